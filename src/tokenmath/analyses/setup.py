"""Resolving a question's inputs once: model, hardware, layout, dtypes, efficiency and serving engine (with named
errors). The engine travels on the efficiency (Efficiency.engine): `engine=` names one (an id, a file, a profile),
"none" removes it, None keeps the efficiency's own (none unless the caller set one)."""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from tokenmath.base.errors import InputError
from tokenmath.engine.economics import usd_per_s
from tokenmath.engine.forward import Precision
from tokenmath.engine.memory import RESERVE_FRACTION
from tokenmath.engine.static_batch import pass_options
from tokenmath.mapping.candidates import MAX_SEARCH_CHIPS
from tokenmath.mapping.layout import Layout, make_layout
from tokenmath.specs.efficiency import Efficiency, default_for
from tokenmath.specs.hardware import Hardware, get_hardware
from tokenmath.specs.model import Model
from tokenmath.specs.model_catalog import get_model
from tokenmath.specs.serving_engines import EngineProfile, engine_dict, engine_label, resolve_engine


@dataclass(frozen=True)
class Transport:
    """How a MoE's expert-parallel all-to-all runs and how evenly the router loads its ranks: engine/forward.py's
    deployment-wide keywords (forward.TRANSPORT_DEFAULTS, the same names), one value per deployment, read by every
    step the engine prices. A new one: a field here (its forward_pass name), its Deployment field and transport()."""
    ep_comm: str = "bf16"
    ep_overlap: bool = False
    ep_imbalance: float | str = 1.0
    experts_whole: bool = False      # the routed experts whole on a TP group's ranks (moe_sharding "ep")

    def kw(self) -> dict:
        """The keywords forward_pass and serve_batch take (the defaults left out)."""
        return pass_options(**{f.name: getattr(self, f.name) for f in fields(self)})


PLAIN = Transport()


@dataclass(frozen=True)
class Setup:
    """A resolved question: model, hardware, layout, precision, efficiency (what every analysis starts from), and
    the deployment's expert-parallel transport."""
    model: Model
    hardware: Hardware
    layout: Layout
    precision: Precision
    efficiency: Efficiency
    reserve: float
    transport: Transport = PLAIN
    adp_balance: bool = False   # the scheduler balances attention-data-parallel groups' prompts (a coordinated wait)

    @property
    def chips(self) -> int:
        return int(np.asarray(self.layout.chips).max())

    @property
    def engine(self) -> EngineProfile | None:
        """The serving engine whose defaults the figures assume (None: the engine-free step)."""
        return self.efficiency.engine

    @property
    def engine_dict(self) -> dict:
        return engine_dict(self.engine)

    @property
    def engine_note(self) -> str:
        return engine_label(self.engine)

    @property
    def usd_per_chip_s(self) -> float | None:
        """$ per second of one chip; None when the chip has no price."""
        return usd_per_s(1, self.hardware.price_usd_per_hour)


def resolve_precision(m: Model, weight_dtype: str | None, kv_dtype: str | None) -> Precision:
    from tokenmath.specs.dtypes import KV_DTYPES, WEIGHT_DTYPES, get_dtype
    w = get_dtype(weight_dtype or m.native_dtype, "weight_dtype", WEIGHT_DTYPES)
    e = w if weight_dtype or not m.native_expert_dtype else get_dtype(m.native_expert_dtype, "weight_dtype")
    kv = get_dtype(kv_dtype or "bf16", "kv_dtype", KV_DTYPES)
    return Precision(w, e, kv)


def serving_efficiency(hw, efficiency: Efficiency | None, engine) -> Efficiency:
    """The efficiency a serving question runs at: the one given (with the engine `engine`, see with_engine), else
    the calibrated default for the chip and that engine (specs.efficiency.default_for: the engine's fitted
    per-step CPU work and the residuals fitted for it)."""
    if efficiency is not None:
        return with_engine(efficiency, engine)
    return default_for(hw, resolve_engine(engine) if engine is not None else None)


def with_engine(eff: Efficiency, engine) -> Efficiency:
    """The efficiency with the serving engine `engine` (id, file or EngineProfile; "none": no engine; None: as is)."""
    if engine is None:
        return eff
    return replace(eff, engine=resolve_engine(engine))


MOE_SHARDING = ("tp", "ep")     # a TP group's routed experts: each split tp ways, or whole on its ranks


def transport(ep_comm=None, ep_overlap=None, ep_imbalance=None, moe_sharding=None) -> Transport:
    """The EP transport from its options, each checked (None: the default)."""
    if moe_sharding is not None and moe_sharding not in MOE_SHARDING:
        raise InputError("moe_sharding", f"{moe_sharding!r} is not a way to place experts", " or ".join(MOE_SHARDING))
    return Transport(check_ep_comm(ep_comm or "bf16"), bool(ep_overlap), check_ep_imbalance(ep_imbalance),
                     moe_sharding == "ep")


def deployment_hardware(hw: Hardware, what_if=(), price_usd_per_hour=None) -> Hardware:
    """The chip (or System) a deployment runs on: the catalog's (or the file's) figures with the deployment's
    what-if overrides applied (specs.overrides.apply: each checked as a hardware file's figure would be, and carried
    on the result's `what_if` for the answer's JSON) and its price per chip-hour (None: the catalog's)."""
    if what_if:
        from tokenmath.specs.overrides import apply
        hw, _ = apply(hw, dict(what_if))
    if price_usd_per_hour is not None:
        hw = hw.replace(price_usd_per_hour=float(price_usd_per_hour))
    return hw


