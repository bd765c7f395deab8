"""Each step's time from the one engine (engine/forward.py, engine/static_batch.engine_step), fast enough to price
every step of a long simulation.

A step of continuous batching is one forward pass over a mixed batch: n_d decode tokens (one per running sequence,
attending A keys in all) and prefill chunks (t_p tokens over l_p chunks, attending their causal pairs and the cached
tokens before them). The engine's pass is a sum of ops, and only attention depends on context:
- every other op runs over the step's T = n_d + t_p tokens (GEMMs read the weights once for all of them; MoE
  experts touched by the step's real token count; the collectives carry T tokens), lm_head over L = n_d + l_p rows;
- attention is priced as two kernels, the decodes' (a decode pass's attention op at n_d sequences attending A) and
  the chunks' (a prefill pass's attention op at l_p chunks of t_p / l_p tokens): FlashInfer and SGLang launch them
  apart; vLLM's one varlen kernel does the same sum of work (max of the sums would credit decode KV streaming hidden
  under prefill compute, an optimistic bound; the difference is at most the smaller part).
`direct` composes exactly that from engine calls at the step's own shape (~1 ms each); a 100,000-request run has
~10^6 steps, so the simulator uses `step_s`, the same sum from tables the engine filled once (vectorized) at
construction: the non-attention ops at every integer token count, lm_head at every row count, and the attention
op's compute and memory legs, affine in the pairs and cached tokens (compute = c0 + alpha pairs, alpha a function
of the chunk length under a kernel model; memory = m0(tokens) + beta cached tokens). Exact at integer tokens per
pass, linear in between; tests/test_simulation_step_cost.py checks step_s against direct on random steps (1%).

With a serving engine on the efficiency (Efficiency.engine), each step goes through engine_step: a step not replayed
from a captured graph (decode: sequences per group; mixed: tokens per pass, as static_batch prices a prefill chunk)
lasts at least kernels x the launch time, and the per-step CPU time adds to it or hides behind it (overlap).
Sparse attention (DeepSeek-V3.2): the indexer op scores every cached token, so it is priced like attention, an
affine op in the pairs and cached tokens (its own tables); the main attention reads at most index_topk tokens per
query: a decode's keys are capped at k per sequence at the step's mean context, a chunk's pairs at k per query at
the mean chunk (as engine/sparse_attention.selected does for one pass).
Speculative decoding (a draft: analyses/serving/speculative.Draft): each decoding sequence verifies k + 1 tokens
per step, a (k + 1)-token chunk in the step's batch: the non-attention ops run over the step's n_d (k + 1) + t_p
tokens, lm_head over n_d (k + 1) + l_p rows (logits at every verified position), and the verification attention is
its own kernel, the decode form at k + 1 queries per sequence (the i-th query attends the context and the i drafted
tokens before it: (k + 1) keys + k (k + 1) / 2 pairs per sequence; MLA stays absorbed), exactly the verification
pass of engine/speculative.py. The draft's k decode steps come from engine/speculative.speculative_step at the
step's decodes, affine in their mean context between two probes; the engine's launch and CPU terms are paid once
per step (as speculative_decode does). Not with pipeline parallelism or sparse attention.
Layout: a step splits evenly over the dp x ep attention groups (one scheduler each; limits are per group), and with
pp stages over M = min(pp, sequences per group) micro-batches, each pass followed by pp - 1 hand-offs (as
static_batch does for decode). The step waits on the busiest pass, which holds whole tokens: ceil(T / passes) token
rows and ceil(S / passes) sequences (its GEMMs, lm_head rows, graphs and CPU; step_geometry.busiest, as static_batch
takes ceil(batch / groups)), while attention takes the mean share of the step's decodes and chunks (its tables are
linear in them). Context parallelism is not simulated. Prefill under attention data-parallel (ep > 1, no pp): a
prompt is prefilled whole on one group, so the busiest group holds step_geometry.prefill_holder's chunks (at most
its table's tokens) and every op but the experts' side (EXPERT_SIDE_OPS, pooled by the all-to-all: even share)
runs at its tokens; TensorRT-LLM tech blog 10 measured this imbalance (DeepSeek-V3, 8 GB200, DEP8). Not for drafts.
Attention sharded over the batch (Layout.attn batch / dp; engine/forward.py): the fullest rank of a TP group runs the
core for ceil(S / tp) of a kernel's S sequences, whole heads, its own KV. The tables' pair and cached-token slopes
are one sequence's (seqs = 1: whole heads, whole KV), so each kernel's pairs and reads are scaled by
share(S) = ceil(S / tp) / S, S its decodes (the decode table's constant terms are tabulated at S itself) or its
chunks (whose new tokens scale too: the chunk table is tabulated at one sequence); dp's replicated projections in a
mixed step run on ceil(s / tp) of the step's s sequences (their op re-read at share(s) x the tokens). As forward_pass
prices the same step (`direct`); heads keeps share = 1 and the arithmetic of before.
"""
from __future__ import annotations

