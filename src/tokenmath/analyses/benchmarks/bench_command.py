"""The benchmark that checks an exported deployment: a `vllm bench serve` command against its OpenAI-compatible
endpoint (vLLM's, SGLang's, trtllm-serve's or a Dynamo / llm-d frontend all speak it), the figures tokenmath expects
it to print, and the `tokenmath calibrate` command that fits tokenmath to what it measured.

Every flag written is one of data/engine_flags.toml's ["vllm bench serve"] (vllm-project/vllm @
def9ce85ba1079af970a58ed3d42dd861ae35d58 vllm/benchmarks/serve.py add_cli_args: --backend defaults to "openai", the
/v1/completions endpoint every one of these servers serves; --base-url for a cluster's service address).
"""
from __future__ import annotations

import math
import shlex

from tokenmath.base.errors import InputError

RESULT_FILE = "tokenmath-check.json"


def flags_of(tool: str) -> dict:
    from tokenmath.specs.catalog import shipped
    return shipped("engine_flags.toml")[tool]


def command(head: list[str], args: list[tuple[str, object]], tool: str) -> list[str]:
    """head + args, every flag checked against the pinned parser's list (a flag not listed is a defect here)."""
    known = set(flags_of(tool)["flags"])
    out = list(head)
    for flag, value in args:
        if flag not in known:
            raise AssertionError(f"{flag} is not in data/engine_flags.toml [{tool}]")
        out.append(flag)
        if value is not None:
            out.append(str(value))
    return out


def bench(model: str, input_len: int, output_len: int, *, concurrency: int | None = None,
          arrival_rate: float | None = None, base_url: str | None = None) -> list[str]:
    """`vllm bench serve` on the random dataset at a closed loop of `concurrency` users or Poisson arrivals at
    `arrival_rate` requests/s, saving its result where `tokenmath calibrate` reads it."""
    if (concurrency is None) == (arrival_rate is None):
        raise InputError("concurrency", "a benchmark runs either a closed loop of users or an arrival rate",
                         "one of the two")
    args: list[tuple[str, object]] = []
    if base_url:
        args.append(("--base-url", base_url))
    args += [("--model", model), ("--dataset-name", "random"), ("--input-len", int(input_len)),
             ("--output-len", int(output_len))]
    if arrival_rate is not None:
        # two minutes of arrivals, at least 200 requests, so the steady state dominates the ramp
        n = max(200, int(math.ceil(float(arrival_rate) * 120)))
        args += [("--request-rate", f"{float(arrival_rate):g}"), ("--num-prompts", n)]
    else:
        c = int(concurrency)
        args += [("--max-concurrency", c), ("--num-prompts", max(10 * c, 100))]
    args += [("--ignore-eos", None), ("--percentile-metrics", "ttft,tpot,itl,e2el"), ("--save-result", None),
             ("--result-filename", RESULT_FILE)]
    return command(["vllm", "bench", "serve"], args, "vllm bench serve")


def expected(output_tokens_per_s: float, ttft_s: float, tpot_s: float, in_flight: float) -> dict:
    """What `vllm bench serve` should print (its 'Output token throughput', 'Mean TTFT', 'Mean TPOT'), in SI."""
    return {"output_tokens_per_s": float(output_tokens_per_s), "mean_ttft_s": float(ttft_s),
            "mean_tpot_s": float(tpot_s), "requests_in_flight": float(in_flight)}


def calibrate_line(hardware: str, chips: int, tp: int, pp: int, ep: int, dp: int, engine: str) -> str:
    """The `tokenmath calibrate` command for the saved result of one colocated server."""
    eng = {"trtllm": "tensorrt-llm"}.get(engine, engine)
    return shlex.join(["tokenmath", "calibrate", RESULT_FILE, "--hardware", hardware, "--chips", str(chips),
                       "--tp", str(tp), "--pp", str(pp), "--ep", str(ep), "--dp", str(dp), "--engine", eng])


def sources(*tools: str) -> dict:
    return {t: {k: flags_of(t)[k] for k in ("repo", "commit", "path")} for t in tools}
