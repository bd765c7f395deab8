"""tokenmath: roofline math for LLM training and serving.

Heavy pieces import lazily so `tokenmath --help` stays quick.
"""
from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["infer", "sweep", "train", "chinchilla", "overtrain", "deduce", "price", "get_model", "get_hardware", "model_ids", "hardware_ids", "InputError", "Efficiency"]


def __getattr__(name):
    if name == "infer":
        from tokenmath.analyses.serving.infer import infer
        return infer
    lazy = {"train": ("analyses.train", "train"), "chinchilla": ("analyses.scaling_laws", "chinchilla"),
            "overtrain": ("analyses.overtrain", "overtrain"), "deduce": ("analyses.deduce", "deduce"),
            "price": ("analyses.price", "price"), "hyperbola": ("analyses.hyperbola", "hyperbola"),
            "pareto": ("analyses.pareto", "pareto"), "validate": ("analyses.validate", "validate")}
    if name in lazy:
        import importlib
        mod, fn = lazy[name]
        return getattr(importlib.import_module(f".{mod}", __name__), fn)
    if name == "sweep":
        from tokenmath.analyses.serving.sweep import sweep
        return sweep
    if name in ("get_model", "model_ids"):
        from tokenmath.specs import model
        return getattr(model, name)
    if name in ("get_hardware", "hardware_ids"):
        from tokenmath.specs import hardware
        return getattr(hardware, name)
    if name == "InputError":
        from tokenmath.base.errors import InputError
        return InputError
    if name == "Efficiency":
        from tokenmath.specs.efficiency import Efficiency
        return Efficiency
    raise AttributeError(f"module 'tokenmath' has no attribute {name!r}")
