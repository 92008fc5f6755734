"""Native memory files (CLAUDE.md, AGENTS.md, ...): where they are, and what facts they hold.

The client half of memory-file sync: it discovers the files under a watched root, turns each into
facts with stable anchors and builds the body of ``POST /v1/sync/files``. The import ledger,
never-clobber, conflict copies and reconcile are the gateway's (``engram/memsync.py``).

Anchors (the ``#anchor`` of a ledger key) must survive edits elsewhere in the file, so they are
made from what a fact says, never from where it is:

- a section (an ATX heading and its own text up to the next heading: paragraphs and code
  blocks, never its list items, which are facts of their own): the slugs of its heading path
  joined by ``/`` (``build-and-test/linux``). A section with no text of its own (only a list) is
  no fact. A lone level-1 heading that opens the file is the document's title: its own text is a
  fact, but it is not part of the other sections' paths, so renaming the title moves nothing.
- a list item (nested items belong to it): ``<section anchor>/<slug of the first 8 words of its
  first line>``;
  at the top of a file without a heading just the slug.
- a paragraph of a plain-text ``.cursorrules``: the slug of the first 8 words of its first line.
- slugs keep the meaning of a trailing ``+``, ``++`` or ``#`` (``C++`` -> ``c-plus-plus``, ``C#``
  -> ``c-sharp``); when anchors still collide within one file, every fact of the collision gets
  ``-<6 hex of the sha256 of its first line>`` (of its content when first lines are equal too),
  never a number from its position, so reordering them keeps every anchor; identical facts are
  sent once (the first).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engram.privacy import scrub_text

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        "dist",
        "build",
        "target",
        ".next",
        ".nuxt",
        "vendor",
        ".gradle",
        ".terraform",
        "site-packages",
        ".direnv",
    }
)
"""Folders never searched for memory files: VCS data, dependencies, virtualenvs, build output.
A folder holding ``pyvenv.cfg`` (a virtualenv of any name) is skipped too."""

MAX_FILE_BYTES = 1_000_000
"""Larger files are not memory files anyone maintains by hand; they are reported and skipped."""

BULLET_WORDS = 8
"""A list item's anchor is the slug of its first this-many words."""

MAX_SLUG_CHARS = 80
FINGERPRINT_CHARS = 12


@dataclass(frozen=True)
class Source:
    """One memory file under a watched root."""

    tool: str  # claude-code | codex | gemini | cursor | copilot
    kind: str  # the importer: a key of IMPORTERS
    root: Path  # resolved
    relpath: str  # posix, relative to root

    @property
    def path(self) -> Path:
        return self.root / self.relpath

    @property
    def label(self) -> str:
        return f"{self.tool} {self.relpath}"


@dataclass
class Fact:
    anchor: str
    content: str
    links: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "anchor": self.anchor,
            "content": self.content,
            "hash": sha256_text(self.content),
            "links": self.links,
        }


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def root_fingerprint(root: Path) -> str:
    """12 hex of the sha256 of the root's resolved absolute path: the ``@<fp>`` of ledger keys,
    so two checkouts that both have an AGENTS.md never share a ledger row."""
    return hashlib.sha256(str(root.resolve()).encode("utf-8")).hexdigest()[:FINGERPRINT_CHARS]


# --- where the files are -------------------------------------------------------------------------


def classify(root: Path, relpath: str) -> tuple[str, str] | None:
    """(tool, importer kind) of the file at ``relpath`` under ``root``, or None when it is not a
    memory file. Folder patterns (``.claude``, ``.cursor/rules``, ``.github``) are matched on the
    absolute path, so watching ``~/.claude`` itself finds ``projects/*/memory/*.md``."""
    rel = PurePosixPath(relpath)
    if any(part in SKIP_DIRS for part in rel.parts[:-1]):
        return None
    name = rel.name
    parts = (*root.parts, *rel.parts[:-1])  # the folders holding the file
    if name in ("CLAUDE.md", "CLAUDE.local.md"):
        return "claude-code", "claude-md"
    if name == "AGENTS.md":
        return "codex", "markdown"
    if name == "GEMINI.md":
        return "gemini", "markdown"
    if name == ".cursorrules":
        return "cursor", "cursorrules"
    if (
        name.endswith(".md")
        and len(parts) >= 2
        and parts[-1] == "memory"
        and ".claude" in parts[:-1]
    ):
        return "claude-code", "claude-md"
    if name.endswith(".mdc") and _under(parts, ".cursor", "rules"):
        return "cursor", "cursor-mdc"
    if name == "copilot-instructions.md" and parts and parts[-1] == ".github":
        return "copilot", "markdown"
    if name.endswith(".instructions.md") and _under(parts, ".github", "instructions"):
        return "copilot", "markdown"
    return None


