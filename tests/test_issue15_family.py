"""Issue 15 item 1: the efficiencies follow the chip, not the name that reached it.

A system id (hgx-h100, gb200-nvl72, ...) resolves to its chip, and the chip to its calibration family; a user
hardware file gets the family its `family` field names, else "other" (the all-rows fit), even when its id is a
catalog chip's."""
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.plan import plan
from tokenmath.base.errors import InputError
from tokenmath.engine import collectives as coll
from tokenmath.specs.efficiency import calibrated, default_for
from tokenmath.specs.families import family
from tokenmath.specs.hardware import from_record, get_hardware
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.specs.systems import get_system


def _batch1_tp8(system):
    p = plan("llama-3.1-70b", system, chips=8)
    return next(x for x in p.frontier if x["tp"] == 8 and x["batch"] == 1)["decode_step_s"]


def test_plan_hgx_h100_and_h100_sxm_same_batch1_step():
    # Llama 3.1 70B bf16, tp=8 on 8 x H100 SXM, batch 1, 1,024 in / 256 out. The nvidia-datacenter fit
    # (data/calibration.toml): memory_bw 1.0, link_bw 0.8, 80 us per layer. By hand (per chip):
    #   weights read: (70,553,706,496 - embedding 128,256 x 8,192) x 2 B / 8 = 17,375,758,336 B
    #                 / (3.35e12 x 1.0) = 5.1868 ms                                   (the embedding: one row)
    #   KV read: 327,680 B/token x 1,152.5 tokens (mean context) / 8 = 47.2 MB / 3.35e12 = 0.0141 ms
    #   2 all-reduces x 80 layers of 8,192 x 2 B: 6 us + 2 us (sqrt 8 - 1) + 2 x 7/8 x 16,384 / (450e9 x 0.8)
    #                 = 9.7365 us x 160 = 1.5578 ms
    #   overhead 80 layers x 80 us = 6.4 ms                        -> 13.16 ms (before: 14.46 via hgx-h100)
    m = get_model("llama-3.1-70b")
    P = count_params(m)
    hw = get_hardware("h100-sxm")
    weights = (P.total - m.vocab_size * m.d_model) * 2 / 8 / (hw.memory_bw * 1.0)
    kv = 327_680 * (1024 + 257 / 2) / 8 / hw.memory_bw
    ar = 160 * float(coll.all_reduce(8192 * 2, 8, hw, 0.8))
    assert ar == pytest.approx(160 * (6e-6 + 2e-6 * (8 ** 0.5 - 1) + 2 * 7 / 8 * 16384 / 360e9), rel=1e-12)
    by_hand = weights + kv + ar + 80 * 80e-6
    assert by_hand == pytest.approx(13.16e-3, abs=0.01e-3)
    via_system, via_chip = _batch1_tp8("hgx-h100"), _batch1_tp8("h100-sxm")
    assert via_system == pytest.approx(via_chip, rel=1e-12)
    assert via_system == pytest.approx(by_hand, rel=2e-3)   # activations and q/o add a little


def test_system_ids_resolve_to_their_chip_family():
    for sid, chip in (("hgx-h100", "h100-sxm"), ("hgx-h200", "h200"), ("hgx-b200", "b200"),
                      ("gb200-nvl72", "gb200-nvl72"), ("mi300x-node", "mi300x"), ("tpu-v5p", "tpu-v5p")):
        assert family(sid) == family(chip) == family(get_system(sid)) == family(get_hardware(chip)), sid
        assert default_for(get_system(sid)) == default_for(chip) == calibrated(sid), sid
    # NVL72 and HGX are the same silicon family: the same bandwidth fraction (before: HGX 0.8, NVL72 1.0)
    assert default_for(get_system("hgx-b200")).memory_bw == default_for(get_system("gb200-nvl72")).memory_bw == 1.0


def test_infer_on_a_system_object_uses_the_chip_family():
    a = tm.infer("llama-3.1-70b", get_system("hgx-h100"), chips=8)
    b = tm.infer("llama-3.1-70b", "h100-sxm", chips=8)
    assert a.efficiency == b.efficiency
    assert a.decode_step_s == pytest.approx(b.decode_step_s, rel=1e-12)


def test_user_hardware_file_family_is_explicit_or_other():
    rec = {"memory_gb": 80, "memory_bw_tbs": 2.0, "tflops": {"bf16": 500}}
    # a user file that borrows a catalog chip's id is not that chip: the all-rows fit, not the chip's family
    assert family(from_record("h100-sxm", rec)) == "other"
    assert default_for(from_record("h100-sxm", rec)).memory_bw == 0.8          # the _all fit
    # the file names its family: that family's fit
    mine = from_record("my-gpu", {**rec, "family": "nvidia-datacenter"})
    assert family(mine) == "nvidia-datacenter"
    assert default_for(mine).memory_bw == 1.0
    with pytest.raises(InputError) as e:
        from_record("my-gpu", {**rec, "family": "nvidia"})
    assert e.value.field == "hardware.family"


def test_system_file_naming_a_chip_gets_the_chip_family(tmp_path):
    f = tmp_path / "rack.toml"
    f.write_text('chip = "h100-sxm"\ndomain = 8\nscaleup_gbs = 450\n')
    assert family(get_system(str(f))) == "nvidia-datacenter"
    g = tmp_path / "card.toml"          # hardware schema passed as a system: the file's own family field, else other
    g.write_text('memory_gb = 80\nmemory_bw_tbs = 3.35\ntflops = { bf16 = 989 }\nscaleup_domain = 8\nscaleup_gbs = 450\n')
    assert family(get_system(str(g))) == "other"
