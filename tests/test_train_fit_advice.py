"""A training layout that does not fit names its binding memory term and the nearest recipe change that fits on the
same chips and layout; the advice is checked by running it."""
import pytest

from tokenmath.analyses.training.train import train
from tokenmath.base.errors import InputError

# Llama 3 paper (arXiv 2407.21783), Table 4: Llama 3 405B at 8K sequence length on 8,192 H100s ran TP 8, CP 1,
# PP 16, DP 64, 16M tokens per batch, 430 TFLOP/s per GPU (43% BF16 MFU); Sec. 3.3.2: stages balanced by taking one
# layer off the first and last stage, an interleaved schedule, and "without activation checkpointing".
META = dict(chips=8192, tp=8, pp=16, dp=64, seq_len=8192, global_batch_tokens=16_777_216)


def _flags_to_kw(flags: str) -> dict:
    words, kw = flags.split(), {}
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--balanced-stages":
            kw["balanced"] = True
            i += 1
            continue
        key, val = w[2:].replace("-", "_"), words[i + 1]
        kw[key] = int(val) if key in ("zero", "virtual_stages") else val
        i += 2
    return kw


def _advised(advice: list[str], prefix: str) -> dict:
    line = next(a for a in advice if a.startswith(prefix))
    return _flags_to_kw(line.split(": ", 1)[1].split(" fits (")[0])


def test_meta_405b_layout_names_activations_and_a_recipe_that_fits():
    # the tool's defaults (1F1B, selective recomputation, ZeRO-1, unbalanced stages) need 82.6 GB of the 77 GB usable:
    # 16 micro-batches in flight x 8 layers x ~533 MB of activations per layer (8,192 tokens x ~65 KB / tp 8)
    r = train("llama-3.1-405b", "h100-sxm", **META)
    assert not r.fits
    assert r.advice[0].startswith("needs 82.6 GB per chip of 77 GB usable; the largest term is activations, 68.2 GB")
    # nearest: one knob, Meta's stage balancing (7 layers + the embedding on the first stage instead of 8)
    near = _advised(r.advice, "nearest change that fits")
    assert near == {"balanced": True}
    assert train("llama-3.1-405b", "h100-sxm", **META, **near).fits
    # fastest on this layout: Meta's own recipe, balanced interleaved stages with no recomputation
    fast = _advised(r.advice, "fastest recipe on this layout")
    assert fast.get("balanced") and fast.get("schedule") == "interleaved" and fast.get("recompute") == "none"
    f = train("llama-3.1-405b", "h100-sxm", **META, **fast)
    assert f.fits
    # and it lands near Meta's 43% MFU (430 TFLOP/s of 989): within 1.25x
    mfu = f.to_dict()["mfu"]
    assert 0.43 / 1.25 <= mfu <= 0.43 * 1.25, mfu


def test_every_advised_change_fits_and_nearest_changes_fewest_knobs():
    r = train("llama-3.1-70b", "h100-sxm", chips=64, tp=8, pp=4, dp=2, seq_len=16384,
              global_batch_tokens=2_097_152, recompute="none", zero=0)
    assert not r.fits
    lines = [a for a in r.advice if " fits (" in a]
    assert lines
    kws = [_flags_to_kw(a.split(": ", 1)[1].split(" fits (")[0]) for a in lines]
    for kw in kws:
        base = dict(recompute="none", zero=0) | kw
        assert train("llama-3.1-70b", "h100-sxm", chips=64, tp=8, pp=4, dp=2, seq_len=16384,
                     global_batch_tokens=2_097_152, **base).fits
    assert len(kws[0]) <= min(len(k) for k in kws)


def test_nothing_fits_on_these_chips_names_the_chips_it_would_take():
    with pytest.raises(InputError) as e:
        train("gpt-3-175b", "a100-80gb", chips=8)
    assert e.value.field == "chips"
    assert "with any recomputation, ZeRO stage or pipeline schedule" in str(e.value)
