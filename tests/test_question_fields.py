"""Every question against every field: a field the question uses moves its answer; a field it does not use is named
in the answer's notes with the reason. Never dropped silently (specs/question/applies.py, analyses/ask.py).

The questions walked are those built on the typed Deployment and Workload (analyses/ask.QUESTIONS, the same path
the CLI and the web page take). Each change is chosen so that the field matters physically for a MoE model on an
8-GPU node (DeepSeek-V3 in fp8 on H200), e.g. an imbalance of 2 doubles the busiest expert rank's tokens."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tokenmath.analyses.ask import QUESTIONS, ask
from tokenmath.specs.question.applies import not_applied, uses
from tokenmath.specs.question.deployment import DEPLOYMENT_FIELDS, Deployment
from tokenmath.specs.question.workload import WORKLOAD_FIELDS, Workload

MOE = dict(model="deepseek-v3", hardware="h200")
ONE = dict(model="gpt-oss-120b", hardware="h200", chips=8, ep=8)    # a MoE that fits every layout of 4 chips
BASE = {   # question -> (deployment, workload, the question's own keywords)
    "infer": (Deployment.of(**MOE, chips=8, ep=8), Workload.of(batch=64, input_len=1024, output_len=256), {}),
    "fleet": (Deployment.of(**MOE), Workload.of(), {"demand": 1e5, "max_chips": 8}),
    "price": (Deployment.of(**MOE), Workload.of(), {"max_chips": 8}),
    "plan": (Deployment.of(model="deepseek-v3", hardware="hgx-h200"), Workload.of(concurrency=64), {}),
    "simulate": (Deployment.of(**ONE), Workload.of(concurrency=16, input_len=512, output_len=64),
                 {"requests": 64}),
    "hyperbola": (Deployment.of(**ONE), Workload.of(), {"max_points": 16}),
    "context": (Deployment.of(**ONE), Workload.of(), {}),
    "pareto": (Deployment.of(**MOE, chips=8), Workload.of(concurrency=16), {}),
    "slowmode": (Deployment.of(**MOE), Workload.of(), {"max_chips": 8}),
    "prices": (Deployment.of(**ONE), Workload.of(), {"contexts": [1024, 8192]}),
    "sensitivity": (Deployment.of(**ONE), Workload.of(batch=64), {"delta": 0.2}),
    "moe": (Deployment.of(model="deepseek-v3", hardware="hgx-h200"), Workload.of(batch=64), {"context": 2048}),
}
# a change of each field (with what it needs beside it) that matters for the base deployment
CHANGE = {
    "model": {"model": "deepseek-v2"},
    "hardware": {"hardware": "b200"},
    "chips": {"chips": 16, "ep": 16},
    "tp": {"tp": 8, "ep": None},
    "pp": {"pp": 2, "ep": 4},
    "ep": {"ep": 4, "dp": 2},
    "dp": {"dp": 2, "ep": 4},
    "cp": {"cp": 2, "ep": 4},
    "attention_sharding": {"attention_sharding": "dp"},
    "weight_dtype": {"weight_dtype": "fp4"},
    "kv_dtype": {"kv_dtype": "fp8"},
    "engine": {"engine": "sglang"},
    "max_running": {"max_running": 4},
    "efficiency": {"efficiency": "peak"},
    "profile": {"profile": "walk-h200"},            # written by the profile_on_h200 fixture below
    "what_if": {"what_if": ("memory_bw_tbs=2x", "memory_gb=2x")},
    "price_usd_per_hour": {"price_usd_per_hour": 9.0},
    "draft": {"draft": "deepseek-v2", "acceptance": 0.5},
    "spec_k": {"mtp": 1, "spec_k": 3},
    "acceptance": {"mtp": 1, "acceptance": 0.5},
    "mtp": {"mtp": 1},
    "ep_comm": {"ep_comm": "fp8"},
    "ep_overlap": {"ep_overlap": True},
    "ep_imbalance": {"ep_imbalance": 2.0},
    "adp_balance": {"adp_balance": True},
    "moe_sharding": {"moe_sharding": "ep"},
    "input_len": {"input_len": 4096},
    "output_len": {"output_len": 1024},
    "batch": {"batch": 8, "concurrency": None},
    "concurrency": {"concurrency": 32, "batch": None},
    "arrival_rate": {"arrival_rate": 2.0, "batch": None, "concurrency": None},
    "prefix_hit": {"prefix_hit": 0.5},
    "turns": {"turns": 3},
    "tool_gap_s": {"tool_gap_s": 2.0},       # simulate with one turn per session: named in its notes (no next turn)
    "ttft_ms": {"ttft_ms": 300.0},
    "min_tokens_per_s_per_user": {"min_tokens_per_s_per_user": 60.0},
}
# (question, field) pairs whose change is refused on that question with a named error instead of an answer:
# each with the reason the model gives
REFUSED = {
    ("infer", "draft"): "DeepSeek-V2's vocabulary is not DeepSeek-V3's: a draft must share the tokenizer",
    ("fleet", "draft"): "as infer",
    ("pareto", "draft"): "as infer",
    ("slowmode", "draft"): "as infer",
    ("price", "draft"): "as infer",
    ("sensitivity", "max_running"): "4 sequences per scheduler x 8 groups cannot run the batch of 64: refused naming "
                                     "the engine's cap and the batch that runs",
    ("plan", "draft"): "as infer",
}
SLOW = ("plan", "fleet", "price", "simulate", "pareto", "slowmode", "sensitivity")          # a few seconds per answer: the walk of these runs in the slow set
WALKED = [pytest.param(q, marks=pytest.mark.slow) if q in SLOW else q for q in BASE if q in QUESTIONS]
FIELDS = [f.name for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS]


@pytest.fixture(autouse=True)
def profile_on_h200(tmp_path_factory, monkeypatch):
    """A calibration profile for vLLM on H200 (as tokenmath calibrate writes it) in a cache folder of the test's own:
    compute at 0.5 and bandwidth at 0.6 of the kernel ceilings, 2 ms of CPU per step, so every step-priced answer
    moves."""
    base = tmp_path_factory.getbasetemp() / "profile-cache"
    (base / "profiles").mkdir(parents=True, exist_ok=True)
    (base / "profiles" / "walk-h200.toml").write_text(
        '# tokenmath calibration profile written by `tokenmath calibrate`\nname = "walk-h200"\nfitted = "2026-12-07"\n'
        'runs = 4\nhardware = "h200"\nengine = "vllm"\n\n[values]\ncompute_scale = 0.5\nbw_scale = 0.6\n'
        'step_cpu_s = 0.002\nlayer_overhead_s = 0.0\nstep_cpu_per_seq_s = 0.0\n')
    monkeypatch.setenv("TOKENMATH_CACHE_DIR", str(base))


def _changed(question: str, name: str):
    dep, wl, own = BASE[question]
    ch = CHANGE[name]
    d = {k: v for k, v in ch.items() if hasattr(dep, k)}
    w = {k: v for k, v in ch.items() if hasattr(wl, k)}
    if question in ("plan", "moe") and name == "hardware":
        d = {"hardware": "hgx-b200"}
    if dep.model == ONE["model"] and name in ("model", "draft"):    # gpt-oss-20b shares gpt-oss-120b's tokenizer
        d = {"model": "qwen3-235b-a22b"} if name == "model" else {"draft": "gpt-oss-20b", "acceptance": 0.5}
    dep2 = Deployment.of(**{**_raw(dep), **d})
    wl2 = Workload.of(**{**_raw(wl), **w})
    return dep2, wl2, own


def _raw(obj) -> dict:
    return {k: v for k, v in obj.to_dict().items() if v is not None}


def _figures(r) -> str:
    d = r.to_dict()
    d.pop("notes", None)
    d.pop("search_s", None)
    return json.dumps(d, sort_keys=True, default=str)


@pytest.mark.parametrize("question", WALKED)
@pytest.mark.parametrize("name", FIELDS)
def test_every_field_moves_the_answer_or_is_named_in_its_notes(question, name):
    from tokenmath.base.errors import InputError
    dep, wl, own = BASE[question]
    dep2, wl2, _ = _changed(question, name)
    if (question, name) in REFUSED:
        with pytest.raises(InputError):
            ask(question, dep2, wl2, **own)
        return
    base = ask(question, dep, wl, **own)
    r = ask(question, dep2, wl2, **own)
    notes = " ".join(r.to_dict().get("notes") or [])
    opt = next(f.option for f in DEPLOYMENT_FIELDS + WORKLOAD_FIELDS if f.name == name)
    if uses(question, name):
        # it moves the answer, or the answer names why it cannot here (attention sharding with tp = 1)
        assert _figures(r) != _figures(base) or opt in notes, f"{question} uses {name}, but {CHANGE[name]} moved nothing"
    else:
        assert opt in notes and "does not apply" in notes, f"{question} ignores {name} without a note"


def test_a_field_left_at_its_default_gives_no_note():
    assert not_applied("context", Deployment(), Workload()) == []


def test_an_unknown_field_is_refused_with_the_closest_names():
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError, match="ep_comm"):
        Deployment.of(ep_comn="fp8")


def test_a_static_batch_and_a_concurrency_together_are_refused_naming_both():
    from tokenmath.base.errors import InputError
    with pytest.raises(InputError, match="concurrency: given with batch"):
        Workload.of(batch=4, concurrency=3)


def test_the_python_api_and_the_cli_give_the_same_answer_for_the_same_question():
    """One question, one answer: tokenmath.infer(Deployment, Workload) and `tokenmath infer` with the same fields."""
    from click.testing import CliRunner

    from tokenmath.faces.cli import cli
    dep, wl = Deployment.of(model="llama-3.1-8b", hardware="h100-sxm"), Workload.of(concurrency=8)
    py = ask("infer", dep, wl).to_dict()
    out = CliRunner().invoke(cli, ["infer", "--concurrency", "8", "--json"])
    assert out.exit_code == 0, out.output
    cli_answer = json.loads(out.output)
    # the command line's answer also names its schema and echoes the question (specs/question/answer_schema.py)
    from tokenmath.specs.question.answer_schema import with_question
    assert cli_answer == with_question("infer", dep, wl, py)
    # the engine default is vLLM's everywhere (before: none in Python, vLLM on the command line)
    assert py["engine"]["id"] == "vllm"


def test_replace_keeps_a_deployment_frozen():
    d = Deployment()
    with pytest.raises(Exception):
        d.tp = 2                                     # frozen: a question cannot be changed under an answer
    assert replace(d, tp=2).tp == 2
