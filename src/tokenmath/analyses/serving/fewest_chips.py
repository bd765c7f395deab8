"""Chips left blank: the fewest chips that fit. One rule for every face that lets a person leave the chip count out.

The candidates are the degrees given (tp x pp x ep, 1 when none) times 1, 2, 4, 8, ... up to MAX_SEARCH_CHIPS, each
laid out as a question with that many chips would be (analyses.setup.setup: make_layout's default spread, e.g.
DeepSeek-V3's EP with DP attention); the first whose HBM holds the weights and `batch` sequences of `context`
tokens (engine.memory.max_batch, the serving engine's KV fraction and running cap included) is the answer.
Powers of two because layouts are (a count a spread refuses, such as 5 chips of 256 experts, is skipped).
None when no candidate fits: the question then runs on the degrees given and says why it does not fit.

`blank_chips` is the rule applied to a question: chips and dp both left out -> the fewest that fit; the CLI, Python
(analyses/ask.py) and the web page (faces/web/blank_chips.py) all call it, so a chip count left out means the same
everywhere."""
from __future__ import annotations

from tokenmath.base.errors import InputError
from tokenmath.engine.memory import max_batch
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS


def fewest_chips(model, hardware, *, context: int, batch: int = 1, tp=None, pp=None, ep=None, weight_dtype=None,
                 kv_dtype=None, engine=None, what_if=(), price_usd_per_hour=None) -> int | None:
    """The fewest chips (the given degrees' product times a power of two) whose layout holds `batch` sequences of
    `context` tokens beside the weights; None if none up to MAX_SEARCH_CHIPS does."""
    from tokenmath.analyses.setup import setup
    given = 1
    for d in (tp, pp, ep):
        given *= int(d or 1)
    need = max(int(batch), 1)
    n = given
    while n <= MAX_SEARCH_CHIPS:
        try:
            su = setup(model, hardware, chips=n, tp=tp, pp=pp, ep=ep, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                       engine=engine, what_if=what_if, price_usd_per_hour=price_usd_per_hour)
        except InputError as e:
            if e.field != "chips":     # a bad model, chip or dtype: the question's own error, not a count to skip
                raise
        else:
            p = su.precision
            got = max_batch(su.model, su.hardware.memory_bytes, su.layout, p.weight.bytes, p.expert.bytes,
                            p.kv.bytes, int(context), su.reserve, engine=su.efficiency.engine)
            if int(got) >= need:
                return n
        n *= 2
    return None


def tokens_of(v, default: int) -> int:
    """A token count of a question (a count, or a simulated distribution's mean such as "uniform:512-1536"; None:
    `default`)."""
    if v is None:
        return default
    if isinstance(v, str):
        from tokenmath.analyses.serving.simulation.workload import parse_lengths
        return max(int(round(parse_lengths(v, "input_len").moments()[0])), 1)
    return int(v)


def sequence_of(input_len, output_len) -> int:
    """One sequence's tokens when its last token is made: input + output (None: the declared 1,024 + 256)."""
    return tokens_of(input_len, 1024) + tokens_of(output_len, 256)


def blank_chips(model, hardware, *, chips, dp, context: int, batch=1, tp=None, pp=None, ep=None, weight_dtype=None,
                kv_dtype=None, engine=None, what_if=()) -> int | None:
    """The chip count a question runs on: `chips` when it names chips or dp, else the fewest that hold `batch`
    sequences of `context` tokens (batch "max" or None: one); None when nothing is named and nothing fits (the
    question then runs on the degrees given and says why it does not fit)."""
    if chips is not None or dp is not None:
        return chips
    b = batch if isinstance(batch, int) else 1
    return fewest_chips(model, hardware, context=context, batch=b, tp=tp, pp=pp, ep=ep, weight_dtype=weight_dtype,
                        kv_dtype=kv_dtype, engine=engine, what_if=what_if)