def _under(parts: tuple[str, ...], first: str, second: str) -> bool:
    """True when ``first/second`` appears in ``parts`` (the file may sit deeper below it)."""
    return any(parts[i] == first and parts[i + 1] == second for i in range(len(parts) - 1))


def skipped_dir(path: Path) -> bool:
    return path.name in SKIP_DIRS or (path / "pyvenv.cfg").exists()


def discover(root: Path) -> Iterator[Source]:
    """Every memory file under ``root`` (resolved), in a stable order."""
    root = root.resolve()
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        dirnames[:] = sorted(d for d in dirnames if not skipped_dir(here / d))
        for name in sorted(filenames):
            relpath = (here / name).relative_to(root).as_posix()
            found = classify(root, relpath)
            if found:
                yield Source(found[0], found[1], root, relpath)


def innermost_root(roots: list[Path], path: Path) -> Path | None:
    """The root ``path`` belongs to: the innermost of ``roots`` holding it (roots resolved)."""
    best: Path | None = None
    for root in roots:
        if (path == root or root in path.parents) and (
            best is None or len(root.parts) > len(best.parts)
        ):
            best = root
    return best


def discover_all(roots: list[Path]) -> Iterator[Source]:
    """Every memory file under ``roots``, each once, under its innermost root (nested roots:
    ``r3/sub/AGENTS.md`` is ``r3/sub``'s, never also ``r3``'s)."""
    resolved = [root.resolve() for root in roots]
    for root in resolved:
        for source in discover(root):
            if innermost_root(resolved, source.path) == source.root:
                yield source


def resolve_aliases(sources: list[Source]) -> dict[Source, Source]:
    """Sources that are the same file (``CLAUDE.md -> AGENTS.md``): each alias mapped to the one
    source imported in their place: the link target's own source when it is one of ``sources``,
    else the first in (root, relpath) order."""
    groups: dict[str, list[Source]] = {}
    for source in sources:
        groups.setdefault(os.path.realpath(source.path), []).append(source)
    aliases: dict[Source, Source] = {}
    for real, group in groups.items():
        if len(group) < 2:
            continue
        own = [s for s in group if str(s.path) == real]
        primary = (own or sorted(group, key=lambda s: (str(s.root), s.relpath)))[0]
        aliases.update({s: primary for s in group if s != primary})
    return aliases


def source_for(roots: list[Path], path: Path) -> Source | None:
    """The source ``path`` is under one of ``roots`` (the innermost root wins), or None."""
    best: Source | None = None
    for root in roots:
        try:
            relpath = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if relpath == "." or any(skipped_dir(root / p) for p in _prefixes(relpath)):
            continue
        found = classify(root, relpath)
        if found and (best is None or len(root.parts) > len(best.root.parts)):
            best = Source(found[0], found[1], root, relpath)
    return best


def _prefixes(relpath: str) -> Iterator[str]:
    parts = PurePosixPath(relpath).parts[:-1]
    for i in range(1, len(parts) + 1):
        yield "/".join(parts[:i])


# --- turning a file into facts -------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")  # `C#` keeps #
_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)$")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_CODE = re.compile(r"`+([^`]*)`+")
_IMPORT = re.compile(r"(?<![\w@`/])@((?:~/|\.{1,2}/|/)?[\w.\-/]+[\w/])")
_CHECKBOX = re.compile(r"^\[[ xX]\][ \t]+")


