"""Scenario sweeps beyond one machine (issue 17, part 5): the product of models x hardware x layouts x engines x
workloads, in local processes by default and on a Dask cluster (here a LocalCluster the test starts), with the same
rows in the same order."""
import json
import sys

import pytest
from click.testing import CliRunner

import tokenmath
from tokenmath.analyses.serving.scenarios import ScenarioSet, run_scenarios, scenario_set
from tokenmath.base.errors import InputError
from tokenmath.base.install import install_hint
from tokenmath.faces.cli import cli

SPEC = {"models": ["llama-3.1-8b"], "hardware": ["h100-sxm", "hgx-h200"], "layouts": [{"chips": 1}, {"chips": 2}],
        "engines": ["vllm", "sglang"], "workloads": [{"concurrency": 8}, {"arrival_rate": 6.0, "burstiness": 0.5}],
        "defaults": {"requests": 150, "input_len": "uniform:256-768", "output_len": 64, "seed": 3}}


def test_the_product_in_order():
    s = scenario_set(SPEC)
    assert s.size == 16
    sc = s.expand()
    assert [x["index"] for x in sc] == list(range(16))
    # models slowest, workloads fastest; the defaults fill every workload
    assert [x["hardware"] for x in sc[:8]] == ["h100-sxm"] * 8
    assert [x["engine"] for x in sc[:4]] == ["vllm", "vllm", "sglang", "sglang"]
    assert [("concurrency" in x["workload"]) for x in sc[:2]] == [True, False]
    assert all(x["workload"]["requests"] == 150 and x["workload"]["seed"] == 3 for x in sc)


def test_local_processes_give_the_same_rows_as_one_process_and_as_direct_calls():
    one = run_scenarios(SPEC, workers=1)
    two = run_scenarios(SPEC, workers=2)
    assert one.rows == two.rows
    assert two.runner == {"kind": "processes", "workers": 2}
    assert all(r["error"] is None for r in one.rows)
    r = one.rows[7]          # h100-sxm, chips 2, sglang, open loop
    direct = tokenmath.simulate("llama-3.1-8b", "h100-sxm", chips=2, engine="sglang", arrival_rate=6.0,
                                burstiness=0.5, requests=150, input_len="uniform:256-768", output_len=64, seed=3)
    assert (r["hardware"], r["layout"], r["engine"]) == ("h100-sxm", {"chips": 2}, "sglang")
    assert r["output_tokens_per_s"] == direct.output_tokens_per_s
    assert r["ttft_p99_s"] == direct.ttft_s.p99 and r["goodput_rps"] == direct.goodput_rps


def test_physics_across_the_sweep():
    """A system id is its chip in a domain: hgx-h200 serves like h200; the closed-form sweep's throughput per chip
    grows with the users until the replica is full."""
    s = run_scenarios({"method": "steady", "models": "llama-3.1-70b", "hardware": ["h200", "hgx-h200"],
                       "layouts": {"chips": 8}, "workloads": [{"concurrency": c} for c in (1, 8, 64, 256)]},
                      workers=1)
    rows = s.rows
    for a, b in zip(rows[:4], rows[4:]):
        assert b["output_tokens_per_s_per_chip"] == pytest.approx(a["output_tokens_per_s_per_chip"], rel=1e-9)
    y = [r["output_tokens_per_s_per_chip"] for r in rows[:4]]
    assert y == sorted(y) and y[-1] > 20 * y[0]
    assert s.summary()["best_output_tokens_per_s_per_chip"]["index"] in (3, 7)


def test_a_scenario_that_cannot_run_is_a_row_with_its_error():
    s = run_scenarios({"models": ["llama-3.1-70b"], "layouts": [{"chips": 1}, {"chips": 8}],
                       "workloads": {"concurrency": 4, "requests": 40}}, workers=1)
    bad, good = s.rows
    assert bad["error"]["field"] and "KV cache" in bad["error"]["problem"]
    assert good["error"] is None and good["output_tokens_per_s"] > 0
    assert s.summary()["errors"] == 1 and s.summary()["ok"] == 1


