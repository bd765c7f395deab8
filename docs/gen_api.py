"""Writes docs/reference/api.md, the Python API reference, as plain Markdown (readable on GitHub, no site build).

    python docs/gen_api.py            # rewrite docs/reference/api.md, running every example for its output
    python docs/gen_api.py --check    # exit 1 if a public name or a signature in api.md is out of date (no examples run)

Each public name of `tokenmath` (tokenmath._PUBLIC) gets its signature (from inspect, so it follows the code), a
sentence on what it answers, the units of its inputs and result, and one example with the output it printed when the
page was written. tests/test_docs.py runs the check.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import os
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference" / "api.md"
sys.path.insert(0, str(ROOT / "src"))

# the two keyword-form wrappers take (*args, **kw); their documented forms
SIGNATURES = {
    "infer": "infer(deployment: Deployment, workload: Workload | None = None) -> InferResult\n"
             "infer(model, hardware, **fields) -> InferResult",
    "hyperbola": "hyperbola(deployment: Deployment, workload: Workload | None = None, *, context=None) -> Hyperbola\n"
                 "hyperbola(model, hardware, **fields) -> Hyperbola",
}

# name: (what it answers, units, example). Examples use only public names and print a few figures.
ENTRIES: dict[str, tuple[str, str, str]] = {
    "Deployment": (
        "What runs: the model, the chips and their layout, dtypes, serving engine, speculation, price. Each field is "
        "declared once with its unit, bounds and default; the command line's options and the web page's parameters "
        "are generated from the same declarations. `Deployment.of(...)` validates and raises `InputError` naming "
        "the field at fault.",
        "`chips`, `tp`, `pp`, `ep`, `dp`, `cp`: counts (None: the question picks); `price_usd_per_hour`: USD per "
        "chip-hour (None: the catalog's); `model` and `hardware`: catalog ids or file paths.",
        """dep = tokenmath.Deployment.of(model="llama-3.1-70b", hardware="h100-sxm", chips=8)
print(dep.chips, dep.engine)""",
    ),
    "Workload": (
        "What arrives: prompt and output lengths, a static batch or a concurrency or an arrival rate, the cached "
        "share of each prompt, and latency targets.",
        "`input_len`, `output_len`: tokens, or a distribution such as `\"uniform:512-1536\"`; `arrival_rate`: "
        "requests/s; `prefix_hit`: a fraction 0-1; `ttft_ms`: milliseconds; `min_tokens_per_s_per_user`: tokens/s.",
        """wl = tokenmath.Workload.of(concurrency=64, input_len=2000, output_len=500)
print(wl.concurrency, wl.input_len, wl.output_len)""",
    ),
    "question_schema": (
        "The JSON Schema (draft 2020-12) of a question's deployment and workload, generated from the same "
        "declarations as the command line's options (also `tokenmath schema`).",
        "each property carries its bounds, default, unit (`x-unit`) and the questions that use it (`x-questions`); "
        "`question`: only the fields that question uses.",
        """s = tokenmath.question_schema("infer")
print(s["properties"]["deployment"]["properties"]["chips"])""",
    ),
    "ask": (
        "Any serving question by its command's name (`\"infer\"`, `\"price\"`, `\"pareto\"`, ...) for a "
        "deployment and a workload: the same answer as the command line and the web page. A field the question does "
        "not use is named in the answer's `notes`.",
        "results are in SI units (seconds, bytes) and USD unless a key's name says otherwise "
        "(`cost_per_mtok_output_usd`: USD per million output tokens).",
        """dep = tokenmath.Deployment.of(model="llama-3.1-70b", hardware="h100-sxm", chips=8)
