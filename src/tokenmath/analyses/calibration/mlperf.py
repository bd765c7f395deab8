"""Held-out validation on MLPerf Inference Offline results (data/mlperf.toml). Nothing is fitted to these rows: each
is predicted by the serving model the commands use (data/calibration.toml, fitted on data/measurements.toml only).

Offline issues every sample at once: throughput at max load. For a row (model, 8 chips, dtypes, engine profile):
- every layout of the node's chips that `pareto` enumerates (TP, EP, DP, attention sharding as the model allows) is
  run at every batch up to the largest that fits, and the best output tokens/s per chip (prefill included: batch x
  output / (TTFT + output x step)) times the chips is the node's prediction;
- the output length is the run's own (tokens/s over samples/s, both quoted); the prompt length is not published,
  only its cap (the file's header), so each row is predicted twice: prompts of 1 token (no prefill, the highest
  throughput any prompt allows) and prompts at the cap (the lowest). The measurement should lie in that band or
  below it (an engine slower than the model); above it means the model is pessimistic whatever the prompts were;
- the bound: the same envelope at the pure roofline (100% of every peak, no engine costs) with 1-token prompts.
The band is wide (prefill at the cap costs several times the decode), so the test that carries information is a
held-out prediction at one prompt:
- where the benchmark's dataset has a known mean prompt (data/mlperf.toml [dataset.*]: the mean token length of
  its evaluation set), the row is predicted at it: nothing about the prompt is estimated from any measurement;
- else at the median implied prompt of the OTHER systems of its benchmark (every row of a benchmark ran the same
  dataset, so the same unknown mean prompt; a row's implied prompt is the length at which the prediction meets its
  measurement, bisection in log length over [1, cap]): leave-one-system-out, the unknown estimated without the row.
That ratio, predicted / measured, is the row's held-out error. The other systems' implied prompt is kept beside the
dataset's (others_*) where both exist: if tokenmath ranked the chips right, every system would imply the same
prompt, and the dataset's mean tells whether the model's level is right too. The medians are given by vendor,
MoE / dense and round (v4.1, v5.1, v6.0).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tokenmath.analyses.calibration.labels import is_moe, vendor_of
from tokenmath.base.errors import InputError
from tokenmath.base.validators import known_keys

DATA = "mlperf.toml"
DATASET_FIELDS = ("input_mean", "samples", "source", "reference_output_mean")
REQUIRED = ("id", "benchmark", "round", "submitter", "system", "url", "quote", "model", "hardware", "chips", "engine",
            "software", "weight_dtype", "precision_source", "tokens_per_s", "samples_per_s")
# input_cap absent: no published cap on the prompts; the row is checked against its upper bound only (1-token
# prompts: no prompt makes a node faster), and stays out of the held-out medians
OPTIONAL = ("kv_dtype", "notes", "input_cap")
# the same system's Server run (mlperf_server.py): its completed tokens/s and the latency limits it met
SERVER = ("server_url", "server_quote", "server_tokens_per_s", "server_samples_per_s", "server_limits_quote",
          "server_ttft_limit_s", "server_tpot_limit_s")
# v6.0's Interactive scenario: loadgen runs it as Server ("Scenario : Server" in its summary) with tighter limits,
# which its mlperf_log_detail.txt states the same way (requested_server_ttft_latency / tpot_latency); same fields
INTERACTIVE = tuple("interactive" + k[len("server"):] for k in SERVER)
SCENARIOS = {"server": SERVER, "interactive": INTERACTIVE}


def load_results(table: dict | None = None) -> list[dict]:
    """The rows of `table` ({"result": [...]}, default the shipped file), each checked: every REQUIRED field present
    (url and quote non-empty), no unknown key, positive figures, ids unique."""
    from tokenmath.specs.catalog import shipped_rows
    rows = shipped_rows(table, DATA, "result", "a list of published MLPerf results")
    seen, out = set(), []
    for r in rows:
        rid = r.get("id", "?")
        missing = [k for k in REQUIRED if r.get(k) in (None, "")]
        if missing:
            raise InputError(f"result {rid}", f"missing {', '.join(missing)}", "every field of " + ", ".join(REQUIRED))
        known_keys(r, REQUIRED + OPTIONAL + SERVER + INTERACTIVE, f"result {rid}")
        for name, keys in SCENARIOS.items():
            some = [k for k in keys if k in r]
            if some and len(some) < len(keys):
                raise InputError(f"result {rid}", f"a {name.capitalize()} run needs every one of {', '.join(keys)}",
                                 "all of them, or none")
        per_run = ("tokens_per_s", "samples_per_s", "ttft_limit_s", "tpot_limit_s")
        for k in ("tokens_per_s", "samples_per_s", "input_cap", "chips") + tuple(
                f"{p}_{x}" for p in SCENARIOS for x in per_run):
            if k not in r:
                continue
            if not (isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0):
                raise InputError(f"result {rid}: {k}", f"{r[k]!r} is not a positive number", "a number > 0")
        if rid in seen:
            raise InputError("id", f"duplicate id {rid!r}", "unique ids")
        seen.add(rid)
        out.append(r)
    return out


def dataset_prompts(table: dict | None = None) -> dict[str, float]:
    """benchmark -> its evaluation set's mean prompt (tokens), from [dataset."<benchmark>"] of `table` (default the
    shipped file); each entry checked (a positive input_mean and samples, a source, no unknown key)."""
    from tokenmath.specs.catalog import shipped
    recs = (shipped(DATA) if table is None else table).get("dataset", {})
    if not isinstance(recs, dict):
        raise InputError("dataset", f"{recs!r} is not a table of benchmarks", '[dataset."<benchmark>"] tables')
    out = {}
    for bench, rec in recs.items():
        f = f"dataset {bench}"
        if not isinstance(rec, dict):
            raise InputError(f, f"{rec!r} is not a table", "input_mean, samples, source")
        known_keys(rec, DATASET_FIELDS, f)
        for k in ("input_mean", "samples"):
            v = rec.get(k)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InputError(f"{f}: {k}", f"{v!r} is not a positive number", "a number > 0")
        if not rec.get("source"):
            raise InputError(f"{f}: source", "missing", "where the lengths were read")
        out[str(bench)] = float(rec["input_mean"])
    return out


def implied_prompt(row: dict, output_len: int, hi: float | None, lo: float | None, steps: int = 12) -> float | None:
    """The prompt length (tokens, in [1, cap]) at which the predicted node throughput equals the measured one, given
    the predictions at 1 token (hi) and at the cap (lo); None without a cap or where the measurement is above hi
    (no prompt explains it), the cap where it is below lo."""
    meas = float(row["tokens_per_s"])
    if "input_cap" not in row:
        return None
    cap = int(row["input_cap"])
    if hi is None or lo is None or meas > hi:
        return None
    if meas <= lo:
        return float(cap)
    a, b = 0.0, math.log(cap)             # log prompt length: prediction(a) >= meas >= prediction(b)
    for _ in range(steps):
        mid = 0.5 * (a + b)
        t, _ = _node_throughput(row, max(1, int(round(math.exp(mid)))), output_len)
        if t is not None and t >= meas:
            a = mid
        else:
            b = mid
    return math.exp(0.5 * (a + b))


@dataclass(frozen=True)
class MLPerfCheck:
    """One result predicted: node output tokens/s with 1-token prompts (high) and prompts at the cap (low)."""
    row: dict
    output_len: int
    predicted_high: float | None     # None: does not fit on the node
    predicted_low: float | None
    pure_roofline: float | None
    layout_high: str | None
    implied_prompt: float | None = None        # prompt tokens at which prediction = measurement
    heldout_prompt: float | None = None        # the prompt the held-out prediction is made at (heldout_prompt_source)
    heldout_predicted: float | None = None     # node tokens/s predicted at heldout_prompt
    heldout_prompt_source: str | None = None   # "dataset mean" | "other systems' implied median"
    others_prompt: float | None = None         # the other systems' median implied prompt (same benchmark)
    others_predicted: float | None = None      # node tokens/s predicted at others_prompt

    @property
    def others_ratio(self) -> float | None:
        return None if not self.others_predicted else self.others_predicted / self.measured

    @property
    def heldout_ratio(self) -> float | None:
        return None if not self.heldout_predicted else self.heldout_predicted / self.measured

    @property
    def measured(self) -> float:
        return float(self.row["tokens_per_s"])

    @property
    def ratio_mid(self) -> float | None:
        """The band's geometric middle over the measurement."""
        if not self.predicted_high or not self.predicted_low:
            return None
        return math.sqrt(self.predicted_high * self.predicted_low) / self.measured

    @property
    def where(self) -> str:
        if self.predicted_high is None:
            return "does not fit"
        if self.measured > self.predicted_high:
            return "above the band"
        if self.predicted_low is None:
            return "below the bound"       # no prompt cap: only the 1-token bound is known
        if self.measured < self.predicted_low:
            return "below the band"
        return "in the band"

    def to_dict(self) -> dict:
        r = self.row
        return {"id": r["id"], "benchmark": r["benchmark"], "round": r["round"], "submitter": r["submitter"],
                "model": r["model"], "hardware": r["hardware"], "chips": r["chips"], "engine": r["engine"],
                "weight_dtype": r["weight_dtype"], "kv_dtype": r.get("kv_dtype"), "url": r["url"],
                "measured_tokens_per_s": self.measured, "output_len": self.output_len, "input_cap": r.get("input_cap"),
                "predicted_tokens_per_s_prompt_1": self.predicted_high,
                "predicted_tokens_per_s_prompt_cap": self.predicted_low, "pure_roofline_tokens_per_s": self.pure_roofline,
                "best_layout_prompt_1": self.layout_high, "ratio_mid": self.ratio_mid, "where": self.where,
                "implied_prompt_tokens": self.implied_prompt, "heldout_prompt_tokens": self.heldout_prompt,
                "heldout_prompt_source": self.heldout_prompt_source,
                "heldout_predicted_tokens_per_s": self.heldout_predicted, "heldout_ratio": self.heldout_ratio,
                "others_implied_prompt_tokens": self.others_prompt,
                "others_predicted_tokens_per_s": self.others_predicted, "others_ratio": self.others_ratio,
                "moe": is_moe(r["model"]), "vendor": vendor_of(r["hardware"])}


