"""The analysis endpoints: each one's parameters (names and defaults of the Python function it mirrors) and the
response it builds: the analysis' own `to_dict()`, its --explain text and, where a chart needs arrays the dict
leaves out, a small `chart` object. No physics here."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache, partial
from typing import TYPE_CHECKING, NamedTuple

from tokenmath.base.errors import InputError
from tokenmath.analyses.inverse.priors import PRICE_NOISE
from tokenmath.analyses.training.train import MAX_TRAIN_TOKENS
from tokenmath.base.validators import MAX_TOKENS
from tokenmath.faces.web.blank_chips import sequence_of, with_fewest_chips
from tokenmath.faces.web.api_models import api_model_names, api_model_response
from tokenmath.faces.web.charts import overtrain_chart, pareto_chart, roofline
from tokenmath.faces.web.overrides import SET, chip, what_if
from tokenmath.faces.web.params import Param
from tokenmath.faces.web.serving_fields import (BATCH, HARDWARE, INPUT_LEN, KNOBS, LAYOUT, MODEL, OUTPUT_LEN, SIM_LENGTHS,
                                                SIM_SESSIONS, dtype_params, engine_param, knobs, layout)
from tokenmath.faces.web.simulation_sweep import SWEEP_PARAMS, simulate_sweep_response
from tokenmath.faces.web.speculation import SPEC, spec_of, speculative_part
from tokenmath.specs.question.deployment import field as dfield
from tokenmath.specs.question.workload import field as wfield

if TYPE_CHECKING:
    from tokenmath.specs.efficiency import Efficiency
    from tokenmath.specs.model import Model

ModelLookup = Callable[[str], "Model"]   # a catalog id or an uploaded config's id -> its Model

MAX_DEDUCE_SAMPLES = 400_000
MAX_TRAIN_LAYOUT = 65_536          # chips or a parallel degree of a training run
MAX_PARETO_CHIPS = 4096
# requests of one simulation: about a second of the server's time (benchmarks/simulate_speed.py: ~2 s per 100,000
# open-loop requests on one core; closed loops and long outputs cost a few times more)
MAX_SIM_REQUESTS = 20_000
DEFAULT_TRAIN_CHIPS = 8            # when neither chips nor dp is given
PRICE_FLOOR = 1e-9                 # a price or speed deduce takes: above 0 ($ per million tokens, tokens/s)


# how a simulation's requests arrive: a closed loop (concurrency) or an open loop (arrival_rate), the declared fields;
# the rate keeps the web's floor (a rate of 0 sends no request: the simulator refuses it)
SIM_LOAD = (replace(wfield("concurrency"), help="closed loop: users, each sending its next request when one completes "
                    "(64 when neither this nor arrival_rate is given)"),
            replace(wfield("arrival_rate"), lo=1e-6, help="open loop: requests (with turns > 1: sessions) per second"))
# a simulated workload's requests, lengths, goodput targets and seed (simulate and simulate_sweep); the targets keep
# the web's floor of 1 microsecond (a 0 ms target no request meets: every answer's goodput 0)
SIM_WORKLOAD = (
    Param("requests", "int", 1000, "requests served", 1, MAX_SIM_REQUESTS),
    *SIM_LENGTHS,
    replace(wfield("ttft_ms"), lo=1e-3, help="goodput target: time to first token (default 2000)"),
    Param("itl_ms", "float", None, "goodput target: time per output token (default 200)", 1e-3, 1e9, unit="ms"),
    Param("seed", "int", 0, "random seed of the workload", 0, 2 ** 32 - 1))


class Endpoint(NamedTuple):
    params: tuple[Param, ...]
    handler: Callable[[dict], dict]   # coerced parameters -> the response dict
    python: str                       # the Python function it mirrors


@cache
def fit_names() -> tuple[str, ...]:
    """The scaling-law fits a request may name."""
    from tokenmath.analyses.training.scaling_laws import FITS
    return tuple(FITS)


def chosen_efficiency(peak: bool, calibrated: bool) -> Efficiency | None:
    """PEAK for peak=true; DEFAULT (kernel ceilings, no fixed overhead: the CLI's --uncalibrated) for
    calibrated=false; else None: the analysis' default, the efficiencies calibrated for the chip's family."""
    from tokenmath.specs.efficiency import DEFAULT, PEAK
    if peak:
        return PEAK
    if not calibrated:
        return DEFAULT
    return None


# ---- responses: coerced parameters in, the analysis' dict (+ explain, chart) out --------------------------------

def infer_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.infer import infer
    from tokenmath.faces.explain_infer import explain_infer
    m, hw, eff = model(a["model"]), chip(a), chosen_efficiency(a["peak"], a["calibrated"])
    a = with_fewest_chips(m, a, a["input_len"] + a["output_len"], a["batch"])
    r = infer(m, hw, **layout(a), batch=1 if a["batch"] is None else a["batch"], input_len=a["input_len"],
              output_len=a["output_len"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], efficiency=eff,
              engine=a["engine"], speculation=spec_of(a), **knobs(a))
    d = r.to_dict()
    d.update(what_if(a))
    # the speculative step on the layout this answer chose (blank chips: the fewest that fit), so both agree
    lay = {k: d[k] for k in ("chips", "tp", "ep", "dp")}
    d.update(speculative_part(m, hw, {**a, **lay}, [int(r.batch)], eff))
    d["model_name"] = r.model.name
    d["hardware_name"] = r.hardware.name
    d["explain"] = explain_infer(r)
    d["roofline"] = roofline(r)
    return d


def hyperbola_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.hyperbola import hyperbola
    from tokenmath.faces.explain_serving import explain_hyperbola
    m, hw = model(a["model"]), chip(a)
    a = with_fewest_chips(m, a, a["context"])
    h = hyperbola(m, hw, **layout(a), context=a["context"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"],
                  engine=a["engine"])
    d = h.to_dict()
    d.update(what_if(a))
    d.update(speculative_part(m, hw, {**a, "chips": d["chips"]}, [p["batch"] for p in d["points"]] or [1],
                              context=a["context"]))
    d["explain"] = explain_hyperbola(h)
    return d


def pareto_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.pareto import pareto
    from tokenmath.faces.explain_serving import pareto_text
    p = pareto(model(a["model"]), chip(a), chips=a["chips"], input_len=a["input_len"],
               output_len=a["output_len"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"],
               allow_pp=a["allow_pp"], engine=a["engine"])
    d = p.to_dict()
    d.update(what_if(a))
    d["explain"] = pareto_text(p)   # the explanation, then the frontier as a table
    d["chart"] = pareto_chart(p)
    return d


def simulate_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.simulation.simulate import simulate
    from tokenmath.faces.explain_simulation import explain_simulation
    m = model(a["model"])
    a = with_fewest_chips(m, a, sequence_of(a) * (a["turns"] or 1))     # a session's last turn: every turn's tokens
    r = simulate(m, chip(a), **layout(a), engine=a["engine"], concurrency=a["concurrency"],
                 arrival_rate=a["arrival_rate"], burstiness=a["burstiness"], requests=a["requests"],
                 input_len=a["input_len"], output_len=a["output_len"], ttft_ms=a["ttft_ms"], itl_ms=a["itl_ms"],
                 seed=a["seed"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], speculation=spec_of(a),
                 turns=a["turns"], tool_gap_s=a["tool_gap_s"], **knobs(a))
    d = r.to_dict()
    d.update(what_if(a))
    d["explain"] = explain_simulation(r)
    return d


def context_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.context import context
    from tokenmath.faces.explain_serving import explain_context
    m = model(a["model"])
    a = with_fewest_chips(m, a, a["context"], a["batch"])
    c = context(m, chip(a), **layout(a), batch=1 if a["batch"] is None else a["batch"],
                context=a["context"], weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], engine=a["engine"])
    d = c.to_dict()
    d.update(what_if(a))
    d["explain"] = explain_context(c)
    return d


def prices_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.serving.input_vs_output import prices
    from tokenmath.faces.explain_serving import explain_prices
    m = model(a["model"])
    # blank chips: the fewest that hold one sequence of the shortest context asked (longer rows say if they do not fit)
    a = with_fewest_chips(m, a, min(a["contexts"] or [256]) + a["output_len"], a["batch"])
    r = prices(m, chip(a), **layout(a), contexts=a["contexts"],
               output_len=a["output_len"], batch=a["batch"],
               min_tokens_per_s_per_user=a["min_tokens_per_s_per_user"], cache_ttl_s=a["cache_ttl_s"],
               weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"], engine=a["engine"])
    d = r.to_dict()
    d.update(what_if(a))
    d["explain"] = explain_prices(r)
    return d


DEDUCE_PRICES = ("input_price", "output_price", "cached_input_price", "long_context_threshold", "long_input_price",
                 "long_output_price", "output_speed")


def deduce_response(a: dict) -> dict:
    from tokenmath.analyses.inverse.deduce import Priors, deduce
    from tokenmath.faces.explain_inverse import explain_deduction
    pr = Priors(price_noise=a["noise"], samples=a["samples"], seed=a["seed"])
    if a["hardware"]:
        pr = replace(pr, hardware=tuple((h, 1.0 / len(a["hardware"])) for h in a["hardware"]))
    for name, key in (("margin", "margin"), ("utilization", "utilization"), ("batch", "batch"),
                      ("chip_cost_factor", "chip_cost")):
        if a[key] is not None:
            pr = replace(pr, **{name: a[key]})
    if not (0 <= pr.margin[0] and pr.margin[1] < 1):
        raise InputError("margin", f"{pr.margin} is not within [0, 1)", "e.g. 0.2,0.6")
    if not (0 < pr.utilization[0] and pr.utilization[1] <= 1):
        raise InputError("utilization", f"{pr.utilization} is not within (0, 1]", "e.g. 0.3,0.8")
    if not pr.batch[0] >= 1:
        raise InputError("batch", f"{pr.batch} starts below 1", "e.g. 4,512")
    if not pr.chip_cost_factor[0] > 0:
        raise InputError("chip_cost", f"{pr.chip_cost_factor} starts at or below 0", "e.g. 0.4,1.2")
    if a["api_model"]:
        typed = [k for k in DEDUCE_PRICES if a.get(k) is not None]
        if typed:               # the catalog's prices and evidence are read: a typed one was dropped silently before
            raise InputError(typed[0], "is not read with api_model (its own prices and evidence are)",
                             "leave it out, or leave api_model out to deduce from typed prices")
        return api_model_response(a["api_model"], pr)
    r = deduce(a["input_price"], a["output_price"], cached_input_price=a["cached_input_price"],
               long_context_threshold=a["long_context_threshold"], long_input_price=a["long_input_price"],
               long_output_price=a["long_output_price"], output_speed=a["output_speed"], priors=pr)
    d = dict(r.to_dict())
    d["explain"] = explain_deduction(r)
    return d


def train_response(model: ModelLookup, a: dict) -> dict:
    from tokenmath.analyses.training.train import train
    from tokenmath.analyses.training.train_search import search
    from tokenmath.faces.explain_training import explain_train
    from tokenmath.specs.efficiency import PEAK
    eff = PEAK if a["peak"] else None
    chips = a["chips"]
    m = model(a["model"])
    if not a["search"] and all(a[k] is None for k in ("chips", "tp", "pp", "dp", "ep", "cp")):
        return auto_train_response(m, a, eff)
    if chips is None and a["dp"] is None:
        chips = DEFAULT_TRAIN_CHIPS
    if a["search"]:
        n = chips
        if n is None:
            n = 1
            for k in ("tp", "pp", "dp", "ep", "cp"):
                n *= a[k] or 1
        r = search(m, a["hardware"], chips=n, seq_len=a["seq_len"], global_batch_tokens=a["global_batch_tokens"],
                     cp=a["cp"], dtype=a["dtype"], tokens=a["tokens"], overlap=a["overlap"], efficiency=eff)
        d = r.to_dict()
        d["explain"] = explain_train(r.top[0]) if r.top else "no layout fits"
        return d
    r = train(m, a["hardware"], chips=chips, tp=a["tp"], pp=a["pp"], dp=a["dp"], ep=a["ep"], cp=a["cp"],
              seq_len=a["seq_len"], global_batch_tokens=a["global_batch_tokens"], micro_batch=a["micro_batch"],
              recompute=a["recompute"], zero=int(a["zero"]), dtype=a["dtype"], tokens=a["tokens"],
              overlap=a["overlap"], efficiency=eff)
    d = r.to_dict()
    d["explain"] = explain_train(r)
    return d


def auto_train_response(m, a: dict, eff) -> dict:
    """Chips and every degree blank: the fewest chips from 8 (doubling) on which a layout fits with the recipe asked
    (micro-batch, recomputation, ZeRO), on its fastest layout (analyses.training.fewest_chips)."""
    from tokenmath.analyses.training.fewest_chips import fewest_chips_search
    from tokenmath.faces.explain_training import explain_train
    s = fewest_chips_search(m, a["hardware"], seq_len=a["seq_len"], global_batch_tokens=a["global_batch_tokens"],
                            dtype=a["dtype"], tokens=a["tokens"], overlap=a["overlap"], efficiency=eff, top=1,
                            micro_batches=(a["micro_batch"],), recomputes=(a["recompute"],), zeros=(int(a["zero"]),))
    r = s.top[0]
    d = r.to_dict()
    d["auto_layout"] = True
    d["notes"] = [f"chips and layout blank: the fewest chips (8, 16, 32, ...) on which a layout fits with this "
                  f"recipe, {s.chips:,}, on the fastest of its {s.fitting:,} fitting layouts (`tokenmath train "
                  f"--search --chips {s.chips}` ranks them, recipes too)", *d.get("notes", [])]
    d["explain"] = explain_train(r)
    return d


def overtrain_response(a: dict) -> dict:
    from tokenmath.analyses.training.overtrain import overtrain
    from tokenmath.faces.explain_overtrain import explain_overtrain
    r = overtrain(target_loss=a["target_loss"], compute=a["compute"], inference_tokens=a["inference_tokens"],
                  rl_rollout_tokens=a["rl_rollout_tokens"], fit=a["fit"], hardware=a["hardware"], mfu=a["mfu"],
                  train_days=a["train_days"],
                  flop_only=a["flop_only"], min_tokens_per_s_per_user=a["min_tokens_per_s_per_user"],
                  input_output_ratio=a["input_output_ratio"], output_len=a["output_len"],
                  weight_dtype=a["weight_dtype"], kv_dtype=a["kv_dtype"])
    d = r.to_dict()
    d["explain"] = explain_overtrain(r)
    d["chart"] = overtrain_chart(r)
    return d


def chinchilla_response(a: dict) -> dict:
    from tokenmath.analyses.training.scaling_laws import chinchilla
    from tokenmath.faces.explain_training import explain_chinchilla
    r = chinchilla(compute=a["compute"], params=a["params"], tokens=a["tokens"], loss_target=a["loss"], fit=a["fit"])
    d = r.to_dict()
    d["explain"] = explain_chinchilla(r)
    return d


# ---- the table ---------------------------------------------------------------------------------------------------

def endpoint_table(model: ModelLookup) -> dict[str, Endpoint]:
    """Every analysis endpoint by name; `model` resolves a request's model id (catalog or upload)."""
    D = dtype_params()
    E = engine_param()
    return {
        "infer": Endpoint(
            (MODEL, HARDWARE, *LAYOUT, BATCH, INPUT_LEN, OUTPUT_LEN,
             *D, E, Param("peak", "bool", False, "100% of every peak (pure roofline)"),
             Param("calibrated", "bool", True, "efficiencies fitted on published measurements (false: kernel "
                   "ceilings, as --uncalibrated)"), SET, *SPEC, *KNOBS),
            partial(infer_response, model), "tokenmath.analyses.serving.infer.infer (+ explain, roofline)"),
        "hyperbola": Endpoint(
            # context 2,048, as `tokenmath hyperbola --context`'s (the page's hyperbola tab defaults to it too)
            (MODEL, HARDWARE, *LAYOUT,
             Param("context", "int", 2048, "tokens in each sequence's KV cache", 1, MAX_TOKENS), *D, E, SET, *SPEC),
            partial(hyperbola_response, model), "tokenmath.analyses.serving.hyperbola.hyperbola"),
        "pareto": Endpoint(
            # chips: every layout of them is searched, so a page's request stays within MAX_PARETO_CHIPS
            (MODEL, HARDWARE, replace(dfield("chips"), hi=MAX_PARETO_CHIPS, help="chips (default: one scale-up "
                                      "domain); every layout of them is searched"),
             INPUT_LEN, OUTPUT_LEN, *D, E,
             Param("allow_pp", "bool", False, "also pipeline-parallel layouts"), SET),
            partial(pareto_response, model), "tokenmath.analyses.serving.pareto.pareto"),
        "simulate": Endpoint(
            (MODEL, HARDWARE, *LAYOUT, E, *SIM_LOAD,
             Param("burstiness", "float", 1.0, "open loop: gamma shape of the gaps (1 = Poisson)", 1e-3, 1e3),
             *SIM_SESSIONS, *SIM_WORKLOAD, *D, SET, *SPEC, *KNOBS),
            partial(simulate_response, model), "tokenmath.analyses.serving.simulation.simulate.simulate"),
        "simulate_sweep": Endpoint(
            (MODEL, HARDWARE, *LAYOUT, E, *SWEEP_PARAMS, *SIM_SESSIONS,
             *(p for p in SIM_WORKLOAD if p.name != "requests"), *D, SET, *KNOBS),
            partial(simulate_sweep_response, model),
            "tokenmath.analyses.serving.simulation.simulate.simulate, once per concurrency or arrival rate"),
        "context": Endpoint(
            # batch: a count (the context question has no 'max'), blank 1; context 8,192, as `tokenmath context`'s
            (MODEL, HARDWARE, *LAYOUT, replace(BATCH, kind="int"), Param("context", "int", 8192, "", 1, MAX_TOKENS),
             *D, E, SET),
            partial(context_response, model), "tokenmath.analyses.serving.context.context"),
        "prices": Endpoint(
            (MODEL, HARDWARE, *LAYOUT,
             Param("contexts", "intlist", None, "input lengths (default 256..131072)", 1, MAX_TOKENS),
             OUTPUT_LEN, replace(BATCH, kind="int", help="batch (default: the largest that fits at each context)"),
             # kept above 0, the web's floor: a speed of 0 asks for no batch at all
             replace(wfield("min_tokens_per_s_per_user"), lo=1e-9,
                     help="speed per user: the largest batch whose decode step gives it (instead of batch)"),
             Param("cache_ttl_s", "float", 300.0, "seconds a cached prompt's KV waits for reuse", 1e-9, 1e9), *D, E,
             SET),
            partial(prices_response, model), "tokenmath.analyses.serving.input_vs_output.prices"),
        "deduce": Endpoint(
            # prices and speeds above 0, a threshold from 1 token: the ranges deduce() accepts
            (Param("input_price", "float", None, "$ per million input tokens", PRICE_FLOOR),
             Param("output_price", "float", None, "$ per million output tokens", PRICE_FLOOR),
             Param("cached_input_price", "float", None, "", PRICE_FLOOR),
             Param("long_context_threshold", "float", None, "tokens above which the long tier applies", 1,
                   MAX_TOKENS),
             Param("long_input_price", "float", None, "", PRICE_FLOOR),
             Param("long_output_price", "float", None, "", PRICE_FLOOR),
             Param("output_speed", "float", None, "measured output tokens/s per user", PRICE_FLOOR),
             Param("hardware", "hwlist", None, "chip ids replacing the hardware prior"),
             Param("margin", "range", None, "gross margin LOW,HIGH (default 0,0.75)"),
             Param("utilization", "range", None, "LOW,HIGH (default 0.3,0.8)"),
             Param("batch", "range", None, "decode batch LOW,HIGH (default 4,512)"),
             Param("chip_cost", "range", None, "multiplier on catalog $/h, LOW,HIGH (default 0.4,1.2)"),
             # the analysis' own range (analyses.inverse.priors.PRICE_NOISE), declared here so /api advertises it
             Param("noise", "float", 0.30, "log-sd between a price and its cost", *PRICE_NOISE),
             Param("samples", "int", 200_000, "Monte Carlo samples", 1000, MAX_DEDUCE_SAMPLES),
             Param("seed", "int", 0, "", 0, 2 ** 32 - 1),
             Param("api_model", "choice", None, "a known API endpoint, PROVIDER: MODEL (data/api_prices.toml), "
                   "deduced from all its evidence instead of the prices (as --api-model --provider)",
                   choices=api_model_names())),
            deduce_response, "tokenmath.analyses.inverse.deduce.deduce"),
        "train": Endpoint(
            (MODEL, HARDWARE,
             Param("chips", "int", None, "total chips (blank, with every degree blank: the fewest that fit, "
                   "from 8 doubling, on their fastest layout; with dp blank: 8)", 1, MAX_TRAIN_LAYOUT),
             Param("tp", "int", None, "", 1, MAX_TRAIN_LAYOUT), Param("pp", "int", None, "", 1, MAX_TRAIN_LAYOUT),
             Param("dp", "int", None, "", 1, MAX_TRAIN_LAYOUT), Param("ep", "int", None, "", 1, MAX_TRAIN_LAYOUT),
             Param("cp", "int", None, "", 1, MAX_TRAIN_LAYOUT),
             Param("seq_len", "int", 4096, "", 1, MAX_TOKENS),
             Param("global_batch_tokens", "int", 4_194_304, "tokens per optimizer step", 1, 10 ** 12),
             Param("micro_batch", "int", 1, "sequences per micro-batch", 1, 1_000_000),
             Param("recompute", "choice", "selective", "", choices=("none", "selective", "full")),
             Param("zero", "choice", "1", "ZeRO stage", choices=("0", "1", "2", "3")),
             Param("dtype", "choice", "bf16", "", choices=("bf16", "fp8")),
             Param("tokens", "float", None, "training tokens: the whole run's time and cost", 1.0, MAX_TRAIN_TOKENS),
             Param("overlap", "bool", True, "overlap DP communication with backward"),
             Param("peak", "bool", False, ""),
             Param("search", "bool", False, "rank the layouts of `chips` that fit")),
            partial(train_response, model), "tokenmath.analyses.training.train.train / search"),
        "overtrain": Endpoint(
            (Param("target_loss", "float", None, "nats/token (or give compute)"),
             Param("compute", "float", None, "training budget (FLOPs) setting the target loss"),
             Param("inference_tokens", "float", 0.0, "lifetime tokens served", 0.0),
             Param("rl_rollout_tokens", "float", 0.0, "", 0.0),
             Param("fit", "choice", "epoch", "", choices=fit_names()),
             HARDWARE,
             Param("mfu", "float", None, "training MFU (blank: the training engine per model size)", 0.01, 1.0),
             Param("train_days", "float", 90.0, "training run horizon (sizes the cluster)", 1e-3, 3650.0, unit="days"),
             Param("flop_only", "bool", False, "inference at 2N FLOPs/token"),
             # the serving side of an over-trained model: overtrain's own defaults, as `tokenmath overtrain`'s
             # the ranges overtrain() accepts (a speed of 0 asks for no batch: the web's floor, as prices')
             replace(wfield("min_tokens_per_s_per_user"), default=20.0, lo=1e-9),
             Param("input_output_ratio", "float", 1.0, "", 0.0, 1e4),
             replace(OUTPUT_LEN, default=512, hi=1_000_000, help="generated tokens per request"), *D),
            overtrain_response, "tokenmath.analyses.training.overtrain.overtrain"),
        "chinchilla": Endpoint(
            (Param("compute", "float", None, "FLOPs"), Param("params", "float", None, ""),
             Param("tokens", "float", None, ""), Param("loss", "float", None, "target loss"),
             Param("fit", "choice", "epoch", "", choices=fit_names())),
            chinchilla_response, "tokenmath.analyses.training.scaling_laws.chinchilla"),
    }
