"""What a `plan` or `fleet` answer deploys: its server pools (colocated, or prefill and decode), each server's layout,
how many of them, how many sequences each runs, and the figures the answer expects a benchmark of one unit to print.

The answer is read as its JSON (`tokenmath plan --json`, `tokenmath fleet --json`, or the Python result's to_dict()),
so `tokenmath export --answer FILE` deploys exactly the answer the user saw, never a re-run of the question. Every key
is checked here (the file is the user's), and a missing or wrong one is refused naming it.

Which point of an answer is deployed (the one a server runs: continuous batching, never a static batch):
- plan: `disaggregated` when the plan sized prefill and decode pools (--disaggregated), else `best_by_concurrency`
  (the cheapest continuously batched point meeting the targets); a plan without a serving engine has neither.
- fleet: `continuously_batched`, or `disaggregated` when asked for (export --disaggregated).
Either question's other sizing is taken when asked for by `disaggregated` (True / False), and refused when the answer
holds none.
A layout (tp, pp, ep, dp) is dp servers of tp x pp x ep chips: a MoE's ep groups are one server (attention
data-parallel over the ep ranks, experts sharded over ep x tp ranks); dp copies run side by side behind a router.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenmath.base.errors import InputError
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.specs.question.deployment import MAX_LAYOUT

ROLES = ("both", "prefill", "decode")
ENGINE_IDS = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}


@dataclass(frozen=True)
class PoolPlan:
    """One pool of identical servers."""
    role: str                       # both (colocated) | prefill | decode
    tp: int
    pp: int
    ep: int
    replicas: int                   # servers in the pool
    max_running: int | None         # sequences one server runs at once (None: the engine's default)
    attention: str = "heads"        # heads | dp (data-parallel attention inside the TP group as well)

    @property
    def chips_per_server(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def chips(self) -> int:
        return self.chips_per_server * self.replicas


@dataclass(frozen=True)
class Deployed:
    """The deployment an answer describes, and what its benchmark should show (SI units: s, tokens/s)."""
    question: str                   # plan | fleet | infer
    model: str                      # catalog id
    hardware: str                   # catalog chip or system id
    engine: str                     # vllm | sglang | trtllm
    weight_dtype: str | None        # None: the checkpoint's own
    kv_dtype: str
    input_len: int
    output_len: int
    pools: tuple[PoolPlan, ...]
    expected: dict                  # output_tokens_per_s, ttft_s, tpot_s, concurrency of one benchmarked unit
    unit: str                       # what one benchmark measures, in words
    notes: tuple[str, ...] = field(default=())

    @property
    def disaggregated(self) -> bool:
        return any(p.role != "both" for p in self.pools)

    @property
    def chips(self) -> int:
        return sum(p.chips for p in self.pools)


def _get(d: dict, key: str, where: str):
    if not isinstance(d, dict) or key not in d:
        raise InputError(f"{where}.{key}" if where else key, "is missing from the answer",
                         "the JSON `tokenmath plan --json` or `tokenmath fleet --json` prints")
    return d[key]


# the most any answer tokenmath writes holds: a parallel degree (specs/question/deployment.MAX_LAYOUT), servers in a
# pool, sequences a server runs, tokens in a request (base/validators.MAX_TOKENS); beyond them the file was edited
_HIGH = {"tp": MAX_LAYOUT, "pp": MAX_LAYOUT, "ep": MAX_LAYOUT, "dp": MAX_LAYOUT, "replicas": 1_000_000,
         "instances": 1_000_000, "concurrency": 10_000_000, "batch": 10_000_000, "input_len": MAX_TOKENS,
         "output_len": MAX_TOKENS}


def _int(d: dict, key: str, where: str, lo: int = 1) -> int:
    v = _get(d, key, where)
    hi = _HIGH.get(key, 10_000_000)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v != int(v) or not \
            lo <= v <= hi:
        raise InputError(f"{where}.{key}" if where else key, f"{str(v)[:40]} is not a whole number from {lo} to "
                         f"{hi:,}", "the value tokenmath wrote")
    return int(v)


def _pos(d: dict, key: str, where: str) -> float:
    v = _get(d, key, where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v < 1e15:
        raise InputError(f"{where}.{key}" if where else key, f"{str(v)[:40]} is not a positive number below 1e15",
                         "the value tokenmath wrote")
    return float(v)


def _layout(d: dict, where: str) -> tuple[int, int, int, int, str]:
    tp, pp, ep, dp = (_int(d, k, where) for k in ("tp", "pp", "ep", "dp"))
    attn = d.get("attention_sharding") or "heads"
    if attn == "batch":
        raise InputError(f"{where}.attention_sharding", "is batch (Pope et al.'s KV sharded over the batch), which no "
                         "serving engine's launch flags express", "ask again with --attention-sharding heads or dp")
    if attn not in ("heads", "dp"):
        raise InputError(f"{where}.attention_sharding", f"{attn!r} is not an attention sharding", "heads or dp")
    return tp, pp, ep, dp, attn


def _engine(answer: dict) -> str:
    eng = answer.get("engine")
    eid = eng.get("id") if isinstance(eng, dict) else eng
    if eid is None:
        raise InputError("engine", "the answer assumed no serving engine, so it holds no continuously batched point "
                         "to run", "ask again with --engine vllm, sglang or tensorrt-llm")
    if eid not in ENGINE_IDS:
        raise InputError("engine", f"the answer assumed {eid}, which export writes no launch command for",
                         ", ".join(ENGINE_IDS))
    return ENGINE_IDS[eid]


def _per_server(n: float, dp: int) -> int:
    return max(1, math.ceil(n / dp))


def _colocated(c: dict, where: str, servers_of_layout: int) -> tuple[PoolPlan, dict]:
    tp, pp, ep, dp, attn = _layout(c, where)
    conc = _int(c, "concurrency", where)
    pool = PoolPlan("both", tp, pp, ep, dp * servers_of_layout, _per_server(conc, dp), attn)
    tpot = _pos(c, "tpot_s", where)
    expected = {"concurrency": _per_server(conc, dp), "ttft_s": _pos(c, "ttft_s", where), "tpot_s": tpot}
    return pool, expected


def _disaggregated(d: dict, where: str, output_len: int, input_len: int, fleet: bool) -> tuple[list, dict, list]:
    dec, pre = _get(d, "decode", where), _get(d, "prefill", where)
    dt, dpp, de, ddp, da = _layout(dec, f"{where}.decode")
    pt, ppp, pe, pdp, pa = _layout(pre, f"{where}.prefill")
    dbatch, pbatch = _int(dec, "batch", f"{where}.decode"), _int(pre, "batch", f"{where}.prefill")
    if fleet:
        dn, pn = _int(dec, "instances", f"{where}.decode"), _int(pre, "instances", f"{where}.prefill")
        dec_tps = _pos(dec, "instance_output_tokens_per_s", f"{where}.decode") * dn
        pre_tps = _pos(pre, "instance_prompt_tokens_per_s", f"{where}.prefill") * pn
        user_tps = _pos(dec, "tokens_per_s_per_user", f"{where}.decode")
    else:
        dn = 1
        pchips = _pos(d, "prefill_chips", where)
        pn = math.ceil(pchips / (pt * ppp * pe * pdp) - 1e-9)
        if pn * pdp > _HIGH["replicas"]:
            raise InputError(f"{where}.prefill_chips", f"{pchips:,.0f} chips are over {_HIGH['replicas']:,} servers",
                             "the value tokenmath wrote")
        dec_tps = _pos(dec, "decode_output_tokens_per_s", f"{where}.decode")
        pre_tps = _pos(pre, "prompt_tokens_per_s_per_chip", f"{where}.prefill") * pn * pt * ppp * pe * pdp
        user_tps = _pos(dec, "output_tokens_per_s_per_user", f"{where}.decode")
    pools = [PoolPlan("prefill", pt, ppp, pe, pdp * pn, _per_server(pbatch, pdp), pa),
             PoolPlan("decode", dt, dpp, de, ddp * dn, _per_server(dbatch, ddp), da)]
    # the whole deployment is one benchmarked unit (one router in front of both pools): it serves what the tighter
    # pool allows, decode's output or prefill's prompts x output / input
    out_tps = min(dec_tps, pre_tps * output_len / input_len)
    tpot = 1.0 / user_tps
    ttft = _pos(pre, "ttft_s", f"{where}.prefill")
    users = math.ceil(out_tps * (ttft + output_len * tpot) / output_len)     # Little's law over one request
    notes = []
    if pre_tps * output_len / input_len < dec_tps:
        notes.append(f"the prefill pool binds ({pre_tps * output_len / input_len:,.0f} output tok/s of prompts against "
                     f"decode's {dec_tps:,.0f}): decode batches run below their {dbatch:,} sequences, so TPOT should "
                     "come out at or under the figure expected")
    return pools, {"concurrency": users, "ttft_s": ttft, "tpot_s": tpot, "output_tokens_per_s": out_tps}, notes


def question_kind(answer: dict) -> str | None:
    """The question whose answer this is, by the keys each writes: plan, fleet or infer (None: none of them)."""
    if "demand_output_tokens_per_s" in answer:
        return "fleet"
    if "best" in answer and "system" in answer:
        return "plan"
    return "infer" if "fits" in answer and "decode_step_s" in answer else None


def pools_of(answer: dict, disaggregated: bool | None = None, *, speculation_recorded: bool = False) -> Deployed:
    """The deployment a plan or fleet answer (its JSON as a dict) describes: its disaggregated pools or its
    colocated servers (disaggregated True / False; None: a plan's own choice, a fleet's continuously batched one).
    speculation_recorded: the answer's question echo names its draft or MTP depth (answer_echo.py), so a speculative
    answer can be written; without it one is refused."""
    if not isinstance(answer, dict):
        raise InputError("answer", f"is a JSON {type(answer).__name__}, not an object",
                         "the JSON `tokenmath plan --json` or `tokenmath fleet --json` prints")
    question = question_kind(answer)
    if question == "fleet":
        hw = _get(answer, "hardware", "")
    elif question == "plan":
        hw = _get(_get(answer, "system", ""), "id", "system")
    elif question == "infer":
        raise InputError("answer", "is an infer answer: one layout, whose question export asks again (export.py), "
                         "not pools to read", "tokenmath.export(answer), or a plan or fleet answer here")
    else:
        raise InputError("answer", "is not a plan, fleet or infer answer (no system + best, no "
                         "demand_output_tokens_per_s, no fits + decode_step_s)",
                         "the JSON `tokenmath plan --json`, `fleet --json` or `infer --json` prints")
    engine = _engine(answer)
    model = _get(answer, "model", "")
    inp, out = _int(answer, "input_len", ""), _int(answer, "output_len", "")
    if answer.get("speculation") and not speculation_recorded:
        raise InputError("speculation", "the answer decodes speculatively and was saved without its question, so the "
                         "draft model or MTP depth that ran is not recorded", "save the answer again with this "
                         "tokenmath, whose --json answers carry their question")
    notes: list[str] = []
    dis = answer.get("disaggregated")
    if disaggregated is None:
        disaggregated = bool(dis) and question == "plan"
    if disaggregated and not dis:
        raise InputError("disaggregated", f"the {question} answer holds no disaggregated sizing",
                         "plan --disaggregated" if question == "plan" else "a fleet answer without --draft / --mtp")
    if disaggregated:
        pools, expected, n2 = _disaggregated(dis, "disaggregated", out, inp, fleet=question == "fleet")
        notes += n2
        unit = f"the whole {'deployment' if question == 'plan' else 'fleet'} (one router in front of both pools)"
    else:
        # the continuously batched point: a plan's one layout, or a fleet's replicas of it
        key = "best_by_concurrency" if question == "plan" else "continuously_batched"
        c = answer.get(key)
        if not c:
            raise InputError(key, f"the {question} answer holds no continuously batched point",
                             "loosen --min-tokens-per-s-per-user / --ttft-ms, or give more --chips"
                             if question == "plan" else "ask fleet with a serving engine (--engine vllm), or "
                             "export its disaggregated pools (--disaggregated)")
        if question == "plan":
            pool, expected = _colocated(c, key, 1)
            per_layout = _pos(c, "output_tokens_per_s", key)
        else:
            pool, expected = _colocated(c, key, _int(c, "replicas", key))
            per_layout = _pos(c, "replica_output_tokens_per_s", key)
        pools = [pool]
        expected["output_tokens_per_s"] = per_layout / _int(c, "dp", key)   # one of the layout's dp servers
        unit = "one server"
    return Deployed(question=question, model=model, hardware=hw, engine=engine,
                    weight_dtype=answer.get("weight_dtype"), kv_dtype=answer.get("kv_dtype") or "bf16",
                    input_len=inp, output_len=out, pools=tuple(pools), expected=expected, unit=unit,
                    notes=tuple(notes))
