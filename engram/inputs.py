"""What any input must be before a route looks at it: JSON that parses, nested at most
MAX_DEPTH levels, text that is Unicode a database can store (no lone surrogates, no NUL),
integers a database column holds and finite numbers. One rule for every door: the gateway
applies it to bodies, query strings and paths, and answers 400 naming the field.

Standard library only; a walk with its own stack (no recursion), linear in the input.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["MAX_DEPTH", "BadInput", "check", "check_text", "parse_json"]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays a body may have (an event nests 5-10 levels)."""
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
"""Integers outside a signed 64-bit column would overflow the store's driver."""


class BadInput(ValueError):
    """Input no route can use: ``field`` is a dotted path (``toolInput.cmd``, ``kinds[0]``, or
    ``""`` for the whole body), ``problem`` says what is wrong in words."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


def _constant(name: str) -> float:
    raise BadInput("", f"{name} is not a JSON number")


def parse_json(raw: bytes | str) -> Any:
    """Parse a JSON document and check it (see `check`); raises BadInput."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        raise BadInput("", f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise BadInput("", f"nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise BadInput("", f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    check(value)
    return value


def check_text(text: str, field: str) -> None:
    """Raise BadInput unless `text` is storable Unicode text (no lone surrogate, no NUL)."""
    if "\x00" in text:
        raise BadInput(field, f"holds a NUL character (at {text.index(chr(0))})")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BadInput(
                field, f"holds a lone surrogate (at {exc.start}); text must be valid Unicode"
            ) from None


def check(value: Any, field: str = "") -> None:
    """Raise BadInput at the first part of a parsed JSON value that no route can use."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, where)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not MIN_INT <= item <= MAX_INT:
                raise BadInput(where, "an integer out of the 64-bit range")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadInput(where, "not a finite number")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                raise BadInput(where, f"nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    path = f"{where}.{key}" if where else str(key)
                    check_text(key, (f"{where}." if where else "") + "(a key)")
                    stack.append((child, path, depth + 1))
            else:
                stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))
