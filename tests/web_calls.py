"""Calling the web API in-process from tests: the answer as JSON, or the refusal's field (tests/conftest.py: `api`)."""
from __future__ import annotations

import json

import pytest

from tokenmath.base.errors import InputError


def call(api, name, **params):
    return json.loads(api.call(name, {k: str(v) for k, v in params.items()}))


def refused(api, name, field, **params):
    with pytest.raises(InputError) as e:
        api.call(name, {k: str(v) for k, v in params.items()})
    assert e.value.field == field, (e.value.field, str(e.value))
    return str(e.value)
