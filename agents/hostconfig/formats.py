"""Read and write host config files without disturbing what the user wrote.

Each format turns file text into plain data (or a tomlkit document), lets the caller change that
data, and turns it back into text that differs from the original only where the data changed:

- JSON and JSONC (comments, trailing commas: Zed, OpenCode) are edited in place, member by member,
  so the user's formatting, key order and comments stay; the result is parsed back and compared
  with the intended data, and only if that check fails is the whole file re-serialised (and the
  caller is told that comments were lost).
- TOML goes through tomlkit, which keeps comments and layout.
- YAML (Continue) appends or removes one list item as text, verified the same way as JSONC; the
  fallback is a full PyYAML dump.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

FORMATS = ("json", "jsonc", "toml", "yaml")


class ConfigSyntaxError(ValueError):
    """A config file that cannot be parsed (or has the wrong shape). Never a traceback."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = (
            f" (line {line}, column {column})"
            if line and column
            else f" (line {line})"
            if line
            else ""
        )
        super().__init__(f"{message}{where}")
        self.line, self.column = line, column


@dataclass
class Rendered:
    text: str
    comments_lost: bool = False


# --- JSON with comments: a parser that remembers where every object member sits ---------------


@dataclass
class Node:
    value: Any
    start: int
    end: int
    members: dict[str, tuple[int, Node]] = field(default_factory=dict)  # key -> (key start, node)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


class _Parser:
    _number = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")

    def __init__(self, text: str, comments: bool) -> None:
        self.text, self.comments, self.pos = text, comments, 0

    def fail(self, message: str, pos: int | None = None) -> ConfigSyntaxError:
        line, col = _line_col(self.text, self.pos if pos is None else pos)
        return ConfigSyntaxError(message, line, col)

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch in " \t\r\n\ufeff":
                self.pos += 1
            elif self.comments and text.startswith("//", self.pos):
                nl = text.find("\n", self.pos)
                self.pos = n if nl < 0 else nl + 1
            elif self.comments and text.startswith("/*", self.pos):
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = close + 2
            else:
                return

    def document(self) -> Node:
        self.skip()
        node = self.value()
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("unexpected text after the JSON value")
        return node

    def value(self) -> Node:
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        ch, start = self.text[self.pos], self.pos
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.arr()
        if ch == '"':
            return Node(self.string(), start, self.pos)
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node(val, start, self.pos)
        match = self._number.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            literal = match.group()
            return Node(json.loads(literal), start, self.pos)
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        try:
            text, self.pos = scanstring(self.text, self.pos + 1, True)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None
        return text

    def obj(self) -> Node:
        start = self.pos
        self.pos += 1
        node = Node({}, start, start)
        self.skip()
        while self.pos < len(self.text) and self.text[self.pos] != "}":
            if self.text[self.pos] != '"':
                raise self.fail("expected a quoted member name or '}'")
            key_start = self.pos
            key = self.string()
            self.skip()
            if self.pos >= len(self.text) or self.text[self.pos] != ":":
                raise self.fail("expected ':' after the member name")
            self.pos += 1
            self.skip()
            child = self.value()
            node.value[key] = child.value
            node.members[key] = (key_start, child)
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                self.skip()
                if not self.comments and self.pos < len(self.text) and self.text[self.pos] == "}":
                    raise self.fail("trailing comma before '}'")
            elif self.pos < len(self.text) and self.text[self.pos] != "}":
                raise self.fail("expected ',' or '}'")
        if self.pos >= len(self.text):
            raise self.fail("unterminated object", start)
        self.pos += 1
        node.end = self.pos
        return node

    def arr(self) -> Node:
        start = self.pos
        self.pos += 1
        items: list[Any] = []
        self.skip()
        while self.pos < len(self.text) and self.text[self.pos] != "]":
            items.append(self.value().value)
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
                self.skip()
                if not self.comments and self.pos < len(self.text) and self.text[self.pos] == "]":
                    raise self.fail("trailing comma before ']'")
            elif self.pos < len(self.text) and self.text[self.pos] != "]":
                raise self.fail("expected ',' or ']'")
        if self.pos >= len(self.text):
            raise self.fail("unterminated array", start)
        self.pos += 1
        return Node(items, start, self.pos)


def parse_json(text: str, comments: bool = False) -> Node:
    if not text.strip():
        return Node({}, 0, 0)
    return _Parser(text, comments).document()


def has_comments(text: str) -> bool:
    """True when ``text`` holds a // or /* comment outside strings."""
    in_string = escape = False
    for i, ch in enumerate(text):
        if in_string:
            escape = not escape and ch == "\\"
            if ch == '"' and not escape:
                in_string = False
            continue
        if ch == '"':
            in_string, escape = True, False
        elif ch == "/" and text[i + 1 : i + 2] in ("/", "*"):
            return True
    return False


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[line_start:])
    return match.group() if match else ""


