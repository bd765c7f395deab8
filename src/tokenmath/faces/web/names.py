"""One vocabulary on the page: a derivation (`explain`, the --explain text) names the chip and the model by their
catalog names ("NVIDIA H100 SXM5 80GB", "Llama 3.1 8B"), as the page's titles and cards do, where some --explain
texts print the ids ("h100-sxm", "llama-3.1-8b"). The JSON keeps the ids (the CLI's JSON contract); only the text a
reader sees changes. No physics here."""
from __future__ import annotations

import re
from collections.abc import Callable

ID_EDGE_BEFORE = r"(?<![\w.\-/])"    # an id stands alone: not inside a longer id, a file name or a path
ID_EDGE_AFTER = r"(?![\w\-/]|\.\w)"


def chip_name(hw_id: str) -> str | None:
    """The catalog name of a chip id (a system id, or an unknown one: None)."""
    from tokenmath.specs.hardware import catalog, get_hardware
    if hw_id.lower() not in catalog():
        return None
    return get_hardware(hw_id.lower()).name


def named(d: dict, model_name: Callable[[str], str | None]) -> dict:
    """`d` with the ids of its chip (`hardware` or `system`) and model (`model`) in its `explain` text replaced by
    their names; `model_name` gives a model id's name (None: leave it)."""
    text = d.get("explain")
    if not isinstance(text, str) or not text:
        return d
    pairs = []
    for key, name_of in (("hardware", chip_name), ("system", chip_name), ("model", model_name)):
        ident = d.get(key)
        if isinstance(ident, str) and ident:
            name = name_of(ident)
            if name and name != ident:
                pairs.append((ident, name))
    for ident, name in pairs:
        text = re.sub(ID_EDGE_BEFORE + re.escape(ident) + ID_EDGE_AFTER, lambda _m, n=name: n, text)
    return {**d, "explain": text}
