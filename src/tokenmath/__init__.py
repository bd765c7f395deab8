"""tokenmath: roofline math for LLM training and serving.

The public Python API, imported lazily so `tokenmath --help` and `import tokenmath` stay quick. Each name lives in
one module of the layers (see docs/ARCHITECTURE.md); this table only points at it.
"""
from __future__ import annotations

__version__ = "0.1.0"

_PUBLIC = {
    "infer": "tokenmath.analyses.python_api:infer_api",
    "ask": "tokenmath.analyses.ask:ask",
    "Deployment": "tokenmath.specs.question.deployment:Deployment",
    "Workload": "tokenmath.specs.question.workload:Workload",
    "question_schema": "tokenmath.specs.question.schema:question_schema",
    "sweep": "tokenmath.analyses.serving.sweep:sweep",
    "hyperbola": "tokenmath.analyses.python_api:hyperbola_api",
    "pareto": "tokenmath.analyses.python_api:pareto_api",
    "price": "tokenmath.analyses.python_api:price_api",
    "fleet": "tokenmath.analyses.python_api:fleet_api",
    "plan": "tokenmath.analyses.python_api:plan_api",
    "export": "tokenmath.analyses.python_api:export_api",
    "simulate": "tokenmath.analyses.python_api:simulate_api",
    "steady_state": "tokenmath.analyses.serving.steady_state:steady_state",
    "train": "tokenmath.analyses.training.train:train",
    "chinchilla": "tokenmath.analyses.training.scaling_laws:chinchilla",
    "overtrain": "tokenmath.analyses.training.overtrain:overtrain",
    "deduce": "tokenmath.analyses.inverse.deduce:deduce",
    "validate": "tokenmath.analyses.calibration.validate:validate",
    "get_model": "tokenmath.specs.model_catalog:get_model",
    "model_ids": "tokenmath.specs.model_catalog:model_ids",
    "get_hardware": "tokenmath.specs.hardware:get_hardware",
    "hardware_ids": "tokenmath.specs.hardware:hardware_ids",
    "InputError": "tokenmath.base.errors:InputError",
    "Efficiency": "tokenmath.specs.efficiency:Efficiency",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name):
    if name in _PUBLIC:
        import importlib
        mod, attr = _PUBLIC[name].split(":")
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'tokenmath' has no attribute {name!r}")
