"""Reading a model's answer: one JSON object (bare, fenced, or inside prose), exactly the keys
a task asked for, lists of strings trimmed and bounded. Every task validates with these before
anything is stored; a ``ValueError`` says what is wrong (the chain asks once more)."""

from __future__ import annotations

import json
import re
from typing import Any

from engram.llm.chain import clip

MAX_LIST_ITEMS = 8
MAX_ITEM_CHARS = 300

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def json_object(text: str) -> dict[str, Any]:
    body = _FENCE.sub("", text.strip())
    try:
        value = json.loads(body)
    except ValueError:
        start, end = body.find("{"), body.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("the answer holds no JSON object") from None
        try:
            value = json.loads(body[start : end + 1])
        except ValueError as exc:
            raise ValueError(f"the answer's JSON does not parse: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError("the answer is not a JSON object")
    return value


def exact_keys(value: dict[str, Any], expected: set[str]) -> None:
    if set(value) != expected:
        missing, extra = expected - set(value), set(value) - expected
        raise ValueError(
            "the object's keys are wrong"
            + (f"; missing {sorted(missing)}" if missing else "")
            + (f"; unexpected {sorted(extra)}" if extra else "")
        )


def strings(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return [clip(item.strip(), MAX_ITEM_CHARS) for item in value if item.strip()][:MAX_LIST_ITEMS]
