"""Workloads for the serving simulator: who sends what, and when.

- closed loop: `concurrency` users, each sending its next request the moment the last one completes (the client
  of `vllm bench serve --max-concurrency` and of InferenceMAX-style sweeps); the users ramp in over one request's
  lifetime, each sending its first request after a uniformly random share of its decode steps (`phases`, a seeded
  stream of its own; the first user at t = 0; loop.py says why: all at t = 0 with fixed lengths they would run in
  lock-step cohorts forever);
- open loop: arrivals at `rate` requests/s, Poisson (exponential gaps) or gamma bursts: gaps Gamma(shape=k,
  scale=1/(k x rate)), the same mean rate, coefficient of variation 1/sqrt(k) (k < 1 burstier than Poisson; the
  `--burstiness` of vLLM's benchmark_serving.py);
- a trace: a CSV or JSONL file of arrival_s, input_tokens, output_tokens and optionally prefix_id and
  prefix_tokens (requests sharing a prefix_id share their first prefix_tokens tokens, by default the group's
  shortest prompt minus one).
Sessions (turns > 1; sessions.py): each request a turn of an agent session, its prompt the session's history plus
input_len new tokens, the next turn sent a tool gap after it completes (exponential, mean tool_gap_s); a closed
loop's users run sessions back to back, an open loop's sessions start at the arrival rate (sessions/s). Not with a
trace or a shared prefix_hit.
Lengths: fixed ("1024"), uniform ("uniform:512-1536"), lognormal ("lognormal:1024,0.6": median, sigma of the
log), or fitted to a trace's column ("fit:trace.csv": the lognormal of maximum likelihood). Seeded: the same seed
gives the same requests.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tokenmath.base.errors import InputError, show
from tokenmath.base.validators import MAX_TOKENS, int_arg, pos_float
from tokenmath.engine.prefix_cache import hit_rate
from tokenmath.specs.question.workload import MAX_TOOL_GAP_S, MAX_TURNS
from tokenmath.analyses.serving.simulation.sessions import session_prompts

MAX_REQUESTS = 2_000_000
MAX_TRACE_BYTES = 256_000_000
MIN_RATE = 1e-6      # requests/s (specs/question/workload.py): slower, the clock's float resolution zeroes every latency
MAX_FIELD_CHARS = 131_072    # of one CSV field (the csv module's own limit, refused by name rather than crashing)
RAMP_STREAM = 1            # the closed loop's ramp draws from default_rng([seed, RAMP_STREAM])
GAP_STREAM = 2             # sessions' tool gaps draw from default_rng([seed, GAP_STREAM])
LENGTH_HELP = '"1024", "uniform:512-1536", "lognormal:1024,0.6" (median, sigma) or "fit:trace.csv"'


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts (each draw a whole number >= 1)."""
    kind: str                   # fixed | uniform | lognormal
    a: float                    # fixed: the value; uniform: low; lognormal: median
    b: float = 0.0              # uniform: high; lognormal: sigma of the log
    source: str = ""            # fitted: the trace it came from

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, int(self.a), np.int64)
        if self.kind == "uniform":
            return rng.integers(int(self.a), int(self.b) + 1, n).astype(np.int64)
        x = np.exp(math.log(self.a) + self.b * rng.standard_normal(n))
        return np.clip(np.rint(x), 1, MAX_TOKENS).astype(np.int64)

    def moments(self) -> tuple[float, float]:
        """(mean, mean of the square) of the draws (lognormal: of the continuous law, before rounding)."""
        if self.kind == "fixed":
            return self.a, self.a ** 2
        if self.kind == "uniform":
            v = np.arange(int(self.a), int(self.b) + 1, dtype=float)
            return float(v.mean()), float((v ** 2).mean())
        mu, s = math.log(self.a), self.b
        return math.exp(mu + s * s / 2), math.exp(2 * mu + 2 * s * s)

    @property
    def max(self) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return int(self.b)
        return MAX_TOKENS

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"{int(self.a)}"
        if self.kind == "uniform":
            return f"uniform {int(self.a)}-{int(self.b)}"
        fit = f", fitted to {self.source}" if self.source else ""
        return f"lognormal (median {self.a:.0f}, sigma {self.b:.2f}{fit})"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "a": self.a, "b": self.b, "source": self.source, "mean": self.moments()[0]}


