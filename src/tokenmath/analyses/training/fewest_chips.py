"""A training run with its chips and layout left blank: the fewest chips, from START_CHIPS doubling, on which some
layout fits (train_search.search over each count, the recipe given or searched), and its fastest layout.

A count whose layouts all overflow memory (search's "chips" error) is doubled; any other error is the question's
own. Powers of two times START_CHIPS, as training clusters are built (8-GPU nodes)."""
from __future__ import annotations

from tokenmath.analyses.training.train_search import SearchResult, search
from tokenmath.base.errors import InputError

START_CHIPS = 8          # one 8-GPU node: the first count tried
MAX_CHIPS = 65_536


def fewest_chips_search(model, system, *, start: int = START_CHIPS, **kw) -> SearchResult:
    """search(model, system, chips=n, **kw) at the first n of start, 2 start, 4 start, ... up to MAX_CHIPS with a
    layout that fits; raises the last count's error when none does."""
    n, last = int(start), None
    while n <= MAX_CHIPS:
        try:
            return search(model, system, chips=n, **kw)
        except InputError as e:
            if e.field != "chips":
                raise
            last = e
        n *= 2
    raise last
