import click

from tokenmath.faces.commands.common import guarded


@click.command("models")
@click.option("--json", "as_json", is_flag=True)
@guarded
def models(as_json):
    """List the model catalog with parameter counts."""
    from tokenmath.faces.tables import models_table
    models_table(as_json)


@click.command("hardware")
@click.option("--json", "as_json", is_flag=True)
@guarded
def hardware(as_json):
    """List the hardware catalog (dense peaks, memory, links, price)."""
    from tokenmath.faces.tables import hardware_table
    hardware_table(as_json)
