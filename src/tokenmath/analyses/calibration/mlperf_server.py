"""Held-out validation on MLPerf Inference Server results (data/mlperf.toml, the server_* fields of each result).
Nothing is fitted to them.

Server issues queries as a Poisson process; a run is VALID only while the 99th percentiles of time to first token
and of time per output token stay within the benchmark's limits (2 s and 200 ms for Llama 2 70B and Mixtral 8x7B),
so its throughput is what continuous batching serves under a latency bound, below Offline's max load. The
prediction is the engine's closed-loop steady state (analyses/serving/by_concurrency.py, the one plan and fleet
use): of the three layouts of the node with the most static throughput per chip, the point with the most output
tokens/s per chip whose requests get their first token within the TTFT limit and their tokens at most the TPOT limit
apart, users bisected to one, times the node's chips. It is read at Offline's held-out prompt (mlperf.held_out: the
benchmark dataset's mean prompt, else the length the OTHER systems of the benchmark imply in Offline), with the
Server run's own output length. The closed form's TTFT and TPOT are means where MLPerf bounds 99th percentiles, and a closed loop
has no Poisson queue: the prediction is the ceiling the limits allow (docs/reference/validation.md: at that ceiling
the simulator's open-loop 99th percentiles stay far inside the limits, where the measured runs' TPOT binds).

Besides the ratio predicted / measured, the row reports Server / Offline both measured and predicted: what the
latency limits cost, a figure that does not depend on the absolute efficiency.

Interactive (v6.0; the interactive_* fields) is the same loadgen scenario with tighter limits, each run's own from its
mlperf_log_detail.txt (450 ms / 40 ms for Llama 2 70B, 500 ms / 30 ms for Llama 3.1 8B, 1.5 s / 15 ms for
DeepSeek-R1, 2 s / 15 ms for gpt-oss-120b): predicted the same way. A row without a held-out prompt (no dataset
mean and no other system's implied prompt: gpt-oss-120b) gets an upper bound instead: the same search with 1-token prompts (no prompt makes a node faster within
the same limits); bounds stay out of the medians, as in Offline.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenmath.analyses.calibration.labels import is_moe, vendor_of
from tokenmath.analyses.calibration.mlperf import GROUPINGS, MLPerfCheck
from tokenmath.base.errors import InputError


@dataclass(frozen=True)
class ServerCheck:
    offline: MLPerfCheck
    output_len: int
    predicted: float | None          # node output tokens/s within the limits (None: no prompt estimate or none meets)
    layout: str | None
    users: int | None                # concurrent requests at that point
    scenario: str = "server"         # the fields' prefix: "server" or "interactive"
    bound_only: bool = False         # no held-out prompt: predicted with 1-token prompts, an upper bound

    def field(self, name: str):
        return self.row[f"{self.scenario}_{name}"]

    @property
    def row(self) -> dict:
        return self.offline.row

    @property
    def measured(self) -> float:
        return float(self.field("tokens_per_s"))

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None or self.bound_only else self.predicted / self.measured

    @property
    def measured_share(self) -> float:
        """Server over Offline, both measured: what the latency limits cost the node."""
        return self.measured / self.offline.measured

    @property
    def predicted_share(self) -> float | None:
        """The same share predicted, both at the held-out prompt."""
        off = self.offline.heldout_predicted
        return None if self.predicted is None or not off or self.bound_only else self.predicted / off

    def to_dict(self) -> dict:
        r = self.row
        return {"id": r["id"], "benchmark": r["benchmark"], "round": r["round"], "scenario": self.scenario,
                "url": self.field("url"), "ttft_limit_s": self.field("ttft_limit_s"),
                "tpot_limit_s": self.field("tpot_limit_s"), "measured_tokens_per_s": self.measured,
                "output_len": self.output_len, "bound_only": self.bound_only,
                "prompt_tokens": 1 if self.bound_only else self.offline.heldout_prompt,
                "predicted_tokens_per_s": self.predicted,
                "ratio": self.ratio, "layout": self.layout, "users": self.users,
                "measured_server_over_offline": self.measured_share,
                "predicted_server_over_offline": self.predicted_share,
                "moe": is_moe(r["model"]), "vendor": vendor_of(r["hardware"])}


def _node_within_limits(row: dict, input_len: int, output_len: int, scenario: str = "server"
                        ) -> tuple[float | None, str | None, int | None]:
    """(node output tokens/s, layout, users) of the best steady-state point within the row's limits of `scenario`."""
    from tokenmath.analyses.serving.by_concurrency import cheapest_continuous
    from tokenmath.analyses.serving.grid import over_batches
    from tokenmath.analyses.setup import setup
    from tokenmath.mapping.candidates import layouts_for
    chips = int(row["chips"])
    tpot = float(row[f"{scenario}_tpot_limit_s"])
    try:
        su = setup(row["model"], row["hardware"], weight_dtype=row["weight_dtype"], kv_dtype=row.get("kv_dtype"),
                   engine=row["engine"])
        g = over_batches(su, layouts_for(su.model, chips, max_tp=su.hardware.scaleup_domain), input_len, output_len)
        if g is None:
            return None, None, None
        rank = np.where(g.fits & (g.step_s <= tpot), -g.output_tokens_per_s_per_chip, np.inf)
        c = cheapest_continuous(su, g, rank, 1.0 / tpot, input_len, output_len,
                                ttft_s=float(row[f"{scenario}_ttft_limit_s"]))
    except InputError:
        return None, None, None
    if c is None:
        return None, None, None
    return c["output_tokens_per_s"] / c["chips"] * chips, c["layout"], int(c["concurrency"])


