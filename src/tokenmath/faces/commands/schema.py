"""`tokenmath schema`: the JSON Schema of a question's Deployment and Workload (specs/question/schema.py)."""
from __future__ import annotations

import json

import click

from tokenmath.specs.question.deployment import SERVING


@click.command()
@click.option("--question", type=click.Choice(SERVING), default=None,
              help="Only the fields this question uses (default: every field).")
def schema(question):
    """The JSON Schema (draft 2020-12) of {"deployment": ..., "workload": ...}: each field's type, bounds, default,
    unit and the questions that use it, from the same declarations as the command-line options."""
    from tokenmath.specs.question.schema import question_schema
    click.echo(json.dumps(question_schema(question), indent=2))
