"""How a model is laid over chips for serving: tensor (tp), pipeline (pp), expert (ep), data (dp) and context (cp)
parallelism.

chips = tp x pp x ep x dp x cp.
- dp: independent replicas, each serving batch/dp sequences.
- pp: the layers split into pp stages; sequences flow through them in microbatches.
- tp: inside a stage, every matrix is split tp ways (attention by heads, FFN by columns, vocab by rows);
  two all-reduces of the activations per layer (Megatron-LM, Shoeybi et al. 2019).
- ep: inside a stage, tp x ep chips; attention runs data-parallel over ep groups of tp chips (each group holds
  batch/(dp x ep) sequences and their KV), routed experts are split over the ep groups with a dispatch and a combine
  all-to-all per MoE layer (the DeepSeek-V3 / SGLang "DP attention + EP" layout). A dense model needs ep = 1.
- cp: context parallelism for long prompts: cp chips (each holding the same weight shard) share the same sequences;
  a prompt is split into cp chunks, attention runs as a ring that passes KV blocks between them (ring attention,
  Liu et al. 2023), and the KV cache of a sequence stays split cp ways. Default 1 (no change to any other figure).
Chips are ordered tp (innermost), ep, cp, pp, dp from a domain boundary: a group stays inside one scale-up domain
when its size divides the domain; other sizes straddle a boundary somewhere (placement.py counts the domains).
Arrays broadcast, so a sweep over layouts is one call.

Attention sharding inside a TP group (Layout.attn, an index into ATTENTION_SHARDING; docs/attention-sharding.md):
- heads (0, the default): attention split by heads; the KV cache splits by KV head and is replicated beyond
  n_kv_heads (MLA's latent is whole on every TP rank).
- batch (1): Pope et al. 2022 ("Efficiently Scaling Transformer Inference", arXiv 2211.05102, Sec. 3.3, Fig. 4(c)):
  the q/k/v/o projections stay split by heads, the KV cache and the attention core are split over the batch
  (each rank holds ceil(S / tp) whole sequences, no copies); an all-to-all reshards q before the core and the
  attention output after it.
- dp (2): data-parallel attention (SGLang --enable-dp-attention; vLLM --data-parallel-size with MoE): the
  attention weights are replicated on every rank of the group, each rank runs attention for its ceil(S / tp)
  sequences, and the MLP (or MoE) stays tensor-parallel: an all-gather of the hidden states before it and a
  reduce-scatter after it replace TP's two all-reduces.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.base.validators import int_arg
from tokenmath.specs.hardware import Hardware
from tokenmath.specs.model import Model


@dataclass(frozen=True)
class Layout:
    """Parallel degrees tp, pp, ep, dp, cp (ints or arrays that broadcast); see the module docstring."""
    tp: object = 1
    pp: object = 1
    ep: object = 1
    dp: object = 1
    cp: object = 1
    attn: object = 0      # attention sharding inside the TP group: index into ATTENTION_SHARDING (0 heads)

    @property
    def chips(self):
        c = np.asarray(self.tp) * np.asarray(self.pp) * np.asarray(self.ep) * np.asarray(self.dp)
        return c if _is_one(self.cp) else c * np.asarray(self.cp)

    def expert_share(self, m: Model):
        """Fraction of the routed experts on the fullest EP rank: ceil(E / ep) / E (= 1/ep when ep divides E;
        e.g. DeepSeek-V3's 256 experts over 72 GPUs put 4 on some ranks, and those ranks set the pace)."""
        ep = np.asarray(self.ep, float)
        if not m.is_moe:
            return 1.0 / ep
        return np.ceil(m.n_experts / ep) / m.n_experts

    @property
    def stage_chips(self):
        """Chips holding one pipeline stage of one replica (the span of TP and EP collectives)."""
        return np.asarray(self.tp) * np.asarray(self.ep)

    def kv_shard(self, m: Model):
        """Ways the KV cache of one sequence is split across a TP group. MLA's latent is shared by all heads,
        so every TP rank keeps the whole latent (vLLM/SGLang replicate it); GQA splits by KV head, and TP beyond
        the number of KV heads replicates heads."""
        if m.is_mla:
            s = np.ones_like(np.asarray(self.tp, dtype=float))
        else:
            s = np.minimum(np.asarray(self.tp, dtype=float), m.kv_heads)
        # context parallelism splits each sequence's KV over cp chips as well
        if not _is_zero(self.attn):
            # batch / dp: a sequence's KV sits whole on one rank of the TP group (no head split, no copies)
            s = np.where(np.asarray(self.attn) > 0, 1.0, s)
        return s if _is_one(self.cp) else s * np.asarray(self.cp, dtype=float)

    @property
    def attn_by_batch(self) -> bool:
        """Whether any of the layouts shards attention over the batch (batch or dp), rather than by heads."""
        return not _is_zero(self.attn)

    def attn_seqs(self, seqs):
        """Sequences (of the `seqs` a TP group holds) whose attention the fullest rank runs: all of them under
        heads, ceil(seqs / tp) under batch and dp (fewer sequences than ranks leave ranks idle)."""
        if _is_zero(self.attn):
            return seqs
        S = np.asarray(seqs, float)
        return np.where(np.asarray(self.attn) > 0, np.ceil(S / np.asarray(self.tp, float)), S)

    def attn_head_split(self):
        """Ways the attention core's heads are split over a rank's sequences: tp under heads, 1 under batch / dp."""
        tp = np.asarray(self.tp, float)
        return tp if _is_zero(self.attn) else np.where(np.asarray(self.attn) > 0, 1.0, tp)

    def attn_weight_split(self):
        """Ways the attention projections' weights are split: tp under heads and batch, 1 under dp (replicated)."""
        tp = np.asarray(self.tp, float)
        return tp if _is_zero(self.attn) else np.where(np.asarray(self.attn) == 2, 1.0, tp)

    def attn_ranks(self):
        """Attention schedulers' share of a TP group: 1 under heads (the group holds what one chip's KV holds), tp
        under batch / dp (each rank holds its own sequences' KV)."""
        return 1.0 if _is_zero(self.attn) else np.where(np.asarray(self.attn) > 0, np.asarray(self.tp, float), 1.0)


ATTENTION_SHARDING = ("heads", "batch", "dp")


def attention_code(mode) -> int:
    """The index of an attention-sharding name (heads, batch, dp) in ATTENTION_SHARDING; InputError otherwise."""
    v = str(mode).strip().lower()
    if v not in ATTENTION_SHARDING:
        import difflib
        close = difflib.get_close_matches(v, ATTENTION_SHARDING, 1)
        raise InputError("attention_sharding", f"unknown attention sharding {mode!r}"
                         + (f" (did you mean {close[0]}?)" if close else ""),
                         "heads (split by heads, KV replicated beyond the KV heads), batch (Pope et al.: KV "
                         "sharded over the batch, projections by heads) or dp (data-parallel attention)")
    return ATTENTION_SHARDING.index(v)


def attention_name(lay: Layout) -> str:
    """The attention-sharding name of one layout."""
    return ATTENTION_SHARDING[int(np.asarray(lay.attn))]


def with_attention(m: Model, lay: Layout, mode) -> Layout:
    """`lay` with attention sharded as `mode` (a name or None: heads), checked (attention_rule)."""
    code = 0 if mode is None else attention_code(mode)
    if code == 0:
        return lay
    out = replace(lay, attn=code)
    check_layout(m, out)
    return out


def attention_rule(attn, cp=1):
    """Where a sharding of attention is admitted (arrays broadcast): heads always; batch and dp with cp = 1
    (context parallelism already splits each sequence's KV; the two are not modelled together). Their tp must
    split the heads like any tp (the projections of batch, the MLP of dp's group): check_layout's tp rules."""
    return (np.asarray(attn) == 0) | (np.asarray(cp) == 1)


def attention_worth_searching(m: Model, tp) -> np.ndarray:
    """Where plan searches batch and dp besides heads: tp > 1 and the head split would replicate the KV cache
    (MLA's latent on every rank; GQA/MQA with tp > n_kv_heads). Elsewhere batch / dp only add communication."""
    tp = np.asarray(tp)
    return (tp > 1) & (True if m.is_mla else tp > m.kv_heads)


def _is_zero(x) -> bool:
    return np.ndim(x) == 0 and float(x) == 0.0


def _is_one(x) -> bool:
    return np.ndim(x) == 0 and float(x) == 1.0


def _as_int_array(v, field: str) -> np.ndarray:
    a = np.asarray(v)
    if a.dtype.kind not in "iuf" or not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
        raise InputError(field, f"{v!r} is not a whole number", "a positive integer")
    if np.any(a < 1):
        raise InputError(field, f"{v!r} must be at least 1", "a positive integer")
    return a.astype(np.int64)


def make_layout(m: Model, chips=None, tp=None, pp=None, ep=None, dp=None, cp=None) -> Layout:
    """Resolve and check one serving layout (chips = tp x pp x ep x dp x cp). The degrees given are kept; the others
    are 1, except that the chips the given ones leave (`chips` / their product) go
    - when tp is not given, where a serving engine spreads a model by default (see default_spread): all to tp for
      a dense model (or a MoE model whose ep is given); for a MoE model, tp up to its KV-head width, then ep;
    - when tp is given, to dp (replicas), as `train` does; when dp is given too, the product must equal chips."""
    deg = {k: _one_int(v, k) for k, v in (("tp", tp), ("pp", pp), ("ep", ep), ("dp", dp), ("cp", cp))}
    tp_, pp_, ep_, dp_, cp_ = (deg[k] or 1 for k in ("tp", "pp", "ep", "dp", "cp"))
    if chips is not None:
        n = _one_int(chips, "chips")
        given = tp_ * pp_ * ep_ * dp_ * cp_
        names = " x ".join(f"{k}={v}" for k, v in deg.items() if v is not None) or "1"
        if n % given:
            raise InputError("chips", f"{n} chips do not divide into {names}", f"a multiple of {given}")
        rest = n // given
        if rest > 1 and deg["tp"] is None:
            t, e, d = default_spread(m, rest, ep_given=deg["ep"] is not None, dp_given=deg["dp"] is not None)
            tp_, ep_, dp_ = t, ep_ * e, dp_ * d
        elif rest > 1 and deg["dp"] is None:
            dp_ = rest
        elif rest > 1:
            raise InputError("chips", f"{n} chips but {names} = {given} chips",
                             "degrees whose product equals --chips, or leave dp out to take the rest")
    lay = Layout(tp_, pp_, ep_, dp_) if cp is None else Layout(tp_, pp_, ep_, dp_, cp_)
    if chips is not None and deg["tp"] is None and not tp_ok(m, tp_):
        # the user named chips, not tp: say so in their terms, with the chip counts and the --tp that would work
        n, given = int(chips), tp_ * pp_ * ep_ * dp_ * cp_ // tp_
        fits = [d for d in range(1, min(m.n_heads, 128) + 1) if tp_ok(m, d)]
        tps = [d for d in fits if (n // given) % d == 0]
        near = sorted((given * d for d in fits), key=lambda c: abs(c - n))[:3]
        raise InputError("chips", f"{n} chips spread by tensor parallelism make tp={tp_}, which does not divide the "
                         f"{m.n_heads} attention heads" + ("" if m.is_mla else f" / {m.kv_heads} KV heads"),
                         f"--chips {' or '.join(str(c) for c in sorted(near))}, or add --tp {tps[-1]} "
                         f"(the other chips become data-parallel replicas)")
    check_layout(m, lay)
    return lay


def default_spread(m: Model, chips: int, ep_given: bool = False, dp_given: bool = False) -> tuple[int, int, int]:
    """(tp, ep, dp) for `chips` chips when the user names no tp: the layout serving engines use by default.

    Dense model: tensor parallelism over all of them (vLLM/SGLang --tp N).
    MoE model: attention tensor-parallel only as far as the KV cache splits by heads without copies (tp up to
    n_kv_heads for GQA; tp = 1 for MLA, whose single latent every TP rank would hold whole), attention
    data-parallel over the remaining tp-groups and the routed experts expert-parallel over them (ep <= experts;
    beyond that, replicas). Sources: vLLM docs "Data Parallel Deployment" (for MoE models with MLA such as DeepSeek,
    data parallel attention with expert or tensor parallel experts; --enable-expert-parallel) and "Expert Parallel
    Deployment" (EP is coupled with DP); SGLang --enable-dp-attention with --ep (DeepSeek usage docs: TP+DP
    attention recommended on 8 x H200); DeepSeek-V3 technical report, Sec. 3.4 (decoding: DP attention, EP experts).
    The engines' own flags default to TP everywhere; this is the deployment their MoE recipes recommend (see
    ../shared/reference/engines.md, DP/EP rows). ep_given: tp takes the chips; dp_given: no replicas added."""
    if not m.is_moe or ep_given:
        return chips, 1, 1
    width = 1 if m.is_mla else m.kv_heads
    tp = max(d for d in range(1, min(width, chips) + 1) if chips % d == 0 and tp_ok(m, d))
    groups = chips // tp
    ep = max(d for d in range(1, min(m.n_experts, groups) + 1) if groups % d == 0)
    if dp_given:           # no replicas beyond those asked for: the experts' cap leaves the rest to tp
        return tp * groups // ep, ep, 1
    return tp, ep, groups // ep


def _one_int(v, field: str) -> int | None:
    """None, or one positive integer (a question takes one layout; tokenmath.sweep takes many)."""
    if v is None:
        return None
    a = _as_int_array(v, field)
    if a.ndim:
        raise InputError(field, "this question takes one layout; use tokenmath.sweep for many", "a single integer")
    return int(a)


def admissible(m: Model, tp=1, pp=1, ep=1):
    """The layout rules as one boolean mask (arrays broadcast): tp divides the attention heads and splits or evenly
    replicates the KV heads (MLA's shared latent has no KV heads to split), pp is at most the layers, ep > 1 only for
    a MoE model and at most its experts. check_layout names the rule a layout breaks; sweeps mask with this."""
    tp, pp, ep = np.asarray(tp), np.asarray(pp), np.asarray(ep)
    return _tp_rule(m, tp) & (pp <= m.n_layers) & _ep_rule(m, ep)


def tp_ok(m: Model, tp: int) -> bool:
    """The tensor-parallel rule for one degree (see admissible)."""
    return bool(_tp_rule(m, np.asarray(tp)))


def _tp_rule(m: Model, tp):
    ok = m.n_heads % tp == 0
    if not m.is_mla:
        ok = ok & ((m.kv_heads % tp == 0) | (tp % m.kv_heads == 0))
    return ok


def _ep_rule(m: Model, ep):
    return (ep <= m.n_experts) if m.is_moe else (ep == 1)


def check_layout(m: Model, lay: Layout) -> None:
    """Raise InputError naming the first layout rule (see admissible) that `lay` breaks."""
    tp, pp, ep = np.asarray(lay.tp), np.asarray(lay.pp), np.asarray(lay.ep)
    if np.any(m.n_heads % tp):
        bad = tp[np.nonzero(m.n_heads % tp)][0] if tp.ndim else tp
        divisors = [d for d in range(1, m.n_heads + 1) if m.n_heads % d == 0 and d <= 128]
        raise InputError("tp", f"tp={int(bad)} does not divide the {m.n_heads} attention heads",
                         f"valid: {', '.join(map(str, divisors))}")
    if not m.is_mla:
        kvh = m.kv_heads
        ok = (kvh % tp == 0) | (tp % kvh == 0)
        if not np.all(ok):
            raise InputError("tp", f"tp does not split or evenly replicate the {kvh} KV heads",
                             "a divisor or a multiple of n_kv_heads")
    if np.any(pp > m.n_layers):
        raise InputError("pp", f"pp={int(np.max(pp))} exceeds the {m.n_layers} layers", f"at most {m.n_layers}")
    if not m.is_moe and np.any(ep > 1):
        raise InputError("ep", "expert parallelism needs a MoE model; this model is dense", "ep=1 (use dp for replicas)")
    if m.is_moe and np.any(ep > m.n_experts):
        raise InputError("ep", f"ep={int(np.max(ep))} exceeds the {m.n_experts} experts", f"at most {m.n_experts}")
    if not np.all(attention_rule(lay.attn, lay.cp)):
        raise InputError("attention_sharding", "batch- or data-parallel attention with context parallelism (cp > 1)",
                         "heads with --cp, or leave --cp out")


def train_layout(tp=1, pp=1, dp=1, ep=1, cp=1) -> Layout:
    """A Layout in training's argument order: tp, pp, dp, ep, cp (chips = tp x pp x dp x ep x cp); the training
    engine costs context parallelism itself."""
    return Layout(tp, pp, ep, dp, cp)


def make_train_layout(m: Model, hw: Hardware, chips=None, tp=None, pp=None, dp=None, ep=None, cp=None) -> Layout:
    """Resolve a training layout: missing degrees are 1, except dp, which takes the chips the others leave (data
    parallelism is what training scales by). Checked against the model (check_layout) and against the hardware:
    more than one scale-up domain needs a scale-out link."""
    t = int_arg(1 if tp is None else tp, "tp", 1, 1_000_000)
    p = int_arg(1 if pp is None else pp, "pp", 1, 1_000_000)
    e = int_arg(1 if ep is None else ep, "ep", 1, 1_000_000)
    c = int_arg(1 if cp is None else cp, "cp", 1, 1_000_000)
    if dp is None:
        if chips is None:
            d = 1
        else:
            n = int_arg(chips, "chips", 1, 10_000_000)
            if n % (t * p * e * c):
                raise InputError("chips", f"{n} chips do not divide into tp={t} x pp={p} x ep={e} x cp={c}",
                                 f"a multiple of {t * p * e * c}")
            d = n // (t * p * e * c)
    else:
        d = int_arg(dp, "dp", 1, 10_000_000)
    lay = train_layout(t, p, d, e, c)
    if chips is not None and int(lay.chips) != int_arg(chips, "chips", 1, 10_000_000):
        raise InputError("chips", f"{chips} chips but tp x pp x dp x ep x cp = {t} x {p} x {d} x {e} x {c} = "
                         f"{int(lay.chips)}", "degrees whose product equals --chips")
    check_layout(m, Layout(t, p, e, d))
    if int(lay.chips) > hw.scaleup_domain and hw.scaleout_bw is None:
        raise InputError("chips", f"{int(lay.chips)} chips span more than one scale-up domain of "
                         f"{hw.scaleup_domain} and {hw.id} has no scale-out bandwidth",
                         f"at most {hw.scaleup_domain} chips, or a hardware file with scaleout_gbs")
    return lay