@pytest.mark.parametrize("spec,field", [
    ({"models": ["no-such-model"]}, "scenarios.models"),
    ({"hardware": ["h100-sxmm"]}, "scenarios.hardware"),
    ({"engines": ["vlm"]}, "scenarios.engines"),
    ({"layouts": [{"tpp": 2}]}, "scenarios.layouts[0].tpp"),
    ({"workloads": [{"concurrency": 0}]}, "scenarios.workloads[0].concurrency"),
    ({"workloads": [{"concurrency": 4, "arrival_rate": 2}]}, "scenarios.workloads[0]"),
    ({"method": "steady", "workloads": [{"arrival_rate": 2}]}, "scenarios.workloads[0].arrival_rate"),
    ({"modles": ["x"]}, "scenarios.modles"),
    ({"method": "guess"}, "scenarios.method"),
    ({"models": []}, "scenarios.models"),
])
def test_bad_scenarios_name_the_field(spec, field):
    with pytest.raises(InputError) as e:
        run_scenarios(spec, workers=1)
    assert e.value.field == field


def test_too_many_scenarios():
    with pytest.raises(InputError) as e:
        scenario_set({"workloads": [{"concurrency": c} for c in range(1, 1001)], "engines": ["vllm"] * 11})
    assert e.value.field == "scenarios"


def test_cli_file_and_options(tmp_path):
    f = tmp_path / "sweep.toml"
    f.write_text('method = "steady"\nmodels = ["llama-3.1-8b"]\nengines = ["vllm", "sglang"]\n'
                 'workloads = [{concurrency = 4}, {concurrency = 32}]\n[defaults]\ninput_len = 512\n')
    r = CliRunner().invoke(cli, ["scenarios", "--file", str(f), "--json", "--workers", "1"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 4 and d["summary"]["scenarios"] == 4 and d["summary"]["errors"] == 0
    assert d["rows"][1]["workload"] == {"concurrency": 32, "input_len": 512}
    # an option replaces the file's axis
    r = CliRunner().invoke(cli, ["scenarios", "--file", str(f), "--engine", "tensorrt-llm", "--concurrency", "8",
                                 "--workers", "1"])
    assert r.exit_code == 0, r.output
    assert "tensorrt-llm" in r.output and "1 scenarios (1 ran, 0 errors)" in r.output
    r = CliRunner().invoke(cli, ["scenarios", "--model", "no-such-model", "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "model"
    f.write_text('models = ["llama-3.1-8b"]\nworkloads = [{users = 4}]\n')
    r = CliRunner().invoke(cli, ["scenarios", "--file", str(f), "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["error"]["field"] == "file.workloads[0].users"


def test_cluster_without_distributed_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)       # import distributed -> ImportError
    r = CliRunner().invoke(cli, ["scenarios", "--cluster", "tcp://127.0.0.1:8786", "--json"])
    assert r.exit_code == 2, r.output
    err = json.loads(r.stdout)["error"]
    assert err["field"] == "cluster" and err["valid"] == install_hint("cluster")
    assert "pip install" in err["valid"] and "[cluster]'" in err["valid"]


@pytest.mark.parametrize("address", ["http://127.0.0.1:8786", "", "tcp://", "tcp://a b:1"])
def test_bad_cluster_address(address):
    from tokenmath.local.cluster import check_address
    with pytest.raises(InputError) as e:
        check_address(address)
    assert e.value.field == "cluster"


def test_unreachable_cluster_is_an_input_error():
    pytest.importorskip("distributed")
    from tokenmath.local.cluster import DaskCluster
    with pytest.raises(InputError) as e:
        DaskCluster("tcp://127.0.0.1:9", timeout_s=1.0)
    assert e.value.field == "cluster" and "cannot reach" in e.value.problem


def test_dask_local_cluster_gives_the_same_rows_as_local_processes():
    """A LocalCluster of two worker processes, started here: the same rows, in the same order, as local processes."""
    distributed = pytest.importorskip("distributed")
    from tokenmath.local.cluster import DaskCluster
    local = run_scenarios(SPEC, workers=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as lc:
        with DaskCluster(lc.scheduler_address) as runner:
            runner.client.wait_for_workers(2, timeout=60)
            remote = run_scenarios(SPEC, runner=runner)
            assert runner.describe() == {"kind": "dask", "address": lc.scheduler_address, "workers": 2}
        # the CLI on the same cluster
        r = CliRunner().invoke(cli, ["scenarios", "--cluster", lc.scheduler_address, "--model", "llama-3.1-8b",
                                     "--concurrency", "4,16", "--requests", "100", "--json"])
    assert remote.rows == local.rows
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["summary"]["runner"]["kind"] == "dask" and [x["workload"]["concurrency"] for x in d["rows"]] == [4, 16]


def test_scenario_set_round_trips():
    s = scenario_set(SPEC)
    assert isinstance(s, ScenarioSet) and scenario_set(s.to_dict()) == s
