"""Speculative decoding in the simulator's step cost: each decoding sequence verifies k + 1 tokens per step after
the draft's k steps (the StepCost mixin; step_cost.py's docstring states the model).

The verification pass is engine/speculative.py's: a decode-form pass of k + 1 tokens per sequence, so lm_head
computes logits at every verified position and MLA attention stays absorbed; the i-th of the k + 1 queries attends
the context and the i drafted tokens before it ((k + 1) keys + k (k + 1) / 2 pairs per sequence). In a step with
prompt chunks the GEMMs run over all the step's tokens once (as the mixed batch prices them) and each attention
kernel apart. The draft's k decode steps come from engine/speculative.speculative_step (reused, not re-derived),
tabulated over sequences at the contexts 1 and the longest request and interpolated linearly between them (exact
while the draft's step is affine in its context: memory-bound decode attention).
"""
from __future__ import annotations

import math

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.engine.forward import forward_pass
from tokenmath.engine.static_batch import engine_step, kernels_of
from tokenmath.analyses.serving.simulation.step_geometry import (CONTEXT_OPS, EXPERT_SIDE_OPS, PROBE, as_floats,
                                                                 attention_op, busiest, chunk_geometry,
                                                                 interpolate_at)


class SpeculativeSteps:
    """Methods StepCost gains for speculation (self.k1 = k + 1 > 1; the tables' sizes, _pass, _attention, split and
    _engine are StepCost's)."""

    def _speculation_tables(self, draft, one, top: int):
        """The verification pass's tables (decode form, k + 1 tokens per sequence, indexed by sequences per pass)
        and the draft's k steps at the context of 1 and of `top` tokens per sequence."""
        k1, n = self.k1, one.size
        p = self._pass("decode", one, float(k1), 0.0, 0.0)
        g = sum(np.broadcast_to(op.total_s, one.shape) for k, op in p.ops.items()
                if k not in CONTEXT_OPS and k != "lm_head") + p.overhead_s
        att = attention_op(p)
        # graphs are captured by tokens per step (vLLM's capture sizes): a verification step holds seqs x (k + 1)
        graphs = self.engine.graphs_at(one * k1, self.tp) if self.engine is not None else np.ones(n, bool)
        tab = {"g": as_floats(g, one.shape), "m0": as_floats(att.memory_s, one.shape),
               "c0": as_floats(att.compute_s, one.shape),
               "nf": p.ops["attention"].count if "attention" in p.ops else 0.0,
               "ns": p.ops["attention_local"].count if "attention_local" in p.ops else 0.0,
               "launch": as_floats(np.where(graphs, 0.0, kernels_of(p) * self.launch_s), one.shape)}
        pc, pk = self._pass("decode", 1.0, float(k1), PROBE, 0.0), self._pass("decode", 1.0, float(k1), 0.0, PROBE)
        tab["alpha"] = [(attention_op(pc).compute_s.item() - tab["c0"][1]) / PROBE] * n
        tab["beta"] = (attention_op(pk).memory_s.item() - tab["m0"][1]) / PROBE
        self.t["verify"] = tab
        self.draft = draft
        self.draft_ctx = (1.0, float(top))
        self.draft_s = tuple(as_floats(self._draft_pass(one, c), one.shape) for c in self.draft_ctx)

    def _draft_pass(self, seqs, context):
        """The draft's k decode steps (engine/speculative.speculative_step) of `seqs` sequences per group attending
        `context` keys each (decode_context of input context - 1, one output token)."""
        from tokenmath.engine.speculative import speculative_step
        su, d = self.su, self.draft
        return speculative_step(su.model, d.model, su.hardware, su.layout, su.precision, d.precision, su.efficiency,
                                seqs, context - 1.0, 1.0, d.spec.k, d.spec.acceptance, mtp=d.spec.mtp).draft_s

    def _draft(self, seqs: float, context: float) -> float:
        """Seconds of the draft's k steps for `seqs` sequences per pass at a mean context (tables, interpolated)."""
        lo, hi = self.draft_s
        j = int(seqs)
        f = seqs - j
        a = lo[j] + f * (lo[j + 1] - lo[j])
        b = hi[j] + f * (hi[j + 1] - hi[j])
        c0, c1 = self.draft_ctx
        return a + (context - c0) / (c1 - c0) * (b - a)

    def _verify_or_plain(self, n_d, keys, t_p=0.0, l_p=0.0, pairs=0.0, pairs_sl=0.0, read=0.0, read_sl=0.0):
        """step_s with speculation: the verification step when there are decodes, else the plain one."""
        if n_d:
            return self._spec_s(n_d, keys, t_p, l_p, pairs, pairs_sl, read, read_sl)
        return type(self).step_s(self, n_d, keys, t_p, l_p, pairs, pairs_sl, read, read_sl)

    def _spec_s(self, n_d, keys, t_p, l_p, pairs, pairs_sl, read, read_sl) -> float:
        """step_s of a step whose n_d decodes each verify k + 1 tokens (after k draft steps)."""
        k1 = self.k1
        seqs = n_d + l_p
        d = self.split(seqs)
        v = self.t["verify"]
        sq = busiest(n_d, d)             # the busiest pass's whole decodes, tokens and lm_head rows (busiest)
        x = busiest(n_d * k1 + t_p, d) if t_p > 0 else sq
        # attention data-parallel: the group holding the most prompt chunks sets the step, as in step_s (before, a
        # speculative step took the even share, so a useless draft looked like a speedup under load)
        held = t_p > 0 and self.coupled > 1 and not self.balanced
        xe, cs = x, 1.0 / d
        if held:
            cs, hb = self._held(n_d * k1, t_p, l_p, d)
            x = max(busiest(n_d * k1, d) + math.ceil(cs * t_p - 1e-9), x)
        i = int(x)
        if i + 1 >= self.size or int((n_d * k1 + l_p) / d) + 1 >= self.size:
            raise InputError("max_tokens", f"a step of {n_d * k1 + t_p:,.0f} tokens is beyond the step tables",
                             f"at most {(self.size - 2) * self.groups:,}")
        tab = self.t["prefill"] if t_p > 0 else v
        g = tab["g"]
        t = g[i] + (x - i) * (g[i + 1] - g[i])
        if held:         # the experts' side runs at the step's even share (pooled by the all-to-all)
            gx = tab["gx"]
            t += interpolate_at(gx, xe) - interpolate_at(gx, x)
        y = busiest(n_d * k1 + l_p, d) if t_p > 0 else sq * k1
        if held:
            y = busiest(n_d * k1, d) + math.ceil(hb - 1e-9)
        j = int(y)
        t += self.lm[j] + (y - j) * (self.lm[j + 1] - self.lm[j])
        kq = keys / n_d
        vp = k1 * keys + n_d * k1 * (k1 - 1) / 2
        vp_sl, vr_sl = vp, keys - n_d
        if self.window:
            _, b, _, e = chunk_geometry(kq - 1.0, k1, self.window)
            vp_sl, vr_sl = b * n_d, e * n_d
        sh = self.share(n_d / d)        # batch / dp attention: the fullest rank's share (step_cost.py); 1 under heads
        t += self._attention(v, n_d / d, 0, vp / d * sh, (keys - n_d) / d * sh, vp_sl / d * sh, vr_sl / d * sh)
        if t_p > 0:
            t += self._proj_fix(tab, x, busiest(seqs, d))
            sh = self.share(l_p * cs)
            k = cs * sh
            t += self._attention(tab, t_p * k, t_p / l_p, pairs * k, read * k, pairs_sl * k, read_sl * k)
        t += self._draft(sq, kq)
        if self.engine is None:
            return t
        return self._engine(t, tab["launch"][min(i, self.size - 1)], busiest(seqs, d))

    def _spec_direct(self, n_d, keys, t_p, l_p, pairs, pairs_sl, read, read_sl):
        """direct() of a speculative step: the verification pass of engine/speculative.py (a decode-form pass of
        k + 1 tokens per sequence) for the decodes, with the step's prompt chunks mixed in (GEMMs over all the
        step's tokens, each attention kernel apart, lm_head over every verified position and one row per chunk)."""
        su, m, k1 = self.su, self.su.model, self.k1
        seqs = n_d + l_p
        d = self.split(seqs)
        kq = keys / n_d
        _, psl, _, rsl = chunk_geometry(kq - 1.0, k1, self.window) if self.window else (0, kq * k1 + k1 * (k1 - 1) / 2,
                                                                                        0, kq - 1.0)

        def verification(seqs_):
            return forward_pass(m, su.hardware, su.layout, su.precision, su.efficiency, phase="decode", seqs=seqs_,
                                new_tokens=float(k1), pairs_full=kq * k1 + k1 * (k1 - 1) / 2, pairs_sliding=psl,
                                kv_read_full=kq - 1.0, kv_read_sliding=rsl, **su.transport.kw())
        # the non-attention ops and the draft at the busiest pass's whole decodes / tokens / rows (busiest), the
        # attention at the mean share (as _spec_s)
        sq, sp = busiest(n_d, d), busiest(seqs, d)
        base = verify_b = verification(sq)
        verify = verify_b if sq == n_d / d else verification(n_d / d)
        t = verify_b.overhead_s + sum(op.total_s.item() for k, op in verify_b.ops.items() if k not in CONTEXT_OPS)
        if t_p <= 0:
            t += sum(verify.ops[k].total_s.item() for k in CONTEXT_OPS if k in verify.ops)
        tokens = sq * k1
        if t_p > 0:
            tokens = busiest(n_d * k1 + t_p, d)
            rows = busiest(n_d * k1 + l_p, d)
            held = self.coupled > 1 and not self.balanced      # _spec_s's rule: the group holding the most chunks
            cs = 1.0 / d
            if held:
                cs, hb = self._held(n_d * k1, t_p, l_p, d)
                even, tokens = tokens, max(busiest(n_d * k1, d) + math.ceil(cs * t_p - 1e-9), tokens)
                rows = busiest(n_d * k1, d) + math.ceil(hb - 1e-9)
            base = self._pass("prefill", sp, tokens / sp, 0.0, 0.0)
            lm = self._pass("decode", rows, 1.0, 0.0, 0.0).ops["lm_head"].total_s.item()
            t = base.overhead_s + lm + sum(op.total_s.item() for k, op in base.ops.items()
                                           if k not in CONTEXT_OPS and k != "lm_head")
            if held:
                ev = self._pass("prefill", sp, even / sp, 0.0, 0.0)
                t += sum(ev.ops[k].total_s.item() - base.ops[k].total_s.item() for k in EXPERT_SIDE_OPS
                         if k in base.ops)
            t += sum(verify.ops[k].total_s.item() for k in CONTEXT_OPS if k in verify.ops)
            pre = forward_pass(m, su.hardware, su.layout, su.precision, su.efficiency, phase="prefill",
                               seqs=l_p * cs, new_tokens=t_p / l_p, pairs_full=pairs / l_p,
                               pairs_sliding=pairs_sl / l_p, kv_read_full=read / l_p, kv_read_sliding=read_sl / l_p,
                               **su.transport.kw())
            t += sum(pre.ops[k].total_s.item() for k in CONTEXT_OPS if k in pre.ops)
        t += float(self._draft_pass(sq, kq))
        if self.engine is not None:
            t = float(engine_step(self.engine, t, kernels_of(base), tokens, self.launch_s, self.tp, cpu_seqs=sp)[0])
        return t, base