d = tokenmath.ask("price", dep, tokenmath.Workload.of()).to_dict()
print(d["layout"], "batch", d["batch"], f"cost ${d['cost_per_mtok_output_usd']:.2f} per Mtok output")""",
    ),
    "infer": (
        "How fast and how expensive one configuration is: time to first token, decode step, tokens/s, $ per "
        "million tokens, memory per chip, bottleneck. The same figures as `tokenmath infer --json` "
        "(`.to_dict()` gives its keys).",
        "`ttft_s`, `decode_step_s`: seconds; `memory_per_chip_bytes`: bytes; `cost_per_mtok_output_usd`: USD per "
        "million output tokens (decode only).",
        """r = tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=16)
print(f"{r.decode_step_s * 1e3:.1f} ms per step, ${r.cost_per_mtok_output_usd:.2f} per Mtok output, fits {r.fits}")""",
    ),
    "hyperbola": (
        "Decode cost per token and latency against the batch, up to the largest batch that fits, and the critical "
        "batch where the step turns compute-bound.",
        "`floor_per_token_s`: seconds; `floor_cost_per_mtok_output_usd`: USD per million output tokens; `context`: "
        "tokens per sequence.",
        """h = tokenmath.hyperbola("llama-3.1-70b", "h100-sxm", chips=8)
print(f"largest batch {h.max_batch}, critical batch {h.critical_batch:.0f}, "
      f"floor ${h.floor_cost_per_mtok_output_usd:.3f} per Mtok output")""",
    ),
    "sweep": (
        "Many configurations in one vectorised call: every combination of the list-valued axes (batch, lengths, "
        "tp, pp, ep, dp). Returns columns (numpy arrays) keyed like `infer`'s figures; `.to_pandas()` makes a "
        "DataFrame.",
        "Columns in seconds, bytes, tokens/s and USD per million tokens (`cost_per_mtok_output_usd`). `reserve`: the "
        "share of memory kept free (0.1 = 10%).",
        """cols = tokenmath.sweep("llama-3.1-8b", "h100-sxm", batch=[1, 8, 64])
print([f"{x * 1e3:.2f} ms" for x in cols["decode_step_s"]])""",
    ),
    "pareto": (
        "Throughput per chip against tokens/s per user over batches and layouts: the frontier, each point with its "
        "$ per million tokens.",
        "`chips`: the chips to lay out (None: the fewest that fit); lengths in tokens; costs in USD per million "
        "tokens.",
        """p = tokenmath.pareto("llama-3.1-70b", "h100-sxm", chips=8, concurrency=())
print(len(p.frontier), "frontier points")""",
    ),
    "price": (
        "What serving a model costs per million tokens at a minimum speed per user, and the price at a margin and "
        "utilization.",
        "`min_tokens_per_s_per_user`: tokens/s; `margin`, `utilization`: fractions 0-1; prices: USD per million "
        "tokens.",
        """d = tokenmath.price("llama-3.1-70b", "h100-sxm").to_dict()
print(d["layout"], f"cost ${d['cost_per_mtok_output_usd']:.2f}, price ${d['price_per_mtok_output_usd']:.2f} per Mtok output")""",
    ),
    "fleet": (
        "Chips, megawatts and dollars a year to serve a demand in output tokens/s: static batches, continuous batching "
        "and prefill on chips of its own, each sized in whole replicas.",
        "`demand`: output tokens/s; `max_chips`: chips one replica may span; `pue`: a ratio; power in MW, costs in "
        "USD per year and per million tokens.",
        """f = tokenmath.fleet("llama-3.1-70b", "h100-sxm", demand=1e5).to_dict()
print(f["layout"], f["chips"], "chips;", f["continuously_batched"]["chips"], "continuously batched")""",
    ),
    "plan": (
        "The best layout and batch for a model on a system (a chip and its scale-up domain): the static best, the "
        "continuously batched point and, with `disaggregated=True`, prefill on chips of its own.",
        "`chips`: the system's chips to lay out; `min_tokens_per_s_per_user`: tokens/s; `ttft_ms`: milliseconds; "
        "costs in USD per million tokens.",
        """p = tokenmath.plan("llama-3.1-70b", "hgx-h100", chips=8).to_dict()
