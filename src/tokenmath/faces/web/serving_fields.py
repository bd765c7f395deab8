"""The serving parameters of the web API: the declared fields themselves (DEPLOYMENT_FIELDS in
specs/question/deployment.py, WORKLOAD_FIELDS in specs/question/workload.py), so a parameter's name, default, bounds,
unit and help are the CLI's and the Python API's. dataclasses.replace changes one only where the web must differ, each saying why: the web reads no file
a request names (a model, a chip, an engine and a draft are ids), it keeps a few tighter bounds a request may not
exceed, and a question keeps its own default where its command has one (e.g. sensitivity's batch "max").
No physics here."""
from __future__ import annotations

from dataclasses import replace
from functools import cache

from tokenmath.faces.web.params import Param
from tokenmath.specs.question.deployment import KNOB_FIELDS
from tokenmath.specs.question.deployment import field as dfield
from tokenmath.specs.question.workload import field as wfield

# model and chip: ids only, never a path (the web reads no file named by a request; web/params.coerce checks them)
MODEL = replace(dfield("model"), kind="model", help="catalog id (GET /api/models) or an uploaded config's id")
HARDWARE = replace(dfield("hardware"), kind="hardware", help="hardware catalog id (GET /api/hardware)")
LAYOUT = tuple(dfield(n) for n in ("chips", "tp", "pp", "ep", "dp"))
LAYOUT_NAMES = tuple(p.name for p in LAYOUT)

# how a MoE's expert-parallel all-to-all runs and how evenly its ranks are loaded, the serving engine's cap on running
# sequences and the chip-hour price: the declared knobs (KNOB_FIELDS, analyses.setup.with_deployment_knobs), but the
# what-if overrides, which the page sends as its own `set` parameter
KNOBS = tuple(dfield(n) for n in KNOB_FIELDS if n != "what_if")
KNOB_NAMES = tuple(p.name for p in KNOBS)

# a static batch's lengths are token counts (a distribution is the simulator's, SIM_LENGTHS)
INPUT_LEN = replace(wfield("input_len"), kind="int", help="prompt tokens per sequence")
OUTPUT_LEN = replace(wfield("output_len"), kind="int", help="generated tokens per sequence")
# the simulator's lengths: a count or a distribution, never "fit:FILE" (web/params._as_length refuses a trace file)
SIM_LENGTHS = (replace(wfield("input_len"), help='prompt tokens, or "uniform:LO-HI" / "lognormal:MEDIAN,SIGMA"'),
               replace(wfield("output_len"), help="generated tokens (as input_len)"))
BATCH = wfield("batch")            # infer: blank is 1, as everywhere
# agent sessions (simulate): turns per session and the tool gap between them
SIM_SESSIONS = (wfield("turns"), wfield("tool_gap_s"))


@cache
def dtype_choices() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The weight dtypes and the KV-cache dtypes a request may name: the declared choices (the CLI's)."""
    return dfield("weight_dtype").choices, dfield("kv_dtype").choices


def dtype_params() -> tuple[Param, Param]:
    return dfield("weight_dtype"), dfield("kv_dtype")


@cache
def engine_param() -> Param:
    """The serving engine a serving view assumes, the declared default (vllm, the CLI's and Python's): a shipped
    profile's id or "none", never an engine file (the web API reads no files named by a request)."""
    from tokenmath.specs.serving_engines import NO_ENGINE, engine_ids
    return replace(dfield("engine"), kind="choice", choices=(*engine_ids(), NO_ENGINE),
                   help="serving engine profile (its graphs, scheduler limits, KV memory fraction and blocks): "
                        "a shipped profile's id, optionally at a release it covers (sglang@0.5), or none: the "
                        "engine-free step (no scheduler limits, launch or CPU costs)")


def layout(a: dict) -> dict:
    return {k: a[k] for k in LAYOUT_NAMES}


def knobs(a: dict) -> dict:
    """The request's EP transport, running-sequence cap and chip-hour price, as the analyses take them."""
    return {k: a[k] for k in KNOB_NAMES}
