"""The versioned JSON Schema of a serving question's `--json` answer (draft 2020-12), generated from the typed
Deployment and Workload (specs/question/schema.py) and the keys whose meaning is one across commands.

Every `--json` answer of a serving question carries:
- "schema": the answer's id and version, e.g. "tokenmath.infer/1" (ANSWER_VERSION rises when a key a user may read
  changes meaning or goes away; new keys do not change it);
- "question": the deployment and workload the answer answered: each field the question uses, as typed or defaulted
  (None left out), valid against `tokenmath schema --question Q` and accepted back by Deployment.of / Workload.of.
The rest of the answer is the question's own. The keys shared by several questions are declared here with their unit
(SHARED_KEYS: one meaning per key, tests/test_cost_key_meanings.py holds the cost keys to it); others are allowed
(additionalProperties) and documented in docs/guide.md beside each command.
"""
from __future__ import annotations

from tokenmath.specs.question.schema import DIALECT, question_schema

ANSWER_VERSION = 1

_NUMBER = {"type": ["number", "null"]}
# a simulation reports a latency as its distribution: the mean and percentiles of the requests it served
_PERCENTILES = {"type": "object", "required": ["mean", "p50", "p99"],
                "properties": {k: {"type": "number"} for k in ("mean", "p50", "p90", "p99")}}
LATENCIES = ("ttft_s",)     # one figure (s), or simulate's percentiles of it
# key -> (description with its unit); each a number or null (null: not defined here, e.g. a chip without a price)
SHARED_KEYS = {
    "ttft_s": "time to first token (s)",
    "decode_step_s": "time of one decode step (s)",
    "output_tokens_per_s": "output tokens per second of the deployment",
    "output_tokens_per_s_per_chip": "output tokens per second per chip",
    "cost_per_mtok_output_usd": "decode-only cost of an output token ($ per million output tokens)",
    "cost_per_mtok_input_usd": "prefill cost of an input token ($ per million input tokens)",
    "cost_per_mtok_output_request_usd": "a whole request (its prefill and its decode) per output token "
                                        "($ per million output tokens)",
}


def answer_id(question: str) -> str:
    """The id and version an answer of `question` carries under "schema"."""
    return f"tokenmath.{question}/{ANSWER_VERSION}"


def question_echo(question: str, dep, wl) -> dict:
    """{"deployment": ..., "workload": ...}: the fields `question` uses, with the values the answer used (None left
    out), in the form Deployment.of / Workload.of take back."""
    from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS
    from tokenmath.specs.question.workload import WORKLOAD_FIELDS

    def used(fields, values: dict) -> dict:
        return {f.name: values[f.name] for f in fields
                if (not f.questions or question in f.questions) and values.get(f.name) not in (None, [], ())}
    return {"deployment": used(DEPLOYMENT_FIELDS, dep.to_dict()), "workload": used(WORKLOAD_FIELDS, wl.to_dict())}


def with_question(question: str, dep, wl, answer: dict) -> dict:
    """The answer with its "schema" id and its "question" echo first."""
    return {"schema": answer_id(question), "question": question_echo(question, dep, wl), **answer}


def answer_schema(question: str) -> dict:
    """The JSON Schema of `question`'s `--json` answer."""
    q = question_schema(question)
    return {"$schema": DIALECT, "$id": f"urn:tokenmath:answer:{question}:{ANSWER_VERSION}",
            "title": f"tokenmath {question} answer, version {ANSWER_VERSION}", "type": "object",
            "required": ["schema", "question"],
            "properties": {
                "schema": {"const": answer_id(question), "description": "this answer's schema id and version"},
                "question": {"type": "object", "additionalProperties": False, "required": ["deployment", "workload"],
                             "properties": q["properties"],
                             "description": "the deployment and workload the answer answered (`tokenmath schema "
                                            f"--question {question}`)"},
                "notes": {"type": "array", "items": {"type": "string"},
                          "description": "what the answer assumed, and the options that do not apply here"},
                **{k: ({"oneOf": [_NUMBER, _PERCENTILES], "description": v + "; simulate: its mean and percentiles"}
                       if k in LATENCIES else {**_NUMBER, "description": v}) for k, v in SHARED_KEYS.items()}},
            "additionalProperties": True}