def parse_lengths(spec, field: str) -> Lengths:
    """A length spec (an int, or the strings of LENGTH_HELP) -> Lengths."""
    if isinstance(spec, Lengths):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        return Lengths("fixed", int_arg(spec, field))
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    try:
        if kind == "uniform":
            lo, hi = (int_arg(x.strip(), field) for x in rest.split("-", 1))
            if lo > hi:
                raise InputError(field, f"uniform range {lo}-{hi} is empty", "low <= high")
            return Lengths("uniform", lo, hi)
        if kind == "lognormal":
            med, sig = rest.split(",", 1)
            return Lengths("lognormal", pos_float(med, field, 0.0, MAX_TOKENS), pos_float(sig, field, 0.0, 5.0))
        if kind == "fit":
            column = "output_tokens" if "output" in field else "input_tokens"
            return fit_lognormal(read_trace(rest.strip(), field)[column], field, Path(rest.strip()).name)
    except ValueError as e:
        if isinstance(e, InputError):
            raise
        raise InputError(field, f"{show(spec)} is not a length spec", LENGTH_HELP) from None
    raise InputError(field, f"{show(spec)} is not a length spec", LENGTH_HELP)


def fit_lognormal(values: np.ndarray, field: str, source: str = "") -> Lengths:
    """Maximum-likelihood lognormal: median exp(mean of log), sigma the std of the log."""
    logs = np.log(np.asarray(values, float))
    if logs.size < 2:
        raise InputError(field, "a fit needs at least 2 requests", "a trace with more rows")
    return Lengths("lognormal", float(np.exp(logs.mean())), max(float(logs.std()), 1e-6), source)


