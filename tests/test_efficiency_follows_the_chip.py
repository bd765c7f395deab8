"""Issue 15 item 1: the efficiencies follow the chip, not the name that reached it.

A system id (hgx-h100, gb200-nvl72, ...) resolves to its chip, and the chip to its calibration family; a user
hardware file gets the family its `family` field names, else "other" (the all-rows fit), even when its id is a
catalog chip's."""
import pytest

import tokenmath as tm
from tokenmath.analyses.serving.plan import plan
from tokenmath.base.errors import InputError
from tokenmath.engine import collectives as coll
from tokenmath.specs.efficiency import calibrated, default_for, physics_values
from tokenmath.specs.families import family
from tokenmath.specs.hardware import from_record, get_hardware
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.params import count_params
from tokenmath.specs.systems import get_system


def _batch1_tp8(system, efficiency=None):
    p = plan("llama-3.1-70b", system, chips=8, efficiency=efficiency)
    return next(x for x in p.frontier if x["tp"] == 8 and x["batch"] == 1)["decode_step_s"]


def test_plan_hgx_h100_and_h100_sxm_same_batch1_step():
    # The default (the physics set: kernel model + residuals fitted per family) follows the chip, whatever name
    # reached it: the same step via the system and via the chip.
    assert _batch1_tp8("hgx-h100") == pytest.approx(_batch1_tp8("h100-sxm"), rel=1e-12)
    # The flat per-family fit, by hand. Llama 3.1 70B bf16, tp=8 on 8 x H100 SXM, batch 1, 1,024 in / 256 out;
    # nvidia-datacenter (data/calibration.toml [family]): memory_bw 0.8, link_bw 0.8, 80 us per layer. Per chip:
    #   weights read: (70,553,706,496 - embedding 128,256 x 8,192) x 2 B / 8 = 17,375,758,336 B
    #                 / (3.35e12 x 0.8) = 6.4835 ms                                   (the embedding: one row)
    #   KV read: 327,680 B/token x 1,152.5 tokens (mean context) / 8 = 47.2 MB / (3.35e12 x 0.8) = 0.0176 ms
    #   2 all-reduces x 80 layers of 8,192 x 2 B: 6 us + 2 us (sqrt 8 - 1) + 2 x 7/8 x 16,384 / (450e9 x 0.8)
    #                 = 9.7365 us x 160 = 1.5578 ms
    #   overhead 80 layers x 80 us = 6.4 ms                                            -> 14.46 ms
    m = get_model("llama-3.1-70b")
    P = count_params(m)
    hw = get_hardware("h100-sxm")
    flat = calibrated("h100-sxm")
    assert (flat.memory_bw, flat.link_bw, flat.layer_overhead_s) == (0.8, 0.8, 80e-6)
    weights = (P.total - m.vocab_size * m.d_model) * 2 / 8 / (hw.memory_bw * 0.8)
    kv = 327_680 * (1024 + 257 / 2) / 8 / (hw.memory_bw * 0.8)
    ar = 160 * float(coll.all_reduce(8192 * 2, 8, hw, 0.8))
    assert ar == pytest.approx(160 * (6e-6 + 2e-6 * (8 ** 0.5 - 1) + 2 * 7 / 8 * 16384 / 360e9), rel=1e-12)
    by_hand = weights + kv + ar + 80 * 80e-6
    assert by_hand == pytest.approx(14.46e-3, abs=0.01e-3)
    via_system, via_chip = _batch1_tp8("hgx-h100", calibrated("hgx-h100")), _batch1_tp8("h100-sxm", flat)
    assert via_system == pytest.approx(via_chip, rel=1e-12)
    assert via_system == pytest.approx(by_hand, rel=2e-3)   # activations and q/o add a little


def test_system_ids_resolve_to_their_chip_family():
    for sid, chip in (("hgx-h100", "h100-sxm"), ("hgx-h200", "h200"), ("hgx-b200", "b200"),
                      ("gb200-nvl72", "gb200-nvl72"), ("mi300x-node", "mi300x"), ("tpu-v5p", "tpu-v5p")):
        assert family(sid) == family(chip) == family(get_system(sid)) == family(get_hardware(chip)), sid
        assert default_for(get_system(sid)) == default_for(chip), sid
        assert calibrated(get_system(sid)) == calibrated(chip) == calibrated(sid), sid
    # NVL72 and HGX are the same silicon and family: the same kernel class and fitted residuals (before issue 15:
    # HGX took the all-rows fit, 0.8 of peak bandwidth, NVL72 its family's 1.0)
    a, b = default_for(get_system("hgx-b200")), default_for(get_system("gb200-nvl72"))
    assert a.kernels.kernel_class == b.kernels.kernel_class == "nvidia-blackwell"
    assert (a.memory_bw, a.kernels.bw_scale, a.kernels.compute_scale) == (b.memory_bw, b.kernels.bw_scale,
                                                                          b.kernels.compute_scale)
    assert physics_values("hgx-b200")["bw_scale"][1] == "nvidia-datacenter"


def test_infer_on_a_system_object_uses_the_chip_family():
    a = tm.infer("llama-3.1-70b", get_system("hgx-h100"), chips=8)
    b = tm.infer("llama-3.1-70b", "h100-sxm", chips=8)
    assert a.efficiency == b.efficiency
    assert a.decode_step_s == pytest.approx(b.decode_step_s, rel=1e-12)


def test_user_hardware_file_family_is_explicit_or_other():
    rec = {"memory_gb": 80, "memory_bw_tbs": 2.0, "tflops": {"bf16": 500}}
    # a user file that borrows a catalog chip's id is not that chip: the all-rows fit, not the chip's family, and
    # the generic kernel class (stream 0.80 of its bandwidth), not Hopper's
    borrowed = from_record("h100-sxm", rec)
    assert family(borrowed) == "other"
    eff = default_for(borrowed)
    scale, group = physics_values(borrowed)["bw_scale"]
    assert group == "_all" and eff.kernels.kernel_class == "generic"
    assert eff.kernels.bw_scale == scale and eff.memory_bw == pytest.approx(0.80 * scale)
    assert calibrated(borrowed).memory_bw == 0.7                       # the flat _all fit
    # the file names its family: that family's fitted residuals
    mine = from_record("my-gpu", {**rec, "family": "nvidia-datacenter"})
    assert family(mine) == "nvidia-datacenter"
    assert physics_values(mine)["bw_scale"][1] == "nvidia-datacenter"
    assert calibrated(mine).memory_bw == 0.8
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
