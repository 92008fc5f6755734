"""The transcript-watch configuration: schemas (match rule -> action -> fields) and watches.

A configuration file (see docs/transcripts.md)::

    {"version": 1,
     "schemas": {"codex": {"events": [
         {"name": "tool-use", "match": {"path": "payload.type", "in": ["function_call"]},
          "action": "tool_use",
          "fields": {"toolId": "payload.call_id", "toolName": {"coalesce": ["payload.name"]}}}]}},
     "watches": [{"name": "codex", "path": "~/.codex/sessions/**/*.jsonl", "schema": "codex",
                  "startAtEnd": true}],
     "stateFile": "~/.engram/transcript-watch-state.json"}

Everything is checked when the file loads; a ``ConfigError`` names the schema, the event and what
is wrong. Paths are dotted with ``[index]`` (``payload.content[0].text``); a path that does not
resolve is *missing*, which is not the same as a JSON ``null``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACTIONS = frozenset(
    {
        "session_init",
        "session_context",
        "user_message",
        "assistant_message",
        "tool_use",
        "tool_result",
        "observation",
        "file_edit",
        "session_end",
    }
)
OPERATORS = (
    "equals",
    "not_equals",
    "in",
    "not_in",
    "exists",
    "starts_with",
    "not_starts_with",
    "contains",
    "regex",
)
FIELD_ALIASES = {
    "toolUseId": "toolId",
    "toolResponse": "toolOutput",
    "tool_use_id": "toolId",
    "toolCallId": "toolId",
    "text": "message",
    "path": "filePath",
}
"""Field names the published configs use, mapped to one spelling each."""
REQUIRED_FIELDS = {"tool_use": ("toolId",), "tool_result": ("toolId",)}


class ConfigError(ValueError):
    """The configuration cannot be used; the message says where and why."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""What a path that does not resolve gives (a JSON ``null`` gives None)."""

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(-?\d+)\]|(\.)")