import math

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.engine import collectives as coll
from tokenmath.engine.forward import ACT_BYTES, forward_pass
from tokenmath.engine.static_batch import engine_step, kernels_of, launch_time_s
from tokenmath.mapping.placement import place
from tokenmath.analyses.serving.simulation.step_geometry import (  # noqa: F401  (chunk_geometry: callers import it here)
    ATTENTION_OPS, CONTEXT_OPS, EXPERT_SIDE_OPS, PROBE, as_floats, attention_op, busiest, capped_share, chunk_geometry,
    interpolate_at as _at, prefill_holder)
from tokenmath.analyses.serving.simulation.verify_steps import SpeculativeSteps

MAX_TABLE = 1 << 20          # tokens per pass the tables cover at most


class StepCost(SpeculativeSteps):
    """Step times of one replica of `su` (analyses.setup.Setup, its serving engine on su.efficiency.engine).
    max_tokens: the most tokens one step may hold (sizes the tables)."""

    def __init__(self, su, max_tokens: int, draft=None, max_context: int = 2):
        m, hw, lay = su.model, su.hardware, su.layout
        if int(np.max(lay.cp)) > 1:
            raise InputError("cp", "simulate does not model context parallelism", "cp = 1")
        self.k1 = 1 if draft is None else int(draft.spec.k) + 1      # tokens each decode verifies per step
        if self.k1 > 1 and int(lay.pp) > 1:
            raise InputError("pp", "speculative decoding is simulated without pipeline parallelism", "leave --pp out")
        if self.k1 > 1 and m.is_sparse_attention:
            raise InputError("draft", f"speculative decoding of {m.id} (sparse attention) is not simulated yet",
                             "a model with dense attention")
        self.su = su
        self.engine = su.efficiency.engine
        self.groups = int(lay.dp * lay.ep)
        self.pp = int(lay.pp)
        self.tp = int(lay.tp)
        # attention groups the EP all-to-all synchronises (attention data-parallel over ep): a prompt is prefilled on
        # one of them, so a step waits on the group that holds the most prefill (step_geometry.prefill_holder)
        self.coupled = int(lay.ep) if int(lay.ep) > 1 and self.pp == 1 else 1
        # the scheduler balances the groups' prompts (TensorRT-LLM's ADP balance: a coordinated wait until every
        # group has one): each step's chunks split evenly; the wait is the closed form's (steady_state.py)
        self.balanced = bool(getattr(su, "adp_balance", False))
        self.replicas = self.groups // self.coupled
        self.by_batch = bool(lay.attn_by_batch)          # attention sharded over the batch (batch / dp)
        self.dp_attn = self.by_batch and int(lay.attn) == 2  # dp: the projections replicated, on a rank's sequences
        self.window = int(m.sliding_window) if m.n_sliding_layers else 0
        self.topk = int(m.index_topk) if m.is_sparse_attention else 0
        # probes of the main attention stay under the top-k cap (above it the engine reads only k tokens)
        probe = min(PROBE, self.topk / 2) if self.topk else PROBE
        n = int(np.ceil(max_tokens / self.groups)) + 2
        if n > MAX_TABLE:
            raise InputError("max_tokens", f"{max_tokens:,} tokens in one step is beyond what is simulated",
                             f"at most {MAX_TABLE * self.groups:,}")
        self.size = n
        grid = np.arange(n, dtype=float)
        # a chunk's length is one sequence's tokens, not divided over the groups: its attention fraction (alpha, a
        # function of the chunk length under a kernel model) is tabulated up to the most tokens a step may hold
        self.chunk_size = max(int(max_tokens) + 2, n)
        cgrid = np.maximum(np.arange(self.chunk_size, dtype=float), 1.0)
        self.launch_s = launch_time_s(su.efficiency, hw) if self.engine is not None else 0.0
        hop = 0.0
        if self.pp > 1:
            crosses = place(lay, hw.scaleup_domain).replica.domains > 1
            hop = (self.pp - 1) * coll.p2p(grid * m.d_model * ACT_BYTES / lay.tp, crosses, hw, su.efficiency.link_bw)
        self.t = {}
        for phase in ("decode", "prefill"):
            one = np.maximum(grid, 1.0)          # row 0 repeats row 1: no step has 0 tokens
            p = self._pass(phase, one, 1.0, 0.0, 0.0) if phase == "decode" else self._pass(phase, 1.0, one, 0.0, 0.0)
            g = sum(np.broadcast_to(op.total_s, grid.shape) for k, op in p.ops.items()
                    if k not in CONTEXT_OPS and k != "lm_head") + p.overhead_s + hop
            att = next((p.ops[k] for k in ATTENTION_OPS if k in p.ops), None)
            counts = tuple(p.ops[k].count if k in p.ops else 0.0 for k in ATTENTION_OPS)
            graphs = self.engine.graphs_at(one, self.tp) if self.engine is not None else np.ones(n, bool)
            launch = np.where(graphs, 0.0, kernels_of(p) * self.launch_s)
            zero = np.zeros(n)
            tab = {"g": as_floats(g, grid.shape), "m0": as_floats(att.memory_s if att else zero, grid.shape),
                   "c0": as_floats(att.compute_s if att else zero, grid.shape), "nf": counts[0], "ns": counts[1],
                   "launch": as_floats(launch, grid.shape), "alpha": [0.0] * n, "beta": 0.0}
            if self.coupled > 1:      # g's expert-side part, which step_s prices at the step's even share of tokens
                tab["gx"] = as_floats(sum((np.broadcast_to(p.ops[k].total_s, grid.shape) for k in EXPERT_SIDE_OPS
                                           if k in p.ops), zero), grid.shape)
            if att is not None:
                # alpha per chunk length (the kernel model's attention fraction depends on it), beta: one probe
                if phase == "decode":
                    pc = self._pass(phase, 1.0, 1.0, probe, 0.0)
                    tab["alpha"] = [(attention_op(pc).compute_s.item() - tab["c0"][1]) / probe] * n
                else:
                    short = np.minimum(cgrid, self.topk) if self.topk else cgrid    # chunks the cap leaves whole
                    pc, p0 = self._pass(phase, 1.0, short, probe, 0.0), self._pass(phase, 1.0, short, 0.0, 0.0)
                    tab["alpha"] = as_floats((attention_op(pc).compute_s - attention_op(p0).compute_s) / probe,
                                             cgrid.shape)
                pk = self._pass(phase, 1.0, 1.0, 0.0, probe)
                tab["beta"] = (attention_op(pk).memory_s.item() - tab["m0"][1]) / probe
            if "indexer" in p.ops:       # the indexer: affine in pairs and cached tokens, never capped
                ix = p.ops["indexer"]
                pc = self._pass(phase, 1.0, 1.0 if phase == "decode" else one, PROBE, 0.0)
                pk = self._pass(phase, 1.0, 1.0, 0.0, PROBE)
                c1 = np.broadcast_to(ix.compute_s, grid.shape)
                tab["ix"] = (ix.count, as_floats(c1, grid.shape), as_floats(np.broadcast_to(ix.memory_s, grid.shape), grid.shape),
                             as_floats((np.broadcast_to(pc.ops["indexer"].compute_s, grid.shape) - c1) / PROBE, grid.shape),
                             (pk.ops["indexer"].memory_s.item() - float(np.asarray(ix.memory_s).flat[1])) / PROBE)
            if phase == "prefill" and self.dp_attn:    # the replicated projections at t tokens on one sequence
                # (with the quantize of their o-projection input, which runs on the same tokens)
                def proj(q):
                    return q.ops["attn_proj"].total_s + (q.ops["act_quant"].total_s if "act_quant" in q.ops else 0.0)
                tab["ap"] = as_floats(np.broadcast_to(proj(p), grid.shape), grid.shape)
                # and just above each integer: forward_pass runs them on ceil(S / tp) x the mean tokens of a
                # sequence, a fractional row count, and a kernel model pads rows to tiles (a jump at a tile's edge,
                # an integer), so _proj_fix interpolates from the right of i, not across the jump
                tab["ap+"] = as_floats(np.broadcast_to(proj(self._pass(phase, 1.0, one + 1e-6, 0.0, 0.0)),
                                                       grid.shape), grid.shape)
            self.t[phase] = tab
        self.lm = as_floats(self._pass("decode", one, 1.0, 0.0, 0.0).ops["lm_head"].total_s, grid.shape)
        if self.k1 > 1:
            self._speculation_tables(draft, one, max(int(max_context), 2))
            self.step_s = self._verify_or_plain       # plain decoding keeps the method itself: no test per step
        # decode steps at n sequences (one group, one stage, no window): t(keys) = base + nf max(c0 + a keys,
        # m0' + b keys), the per-n constants read off the same tables
        dt = self.t["decode"]
        self.lines = (self.groups == 1 and self.pp == 1 and not self.window and not self.topk and self.k1 == 1
                      and not self.by_batch)
        if self.lines:
            nf, a, b = dt["nf"], dt["alpha"][0], dt["beta"]
            self.line = (nf * a, nf * b, [g + lm for g, lm in zip(dt["g"], self.lm)],
                         [nf * c for c in dt["c0"]], [nf * (m - b * k) for k, m in enumerate(dt["m0"])], dt["launch"])
            pt = self.t["prefill"]
            nf = pt["nf"]
            self.pline = (pt["g"], [nf * x for x in pt["alpha"]], nf * pt["beta"], [nf * c for c in pt["c0"]],
                          [nf * m for m in pt["m0"]], pt["launch"])

    def _pass(self, phase, seqs, new_tokens, pairs, kv_read):
        su = self.su
        return forward_pass(su.model, su.hardware, su.layout, su.precision, su.efficiency, phase=phase,
                            seqs=np.asarray(seqs, float), new_tokens=np.asarray(new_tokens, float),
                            pairs_full=pairs, pairs_sliding=pairs, kv_read_full=kv_read, kv_read_sliding=kv_read,
                            **su.transport.kw())

    def share(self, seqs: float) -> float:
        """Share of a kernel's `seqs` sequences whose attention the fullest rank runs: ceil(S / tp) / S under batch
        or dp attention (one sequence's slopes x this x the totals = ceil(S / tp) sequences' work), 1 under heads;
        at most 1 (a steady state's fractional S: ceil(4.1) / 4.1 = 1.22 ran past the step tables, an IndexError)."""
        if not self.by_batch or seqs <= 0:
            return 1.0
        return min(1.0, float(np.ceil(seqs / self.tp)) / seqs)

    def _proj_fix(self, tab, x: float, seqs: float) -> float:
        """dp attention in a mixed step: the replicated projections the prefill table prices at all x tokens (one
        sequence), re-read at the x share(seqs) tokens of the fullest rank's ceil(seqs / tp) sequences."""
        if not self.dp_attn or "ap" not in tab:
            return 0.0
        ap, right = tab["ap"], tab["ap+"]
        y = x * self.share(seqs)

        def at(v):
            i = int(v)
            f = v - i
            return ap[i] + (f - 1e-6) / (1 - 1e-6) * (ap[i + 1] - right[i]) + (right[i] - ap[i]) if f else ap[i]
        return at(y) - at(x)

    def split(self, seqs: float) -> float:
        """Passes a step's work is divided by: attention groups x pipeline micro-batches."""
        return self.groups * (min(self.pp, max(seqs / self.groups, 1.0)) if self.pp > 1 else 1)

    def _engine(self, device: float, launch: float, seqs: float = 0.0) -> float:
        """engine_step for one scalar step of `seqs` sequences per group (the same rule; tests compare the two)."""
        e = self.engine
        if e is None:
            return device
        dev = max(device, launch)
        cpu = e.step_cpu + e.step_cpu_per_seq_s * seqs
        return max(dev, cpu) if e.overlap_scheduling else dev + cpu

    # ---- the fast path (pure-Python floats: the simulator calls it once per step or run) ---------------------
    def step_s(self, n_d: float, keys: float, t_p: float = 0.0, l_p: float = 0.0, pairs: float = 0.0,
               pairs_sl: float = 0.0, read: float = 0.0, read_sl: float = 0.0) -> float:
        """Seconds of a step: n_d decodes attending `keys` keys in all, plus prefill chunks holding t_p tokens over
        l_p chunks with these pairs and cached reads (full / sliding layers; chunk_geometry). With speculation each
        decode verifies k + 1 tokens (`keys`: what the first of them attends; verify_steps.py)."""
        if self.lines and type(t_p) is int and type(n_d) is int and 0 < t_p and n_d + t_p + 1 < self.size:
            return self._mixed_line(n_d, keys, t_p, l_p, pairs, read)
        seqs = n_d + l_p
        if seqs <= 0:
            return 0.0
        d = self.split(seqs)
        x = busiest(n_d + t_p, d)        # the busiest pass's whole tokens (GEMM rows) and sequences (lm_head rows)
        y = busiest(seqs, d)
        held = t_p > 0 and self.coupled > 1 and not self.balanced
        if held:      # the group holding the most prefill chunks: its tokens for every op but the experts' (even)
            cs, hb = self._held(n_d, t_p, l_p, d)
            xe, x = x, max(busiest(n_d, d) + math.ceil(cs * t_p - 1e-9), x)
            y = busiest(n_d, d) + math.ceil(hb - 1e-9)
        i = int(x)
        if i + 1 >= self.size:
            raise InputError("max_tokens", f"a step of {n_d + t_p:,.0f} tokens is beyond the step tables",
                             f"at most {(self.size - 2) * self.groups:,}")
        tab = self.t["prefill" if t_p > 0 else "decode"]
        t = _at(tab["g"], x)
        if held:
            t += _at(tab["gx"], xe) - _at(tab["gx"], x)
        j = int(y)
        lm = self.lm
        t += lm[j] + (y - j) * (lm[j + 1] - lm[j]) if y != j else lm[j]
        if t_p > 0 and self.dp_attn:
            t += self._proj_fix(tab, x, y)
        if n_d:
            dt = self.t["decode"]
            sh = self.share(n_d / d) if self.by_batch else 1.0
            main = min(keys / n_d, self.topk) * n_d / d if self.topk else keys / d
            sl = min(keys / n_d, self.window) * n_d / d if self.window else 0.0
            if sh != 1.0:
                t += self._attention(dt, n_d / d, n_d / d, main * sh, (main - n_d / d) * sh, sl * sh,
                                     (sl - n_d / d) * sh)
            else:
                t += self._attention(dt, n_d / d, n_d / d, main, main - n_d / d, sl)
            if "ix" in dt:
                t += self._indexer(dt["ix"], n_d / d, keys / d * sh, (keys / d - n_d / d) * sh)
        if t_p > 0:
            seq = t_p / l_p
            cs = cs if held else 1.0 / d             # share of the step's chunks the busiest pass holds
            sh = self.share(l_p * cs) if self.by_batch else 1.0
            main = pairs * capped_share(read / l_p, seq, self.topk) if self.topk else pairs
            k = cs * sh
            t += self._attention(tab, t_p * k, seq, main * k, read * k, pairs_sl * k, read_sl * k)
            if "ix" in tab:
                t += self._indexer(tab["ix"], t_p * k, pairs * k, read * k, seq)
        if self.engine is None:
            return t
        return self._engine(t, tab["launch"][min(i, self.size - 1)], y)

    def _held(self, n_d, t_p, l_p, d) -> tuple[float, float]:
        """(share of the step's chunks, chunks) on the busiest group: prefill_holder's, at most what one group's
        tables hold (the rest of a long prompt waits for its next steps, chunked), at least the even share 1 / d."""
        hb = prefill_holder(l_p, self.replicas, self.coupled)
        room = (self.size - 2 - busiest(n_d, d)) / t_p
        cs = max(min(hb / l_p, room), 1.0 / d)
        return cs, min(hb, cs * l_p)

    def _mixed_line(self, n_d, keys, t_p, l_p, pairs, read) -> float:
        """step_s for one group, one stage, no window, whole tokens: the same sum without interpolation."""
        g, pa, pb, pc0, pm0, launch = self.pline
        i = int(n_d + t_p)
        k = int(t_p)
        t = g[i] + self.lm[int(n_d + l_p)] + max(pc0[k] + pa[int(t_p / l_p)] * pairs, pm0[k] + pb * read)
        if n_d:
            a, b, _, c0, m0, _ = self.line
            t += max(c0[n_d] + a * keys, m0[n_d] + b * keys)
        e = self.engine
        if e is None:
            return t
        t = max(t, launch[i])
        cpu = e.step_cpu + e.step_cpu_per_seq_s * (n_d + l_p)
        return max(t, cpu) if e.overlap_scheduling else t + cpu

    def _attention(self, tab, tokens, seq, pairs, read, pairs_sl=0.0, read_sl=None):
        """Seconds of an attention op over `tokens` query tokens (per pass), chunks of `seq` tokens."""
        k = int(tokens)
        m0 = tab["m0"][k] + (tokens - k) * (tab["m0"][k + 1] - tab["m0"][k])
        c0 = tab["c0"][k] + (tokens - k) * (tab["c0"][k + 1] - tab["c0"][k])
        a = tab["alpha"][min(int(seq), len(tab["alpha"]) - 1)]
        b = tab["beta"]
        t = 0.0
        if tab["nf"]:
            t += tab["nf"] * max(c0 + a * pairs, m0 + b * read)
        if tab["ns"]:
            if read_sl is None:          # decodes: pairs_sl is the sliding keys; each reads all but its own token
                read_sl = pairs_sl - tokens
            t += tab["ns"] * max(c0 + a * pairs_sl, m0 + b * read_sl)
        return t

    def _indexer(self, ix, tokens, pairs, read, seq=1.0):
        """Seconds of the sparse-attention indexer over `tokens` query tokens scoring `pairs` (query, key) pairs and
        reading `read` cached index keys (per pass)."""
        count, c0, m0, alpha, beta = ix
        k = int(tokens)
        c = c0[k] + (tokens - k) * (c0[k + 1] - c0[k]) + alpha[min(int(seq), self.size - 1)] * pairs
        m = m0[k] + (tokens - k) * (m0[k + 1] - m0[k]) + beta * read
        return count * max(c, m)

    def decode_s(self, n_d: float, keys: float) -> float:
        return self.step_s(n_d, keys)

    def decode_ends(self, n_d: int, keys0: float, keys1: float) -> tuple[float, float]:
        """(first, last) step times of a run of decode steps of n_d sequences attending keys0 ... keys1 keys
        (step_s twice, from per-n constants where the layout allows: the simulator's most frequent call)."""
        a, b, base, c0, m0, launch = self.line if self.lines else (None,) * 6
        if not self.lines or type(n_d) is not int or n_d + 1 >= self.size:
            return self.step_s(n_d, keys0), self.step_s(n_d, keys1)
        t0 = base[n_d] + max(c0[n_d] + a * keys0, m0[n_d] + b * keys0)
        t1 = base[n_d] + max(c0[n_d] + a * keys1, m0[n_d] + b * keys1)
        e = self.engine
        if e is None:
            return t0, t1
        lau, cpu = launch[n_d], e.step_cpu + e.step_cpu_per_seq_s * n_d
        if e.overlap_scheduling:
            return max(t0, lau, cpu), max(t1, lau, cpu)
        return max(t0, lau) + cpu, max(t1, lau) + cpu

    # ---- the reference: engine calls at the step's own shape -------------------------------------------------
    def direct(self, n_d, keys, t_p=0.0, l_p=0.0, pairs=0.0, pairs_sl=0.0, read=0.0, read_sl=0.0):
        """(seconds, PassCost of the step's non-attention ops) of the same step from forward_pass calls at its own
        shape, composed as the docstring says (the check of the fast path; the source of each step's bottleneck)."""
        su, m = self.su, self.su.model
        if self.k1 > 1 and n_d:
            return self._spec_direct(n_d, keys, t_p, l_p, pairs, pairs_sl, read, read_sl)
        seqs = n_d + l_p
        d = self.split(seqs)
        mixed = t_p > 0
        w = self.window
        phase = "prefill" if mixed else "decode"
        # the non-attention ops at the busiest pass's whole sequences and tokens (step_s's rule, busiest); the
        # attention ops at the mean share of the step's decodes and chunks (step_s's tables, linear in them)
        # (a decode step's base keeps its attention: the step kinds read its KV bytes and bottleneck, simulate.py)
        s, tok = busiest(seqs, d), busiest(n_d + t_p, d)
        held = mixed and self.coupled > 1 and not self.balanced
        if held:      # step_s's rule: the group holding the most prefill chunks, the experts at the even share
            cs, hb = self._held(n_d, t_p, l_p, d)
            s_e, tok_e = s, tok
            s = busiest(n_d, d) + math.ceil(hb - 1e-9)
            tok = max(busiest(n_d, d) + math.ceil(cs * t_p - 1e-9), tok)
        dk = (min(keys / n_d, w) if w else keys / n_d) if n_d else 0.0

        def decodes(seqs_):
            return forward_pass(m, su.hardware, su.layout, su.precision, su.efficiency, phase="decode",
                                seqs=seqs_, new_tokens=1.0, pairs_full=keys / n_d, pairs_sliding=dk,
                                kv_read_full=keys / n_d - 1, kv_read_sliding=dk - 1, **su.transport.kw())
        base = self._pass(phase, s, tok / s, 0.0, 0.0) if mixed else decodes(s)
        t = sum(op.total_s.item() for k, op in base.ops.items() if k not in CONTEXT_OPS)
        t += base.overhead_s
        if held:
            even = self._pass(phase, s_e, tok_e / s_e, 0.0, 0.0)
            t += sum(even.ops[k].total_s.item() - base.ops[k].total_s.item() for k in EXPERT_SIDE_OPS if k in base.ops)
        if n_d:
            dec = base if not mixed and s == n_d / d else decodes(n_d / d)
            t += sum(dec.ops[k].total_s.item() for k in CONTEXT_OPS if k in dec.ops)
        if mixed:
            pre = forward_pass(m, su.hardware, su.layout, su.precision, su.efficiency, phase="prefill",
                               seqs=cs * l_p if held else l_p / d, new_tokens=t_p / l_p, pairs_full=pairs / l_p,
                               pairs_sliding=pairs_sl / l_p, kv_read_full=read / l_p, kv_read_sliding=read_sl / l_p,
                               **su.transport.kw())
            t += sum(pre.ops[k].total_s.item() for k in CONTEXT_OPS if k in pre.ops)
        if self.pp > 1:
            crosses = place(su.layout, su.hardware.scaleup_domain).replica.domains > 1
            t += (self.pp - 1) * coll.p2p(tok * m.d_model * ACT_BYTES / su.layout.tp, crosses,
                                          su.hardware, su.efficiency.link_bw).item()
        if self.engine is not None:
            t = float(engine_step(self.engine, t, kernels_of(base), tok, self.launch_s, self.tp, cpu_seqs=s)[0])
        return t, base