_SYMBOL = re.compile(r"(?<=\w)(\+\+|\+|#)(?![\w+#])")
_SYMBOL_WORDS = {"++": " plus plus ", "+": " plus ", "#": " sharp "}


def slug(text: str, max_words: int | None = None) -> str:
    """Lower-case words of ``text`` (markdown stripped) joined by ``-``; ``item`` if empty. A
    ``+``, ``++`` or ``#`` ending a word is a word (``C++`` -> ``c-plus-plus``, ``C#`` ->
    ``c-sharp``), so such headings do not collide."""
    text = _LINK.sub(r"\1", text)
    text = _CODE.sub(r"\1", text)
    text = _SYMBOL.sub(lambda m: _SYMBOL_WORDS[m.group(1)], text)
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    words = [w for w in re.split(r"[\W_]+", text) if w]
    if max_words is not None:
        words = words[:max_words]
    out = "-".join(words)[:MAX_SLUG_CHARS].strip("-")
    return out or "item"


def github_slug(heading: str) -> str:
    """The fragment GitHub gives a heading: what ``[x](#...)`` links inside a file point at."""
    text = _CODE.sub(r"\1", _LINK.sub(r"\1", heading)).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@dataclass
class _Section:
    level: int  # 0: text before the first heading
    title: str
    anchor: str
    lines: list[str] = field(default_factory=list)  # heading line first, when there is one


def split_front_matter(text: str) -> tuple[str, str]:
    """(front matter block with its ``---`` fences, rest). Only a block that opens the file."""
    if not text.startswith("---\n"):
        return "", text
    end = text.find("\n---", 3)
    while end != -1:
        after = text[end + 4 : end + 5]
        if after in ("", "\n"):
            return text[: end + 4].strip("\n"), text[end + 5 :]
        end = text.find("\n---", end + 4)
    return "", text


def _sections(body: str) -> list[_Section]:
    lines = body.split("\n")
    headings: list[tuple[int, int, str]] = []  # (line, level, title)
    fence = ""
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        found = _HEADING.match(line)
        if found:
            headings.append((i, len(found.group(1)), found.group(2).strip()))
    title_line = -1
    if (
        headings
        and headings[0][1] == 1
        and sum(1 for h in headings if h[1] == 1) == 1
        and not "".join(lines[: headings[0][0]]).strip()
    ):
        title_line = headings[0][0]  # a lone title: not part of the other anchors' paths
    sections = [_Section(0, "", "")]
    path: list[tuple[int, str]] = []
    starts = {h[0]: h for h in headings}
    for i, line in enumerate(lines):
        if i in starts:
            _, level, title = starts[i]
            if i == title_line:
                anchor = slug(title)
            else:
                path = [(lvl, s) for lvl, s in path if lvl < level] + [(level, slug(title))]
                anchor = "/".join(s for _, s in path)
            sections.append(_Section(level, title, anchor, [line]))
        else:
            sections[-1].lines.append(line)
    return sections


def _split(lines: list[str]) -> tuple[list[str], list[str]]:
    """(the section's own text: every line outside its top-level list items, the top-level list
    items, each with its nested items and continuation lines, dedented). Lines inside a
    top-level code fence never start an item."""
    own: list[str] = []
    items: list[str] = []
    current: list[str] = []
    indent = 0  # where the open item's text starts
    fence = ""

    def close() -> None:
        items.append(_finish(current))
        if own and own[-1].strip():
            own.append("")  # the list's place: the text around it stays separate paragraphs

    for line in lines:
        if current:
            item = _ITEM.match(line)
            lazy = current[-1].strip() and line.strip() and not _FENCE.match(line)
            if not line.strip() or _indent(line) >= indent:
                current.append(line[indent:])  # nested items, continuation, blank lines
                continue
            if item is None and lazy:
                current.append(line.strip())  # a lazy continuation line
                continue
            close()
            current = []
        opened = _FENCE.match(line)
        if fence:
            own.append(line)
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
            continue
        if opened:
            own.append(line)
            fence = opened.group(1)
            continue
        item = _ITEM.match(line)
        if item is not None:
            indent = len(item.group(1)) + len(item.group(2)) + max(1, len(item.group(3)))
            current = [_CHECKBOX.sub("", item.group(4))]
        else:
            own.append(line)
    if current:
        close()
    return own, items


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _finish(lines: list[str]) -> str:
    return "\n".join(lines).strip()