print(p["best"]["layout"], f"{p['best']['output_tokens_per_s_per_chip']:.0f} tok/s/chip")""",
    ),
    "export": (
        "The commands that run an answer: a plan, fleet or infer result (or its saved JSON) or infer's question, as "
        "each pool's engine launch command (vLLM, SGLang, TensorRT-LLM) with the deployment options the question "
        "asked (a result remembers its question, a saved answer echoes it), an optional Dynamo or llm-d manifest "
        "validated against its schema, the `vllm bench serve` command and the figures it should print (`tokenmath "
        "export`).",
        "`expected`: output tokens/s, mean TTFT and TPOT in seconds, requests in flight; `stack`: dynamo or llm-d; "
        "`disaggregated`: a fleet's prefill and decode pools instead of its continuously batched servers.",
        """e = tokenmath.export(tokenmath.plan("llama-3.1-70b", "hgx-h100", chips=8))
print(e["serve_line"][:60], round(e["expected"]["output_tokens_per_s"]))""",
    ),
    "simulate": (
        "A serving engine's scheduler run request by request on one replica: throughput, time-to-first-token and "
        "inter-token latency percentiles, goodput against targets.",
        "`arrival_rate`: requests/s; `ttft_ms`, `itl_ms`: milliseconds; `requests`: a count; results in seconds and "
        "tokens/s.",
        """s = tokenmath.simulate("llama-3.1-8b", "h100-sxm", concurrency=32, requests=200)
print(f"{s.output_tokens_per_s:.0f} tokens/s, TTFT p50 {s.ttft_s.p50 * 1e3:.0f} ms, p99 {s.ttft_s.p99 * 1e3:.0f} ms")""",
    ),
    "steady_state": (
        "The closed-loop steady state of a continuously batching engine at a concurrency (or a list of them): "
        "throughput and latency once the queue has settled, without simulating each request.",
        "`concurrency`: requests in flight; results in seconds and tokens/s.",
        """ss = tokenmath.steady_state("llama-3.1-8b", "h100-sxm", concurrency=64)
print(f"{ss.to_dict()['points'][0]['output_tokens_per_s']:.0f} tokens/s")""",
    ),
    "train": (
        "One training step (and with `tokens`, the whole run): step time, MFU, memory per chip and what binds it, "
        "the run's time, chip-hours and cost.",
        "`seq_len`, `global_batch_tokens`, `tokens`: tokens; step time in seconds; memory in bytes; cost in USD.",
        """r = tokenmath.train("llama-3.1-8b", "h100-sxm", chips=8, tp=1, dp=8, tokens=1e12)
print(f"step {r.step_time_s:.2f} s, MFU {r.mfu:.1%}, fits {r.fits}")""",
    ),
    "chinchilla": (
        "The Chinchilla scaling law: loss L(N, D), and the compute-optimal parameters and tokens for a budget or a "
        "target loss.",
        "`compute`: FLOPs; `params`: parameters; `tokens`: training tokens; `loss_target`: nats per token.",
        """c = tokenmath.chinchilla(compute=1e24)
print(f"{c.params:.3g} params, {c.tokens:.3g} tokens, loss {c.loss:.3f}")""",
    ),
    "overtrain": (
        "Train a smaller model for longer: the size and token count that minimise training plus lifetime inference "
        "cost at a target loss.",
        "`target_loss`: nats per token; `compute`: FLOPs; `inference_tokens`: lifetime tokens served; costs in USD.",
        """o = tokenmath.overtrain(target_loss=2.2, inference_tokens=1e13, mfu=0.4)
