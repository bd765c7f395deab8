"""One vocabulary for every face: prose names the chip and the model by their catalog names ("NVIDIA H100 SXM5
80GB", "Llama 3.1 8B"), as `infer` does, on the command line and on the page alike. Ids stay where a user types them
back (a "use --model llama-3.1-8b" hint, a column of ids, every JSON key: the JSON contract never changes).

`chip_label` / `model_label` take a spec object or an id; an id the catalog does not know (a hardware file, an
uploaded or config.json model) is shown as it is. The analyses write ids in their notes and advice (their JSON keeps
them): `name_ids` names them in the text a face prints, and `named` does the same to a derivation for the web API
(uploads have names only the server knows). No physics here."""
from __future__ import annotations

import re
from collections.abc import Callable

# an id stands alone: not inside a longer id, a file name or a path, and not after the option a user types it to
ID_EDGE_BEFORE = r"(?<![\w.\-/])(?<!--model )(?<!--hardware )(?<!--system )(?<!--draft )"
ID_EDGE_AFTER = r"(?![\w\-/]|\.\w)"


def chip_name(hw_id: str) -> str | None:
    """The catalog name of a chip id (a system id, a file or an unknown id: None)."""
    from tokenmath.specs.hardware import catalog
    rec = catalog().get(hw_id.lower()) if isinstance(hw_id, str) else None
    return None if rec is None else str(rec.get("name", hw_id.lower()))


def model_name(model_id: str) -> str | None:
    """The catalog name of a model id (a config.json path, an upload or an unknown id: None)."""
    from tokenmath.specs.model_catalog import catalog
    rec = catalog().get(model_id.lower()) if isinstance(model_id, str) else None
    return None if rec is None else str(rec.get("name", model_id.lower()))


def chip_label(hw) -> str:
    """How prose names a chip: a Hardware's name; a System's chip by the chip's catalog name (the system's own
    name is `system_label`'s); an id by its catalog name, or the id itself when the catalog does not know it."""
    if isinstance(hw, str):
        return chip_name(hw) or hw
    chip = getattr(hw, "chip", "")
    return (chip_name(chip) if chip else None) or hw.name


def model_label(m) -> str:
    """How prose names a model: a Model's name; an id by its catalog name, or the id itself (file, upload)."""
    if isinstance(m, str):
        return model_name(m) or m
    return m.name


def system_label(hw) -> str:
    """A chip in its system: "NVIDIA H100 SXM5 80GB in NVIDIA HGX H100 (...)", or the chip's name alone where the
    system is that chip in its usual domain (no system name of its own)."""
    chip = chip_label(hw)
    own = getattr(hw, "chip", "") and hw.name not in (chip, hw.chip)
    return f"{chip} in {hw.name}" if own else chip


def replace_ids(text: str, pairs) -> str:
    """`text` with each (id, name) pair's id, where it stands alone, replaced by the name."""
    for ident, name in pairs:
        if name and name != ident:
            text = re.sub(ID_EDGE_BEFORE + re.escape(ident) + ID_EDGE_AFTER, lambda _m, n=name: n, text)
    return text


def name_ids(text: str, *specs) -> str:
    """An analysis' note or advice, written with ids (its JSON keeps them), as prose: the ids of `specs` (Hardware,
    System or Model objects, or ids; None skipped) replaced by their labels where they stand alone."""
    pairs = []
    for s in specs:
        if isinstance(s, str):
            pairs.append((s, chip_name(s) or model_name(s)))
        elif s is not None:
            pairs.append((s.id, system_label(s) if getattr(s, "chip", "") else s.name))
    return replace_ids(text, pairs)


def named(d: dict, model_name_of: Callable[[str], str | None]) -> dict:
    """`d` with the ids of its chip (`hardware` or `system`) and model (`model`) in its `explain` text replaced by
    their names; `model_name_of` gives a model id's name (None: leave it)."""
    text = d.get("explain")
    if not isinstance(text, str) or not text:
        return d
    pairs = [(d[key], name_of(d[key])) for key, name_of in
             (("hardware", chip_name), ("system", chip_name), ("model", model_name_of))
             if isinstance(d.get(key), str) and d[key]]
    return {**d, "explain": replace_ids(text, pairs)}