@dataclass(frozen=True)
class Workload:
    kind: str                       # closed | poisson | gamma | trace
    requests: int
    input: Lengths | None = None
    output: Lengths | None = None
    concurrency: int = 0
    rate: float = 0.0
    burstiness: float = 1.0
    trace: str = ""
    seed: int = 0
    # prefix caching on a generated workload: every prompt's first prefix_hit share is one prefix shared by all
    # requests (a common system prompt); the first request to run prefills it, the others find it cached
    # (state.py). A trace carries its own prefixes (prefix_id, prefix_tokens).
    prefix_hit: float = 0.0
    turns: int = 1                  # turns per session (1: independent requests)
    tool_gap_s: float = 0.0         # mean seconds from a turn's last token to its session's next prompt (gaps())

    @property
    def sessions(self) -> int:
        """Sessions the requests make (the last one shorter when they are not a whole number of sessions)."""
        return -(-self.requests // self.turns)

    def describe(self) -> str:
        if self.kind == "trace":
            return f"trace {Path(self.trace).name} ({self.requests:,} requests)"
        lens = f"input {self.input.describe()}, output {self.output.describe()}"
        if self.prefix_hit:
            lens += f", {self.prefix_hit:g} of each prompt a shared cached prefix"
        what = f"{self.requests:,} requests"
        if self.turns > 1:
            what = (f"{self.sessions:,} session{'s' if self.sessions > 1 else ''} of {self.turns} turns "
                    f"({self.requests:,} turns, each prompt the "
                    f"session's history + the new input, tool gaps between turns exponential with mean "
                    f"{self.tool_gap_s:g} s)")
            lens = lens.replace("input ", "new input ", 1)
        if self.kind == "closed":
            return f"closed loop, concurrency {self.concurrency}, {what}, {lens}"
        how = "Poisson" if self.kind == "poisson" else f"gamma bursts (shape {self.burstiness:g})"
        unit = "sessions/s" if self.turns > 1 else "req/s"
        return f"open loop, {self.rate:g} {unit} {how}, {what}, {lens}"

    def materialize(self):
        """(arrival times s or None for a closed loop, input tokens, output tokens, prefix groups, prefix tokens)
        as arrays; prefix groups are -1 where a request shares nothing. Sessions: the arrival times are the sessions'
        first sends (open loop), the input tokens whole prompts (history + new), the prefixes the histories, each
        session its own group from its second turn (sessions.session_prompts)."""
        rng = np.random.default_rng(self.seed)
        n = self.requests
        if self.kind == "trace":
            t = read_trace(self.trace, "trace")
            return t["arrival_s"], t["input_tokens"], t["output_tokens"], t["prefix_group"], t["prefix_tokens"]
        inp, out = self.input.sample(rng, n), self.output.sample(rng, n)
        if self.kind == "closed":
            arr = None
        else:
            k = 1.0 if self.kind == "poisson" else self.burstiness
            arr = np.cumsum(rng.gamma(k, 1.0 / (k * self.rate), n if self.turns == 1 else self.sessions))
        if self.turns > 1:
            whole, history, group, _ = session_prompts(inp, out, self.turns)
            return arr, whole, out, group, history
        if self.prefix_hit:
            shared = np.minimum(np.floor(self.prefix_hit * inp), inp - 1).astype(np.int64)
            return arr, inp, out, np.where(shared > 0, 0, -1).astype(np.int64), shared
        return arr, inp, out, np.full(n, -1, np.int64), np.zeros(n, np.int64)

    def phases(self) -> np.ndarray | None:
        """Closed loop: each user's first send as a share of the ramp (loop.cycle_steps), sorted: the first user at 0,
        the others independent uniform on [0, 1) (seeded, a stream of their own so the lengths drawn by
        materialize are unchanged). None for other workloads."""
        if self.kind != "closed":
            return None
        users = min(self.concurrency, self.sessions)
        rng = np.random.default_rng([self.seed, RAMP_STREAM])
        return np.concatenate(([0.0], np.sort(rng.random(users - 1))))

    def gaps(self) -> np.ndarray | None:
        """Sessions: the tool gap after each request, seconds: exponential with mean tool_gap_s (seeded, a stream of
        their own; sessions.py says why not a constant); None without sessions."""
        if self.turns == 1:
            return None
        if not self.tool_gap_s:
            return np.zeros(self.requests)
        return np.random.default_rng([self.seed, GAP_STREAM]).exponential(self.tool_gap_s, self.requests)

    def to_dict(self) -> dict:
        d = {"kind": self.kind, "requests": self.requests, "seed": self.seed}
        if self.kind == "closed":
            d["concurrency"] = self.concurrency
        if self.kind in ("poisson", "gamma"):
            d["arrival_rate"] = self.rate
            d["burstiness"] = self.burstiness
        if self.kind == "trace":
            d["trace"] = self.trace
        else:
            d["input"], d["output"] = self.input.to_dict(), self.output.to_dict()
        if self.prefix_hit:
            d["prefix_hit"] = self.prefix_hit
        if self.turns > 1:
            d["turns"], d["tool_gap_s"], d["sessions"] = self.turns, self.tool_gap_s, self.sessions
        return d


def make_workload(*, concurrency=None, arrival_rate=None, burstiness=1.0, trace=None, requests=1000,
                  input_len=1024, output_len=256, seed=0, prefix_hit=None, turns=None, tool_gap_s=None) -> Workload:
    given = [x is not None for x in (concurrency, arrival_rate, trace)]
    if sum(given) > 1:
        raise InputError("workload", "more than one of concurrency, arrival_rate and trace was given", "one of them")
    seed = int_arg(seed, "seed", 0, 2 ** 63 - 1)
    hit = hit_rate(prefix_hit)
    turns, gap = _sessions(turns, tool_gap_s, trace, hit)
    if trace is not None:
        if hit:
            raise InputError("prefix_hit", "given with a trace", "the trace's own prefix_id and prefix_tokens columns, "
                             "or a generated workload")
        if burstiness is not None and burstiness != 1.0:
            raise InputError("burstiness", f"{show(burstiness)} given with a trace, whose arrival_s column sets the "
                             "gaps", "leave burstiness out with a trace")
        t = read_trace(trace, "trace")
        return Workload("trace", int(t["arrival_s"].size), trace=str(trace), seed=seed)
    n = int_arg(requests, "requests", 1, MAX_REQUESTS)
    inp, out = parse_lengths(input_len, "input_len"), parse_lengths(output_len, "output_len")
    if arrival_rate is not None:
        rate = pos_float(arrival_rate, "arrival_rate", 0.0, 1e7)
        if rate < MIN_RATE:
            raise InputError("arrival_rate", f"{rate:g} requests/s is out of range", f"a number from {MIN_RATE:g} to 1e+07")
        k = pos_float(burstiness, "burstiness", 0.0, 1e3)
        return Workload("poisson" if k == 1.0 else "gamma", n, inp, out, rate=rate, burstiness=k, seed=seed,
                        prefix_hit=hit, turns=turns, tool_gap_s=gap)
    if burstiness is not None and burstiness != 1.0:      # the gaps between arrivals: a closed loop has none
        raise InputError("burstiness", f"{show(burstiness)} given with a closed loop (users send their next request "
                         "when one completes: no arrival gaps to shape)", "an open loop (arrival_rate) with it, or "
                         "leave burstiness out")
    c = int_arg(64 if concurrency is None else concurrency, "concurrency", 1, 1_000_000)
    return Workload("closed", n, inp, out, concurrency=c, seed=seed, prefix_hit=hit, turns=turns, tool_gap_s=gap)


def _sessions(turns, tool_gap_s, trace, hit) -> tuple[int, float]:
    """(turns per session, tool gap s), checked: sessions are generated, so not with a trace; a session's cached
    prefix is its own history, so not with a prefix shared by every request (prefix_hit) under it."""
    t = 1 if turns is None else int_arg(turns, "turns", 1, MAX_TURNS)
    gap = 0.0 if tool_gap_s is None or _zero(tool_gap_s) else pos_float(tool_gap_s, "tool_gap_s", 0.0, MAX_TOOL_GAP_S)
    if t > 1 and trace is not None:
        raise InputError("turns", f"{t} given with a trace, whose rows are the requests", "a generated workload "
                         "(--concurrency or --arrival-rate) with --turns, or a trace whose rows share prefix_id")
    if t > 1 and hit:
        raise InputError("prefix_hit", f"{hit:g} given with turns {t}: a session's cached prefix is its own history, "
                         "and a prefix shared by every session under it is not modelled", "leave --prefix-hit out "
                         "with --turns")
    return t, gap


def _zero(v) -> bool:
    """Whether v reads as the number 0 (no gap: allowed, where pos_float takes numbers above its floor)."""
    try:
        return float(v) == 0.0
    except (TypeError, ValueError, OverflowError):
        return False


# ---- trace files ------------------------------------------------------------------------------------------
def _rows(path: Path, field: str):
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as e:
        raise InputError(field, f"cannot read {path.name!r}: {e.strerror or type(e).__name__}",
                         "a readable CSV or JSONL file") from None
    if len(raw) > MAX_TRACE_BYTES:
        raise InputError(field, f"{path.name!r} is over {MAX_TRACE_BYTES:,} bytes", "a smaller trace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(field, f"{path.name!r} is not UTF-8 text", "a CSV or JSONL text file") from None
    if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for k, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:        # an integer of hundreds of digits is read as a float (inf: refused as out of range below)
                    row = json.loads(line, parse_int=_json_int)
                except (ValueError, RecursionError):
                    raise InputError(field, f"line {k} of {path.name!r} is not JSON", "one JSON object per line") from None
                if not isinstance(row, dict):
                    raise InputError(field, f"line {k} of {path.name!r} is not an object", "one JSON object per line")
                yield k, row
    else:
        reader = enumerate(csv.DictReader(io.StringIO(text)), 2)
        while True:
            try:
                k, row = next(reader)
            except StopIteration:
                return
            except csv.Error as e:      # a field over MAX_FIELD_CHARS, a NUL byte, ...
                raise InputError(field, f"{path.name!r} is not a CSV trace: {show(str(e), 120)}",
                                 f"columns arrival_s, input_tokens, output_tokens, each field under "
                                 f"{MAX_FIELD_CHARS:,} characters") from None
            yield k, row


def _json_int(s: str):
    return int(s) if len(s) <= 30 else float(s)


def trace_file(path, field: str = "trace", valid: str = "a CSV or JSONL trace file") -> Path:
    """The path of an existing trace file, or an InputError naming `field` (never an OSError)."""
    p = Path(str(path))
    try:
        found = p.is_file()
    except OSError:                 # a name too long for the file system, ...
        found = False
    if not found:
        raise InputError(field, f"file not found: {show(str(path))}", valid)
    return p


def read_trace(path, field: str = "trace") -> dict:
    """A trace file as arrays sorted by arrival: arrival_s, input_tokens, output_tokens, prefix_group (-1: none),
    prefix_tokens (the shared prefix each request may find cached)."""
    p = trace_file(path, field)
    arr, inp, out, pid, ptok = [], [], [], [], []
    for k, row in _rows(p, field):
        if len(arr) >= MAX_REQUESTS:
            raise InputError(field, f"{p.name!r} has over {MAX_REQUESTS:,} requests", "a shorter trace")
        try:
            a = float(row["arrival_s"])
        except (KeyError, TypeError, ValueError, OverflowError):
            raise InputError(field, f"row {k} of {p.name!r} has no number arrival_s",
                             "columns arrival_s, input_tokens, output_tokens[, prefix_id, prefix_tokens]") from None
        if not (math.isfinite(a) and a >= 0):
            raise InputError(field, f"row {k}: arrival_s {show(row['arrival_s'])} is out of range", "seconds >= 0")
        arr.append(a)
        inp.append(int_arg(row.get("input_tokens"), f"{field} row {k} input_tokens"))
        out.append(int_arg(row.get("output_tokens"), f"{field} row {k} output_tokens"))
        g = row.get("prefix_id")
        pid.append(None if g in (None, "") else str(g))
        t = row.get("prefix_tokens")
        ptok.append(-1 if t in (None, "") else int_arg(t, f"{field} row {k} prefix_tokens", 0))
    if not arr:
        raise InputError(field, f"{p.name!r} holds no requests", "at least one row")
    order = np.argsort(np.asarray(arr), kind="stable")
    inp_a = np.asarray(inp, np.int64)
    groups = {g: j for j, g in enumerate(dict.fromkeys(x for x in pid if x is not None))}
    grp = np.asarray([-1 if g is None else groups[g] for g in pid], np.int64)
    shortest = {}
    for g, n in zip(grp, inp_a):
        if g >= 0:
            shortest[g] = min(shortest.get(g, n), n)
    pt = np.asarray([0 if g < 0 else (t if t >= 0 else shortest[g] - 1) for g, t in zip(grp, ptok)], np.int64)
    pt = np.minimum(pt, inp_a - 1)
    return {"arrival_s": np.asarray(arr, float)[order], "input_tokens": inp_a[order],
            "output_tokens": np.asarray(out, np.int64)[order], "prefix_group": grp[order], "prefix_tokens": pt[order]}
