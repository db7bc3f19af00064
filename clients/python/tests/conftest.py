import base64
import json
import pathlib
from typing import Any

import pytest

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "test-vectors.json").read_text(encoding="utf-8"))


def vector(scheme: str, name: str) -> dict[str, Any]:
    return next(v for v in VECTORS["vectors"] if v["scheme"] == scheme and v["name"] == name)


def body_of(v: dict[str, Any]) -> bytes:
    return base64.b64decode(v["body_base64"])


@pytest.fixture
def good() -> dict[str, Any]:
    return vector("standard-webhooks", "good signature")