print(f"{o.optimum.params:.3g} params, {o.optimum.tokens:.3g} tokens, saves {o.saving_fraction:.0%}")""",
    ),
    "deduce": (
        "What a model behind an API likely is: active parameters, KV bytes per token and batch regime, deduced "
        "from its prices (and, when given, its speed and time to first token), as intervals.",
        "Prices in USD per million tokens; `output_speed`: tokens/s per user; `ttft_s`: seconds for a prompt of "
        "`ttft_prompt_tokens`; `context_window`: tokens.",
        """a = tokenmath.deduce(3.0, 15.0).summary["active_params_b"]
print(f"active params {a['low']:.0f}-{a['high']:.0f} B (median {a['median']:.0f} B)")""",
    ),
    "validate": (
        "Every published measurement in the shipped table predicted and scored: error by regime, held out by "
        "source. Slow (tens of seconds): it evaluates every row.",
        "Errors are fractions ((predicted - measured) / measured).",
        """s = tokenmath.validate().to_dict()["summary"]
print(s["rows"]["scored"], "rows scored; median error held out by source:",
      f"{s['median_ape']['loso']['all']['median_ape']:.0%}")""",
    ),
    "get_model": (
        "A model from the catalog by id, or from a Hugging Face `config.json` path.",
        "Parameter counts are plain counts; `kv_bytes_per_token`-style figures are bytes.",
        """m = tokenmath.get_model("llama-3.1-70b")
print(m.name)""",
    ),
    "model_ids": (
        "Every model id in the catalog.",
        "",
        """print(len(tokenmath.model_ids()), tokenmath.model_ids()[:3])""",
    ),
    "get_hardware": (
        "A chip from the catalog by id (short names such as `h100` resolve), or from a hardware file "
        "(`.toml` or `.json`, the catalog's schema: [docs/hardware-file.md](../hardware-file.md)).",
        "`memory_gb`: GB; `memory_bw_tbs`: TB/s; `tflops`: dense TFLOP/s per dtype; price: USD per chip-hour.",
        """hw = tokenmath.get_hardware("h100-sxm")
print(hw.name)""",
    ),
    "hardware_ids": (
        "Every chip id in the hardware catalog.",
        "",
        """print(len(tokenmath.hardware_ids()), tokenmath.hardware_ids()[:3])""",
    ),
    "InputError": (
        "Raised on bad input: `field` names the option, file key or argument at fault, `problem` says what is "
        "wrong and `valid` what would work. The command line prints it and exits 2.",
        "",
        """try:
    tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=0)
except tokenmath.InputError as e:
    print(e.field, "|", e.problem)""",
    ),
    "Efficiency": (
        "Achievable fractions of peak (FLOP/s, memory and link bandwidth) and fixed overheads, with their source. "
        "The default is the chip's kernel model with the calibrated residuals; pass one to override.",
        "`flops`, `memory_bw`, `link_bw`: fractions 0-1 of peak; `layer_overhead_s`: seconds per layer.",
        """e = tokenmath.Efficiency(flops=0.6, memory_bw=0.8)
print(e.flops, e.memory_bw, e.layer_overhead_s)""",
    ),
}

ORDER = ["Deployment", "Workload", "question_schema", "ask", "infer", "hyperbola", "sweep", "pareto", "price", "fleet", "plan", "export",
         "simulate",
         "steady_state", "train", "chinchilla", "overtrain", "deduce", "validate", "get_model", "model_ids",
         "get_hardware", "hardware_ids", "InputError", "Efficiency"]

HEAD = """# Python API reference

<!-- generated by docs/gen_api.py (signatures from the code, examples run when it was written); edit that script,
then `python docs/gen_api.py`. tests/test_docs.py checks that every public name and signature here is current. -->

Every name below is importable from `tokenmath` itself (`import tokenmath` is quick: a name's module loads when it
is first used). Results are frozen dataclasses; `to_dict()` gives the same keys and figures as the command's
`--json`. Units are SI (seconds, bytes, FLOPs) and USD unless a key's name says otherwise (`_ms`, `_gb`,
`per_mtok`: per million tokens).