def _dump(value: Any, unit: str, base: str) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + base)


def _after_gap(text: str, pos: int) -> int:
    """First position at or after ``pos`` that is not whitespace or a comment."""
    parser = _Parser(text, True)
    parser.pos = pos
    parser.skip()
    return parser.pos


def _find(root: Node, path: tuple[str, ...]) -> Node | None:
    node = root
    for key in path:
        if key not in node.members:
            return None
        node = node.members[key][1]
    return node


def _set_member(text: str, root: Node, path: tuple[str, ...], value: Any, unit: str) -> str:
    node = _find(root, path)
    assert node is not None
    base = _line_indent(text, node.start)
    return text[: node.start] + _dump(value, unit, base) + text[node.end :]


def _add_member(text: str, root: Node, path: tuple[str, ...], value: Any, unit: str) -> str:
    parent = _find(root, path[:-1])
    assert parent is not None and isinstance(parent.value, dict)
    parent_indent = _line_indent(text, parent.start)
    if parent.members:
        key_start, last = list(parent.members.values())[-1]
        indent = _line_indent(text, key_start)
        member = f'"{_escape(path[-1])}": ' + _dump(value, unit, indent)
        after = _after_gap(text, last.end)
        if text[after] == ",":  # the file uses trailing commas: keep doing so
            return text[: after + 1] + f"\n{indent}{member}," + text[after + 1 :]
        return text[: last.end] + f",\n{indent}{member}" + text[last.end :]
    indent = parent_indent + unit
    member = f'"{_escape(path[-1])}": ' + _dump(value, unit, indent)
    inner_end = parent.end - 1  # the closing brace
    return text[: parent.start + 1] + f"\n{indent}{member}\n{parent_indent}" + text[inner_end:]


def _escape(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)[1:-1]


def _del_member(text: str, root: Node, path: tuple[str, ...]) -> str:
    parent = _find(root, path[:-1])
    assert parent is not None
    keys = list(parent.members)
    index = keys.index(path[-1])
    key_start, node = parent.members[path[-1]]
    start, end = key_start, node.end
    after = _after_gap(text, end)
    if after < len(text) and text[after] == ",":
        end = after + 1
    elif index > 0:  # last member: drop the comma that follows the previous one
        prev_end = parent.members[keys[index - 1]][1].end
        comma = _after_gap(text, prev_end)
        if text[comma] == ",":
            start = comma
    # take the whole line(s) when the member sat on lines of its own
    line_start = text.rfind("\n", 0, start) + 1
    if start == key_start and not text[line_start:start].strip():
        start = max(line_start - 1, 0)
    return text[:start] + text[end:]


def _changes(
    old: Any, new: Any, path: tuple[str, ...] = ()
) -> list[tuple[str, tuple[str, ...], Any]]:
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [("set", path, new)]
    out: list[tuple[str, tuple[str, ...], Any]] = []
    for key in old:
        if key not in new:
            out.append(("del", path + (key,), None))
    for key, value in new.items():
        if key not in old:
            out.append(("add", path + (key,), value))
        elif old[key] != value:
            out.extend(_changes(old[key], value, path + (key,)))
    return out


def render_json(text: str, new: Any, comments: bool) -> Rendered:
    """``text`` edited so it parses to ``new``, touching only the members that changed."""
    unit = _indent_unit(text)
    if not text.strip():
        return Rendered(json.dumps(new, indent=unit, ensure_ascii=False) + "\n")
    root = parse_json(text, comments)
    edited = text
    try:
        for op, path, value in _changes(root.value, new):
            if not path:
                raise ValueError("root replaced")
            if op == "set":
                edited = _set_member(edited, root, path, value, unit)
            elif op == "add":
                edited = _add_member(edited, root, path, value, unit)
            else:
                edited = _del_member(edited, root, path)
            root = parse_json(edited, comments)
        if root.value == new:
            return Rendered(edited)
    except (ValueError, AssertionError, IndexError):
        pass
    dumped = json.dumps(new, indent=unit, ensure_ascii=False)
    return Rendered(
        dumped + ("\n" if text.endswith("\n") else ""),
        comments_lost=comments and has_comments(text),
    )


# --- YAML (Continue's config.yaml): one top-level list, edited as text --------------------------


def load_yaml(text: str) -> Any:
    import yaml

    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigSyntaxError(
            f"not valid YAML: {problem}",
            mark.line + 1 if mark else None,
            mark.column + 1 if mark else None,
        ) from None
    return {} if data is None else data