def _node_throughput(row: dict, input_len: int, output_len: int, pure: bool = False) -> tuple[float | None, str | None]:
    """Best output tokens/s of the node over its layouts and batches (static batches at max load)."""
    from tokenmath.analyses.serving.pareto import pareto
    from tokenmath.specs.efficiency import PEAK
    try:
        p = pareto(row["model"], row["hardware"], chips=int(row["chips"]), input_len=input_len, output_len=output_len,
                   weight_dtype=row["weight_dtype"], kv_dtype=row.get("kv_dtype"), concurrency=(),
                   efficiency=PEAK if pure else None, engine="none" if pure else row["engine"])
    except InputError:
        return None, None
    pts = [q for q in p.frontier if q.get("output_tokens_per_s_per_chip")]
    if not pts:
        return None, None
    best = max(pts, key=lambda q: q["output_tokens_per_s_per_chip"])
    return float(best["output_tokens_per_s_per_chip"]) * int(row["chips"]), best["layout"]


def check(row: dict) -> MLPerfCheck:
    out = max(1, int(round(row["tokens_per_s"] / row["samples_per_s"])))
    hi, lay = _node_throughput(row, 1, out)
    lo = _node_throughput(row, int(row["input_cap"]), out)[0] if "input_cap" in row else None
    bound, _ = _node_throughput(row, 1, out, pure=True)
    return MLPerfCheck(row=row, output_len=out, predicted_high=hi, predicted_low=lo, pure_roofline=bound,
                       layout_high=lay, implied_prompt=implied_prompt(row, out, hi, lo))


