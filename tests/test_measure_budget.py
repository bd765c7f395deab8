"""Issue 23 items 4 and 6: `tokenmath measure` fits a time budget (repetitions stop early, never below 3; arrays
sized from the cache and free memory), and progress lines go to stderr only on a terminal, never under --quiet."""
import pytest

from tokenmath.faces import progress
from tokenmath.local import timing
from tokenmath.local.bandwidth import CACHE_MULTIPLE, DEFAULT_ARRAY_MIN, QUICK_ARRAY, array_bytes

MiB = 1 << 20


class FakeClock:
    """perf_counter advancing `step` seconds per read: each timed call (read before, read after) lasts `step` s."""
    def __init__(self, step):
        self.t, self.step = 0.0, step

    def __call__(self):
        self.t += self.step
        return self.t


@pytest.mark.parametrize("step,reps,budget,expected", [
    (0.5, 10, 1.0, 3),     # 0.5 + 0.5 = 1.0 s reaches the budget after 2 calls, but never fewer than MIN_REPS = 3
    (0.1, 10, 1.0, 10),    # 10 calls x 0.1 s = 1.0 s: all 10 run (the budget is met on the last)
    (0.1, 20, 1.0, 10),    # 20 asked, the budget stops them at 10 x 0.1 s = 1.0 s
    (2.0, 2, 1.0, 2),      # fewer repetitions asked than MIN_REPS: the ask wins
    (0.1, 7, None, 7),     # no budget: every repetition
])
def test_times_stops_at_the_budget(monkeypatch, step, reps, budget, expected):
    monkeypatch.setattr(timing.time, "perf_counter", FakeClock(step))
    calls = []
    t = timing.times(lambda: calls.append(1), reps, warmup=1, budget_s=budget)
    assert len(t) == expected and len(calls) == expected + 1          # + the untimed warm-up
    assert all(x == pytest.approx(step) for x in t)


def test_array_size_follows_cache_and_memory():
    assert CACHE_MULTIPLE == 2
    assert array_bytes(False, 300 * MiB, None) == 600 * MiB             # 2 x a 300 MiB L3
    assert array_bytes(False, 8 * MiB, None) == DEFAULT_ARRAY_MIN == 256 * MiB   # small caches: the floor
    assert array_bytes(False, None, None) == 256 * MiB
    assert array_bytes(False, 300 * MiB, 1600 * MiB) == 200 * MiB       # free memory / 8: 3 arrays stay inside it
    assert array_bytes(True, 300 * MiB, None) == QUICK_ARRAY == 64 * MiB


def test_progress_only_on_a_terminal_and_never_quiet(monkeypatch, capsys):
    monkeypatch.delenv("TOKENMATH_PROGRESS", raising=False)
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False, raising=False)
    assert progress.reporter(quiet=False) is None                     # a pipe or a log: no chatter
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: True, raising=False)
    assert progress.reporter(quiet=True) is None                      # --quiet wins
    say = progress.reporter(quiet=False)
    say("bandwidth: numpy")
    cap = capsys.readouterr()
    assert cap.out == "" and "bandwidth: numpy" in cap.err and " s]" in cap.err   # stderr, with elapsed seconds
    monkeypatch.setenv("TOKENMATH_PROGRESS", "0")
    assert progress.reporter(quiet=False) is None
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: False, raising=False)
    monkeypatch.setenv("TOKENMATH_PROGRESS", "1")
    assert progress.reporter(quiet=False) is not None                 # asked for explicitly (tests, CI logs)


def test_measure_checks_out_before_measuring(tmp_path, monkeypatch):
    # a bad --out fails at once (exit 2, field named), before any benchmark runs
    from click.testing import CliRunner

    import tokenmath.local.measure as m
    from tokenmath.faces.cli import cli
    monkeypatch.setattr(m, "measure", lambda **kw: pytest.fail("measured before checking --out"))
    r = CliRunner().invoke(cli, ["measure", "--out", str(tmp_path / "hw.txt"), "--json"])
    assert r.exit_code == 2 and "out" in r.output