class _Facts:
    """Facts in file order, with identical content sent once. Colliding anchors: every fact of
    the collision gets a suffix from its own text (never from its position), see ``done``."""

    def __init__(self) -> None:
        self._facts: list[tuple[Fact, str]] = []  # (fact, the text its suffix is made from)
        self._contents: set[str] = set()

    def add(self, anchor: str, content: str, links: list[str], key: str | None = None) -> None:
        if not content.strip() or content in self._contents:
            return
        self._contents.add(content)
        self._facts.append((Fact(anchor, content, links), content if key is None else key))

    @property
    def facts(self) -> list[Fact]:
        groups: dict[str, list[tuple[Fact, str]]] = {}
        for fact, key in self._facts:
            groups.setdefault(fact.anchor, []).append((fact, key))
        taken = {anchor for anchor, group in groups.items() if len(group) == 1}
        renamed: dict[int, str] = {}
        for anchor, group in groups.items():
            if len(group) == 1:
                continue
            keys = [key for _, key in group]
            for fact, key in group:
                text = key if keys.count(key) == 1 else fact.content
                unique = f"{anchor}-{sha256_text(text)[:6]}"
                n = 1
                while unique in taken:  # a 24-bit clash, or an anchor that looks like one
                    n += 1
                    unique = f"{anchor}-{sha256_text(text)[:6]}-{n}"
                taken.add(unique)
                renamed[id(fact)] = unique
        return [
            Fact(renamed.get(id(fact), fact.anchor), fact.content, fact.links)
            for fact, _ in self._facts
        ]


def _links(
    content: str, fragments: dict[str, str], imports: Callable[[str], list[str]] | None, own: str
) -> list[str]:
    """Anchors of this file that ``content`` links to (``[x](#frag)``), then the relpaths it
    imports (``@path``, CLAUDE.md only); in order, each once, never the fact itself."""
    found: list[str] = []
    for _, target in _LINK.findall(content):
        if target.startswith("#"):
            anchor = fragments.get(target[1:].lower()) or fragments.get(slug(target[1:]))
            if anchor:
                found.append(anchor)
    if imports is not None:
        found.extend(imports(content))
    return [link for i, link in enumerate(found) if link != own and link not in found[:i]]


def import_markdown(text: str, imports: Callable[[str], list[str]] | None = None) -> list[Fact]:
    """Sections and list items as facts. Front matter (``.mdc``, ``.instructions.md``) is kept at
    the top of the first fact: its ``globs`` / ``applyTo`` say where the rules apply."""
    front, body = split_front_matter(text)
    sections = _sections(body)
    fragments: dict[str, str] = {}
    for section in sections[1:]:
        fragments.setdefault(github_slug(section.title), section.anchor)
        fragments.setdefault(slug(section.title), section.anchor)
        fragments.setdefault(section.anchor, section.anchor)
    facts = _Facts()
    pending_front = front
    for section in sections:
        body_lines = section.lines[1:] if section.level else section.lines
        own, items = _split(body_lines)
        has_own = bool("\n".join(own).strip())
        if has_own or (pending_front and (items or section.level)):
            anchor = section.anchor or "preamble"
            content = _finish(section.lines[:1] + own if section.level else own)
            if pending_front:
                content = f"{pending_front}\n{content}"
                pending_front = ""
            facts.add(
                anchor, content, _links(content, fragments, imports, anchor), key=_finish(own)
            )
        for item in items:
            first_line = item.split("\n", 1)[0]
            first = slug(first_line, BULLET_WORDS)  # nested items never move it
            anchor = "/".join(filter(None, [section.anchor, first]))
            facts.add(anchor, item, _links(item, fragments, imports, anchor), key=first_line)
    if pending_front:  # front matter and nothing else
        facts.add("front-matter", pending_front, [])
    return facts.facts


