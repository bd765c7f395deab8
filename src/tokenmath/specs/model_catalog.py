"""Finding a model by name: the shipped catalog (data/models.toml) or a Hugging Face config.json path."""
from __future__ import annotations

from tokenmath.base.errors import InputError, unknown_name
from tokenmath.specs.catalog import looks_like_path, read_user_file, shipped
from tokenmath.specs.model import Model, from_record, validate


def catalog() -> dict:
    return shipped("models.toml")


def model_ids() -> list[str]:
    return sorted(catalog())


def get_model(spec: "str | Model") -> Model:
    """A catalog id (e.g. 'llama-3.1-70b') or the path of a Hugging Face config.json."""
    if isinstance(spec, Model):
        return validate(spec)
    if not isinstance(spec, str) or not spec:
        raise InputError("model", f"{spec!r} is not a name", "a catalog id such as llama-3.1-8b, or a config.json path")
    cat = catalog()
    key = spec.lower()
    if key in cat:
        return from_record(key, cat[key], field_prefix=f"model[{key}]")
    if looks_like_path(spec):
        # a config.json is rare beside a catalog id: its reader (3 modules of Hugging Face families) loads on use
        from tokenmath.specs.hf_config import model_from_hf_config
        return model_from_hf_config(read_user_file(spec, "model"), name=spec)
    raise unknown_name("model", spec, cat)
