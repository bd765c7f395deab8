"""What arrives: prompt and output lengths (fixed or a distribution), how requests arrive (exactly one of a static
batch, a closed loop of users, an open loop at a rate), the share of each prompt already cached, and the targets
(SLOs) an answer must meet. Declared once (WORKLOAD_FIELDS), validated once (`Workload.of`).

"Sequences in a step" has one name everywhere: `batch` for a static batch a user asks for; under load the answer's
`running` is the mean number of sequences the replica runs at once.
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dc_fields

from tokenmath.base.errors import InputError
from tokenmath.specs.question.deployment import SERVING, validated
from tokenmath.specs.question.fields import Field

MAX_TOKENS = 100_000_000
MAX_CONCURRENCY = 1_000_000
MAX_TURNS = 10_000          # turns of one session: its last prompt holds every earlier turn, so the KV bounds it first
MAX_TOOL_GAP_S = 86_400.0   # one day between two turns of a session

LOAD = ("infer", "simulate")                      # questions that serve one arrival process
STATIC_BATCH = ("infer", "context", "prices", "moe", "sensitivity")     # hyperbola sweeps the batch
LENGTH_HELP = 'prompt tokens per request: a count, "uniform:LO-HI", "lognormal:MEDIAN,SIGMA" or "fit:trace.csv"'

WORKLOAD_FIELDS: tuple[Field, ...] = (
    Field("input_len", "length", 1024, LENGTH_HELP, 1, MAX_TOKENS, unit="tokens",
          questions=tuple(q for q in SERVING if q not in ("hyperbola", "context", "prices", "moe", "agents")),
          why_not="it sweeps or sets the context itself (--context / --contexts)"),
    Field("output_len", "length", 256, "generated tokens per request (as input_len)", 1, MAX_TOKENS, unit="tokens",
          questions=tuple(q for q in SERVING if q not in ("hyperbola", "context")),
          why_not="it prices one decode step at a context (--context)"),
    Field("batch", "batch", None, "a static batch: sequences prefilled together then decoded together, or 'max' "
          "(the most that fit); default 1", 1, 10_000_000_000, unit="sequences", short="-b",
          questions=STATIC_BATCH, why_not="it sweeps or searches the batch itself"),
    Field("concurrency", "int", None, "serve under load: this many users in a closed loop", 1, MAX_CONCURRENCY,
          unit="users", questions=("infer", "simulate", "pareto", "plan"),
          why_not="it prices a static batch (infer --concurrency serves under load)"),
    # from 1e-6/s (one request in ~12 days): a slower rate spaces arrivals so far apart that the clock's float
    # resolution rounds every latency to 0 (1e-300 printed a 0 us TTFT, issue 40)
    Field("arrival_rate", "float", None, "serve under load: requests/s arriving at random (Poisson)", 1e-6, 1e7,
          unit="requests/s", questions=LOAD, why_not="it prices a static batch (infer --arrival-rate serves under load)"),
    Field("prefix_hit", "float", 0.0, "prefix caching: the share of every prompt already cached (0-1); its prefill "
          "is skipped, the rest attends to it", 0.0, 1.0, unit="fraction",
          questions=("infer", "simulate", "plan", "fleet", "agents"),
          why_not="prefix caching is modelled by infer, simulate, plan and fleet's disaggregated pools"),
    # agent sessions (issue 38): simulate runs them step by step; agents prices endless sessions in closed form, its
    # turn's cached share given as --prefix-hit, its gap defaulting to agents.DEFAULTS' 3 s (an assumption)
    Field("turns", "int", 1, "agent sessions: turns per session; each turn's prompt is the session's history (its "
          "earlier prompts and outputs, a cached prefix while the prefix cache holds it) plus input_len new tokens; "
          "1: independent requests", 1, MAX_TURNS, unit="turns", questions=("simulate",),
          why_not="sessions of turns are simulated step by step only (tokenmath simulate --turns); agents takes a "
                  "turn's cached share as --prefix-hit"),
    Field("tool_gap_s", "float", None, "agent sessions: mean seconds between a turn's last token and the session's "
          "next prompt (tool calls, thinking; simulate draws each gap exponential); default 0 in simulate, 3 in agents "
          "(an assumption: no public figure)", 0.0,
          MAX_TOOL_GAP_S, unit="s", questions=("simulate", "agents"),
          why_not="it serves independent requests, with no session whose turns wait on tools (simulate --turns, "
                  "agents)"),
    Field("ttft_ms", "float", None, "target time to first token", 1e-3, 1e9, unit="ms",
          questions=("plan", "simulate", "agents"), why_not="it has no time-to-first-token target"),
    Field("min_tokens_per_s_per_user", "float", None, "target: each user's decode speed at least this", 0.0, 1e9,
          unit="tokens/s", questions=("infer", "plan", "fleet", "price", "prices", "agents"),
          why_not="it has no per-user speed target"),
)
_BY_NAME = {f.name: f for f in WORKLOAD_FIELDS}


@dataclass(frozen=True)
class Workload:
    """What arrives (validated; see WORKLOAD_FIELDS). Lengths are whole tokens or a distribution's spec."""
    input_len: object = 1024
    output_len: object = 256
    batch: object = None
    concurrency: int | None = None
    arrival_rate: float | None = None
    prefix_hit: float = 0.0
    turns: int = 1
    tool_gap_s: float | None = None
    ttft_ms: float | None = None
    min_tokens_per_s_per_user: float | None = None

    @classmethod
    def of(cls, **raw) -> Workload:
        out = validated({k: v for k, v in raw.items()}, _BY_NAME, "workload")
        for k in ("input_len", "output_len"):
            if k in out:
                out[k] = _length(out[k], _BY_NAME[k])
        given = [k for k in ("batch", "concurrency", "arrival_rate") if out.get(k) is not None]
        if len(given) > 1:
            raise InputError(given[1], f"given with {given[0]}",
                             "one of a static batch, a concurrency (closed loop) or an arrival rate (open loop)")
        return cls(**out)

    @property
    def arrival(self) -> str:
        """How requests arrive: "static" (a batch), "closed" (concurrency) or "open" (arrival rate)."""
        if self.concurrency is not None:
            return "closed"
        return "open" if self.arrival_rate is not None else "static"

    def set_fields(self) -> dict:
        return {f.name: getattr(self, f.name) for f in WORKLOAD_FIELDS if getattr(self, f.name) != f.default}

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dc_fields(self)}


def _length(v, f: Field):
    """A whole token count in range, or a distribution's spec kept as text (the simulator parses it)."""
    if isinstance(v, str) and ":" in v:
        kind = v.split(":", 1)[0].strip().lower()
        if kind not in ("uniform", "lognormal", "fit"):
            raise InputError(f.name, f"{v!r} is not a length", LENGTH_HELP)
        return v.strip()
    from tokenmath.specs.question.fields import as_int
    return as_int(v, f)


def field(name: str) -> Field:
    return _BY_NAME[name]