A serving question is a `Deployment` (what runs) and a `Workload` (what arrives). The command line, the web page and
Python answer it through the same code, so the figures agree:

```python
import tokenmath
dep = tokenmath.Deployment.of(model="deepseek-v3", hardware="h200", chips=8, ep=8)
wl = tokenmath.Workload.of(concurrency=130, input_len="uniform:512-1536", output_len=256)
r = tokenmath.infer(dep, wl)       # = tokenmath infer --model deepseek-v3 ... --concurrency 130 --json
tokenmath.ask("price", dep, wl)     # any serving question by its command's name
tokenmath.infer("llama-3.1-70b", "h100-sxm", chips=8, batch=16)   # the keyword form, validated the same way
```

Bad input raises `tokenmath.InputError` naming the field. The examples' outputs below were printed when this page was
written; figures move as the catalog and the models are updated.

| name | answers |
|---|---|
"""


def signature(name: str) -> str:
    """The signature line(s) shown for `name`: from inspect, with string annotations unquoted."""
    if name in SIGNATURES:
        return SIGNATURES[name]
    import tokenmath
    sig = inspect.signature(getattr(tokenmath, name))

    def unquote(annotation) -> str:
        return str(annotation).replace("'", "").replace('"', "")
    params = []
    for p in sig.parameters.values():
        text = p.name if p.annotation is p.empty else f"{p.name}: {unquote(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}" if p.annotation is not p.empty else f"={p.default!r}"
        params.append(("*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else "") + text)
        if p.kind is p.KEYWORD_ONLY and not any(q.startswith("*") for q in params[:-1]):
            params.insert(len(params) - 1, "*")
    ret = "" if sig.return_annotation is sig.empty else f" -> {unquote(sig.return_annotation)}"
    return f"{name}({', '.join(params)}){ret}"


def wrap_sig(sig: str) -> str:
    lines = []
    for one in sig.split("\n"):
        lines.extend(textwrap.wrap(one, 110, subsequent_indent="    ", break_long_words=False,
                                   break_on_hyphens=False) or [""])
    return "\n".join(lines)


def run_example(code: str) -> str:
    import tokenmath
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {"tokenmath": tokenmath})
    out = buf.getvalue().rstrip()
    return "\n".join(line if len(line) <= 110 else line[:106] + " ..." for line in out.splitlines())


def render(run: bool) -> str:
    parts = [HEAD]
    for name in ORDER:
        parts.append(f"| [`{name}`](#{name.lower()}) | {ENTRIES[name][0].split('. ')[0].rstrip('.')}. |\n")
    for name in ORDER:
        what, units, example = ENTRIES[name]
        parts.append(f"\n## {name}\n\n```python\n{wrap_sig(signature(name))}\n```\n\n{what}\n")
        if units:
            parts.append(f"\nUnits: {units}\n")
        out = run_example(example) if run else "..."
        parts.append(f"\n```python\n{example}\n```\n\n```\n{out}\n```\n")
    return "".join(parts)


def check() -> list[str]:
    """What in api.md is out of date: a public name without its section, or a signature that changed."""
    import tokenmath
    text = OUT.read_text(encoding="utf-8")
    problems = []
    for name in tokenmath._PUBLIC:
        if name not in ENTRIES:
            problems.append(f"{name}: public but not in docs/gen_api.py ENTRIES")
        elif f"\n## {name}\n" not in text:
            problems.append(f"{name}: no section in api.md")
        elif wrap_sig(signature(name)) not in text:
            problems.append(f"{name}: signature changed: {signature(name)}")
    for name in ENTRIES:
        if name not in tokenmath._PUBLIC:
            problems.append(f"{name}: in docs/gen_api.py but no longer public")
    return problems


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    if "--check" in sys.argv:
        found = check()
        print("\n".join(found) or "api.md is current")
        sys.exit(1 if found else 0)
    OUT.write_text(render(run=True), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