DATASET_MEAN = "dataset mean"
OTHERS_IMPLIED = "other systems' implied median"


def held_out(checks: list[MLPerfCheck], prompts: dict[str, float] | None = None) -> list[MLPerfCheck]:
    """Each check predicted at its benchmark's dataset mean prompt (prompts: dataset_prompts(); None: the shipped
    file's), else at the median implied prompt of the other systems of its benchmark; the latter kept beside the
    former where both exist."""
    prompts = dataset_prompts() if prompts is None else prompts
    out = []
    for c in checks:
        others = [o.implied_prompt for o in checks if o is not c and o.row["benchmark"] == c.row["benchmark"]
                  and o.implied_prompt is not None]
        if others:
            p = float(np.median(others))
            t, _ = _node_throughput(c.row, max(1, int(round(p))), c.output_len)
            c = replace(c, others_prompt=p, others_predicted=t)
        mean = prompts.get(c.row["benchmark"])
        if mean is not None:
            t, _ = _node_throughput(c.row, max(1, int(round(mean))), c.output_len)
            c = replace(c, heldout_prompt=mean, heldout_predicted=t, heldout_prompt_source=DATASET_MEAN)
        elif c.others_prompt is not None:
            c = replace(c, heldout_prompt=c.others_prompt, heldout_predicted=c.others_predicted,
                        heldout_prompt_source=OTHERS_IMPLIED)
        out.append(c)
    return out


