"""Serving under load for `infer`: what one request sees when others share the replica.

- closed loop at a concurrency: the closed-form steady state (steady_state.py): per-request TTFT (its own prefill
  step among the steps of the others), the mean time between its tokens, throughput;
- open loop at an arrival rate: the simulator (simulation/, `LOAD_REQUESTS` Poisson arrivals, seed 0) rather than an
  M/G/1 formula, because the service here is not one server with i.i.d. service times: a step serves every running
  request at once and its time depends on how many there are, so the queue's service rate depends on its own
  length (a batch server); the simulation is exact for that and takes ~0.1 s.
Both need a scheduler: the engine given, else vLLM's (specs/serving_engines.py DEFAULT_ENGINE).
"""
from __future__ import annotations

from dataclasses import dataclass

from tokenmath.base.errors import InputError
from tokenmath.base.validators import finite, int_arg, pos_float
from tokenmath.specs.serving_engines import DEFAULT_ENGINE

LOAD_REQUESTS = 2000


@dataclass(frozen=True)
class Load:
    """Serving under load: the closed-loop or open-arrival steady state of one configuration (s, tokens/s)."""
    mode: str                       # "closed" (concurrency) | "open" (arrival rate)
    concurrency: int | None
    arrival_rate: float | None
    engine: dict
    policy: str
    source: str
    running: float | None           # sequences the replica runs at once (mean)
    ttft_s: float
    tpot_s: float
    e2e_s: float
    output_tokens_per_s: float
    chips: int
    ttft_p99_s: float | None = None
    itl_p99_s: float | None = None
    goodput_rps: float | None = None
    slo_attainment: float | None = None
    queue_grows: bool | None = None
    queued: float | None = None
    ttft_target_s: float | None = None
    tpot_target_s: float | None = None

    @property
    def output_tokens_per_s_per_chip(self) -> float:
        return self.output_tokens_per_s / self.chips

    @property
    def output_tokens_per_s_per_user(self) -> float | None:
        return 1.0 / self.tpot_s if self.tpot_s else None

    def to_dict(self) -> dict:
        f = finite
        return {"mode": self.mode, "concurrency": self.concurrency, "arrival_rate": self.arrival_rate,
                "engine": self.engine, "policy": self.policy, "source": self.source, "running": f(self.running),
                "queued": f(self.queued), "ttft_s": f(self.ttft_s), "tpot_s": f(self.tpot_s), "e2e_s": f(self.e2e_s),
                "output_tokens_per_s": f(self.output_tokens_per_s),
                "output_tokens_per_s_per_chip": f(self.output_tokens_per_s_per_chip),
                "output_tokens_per_s_per_user": f(self.output_tokens_per_s_per_user),
                "ttft_p99_s": f(self.ttft_p99_s), "itl_p99_s": f(self.itl_p99_s), "goodput_rps": f(self.goodput_rps),
                "slo_attainment": f(self.slo_attainment), "queue_grows": self.queue_grows,
                "slo": None if self.ttft_target_s is None else {"ttft_target_s": self.ttft_target_s,
                                                                "tpot_target_s": self.tpot_target_s}}


def under_load(model, hardware, *, input_len, output_len, concurrency=None, arrival_rate=None, engine=None,
               **setup_kw) -> Load:
    """The load answer at `concurrency` users (closed loop) or `arrival_rate` requests/s (open loop).
    setup_kw: chips, tp, pp, ep, dp, weight_dtype, kv_dtype, efficiency and the deployment's knobs (as
    analyses.setup.setup), attention_sharding (heads, batch, dp; None: heads) and speculation."""
    if (concurrency is None) == (arrival_rate is None):
        raise InputError("concurrency", "give one of concurrency and arrival_rate", "--concurrency N or --arrival-rate R")
    eng = engine if engine not in (None, "none") else DEFAULT_ENGINE
    if concurrency is not None:
        from tokenmath.analyses.serving.steady_state import steady_state
        c = int_arg(concurrency, "concurrency", 1, 1_000_000)
        ss = steady_state(model, hardware, concurrency=c, engine=eng, input_len=input_len, output_len=output_len,
                          **setup_kw)
        p = ss.points[0]
        return Load("closed", c, None, ss.engine, ss.policy, "closed-form steady state (analyses/serving/steady_state.py)",
                    p.running, p.ttft_s, p.tpot_s, p.e2e_s, p.output_tokens_per_s, p.chips, queued=p.queued)
    from tokenmath.analyses.serving.simulation.simulate import simulate
    rate = pos_float(arrival_rate, "arrival_rate", 0.0, 1e7)
    r = simulate(model, hardware, arrival_rate=rate, engine=eng, requests=LOAD_REQUESTS, input_len=input_len,
                 output_len=output_len, **setup_kw)
    return Load("open", None, rate, r.engine, r.policy, f"simulation of {LOAD_REQUESTS:,} Poisson arrivals (seed 0)",
                r.steady.get("running_mean"), r.ttft_s.mean, r.tpot_s.mean if r.tpot_s.mean is not None else 0.0,
                r.e2e_s.mean, r.output_tokens_per_s, r.chips, ttft_p99_s=r.ttft_s.p99, itl_p99_s=r.itl_s.p99,
                goodput_rps=r.goodput_rps, slo_attainment=r.slo_attainment, queue_grows=r.queue_grows,
                ttft_target_s=r.ttft_target_s, tpot_target_s=r.itl_target_s)