def _yaml_block(lines: list[str], key: str) -> tuple[int, int] | None:
    """(line of ``key:``, end line exclusive) of a top-level block, or None."""
    head = re.compile(rf"^{re.escape(key)}:\s*(#.*)?$")
    for i, line in enumerate(lines):
        if head.match(line.rstrip("\n")):
            end = i + 1
            while end < len(lines):
                stripped = lines[end].rstrip("\n")
                if stripped and not stripped[0].isspace() and not stripped.startswith(("#", "-")):
                    break
                end += 1
            return i, end
    return None


def render_yaml_list(text: str, key: str, keep: list[Any], add: list[Any], new: Any) -> Rendered:
    """``text`` with the items of top-level list ``key`` reduced to ``keep`` (in order, a
    subsequence of the current items) and ``add`` appended; verified to load as ``new``."""
    import yaml

    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    try:
        block = _yaml_block(lines, key)
        indent = "  "
        if block is None:
            if keep:
                raise ValueError("list not found")
            body: list[str] = []
            if add:
                body = [f"{key}:\n"] + _yaml_items(add, indent)
            out = lines + body
        else:
            head, end = block
            blank_end = end
            while blank_end > head + 1 and not lines[blank_end - 1].strip():
                blank_end -= 1
            trailing = lines[blank_end:end]
            end = blank_end
            starts = [i for i in range(head + 1, end) if re.match(r"^\s*- ", lines[i])]
            if starts:
                indent = re.match(r"^(\s*)-", lines[starts[0]]).group(1)  # type: ignore[union-attr]
                starts = [i for i in starts if lines[i].startswith(indent + "- ")]
            spans = [
                (s, starts[n + 1] if n + 1 < len(starts) else end) for n, s in enumerate(starts)
            ]
            items = [
                (yaml.safe_load(_dedent("".join(lines[a:b]), indent)) or [None])[0]
                for a, b in spans
            ]
            if items != list(yaml.safe_load("".join(lines[head:end]))[key] or []):
                raise ValueError("list is not in block style")
            prefix = lines[head + 1 : spans[0][0]] if spans else lines[head + 1 : end]
            kept_lines: list[str] = []
            want = list(keep)
            for (a, b), item in zip(spans, items, strict=True):
                if want and item == want[0]:
                    want.pop(0)
                    kept_lines.extend(lines[a:b])
            if want:
                raise ValueError("keep is not a subsequence")
            if not keep and not add:
                out = lines[:head] + lines[end + len(trailing) :]
            else:
                out = (
                    lines[: head + 1]
                    + prefix
                    + kept_lines
                    + _yaml_items(add, indent or "  ")
                    + trailing
                    + lines[end + len(trailing) :]
                )
        result = "".join(out)
        if load_yaml(result) == new:
            return Rendered(result)
    except (ValueError, AttributeError, KeyError, TypeError, ConfigSyntaxError):
        pass
    return Rendered(
        yaml.safe_dump(new, sort_keys=False, default_flow_style=False), comments_lost="#" in text
    )


def _yaml_items(items: list[Any], indent: str) -> list[str]:
    import yaml

    if not items:
        return []
    dumped = yaml.safe_dump(items, sort_keys=False, default_flow_style=False)
    return [indent + line if line.strip() else line for line in dumped.splitlines(keepends=True)]


def _dedent(block: str, indent: str) -> str:
    return "".join(
        line[len(indent) :] if line.startswith(indent) else line
        for line in block.splitlines(keepends=True)
    )


# --- TOML ---------------------------------------------------------------------------------------


def load_toml(text: str) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        message = str(exc).split(" at line ")[0]
        raise ConfigSyntaxError(f"not valid TOML: {message}", exc.line, exc.col) from None


def dump_toml(doc: Any) -> str:
    import tomlkit

    return tomlkit.dumps(doc)


# --- one entry point per format -----------------------------------------------------------------


def load(fmt: str, text: str) -> Any:
    """Parsed data: plain dicts/lists for JSON and YAML, a tomlkit document for TOML."""
    if fmt in ("json", "jsonc"):
        try:
            return parse_json(text, comments=fmt == "jsonc").value
        except ConfigSyntaxError as exc:
            kind = "JSON with comments" if fmt == "jsonc" else "JSON"
            message = str(exc).split(" (line ")[0]
            raise ConfigSyntaxError(f"not valid {kind}: {message}", exc.line, exc.column) from None
    if fmt == "toml":
        return load_toml(text)
    if fmt == "yaml":
        return load_yaml(text)
    raise ValueError(f"unknown format {fmt!r}")


def editable(fmt: str, data: Any) -> Any:
    """A copy the caller may change without touching ``data``."""
    if fmt == "toml":
        return load_toml(dump_toml(data))
    return copy.deepcopy(data)