# the groupings of the held-out medians (Offline here, Server and Interactive in mlperf_server.py): c.row is the result
GROUPINGS = (("vendor", lambda c: vendor_of(c.row["hardware"])),
             ("moe", lambda c: "moe" if is_moe(c.row["model"]) else "dense"),
             ("round", lambda c: c.row["round"]))


@dataclass(frozen=True)
class MLPerfValidation:
    checks: list[MLPerfCheck]

    def groups(self) -> dict:
        """Rows, rows in the band, and the median held-out ratio and |error|, by vendor, MoE / dense and round."""
        def summary(cs):
            rs = [c.heldout_ratio for c in cs if c.heldout_ratio is not None]
            os_ = [c.others_ratio for c in cs if c.others_ratio is not None]
            return {"rows": len(cs), "scored": len(rs), "in_band": sum(c.where == "in the band" for c in cs),
                    "below_band": sum(c.where == "below the band" for c in cs),
                    "above_band": sum(c.where == "above the band" for c in cs),
                    "bound_only": sum(c.heldout_prompt is None for c in cs),    # no prompt to predict at
                    "median_heldout_ratio": float(np.median(rs)) if rs else None,
                    "median_heldout_abs_error": float(np.median(np.abs(np.asarray(rs) - 1.0))) if rs else None,
                    "others_rows": len(os_),
                    "median_others_ratio": float(np.median(os_)) if os_ else None,
                    "median_others_abs_error": float(np.median(np.abs(np.asarray(os_) - 1.0))) if os_ else None}
        out = {"all": summary(self.checks)}
        out["bound_only"] = [{"id": c.row["id"], "measured": c.measured, "bound_prompt_1": c.predicted_high,
                              "bound_over_measured": c.predicted_high / c.measured if c.predicted_high else None}
                             for c in self.checks if c.heldout_prompt is None]
        for key, label in GROUPINGS:
            names = sorted({label(c) for c in self.checks})
            out[key] = {n: summary([c for c in self.checks if label(c) == n]) for n in names}
        return out

    @property
    def faster_than_pure_roofline(self) -> list[str]:
        """Rows whose prediction beats the pure roofline (must be none)."""
        return [c.row["id"] for c in self.checks if c.predicted_high and c.pure_roofline
                and c.predicted_high > c.pure_roofline * (1 + 1e-9)]

    def to_dict(self) -> dict:
        return {"title": "MLPerf Inference Offline, held out (never fitted)", "source": DATA,
                "rows": [c.to_dict() for c in self.checks], "summary": self.groups(),
                "faster_than_pure_roofline": self.faster_than_pure_roofline}


def validate_mlperf(table: dict | None = None) -> MLPerfValidation:
    """Every result of `table` (default the shipped file) checked and predicted held out, at the dataset mean prompts
    the same table holds."""
    return MLPerfValidation(held_out([check(r) for r in load_results(table)], dataset_prompts(table)))
