import click

from tokenmath.faces.commands.common import guarded


@click.command("models")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@guarded
def models(as_json):
    """List the model catalog with parameter counts."""
    from tokenmath.faces.tables import models_table
    models_table(as_json)


@click.command("hardware")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as one JSON object.")
@click.option("--template", is_flag=True,
              help="Print a commented hardware file to fill in: tokenmath hardware --template > mychip.toml")
@click.option("--check", "check", metavar="FILE", default=None,
              help="Read your hardware file (.toml/.json) and print what tokenmath takes from it, defaults included.")
@guarded
def hardware(as_json, template, check):
    """List the hardware catalog (dense peaks, memory, links, price); --template / --check for your own chip file."""
    if template and check:
        from tokenmath.base.errors import InputError
        raise InputError("template", "--template and --check both given", "one of them: write a file, or check one")
    if template:
        from tokenmath.faces.hardware_template import template_text
        click.echo(template_text(), nl=False)
        return
    if check is not None:
        from tokenmath.faces.hardware_template import check_report, print_check
        print_check(check_report(check), as_json)
        return
    from tokenmath.faces.tables import hardware_table
    hardware_table(as_json)