def server_checks(offline: list[MLPerfCheck], scenario: str = "server") -> list[ServerCheck]:
    """Every Offline check whose row has a run of `scenario` ("server" or "interactive"), predicted within its limits
    at its held-out prompt, or with 1-token prompts (an upper bound) where it has none."""
    out = []
    for c in offline:
        r = c.row
        if f"{scenario}_tokens_per_s" not in r:
            continue
        o = max(1, int(round(r[f"{scenario}_tokens_per_s"] / r[f"{scenario}_samples_per_s"])))
        bound = c.heldout_prompt is None
        t, lay, users = _node_within_limits(r, 1 if bound else max(1, int(round(c.heldout_prompt))), o, scenario)
        out.append(ServerCheck(c, o, t, lay, users, scenario, bound))
    return out


def server_summary(checks: list[ServerCheck]) -> dict:
    """Medians by vendor, MoE / dense, round and all: predicted / measured and its |error|, and the Server (or
    Interactive) / Offline shares; the upper bounds (rows without a held-out prompt) listed apart."""
    def summary(cs):
        rs = [c.ratio for c in cs if c.ratio is not None]
        ps = [c.predicted_share for c in cs if c.predicted_share is not None]
        return {"rows": len(cs), "predicted": len(rs),
                "median_ratio": float(np.median(rs)) if rs else None,
                "median_abs_error": float(np.median(np.abs(np.asarray(rs) - 1.0))) if rs else None,
                "median_measured_server_over_offline": float(np.median([c.measured_share for c in cs])) if cs else None,
                "median_predicted_server_over_offline": float(np.median(ps)) if ps else None}
    bounds = [c for c in checks if c.bound_only]
    checks = [c for c in checks if not c.bound_only]
    out = {"all": summary(checks)}
    for key, label in GROUPINGS:
        names = sorted({label(c) for c in checks})
        out[key] = {n: summary([c for c in checks if label(c) == n]) for n in names}
    out["bound_only"] = [{"id": c.row["id"], "measured": c.measured, "bound_prompt_1": c.predicted,
                          "bound_over_measured": c.predicted / c.measured if c.predicted else None} for c in bounds]
    return out


def validate_server(offline, scenario: str = "server") -> dict:
    """The Server (or Interactive) section of `tokenmath validate --json`'s `mlperf`: every row with such a run
    predicted within its limits at its held-out prompt (bounds with 1-token prompts apart). offline:
    mlperf.MLPerfValidation."""
    checks = server_checks(offline.checks, scenario)
    name = {"server": "Server", "interactive": "Interactive"}[scenario]
    return {"title": f"MLPerf Inference {name}, held out (never fitted)",
            "method": "the engine's closed-loop steady state with the most output per chip whose mean TTFT and TPOT "
                      "are within the run's limits (MLPerf bounds their 99th percentiles), at Offline's held-out "
                      "prompt (the dataset's mean prompt, else the one the other systems of the benchmark imply); "
                      "without one, with 1-token prompts: an upper bound",
            "rows": [c.to_dict() for c in checks if not c.bound_only],
            "bound_only_rows": [c.to_dict() for c in checks if c.bound_only], "summary": server_summary(checks)}
