"""Issue 23 item 5: a table never cuts an id a user must type back (chip, model, provider, validation row ids), and
at 80 columns the hardware catalog still fits without cropping a column."""
import pytest

from tokenmath.faces import tables
from tokenmath.specs.hardware import hardware_ids


def lines(out):
    return [ln for ln in out.splitlines() if ln.strip()]


@pytest.mark.parametrize("width", [80, 60])
def test_hardware_table_keeps_every_id_whole(monkeypatch, capsys, width):
    monkeypatch.setenv("COLUMNS", str(width))
    tables.hardware_table(False)
    out = capsys.readouterr().out
    if width == 80:
        assert "…" not in out   # narrower, headers may shorten; the ids below never do
    for hid in hardware_ids():   # gb200-nvl72, apple-m2-ultra, ... each on one line, whole
        assert any(hid in ln for ln in out.splitlines()), hid
    if width == 80:
        # every column shows: the right border is on every row (nothing cropped at the terminal's edge)
        assert max(len(ln) for ln in lines(out)) <= 80
        assert all(ln.rstrip().endswith(("┓", "┃", "┩", "│", "┘", "┛")) for ln in lines(out)[1:])


def test_coverage_tables_keep_model_and_provider_ids(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    a = {"median": 20.0, "low": 10.0, "high": 40.0}
    long_err = "the price implies more than the largest prior allows: raise --chip-cost or check the price pair"
    cov = {"open": [{"model": "llama-3.1-405b-instruct-turbo", "provider": "together-ai-serverless",
                     "input_usd_per_mtok": 3.5, "output_usd_per_mtok": 3.5, "true_active_params_b": 405,
                     "active_params_b": a, "inside_80": False}],
           "closed": [{"model": "claude-sonnet-4.5-long-context", "provider": "anthropic", "input_usd_per_mtok": 6,
                       "output_usd_per_mtok": 22.5, "active_params_b": a, "total_params_b": a},
                      {"model": "claude-sonnet-4.5", "provider": "anthropic", "input_usd_per_mtok": 3,
                       "output_usd_per_mtok": 15, "error": long_err}],
           "coverage_80": None}
    tables.coverage_table(cov)
    out = capsys.readouterr().out
    assert "…" not in out
    for name in ("llama-3.1-405b-instruct-turbo", "together-ai-serverless", "claude-sonnet-4.5-long-context"):
        assert any(name in ln for ln in out.splitlines()), name
    # the error text is folded over lines, never cut: every word of it is there
    flat = " ".join(out.replace("│", " ").split())
    for word in long_err.split():
        assert word in flat


def test_add_id_column_width_is_the_longest_id():
    from rich.table import Table
    t = Table()
    tables.add_id_column(t, "id", ["a", "gb200-nvl72", "abc"])
    assert t.columns[0].min_width == len("gb200-nvl72") == 11


def test_a_name_wider_than_the_terminal_runs_past_the_edge_whole(monkeypatch, capsys):
    # 59 characters, as the longest model name in data/api_prices.toml: with the other columns the table needs more
    # than 60 columns, so it is printed wider than the terminal instead of cropping the name or a column
    monkeypatch.setenv("COLUMNS", "60")
    name = "Mistral 7B Instruct v0.2 (mistral.mistral-7b-instruct-v0:2)"
    assert len(name) == 59
    a = {"median": 7.0, "low": 3.0, "high": 12.0}
    tables.coverage_table({"open": [{"model": name, "provider": "AWS Bedrock", "input_usd_per_mtok": 0.15,
                                     "output_usd_per_mtok": 0.2, "true_active_params_b": 7.24,
                                     "active_params_b": a, "inside_80": True}],
                           "closed": [], "coverage_80": None})
    out = capsys.readouterr().out
    assert name in out and "…" not in out
    assert "3 - 12" in out and "yes" in out   # the last columns are there too
