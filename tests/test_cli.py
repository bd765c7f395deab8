"""The command line: answers, JSON contract, and every bad input gets a named field and exit code 2."""
import json

import pytest
from click.testing import CliRunner

import subprocess
import sys

from tokenmath.faces.cli import cli as main

KEYS = ["params_total", "params_active", "weights_bytes", "kv_bytes_per_token", "memory_per_chip_bytes", "fits",
        "batch", "ttft_s", "decode_step_s", "output_tokens_per_s", "output_tokens_per_s_per_user",
        "bottleneck_prefill", "bottleneck_decode", "cost_per_mtok_input_usd", "cost_per_mtok_output_usd",
        "cost_per_mtok_output_request_usd"]


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_infer_json_contract(fixtures):
    r = run("infer", "--model", str(fixtures / "Llama-3.1-8B.json"), "--hardware", "h100-sxm", "--chips", "2", "--tp", "2",
            "--batch", "8", "--input-len", "1024", "--output-len", "128", "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for k in KEYS:
        assert k in d
    assert d["fits"] is True and d["batch"] == 8
    assert d["bottleneck_decode"] in ("compute", "memory", "communication", "overhead")
    assert d["output_tokens_per_s_per_user"] == pytest.approx(1 / d["decode_step_s"])


def test_batch_max_mla_moe(fixtures):
    r = run("infer", "--model", str(fixtures / "DeepSeek-V3.json"), "--hardware", "h200", "--chips", "8", "--tp", "8",
            "--batch", "max", "--input-len", "2000", "--output-len", "200", "--json")
    d = json.loads(r.output)
    assert r.exit_code == 0 and d["fits"] and d["batch"] > 1


def test_table_and_explain():
    r = run("infer", "--model", "llama-3.1-70b", "--hardware", "h100-sxm", "--chips", "8")
    assert r.exit_code == 0 and "memory" in r.output
    e = run("infer", "--model", "mixtral-8x7b", "--hardware", "h100-sxm", "--chips", "2", "--explain")
    assert e.exit_code == 0 and "napkin floor" in e.output and "experts" in e.output


@pytest.mark.parametrize("args,field", [
    (["--model", "llama-3.1-70"], "model"),
    (["--hardware", "h100sxm"], "hardware"),
    (["--model", "llama-3.1-8b", "--chips", "3", "--tp", "3"], "tp"),
    (["--model", "llama-3.1-8b", "--tp", "5"], "tp"),
    (["--model", "llama-3.1-8b", "--ep", "2"], "ep"),
    (["--model", "llama-3.1-8b", "--chips", "6", "--pp", "4"], "chips"),
    (["--weight-dtype", "fp3"], "weight_dtype"),
    (["--kv-dtype", "int4"], "kv_dtype"),
    (["--model", "no/such/config.json"], "model"),
])
def test_bad_input_names_the_field(args, field):
    r = run("infer", *args, "--json")
    assert r.exit_code == 2, r.output
    err = json.loads(r.stdout)["error"]
    assert err["field"] == field and err["problem"]


def test_typo_gets_closest_names():
    r = run("infer", "--model", "llama-3.1-70", "--json")
    assert "llama-3.1-70b" in json.loads(r.stdout)["error"]["valid"]
    r = run("infer", "--hardware", "h100sxm", "--json")
    assert "h100-sxm" in json.loads(r.stdout)["error"]["valid"]


def test_a_system_id_as_hardware_names_its_chip():
    # hgx-h100 is a system of h100-sxm chips; difflib alone would suggest gh200 / rtx-5090, not the chip meant
    r = run("infer", "--hardware", "hgx-h100", "--json")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["field"] == "hardware" and "--hardware h100-sxm" in err["valid"] and "--system hgx-h100" in err["valid"]


@pytest.mark.parametrize("args", [["--batch", "0"], ["--batch", "lots"], ["--input-len", "-5"], ["--output-len", "0"],
                                  ["--chips", "0"]])
def test_impossible_values_exit_2(args):
    r = run("infer", *args)
    assert r.exit_code == 2 and "Traceback" not in r.output


def test_lists():
    assert run("models").exit_code == 0
    assert run("hardware").exit_code == 0
    d = json.loads(run("hardware", "--json").output)
    assert all(h["sources"].get("flops") and h["sources"].get("memory") for h in d)


def test_user_hardware_file(tmp_path):
    f = tmp_path / "mychip.toml"
    f.write_text('name = "my chip"\nmemory_gb = 48\nmemory_bw_tbs = 1.0\ntflops = { bf16 = 200 }\n')
    r = run("infer", "--model", "llama-3.1-8b", "--hardware", str(f), "--json")
    d = json.loads(r.output)
    assert r.exit_code == 0 and d["cost_per_mtok_output_usd"] is None and d["fits"]
    f.write_text('memory_gb = 48\nmemory_bw_tb = 1.0\ntflops = { bf16 = 200 }\n')
    r = run("infer", "--hardware", str(f), "--json")
    assert r.exit_code == 2 and "memory_bw_tbs" in json.loads(r.stdout)["error"]["valid"]


def test_usage_errors_are_json_too():
    p = subprocess.run([sys.executable, "-m", "tokenmath.faces.cli", "infer", "--batch", "0", "--json"], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert json.loads(p.stdout)["error"]["field"] == "batch"


def test_chips_that_tensor_parallelism_cannot_split_name_chips_not_tp():
    # Llama 3.1 8B: 32 heads, 8 KV heads. 5 chips spread by tp make tp=5 (32 % 5 = 2): the user typed --chips, so the
    # error names chips and offers chip counts tp can take (4 and 8 are nearest) or --tp 1 with 5 replicas.
    r = run("infer", "--model", "llama-3.1-8b", "--chips", "5", "--json")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["field"] == "chips" and "tp=5" in err["problem"]
    assert "--chips 2 or 4 or 8" in err["valid"] and "--tp 1" in err["valid"]
    # an explicit --tp keeps the tp error
    r = run("infer", "--model", "llama-3.1-8b", "--chips", "5", "--tp", "5", "--json")
    assert json.loads(r.stdout)["error"]["field"] == "tp"
