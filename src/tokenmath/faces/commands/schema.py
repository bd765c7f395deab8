"""`tokenmath schema`: the JSON Schema of a question's Deployment and Workload (specs/question/schema.py), or of a
serving question's versioned `--json` answer (specs/question/answer_schema.py)."""
from __future__ import annotations

import json

import click

from tokenmath.specs.question.deployment import SERVING


@click.command()
@click.option("--question", type=click.Choice(SERVING), default=None,
              help="Only the fields this question uses (default: every field).")
@click.option("--answer", type=click.Choice(SERVING), default=None,
              help="The schema of this question's --json answer instead: its versioned id, the question it "
                   "answered and the keys shared across commands.")
def schema(question, answer):
    """The JSON Schema (draft 2020-12) of {"deployment": ..., "workload": ...}: each field's type, bounds, default,
    unit and the questions that use it, from the same declarations as the command-line options; with --answer, of a
    question's --json answer."""
    if answer is not None:
        if question is not None:
            raise click.BadParameter("give --question or --answer, not both", param_hint="--answer")
        from tokenmath.specs.question.answer_schema import answer_schema
        click.echo(json.dumps(answer_schema(answer), indent=2))
        return
    from tokenmath.specs.question.schema import question_schema
    click.echo(json.dumps(question_schema(question), indent=2))