def parse_path(path: Any) -> tuple[str | int, ...]:
    """``"payload.content[0].text"`` -> ``("payload", "content", 0, "text")``."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"a path must be a non-empty string, got {path!r}")
    parts: list[str | int] = []
    pos, expect_name = 0, True
    while pos < len(path):
        found = _SEGMENT.match(path, pos)
        if found is None:
            raise ConfigError(f"bad path {path!r} at character {pos + 1}")
        name, index, dot = found.groups()
        if dot:
            if expect_name:
                raise ConfigError(f"bad path {path!r}: empty segment at character {pos + 1}")
            expect_name = True
        elif index is not None:
            if not parts:
                raise ConfigError(f"bad path {path!r}: an index needs a name before it")
            parts.append(int(index))
            expect_name = False
        else:
            if not expect_name:
                raise ConfigError(f"bad path {path!r}: missing '.' before {name!r}")
            parts.append(name)
            expect_name = False
        pos = found.end()
    if expect_name:
        raise ConfigError(f"bad path {path!r}: ends with '.'")
    return tuple(parts)


def resolve(value: Any, parts: tuple[str | int, ...]) -> Any:
    for part in parts:
        if isinstance(part, int):
            if not isinstance(value, list) or not -len(value) <= part < len(value):
                return MISSING
            value = value[part]
        else:
            if not isinstance(value, dict) or part not in value:
                return MISSING
            value = value[part]
    return value


def get(value: Any, path: str) -> Any:
    """The value at a dotted path, or MISSING."""
    return resolve(value, parse_path(path))


# --- match rules -------------------------------------------------------------------------------

Matcher = Callable[[Any], bool]


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers compare by value (``1 == 1.0``), but a boolean only equals a
    boolean (Python's ``True == 1`` is not JSON's), also inside arrays and objects."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


def _contains(value: Any, needle: Any) -> bool:
    if isinstance(value, str):
        return isinstance(needle, str) and needle in value
    if isinstance(value, list):
        return any(json_equal(item, needle) for item in value)
    if isinstance(value, dict):
        return isinstance(needle, str) and needle in value
    return False


def compile_match(rule: Any, where: str) -> Matcher:
    """A match rule as a predicate on a parsed line. ``where`` prefixes error messages."""
    if not isinstance(rule, dict):
        raise ConfigError(f"{where}: a match rule must be an object, got {rule!r}")
    for combinator in ("all", "any"):
        if combinator in rule:
            extra = set(rule) - {combinator}
            if extra:
                raise ConfigError(
                    f"{where}: '{combinator}' cannot be combined with {', '.join(sorted(extra))}"
                )
            rules = rule[combinator]
            if not isinstance(rules, list) or not rules:
                raise ConfigError(f"{where}: '{combinator}' needs a non-empty list of rules")
            subs = [compile_match(r, f"{where}.{combinator}[{i}]") for i, r in enumerate(rules)]
            if combinator == "all":
                return lambda line: all(m(line) for m in subs)
            return lambda line: any(m(line) for m in subs)
    if "path" not in rule:
        raise ConfigError(
            f"{where}: a match rule needs 'path' and one operator "
            f"({', '.join(OPERATORS)}), or 'all' / 'any'"
        )
    parts = _path(rule["path"], where)
    ops = [k for k in rule if k != "path"]
    unknown = [k for k in ops if k not in OPERATORS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown operator {unknown[0]!r} (known: {', '.join(OPERATORS)})"
        )
    if len(ops) != 1:
        raise ConfigError(
            f"{where}: a rule on path {rule['path']!r} needs exactly one operator, got {len(ops)}"
        )
    op, arg = ops[0], rule[ops[0]]
    test = _operator(op, arg, where)
    return lambda line: test(resolve(line, parts))


def _operator(op: str, arg: Any, where: str) -> Callable[[Any], bool]:
    if op in ("in", "not_in"):
        if not isinstance(arg, list):
            raise ConfigError(f"{where}: '{op}' needs a list, got {arg!r}")
        options = list(arg)

        def present(v: Any) -> bool:
            return v is not MISSING and any(json_equal(v, option) for option in options)

        return present if op == "in" else (lambda v: not present(v))
    if op == "exists":
        if not isinstance(arg, bool):
            raise ConfigError(f"{where}: 'exists' needs true or false, got {arg!r}")
        return lambda v: (v is not MISSING and v is not None) is arg
    if op in ("starts_with", "not_starts_with"):
        if not isinstance(arg, str):
            raise ConfigError(f"{where}: '{op}' needs a string, got {arg!r}")
        starts: Callable[[Any], bool] = lambda v: isinstance(v, str) and v.startswith(arg)  # noqa: E731
        return starts if op == "starts_with" else (lambda v: not starts(v))
    if op == "contains":
        return lambda v: _contains(v, arg)
    if op == "regex":
        if not isinstance(arg, str):
            raise ConfigError(f"{where}: 'regex' needs a string, got {arg!r}")
        try:
            pattern = re.compile(arg)
        except re.error as exc:
            raise ConfigError(f"{where}: bad regex {arg!r}: {exc}") from None
        return lambda v: isinstance(v, str) and pattern.search(v) is not None

    # equals / not_equals: JSON equality (1 == 1.0, but true is not 1, also nested)
    def equal(v: Any) -> bool:
        return v is not MISSING and json_equal(v, arg)

    return equal if op == "equals" else (lambda v: not equal(v))


def _path(path: Any, where: str) -> tuple[str | int, ...]:
    try:
        return parse_path(path)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


# --- field specs -------------------------------------------------------------------------------

Extractor = Callable[[Any], Any]


def compile_field(spec: Any, where: str) -> Extractor:
    """A field spec as a function of a line: a path string, ``{"coalesce": [specs...]}`` (the
    first that is present and not null / empty), ``{"value": constant}``, ``{"path": p}``; any of
    the object forms may add ``"default"`` (used when the value is missing or null)."""
    if isinstance(spec, str):
        parts = _path(spec, where)
        return lambda line: resolve(line, parts)
    if not isinstance(spec, dict):
        raise ConfigError(
            f"{where}: a field is a path string or an object with 'path', "
            f"'coalesce' or 'value', got {spec!r}"
        )
    kinds = [k for k in ("path", "coalesce", "value") if k in spec]
    unknown = set(spec) - {"path", "coalesce", "value", "default"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {sorted(unknown)[0]!r} in a field spec "
            f"(known: path, coalesce, value, default)"
        )
    if len(kinds) != 1:
        raise ConfigError(f"{where}: a field spec needs exactly one of 'path', 'coalesce', 'value'")
    default = spec.get("default", MISSING)
    inner: Extractor
    if kinds[0] == "value":
        constant = spec["value"]
        inner = lambda line: constant  # noqa: E731
    elif kinds[0] == "path":
        inner = compile_field(spec["path"], where)
    else:
        options = spec["coalesce"]
        if not isinstance(options, list) or not options:
            raise ConfigError(f"{where}: 'coalesce' needs a non-empty list")
        subs = [compile_field(o, f"{where}.coalesce[{i}]") for i, o in enumerate(options)]

        def inner(line: Any) -> Any:
            for sub in subs:
                value = sub(line)
                if value is not MISSING and value is not None and value != "":
                    return value
            return MISSING

    if default is MISSING:
        return inner
    return lambda line: v if (v := inner(line)) is not MISSING and v is not None else default


# --- schemas and watches -----------------------------------------------------------------------


@dataclass(frozen=True)
class EventRule:
    name: str
    action: str
    match: Matcher
    fields: dict[str, Extractor]

    def extract(self, line: Any) -> dict[str, Any]:
        """The fields that resolved (missing ones left out)."""
        values = {name: get_(line) for name, get_ in self.fields.items()}
        return {k: v for k, v in values.items() if v is not MISSING}


@dataclass(frozen=True)
class Schema:
    name: str
    events: tuple[EventRule, ...]

    def rule_for(self, line: Any) -> EventRule | None:
        """The first rule whose match accepts the line."""
        return next((rule for rule in self.events if rule.match(line)), None)


@dataclass(frozen=True)
class Watch:
    name: str
    path: str
    schema: Schema
    start_at_end: bool = False


@dataclass(frozen=True)
class Config:
    schemas: dict[str, Schema]
    watches: tuple[Watch, ...]
    state_file: str | None
    source: str = ""
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def compile_schema(name: str, data: Any) -> Schema:
    where = f"schema {name!r}"
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be an object")
    events = data.get("events")
    if not isinstance(events, list) or not events:
        raise ConfigError(f"{where}: needs a non-empty 'events' list")
    rules = []
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise ConfigError(f"{where}: events[{i}] must be an object")
        label = str(event["name"]) if isinstance(event.get("name"), str) else f"events[{i}]"
        at = f"{where} event {label!r}"
        action = event.get("action")
        if action not in ACTIONS:
            raise ConfigError(
                f"{at}: unknown action {action!r} (known: {', '.join(sorted(ACTIONS))})"
            )
        if "match" not in event:
            raise ConfigError(f"{at}: needs a 'match' rule")
        match = compile_match(event["match"], f"{at}: match")
        specs = event.get("fields", {})
        if not isinstance(specs, dict):
            raise ConfigError(f"{at}: 'fields' must be an object")
        fields = {
            FIELD_ALIASES.get(str(k), str(k)): compile_field(v, f"{at}: field {k!r}")
            for k, v in specs.items()
        }
        for needed in REQUIRED_FIELDS.get(action, ()):
            if needed not in fields:
                raise ConfigError(f"{at}: action {action} needs a {needed!r} field")
        rules.append(EventRule(label, action, match, fields))
    return Schema(name, tuple(rules))


def compile_config(data: Any, source: str = "") -> Config:
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a JSON object")
    if data.get("version", 1) != 1:
        raise ConfigError(f"unsupported version {data.get('version')!r} (this Engram reads 1)")
    raw_schemas = data.get("schemas")
    if not isinstance(raw_schemas, dict) or not raw_schemas:
        raise ConfigError("needs a 'schemas' object with at least one schema")
    schemas = {name: compile_schema(name, body) for name, body in raw_schemas.items()}
    raw_watches = data.get("watches")
    if not isinstance(raw_watches, list) or not raw_watches:
        raise ConfigError("needs a 'watches' list with at least one watch")
    watches = []
    names: set[str] = set()
    for i, watch in enumerate(raw_watches):
        if not isinstance(watch, dict):
            raise ConfigError(f"watches[{i}] must be an object")
        name = watch.get("name") or watch.get("schema") or f"watch{i}"
        where = f"watch {name!r}"
        if name in names:
            raise ConfigError(f"{where}: two watches have this name")
        names.add(name)
        if not isinstance(watch.get("path"), str) or not watch["path"].strip():
            raise ConfigError(f"{where}: needs a 'path' (a file, folder or glob)")
        schema = watch.get("schema")
        if schema not in schemas:
            raise ConfigError(
                f"{where}: unknown schema {schema!r} (defined: {', '.join(sorted(schemas))})"
            )
        start_at_end = watch.get("startAtEnd", False)
        if not isinstance(start_at_end, bool):
            raise ConfigError(f"{where}: 'startAtEnd' must be true or false")
        watches.append(Watch(str(name), watch["path"], schemas[schema], start_at_end))
    state_file = data.get("stateFile")
    if state_file is not None and (not isinstance(state_file, str) or not state_file.strip()):
        raise ConfigError("'stateFile' must be a path string")
    return Config(schemas, tuple(watches), state_file, source, data)


def load_config(path: Path) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"no transcript-watch configuration at {path} (write one, see "
            "docs/transcripts.md, or pass --config)"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from None
    try:
        return compile_config(data, str(path))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