def import_plaintext(text: str) -> list[Fact]:
    """``.cursorrules``: plain text, one fact per paragraph (blank-line separated)."""
    facts = _Facts()
    for paragraph in re.split(r"\n[ \t]*\n", text):
        paragraph = paragraph.strip("\n").rstrip()
        if paragraph.strip():
            first_line = paragraph.strip().split("\n", 1)[0]
            facts.add(slug(first_line, BULLET_WORDS), paragraph, [], key=first_line)
    return facts.facts


def claude_imports(source: Source) -> Callable[[str], list[str]]:
    """CLAUDE.md ``@path`` imports, as relpaths under the root (or as written when outside it).
    A token counts when it names an existing file or has a file extension, so ``@types/node``
    and e-mail addresses are not imports."""
    folder = source.path.parent

    def resolve(content: str) -> list[str]:
        out = []
        for raw in _IMPORT.findall(_CODE.sub("", content)):
            target = Path(os.path.expanduser(raw))
            target = target if target.is_absolute() else folder / target
            try:
                exists = target.is_file()
            except (OSError, ValueError):  # a name too long, a folder it may not search
                exists = False
            if not (exists or PurePosixPath(raw).suffix):
                continue
            try:
                out.append(Path(os.path.normpath(target)).relative_to(source.root).as_posix())
            except ValueError:
                out.append(raw)
        return out

    return resolve


IMPORTERS: dict[str, Callable[[str, Source], list[Fact]]] = {
    "claude-md": lambda text, source: import_markdown(text, claude_imports(source)),
    "markdown": lambda text, source: import_markdown(text),
    "cursor-mdc": lambda text, source: import_markdown(text),
    "cursorrules": lambda text, source: import_plaintext(text),
}
"""One importer per source kind: (file text, source) -> facts, unscrubbed."""


def facts_of(source: Source, data: bytes) -> list[Fact]:
    """The file's facts, secrets scrubbed before the anchor is made (an anchor ends up in the
    ledger key, so it must not carry a secret either)."""
    text = scrub_text(data.decode("utf-8-sig", "replace").replace("\r\n", "\n").replace("\r", "\n"))
    return IMPORTERS[source.kind](text, source)


class FileTooLarge(ValueError):
    pass


class NotRegularFile(ValueError):
    """A FIFO, socket or device named like a memory file: never read (a FIFO would block)."""


def read_source(path: Path) -> bytes:
    """The file's bytes, at most ``MAX_FILE_BYTES``. Raises ``FileNotFoundError`` (gone, or a
    dangling link), ``NotRegularFile``, ``FileTooLarge`` or another ``OSError``. Opened
    non-blocking and checked on the open descriptor, so a FIFO swapped in after the check cannot
    hang the caller."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotRegularFile(f"{path} is not a regular file")
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
        | getattr(os, "O_BINARY", 0)
    )
    with os.fdopen(os.open(path, flags), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{path} is not a regular file")
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise FileTooLarge(
            f"{path} is {max(info.st_size, len(data))} bytes (over {MAX_FILE_BYTES})"
        )
    return data


def sync_body(
    source: Source, *, user: str, project: str, scope: str, force: bool, data: bytes | None
) -> dict[str, Any]:
    """The ``POST /v1/sync/files`` body for ``source``. ``data`` None: the file is gone, and an
    empty fact list retires its memories."""
    if data is not None and len(data) > MAX_FILE_BYTES:
        raise FileTooLarge(f"{source.path} is {len(data)} bytes (over {MAX_FILE_BYTES})")
    facts = facts_of(source, data) if data else []
    return {
        "user": user,
        "project": project,
        "scope": scope,
        "tool": source.tool,
        "root": root_fingerprint(source.root),
        "relpath": source.relpath,
        "path": str(source.path),
        "contentHash": hashlib.sha256(data or b"").hexdigest(),
        "facts": [fact.as_dict() for fact in facts],
        "force": force,
    }