def with_deployment_knobs(su: Setup, *, ep_comm=None, ep_overlap=None, ep_imbalance=None, max_running=None,
                          price_usd_per_hour=None, what_if=(), adp_balance=None, moe_sharding=None) -> Setup:
    """The setup with a deployment's transport, its engine's cap on running sequences (max_running: per scheduler),
    its what-if hardware and its price per chip-hour (deployment_hardware; None or empty each: unchanged). The one
    place a Deployment's knobs (specs/question/deployment.KNOB_FIELDS) meet the setup: every analysis passes them
    through as **knobs."""
    if ep_comm is not None or ep_overlap is not None or ep_imbalance is not None or moe_sharding is not None:
        su = replace(su, transport=transport(ep_comm, ep_overlap, ep_imbalance, moe_sharding))
    if max_running is not None:
        eng = su.efficiency.engine
        if eng is None:
            raise InputError("max_running", "caps a serving engine's running sequences, and the engine is none",
                             "a serving engine (--engine vllm, sglang, ...) or leave --max-running out")
        n = int(max_running)
        su = replace(su, efficiency=replace(su.efficiency, engine=replace(eng, max_running=n,
                                                                          max_running_small_gpu=n)))
    if what_if or price_usd_per_hour is not None:
        su = replace(su, hardware=deployment_hardware(su.hardware, what_if, price_usd_per_hour))
    if adp_balance:
        su = replace(su, adp_balance=True)
    return su


def setup(model, hardware, *, chips=None, tp=None, pp=None, ep=None, dp=None, weight_dtype=None, kv_dtype=None,
          efficiency: Efficiency | None = None, reserve: float | None = None, cp=None, engine=None, what_if=(),
          price_usd_per_hour=None, **knobs) -> Setup:
    """One question's inputs. The layout: make_layout (the degrees given; the chips they leave go to the default
    spread when tp is not given, else to dp). The efficiency: the one given, else the chip family's calibration;
    the engine (with_engine): the one named, else the efficiency's own (None: the engine-free step). The chip:
    deployment_hardware (what-if overrides, price), before anything reads its figures. The rest:
    with_deployment_knobs (knobs: its keywords)."""
    m = get_model(model)
    hw = deployment_hardware(get_hardware(hardware), what_if, price_usd_per_hour)
    lay = make_layout(m, chips=chips, tp=tp, pp=pp, ep=ep, dp=dp, cp=cp)
    reserve = RESERVE_FRACTION if reserve is None else reserve
    if not 0 <= reserve < 1:
        raise InputError("reserve", f"{reserve!r} is not a fraction of memory", "a number in [0, 1)")
    eff = serving_efficiency(hw, efficiency, engine)
    su = Setup(m, hw, lay, resolve_precision(m, weight_dtype, kv_dtype), eff, reserve)
    return with_deployment_knobs(su, **knobs)


def system_setup(model, system, chips, weight_dtype, kv_dtype, efficiency, reserve, engine=None,
                 **knobs) -> tuple[Setup, int]:
    """A question about a whole system (plan, moe): its Setup (no layout yet) and its number of chips."""
    from tokenmath.specs.systems import get_system     # systems (and their dataclass) only for a system question
    m = get_model(model)
    hw = deployment_hardware(get_system(system, chips), knobs.pop("what_if", ()), knobs.pop("price_usd_per_hour", None))
    n = hw.chips
    if n > MAX_SEARCH_CHIPS:
        raise InputError("chips", f"{n:,} chips is more than one plan searches", f"at most {MAX_SEARCH_CHIPS:,}")
    reserve = RESERVE_FRACTION if reserve is None else reserve
    eff = serving_efficiency(hw, efficiency, engine)
    su = Setup(m, hw, Layout(), resolve_precision(m, weight_dtype, kv_dtype), eff, reserve)
    return with_deployment_knobs(su, **knobs), n


def check_ep_imbalance(ep_imbalance):
    """The busiest expert-parallel rank's tokens over the mean: a number >= 1 (None: 1, balanced), "routing" for
    the measured routing skew (engine/expert_parallel.routing_imbalance) or "eplb" for the same with EPLB's
    redundant experts."""
    if ep_imbalance is None:
        return 1.0
    # the declared field's validator: one home (imported here: a sweep never needs the question types)
    from tokenmath.specs.question.deployment import field
    from tokenmath.specs.question.fields import coerce_basic
    return coerce_basic(field("ep_imbalance"), ep_imbalance)


def check_ep_comm(ep_comm) -> str:
    """How the EP all-to-all moves tokens: one of engine.expert_parallel.EP_COMM."""
    from tokenmath.engine.expert_parallel import EP_COMM
    v = str(ep_comm).lower()
    if v not in EP_COMM:
        raise InputError("ep_comm", f"unknown all-to-all mode {ep_comm!r}",
                         "bf16 (one bf16 copy per expert), fp8 (FP8 dispatch, bf16 combine) or deepep (FP8 dispatch, "
                         "bf16 combine, one copy per remote domain)")
    return v


def fmt_layout(tp, pp, ep, dp, attn=0) -> str:
    """The layout as text; a fifth element (mapping.layout.ATTENTION_SHARDING index) adds the attention sharding."""
    from tokenmath.mapping.layout import ATTENTION_SHARDING
    extra = f" attn={ATTENTION_SHARDING[int(attn)]}" if int(attn) else ""
    return f"tp={int(tp)} pp={int(pp)} ep={int(ep)} dp={int(dp)}{extra}"
