"""The graph's entities, found by heuristics in a keyword document (no LLM): file paths,
symbols, packages, commands, error types and concepts."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    select,
)

from engram.compress import _segments
from engram.keyword import KeywordDoc
from engram.schema import (
    memories,
    observations,
)
from engram.store import loads

TYPES = ("file", "symbol", "package", "command", "error", "concept")
"""Entity types found in documents; a ``session`` node stands for each session with entities."""
SESSION = "session"
NODE_TYPES = (*TYPES, SESSION)
"""Every type a graph query may name: the entity types and a session's own node."""
RELATIONS = ("co_occurs", "same_session", "edits", "edited_in")
MAX_ENTITIES_PER_DOC = 32
"""Entities kept per document, most specific first (edited files, read files, errors, ...)."""
MAX_NAME_CHARS = 300
SCAN_CHARS = 20_000
"""Extraction reads at most this much of a body (indexed bodies are a few thousand characters)."""

ROLE_WEIGHTS = {"edits": 1.5, "reads": 1.2, "runs": 1.0, "mentions": 1.0}
"""How strongly a document is about an entity it names, by role (strongest first)."""

# --- extraction ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Entity:
    type: str
    key: str  # normalised: identity within (project, type), and what lookups compare
    name: str  # as written (normalised separators, original case)
    alias: str  # what a query word matches: the basename for files, the key otherwise
    role: str = "mentions"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_EXTENSIONS = _words(
    "py pyi ipynb ts tsx js jsx mjs cjs go rs java kt kts rb php c h cc cpp hpp cs swift sh bash "
    "zsh ps1 sql md mdx rst txt yml yaml toml json jsonl ini cfg conf env lock xml html css scss "
    "vue svelte tf ex exs erl proto gradle lua r dart scala clj csv log pem dockerfile"
)
_BARE_FILES = (
    r"Makefile|Dockerfile|Containerfile|Gemfile|Procfile|Justfile|Rakefile|Vagrantfile"
    r"|Jenkinsfile|LICENSE|CODEOWNERS|\.gitignore|\.dockerignore|\.editorconfig"
    r"|\.env(?:\.\w+)?|\.npmrc|\.bashrc|\.zshrc"
)
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_FILE = re.compile(
    r"(?<![\w@/.:~-])((?:~|\.{1,2})?/?(?:[\w@.+-]+/+)*(?:[\w@+-][\w@.+-]*\.(?:"
    + "|".join(sorted(_EXTENSIONS, key=len, reverse=True))
    + r")|"
    + _BARE_FILES
    + r"))(?![\w/-])",
    re.I,
)
_ROOTED_PATH = re.compile(r"(?<![\w@/.:~-])((?:~|\.{1,2})?/[\w@.+-]+(?:/[\w@.+-]+)+)/?(?![\w/-])")
_ERROR_TYPE = re.compile(
    r"\b(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Warning)|KeyboardInterrupt|SystemExit"
    r"|StopIteration|GeneratorExit|TimeoutExpired|CalledProcessError)\b"
)
_ERROR_CODE = re.compile(
    r"\berror\s*\[(E\d{4})\]|\berror\s+(TS\d{4,5})\b|\b(E(?:NOENT|ACCES|PERM"
    r"|EXIST|CONNREFUSED|CONNRESET|ADDRINUSE|PIPE|NOTDIR|ISDIR|NOSPC|MFILE"
    r"|TIMEDOUT|HOSTUNREACH|NOTEMPTY|ROFS))\b"
)
_HTTP_STATUS = re.compile(
    r"\bHTTP(?:/\d(?:\.\d)?)?\s+([45]\d\d)\b|\bstatus(?:[ _]code)?\s*[:=]?\s*([45]\d\d)\b"
    r"|\b([45]\d\d)\s+(?:Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed"
    r"|Conflict|Unprocessable|Too Many Requests|Internal Server Error|Bad Gateway"
    r"|Service Unavailable|Gateway Timeout)\b",
    re.I,
)
_ERROR_PHRASES = (
    "segmentation fault",
    "permission denied",
    "command not found",
    "no such file or directory",
    "connection refused",
    "out of memory",
    "merge conflict",
    "deadlock detected",
)
_ERROR_PHRASE = re.compile(r"\b(" + "|".join(_ERROR_PHRASES) + r")\b", re.I)
_PY_IMPORT = re.compile(
    r"^\s*(?:import\s+([\w.]+(?:\s*,\s*[\w.]+)*)|from\s+(\w[\w.]*)\s+import\b)", re.M
)
_JS_IMPORT = re.compile(
    r"""\b(?:import\s+(?:[\w*{}\s,]+\s+from\s+)?|require\(\s*|import\(\s*)"""
    r"""['"]([^'"\s]+)['"]"""
)
_ARGS = r"([^\n;&|]+)"
_INSTALL = re.compile(
    rf"\b(?:pip3?|uv\s+pip|pipx)\s+install\s+{_ARGS}|\b(?:uv|poetry|pdm|cargo"
    rf"|yarn|pnpm|bun)\s+add\s+{_ARGS}|\bnpm\s+(?:install|i|add)\s+{_ARGS}"
    rf"|\bcargo\s+install\s+{_ARGS}|\bgo\s+(?:get|install)\s+{_ARGS}"
    rf"|\bgem\s+install\s+{_ARGS}"
)
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[^\s'\"`]+")
_REQUIREMENT = re.compile(
    r"^\s*([A-Za-z][\w.-]*)(?:\[[\w,\s-]+\])?\s*(?:==|>=|~=|<=)\s*\d[\w.*]*", re.M
)
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?![\w])")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\(\)")
_CODE_SPAN = re.compile(r"`([^`\n]{2,300})`")
_SHELL_LINE = re.compile(r"^\s*\$\s+(.+)$", re.M)
_HEXISH = re.compile(r"[0-9a-f]{8,}|\d{4,}|(?=[A-Za-z0-9]{10})(?:[A-Za-z]*\d){3}", re.I)
"""Ids, hashes and tokens (``obs_e54b…``, ``toolu_01Jm5sK…``): never entity names."""
_COMMAND_ALIASES = {
    "npm i": "npm install",
    "npm add": "npm install",
    "pip3 install": "pip install",
    "docker-compose up": "docker compose",
}

_SUBCOMMAND_PROGRAMS = _words(
    "git gh npm yarn pnpm bun cargo go docker docker-compose podman kubectl helm pip pip3 uv "
    "poetry pdm terraform dotnet mvn gradle brew apt apt-get systemctl engram alembic flask "
    "django-admin rails bundle mix deno just make"
)
_KNOWN_PROGRAMS = _SUBCOMMAND_PROGRAMS | _words(
    "pytest tox nox ruff mypy flake8 pylint black isort node tsc jest vitest eslint prettier "
    "python python3 psql sqlite3 mysql redis-cli curl wget ssh scp rsync grep rg sed awk jq "
    "cmake gcc clang rustc celery uvicorn gunicorn"
)
_TRIVIAL_PROGRAMS = _words(
    "cd echo export set unset true false source exit sleep printf test [ pwd clear read "
    "then else fi do done for while if"
)
_JUNK_SYMBOLS = _words(
    "print len str int dict list set range type super open isinstance getattr setattr hasattr "
    "__init__ __main__ __name__ e.g i.e etc"
)
_TLDS = _words("com org net io dev ai app co uk de fr edu gov")
_SELF = ("self.", "this.", "cls.")


def extract(
    body: str,
    *,
    project: str = "",
    files_read: Iterable[str] = (),
    files_modified: Iterable[str] = (),
    commands: Iterable[str] = (),
    errors: Iterable[str] = (),
    concepts: Iterable[str] = (),
) -> list[Entity]:
    """Entities of one document, most specific first, at most ``MAX_ENTITIES_PER_DOC``, one
    per (type, key) with its strongest role. The keyword arguments are an observation's columns
    (a memory's concepts); ``project`` lets absolute paths inside the project become relative."""
    found: list[Entity] = []
    found += (e for p in files_modified for e in _file(p, project, "edits"))
    found += (e for p in files_read for e in _file(p, project, "reads"))
    found += (e for line in errors for e in _errors(line))
    text = _URL.sub(" ", body[:SCAN_CHARS])
    text = _WINDOWS_PATH.sub(lambda m: m.group(0)[2:].replace("\\", "/"), text)  # C:\x -> /x
    files, rest = _files_in(text, project)
    found += files
    found += _errors(rest)
    found += _packages(text)
    found += (e for c in commands for e in _commands(c, "runs"))
    found += _commands_in(text)
    found += _symbols(rest)
    found += (e for c in concepts if (e := _concept(c)) is not None)
    best: dict[tuple[str, str], Entity] = {}
    for entity in found:
        seen = best.get((entity.type, entity.key))
        if seen is None:
            best[(entity.type, entity.key)] = entity
        elif _stronger(entity.role, seen.role):
            best[(entity.type, entity.key)] = dataclasses.replace(seen, role=entity.role)
    return list(best.values())[:MAX_ENTITIES_PER_DOC]


def _stronger(role: str, than: str) -> bool:
    order = list(ROLE_WEIGHTS)
    return order.index(role) < order.index(than)


def _entity(
    type_: str, name: str, role: str = "mentions", key: str | None = None, alias: str | None = None
) -> Entity | None:
    name = name.strip()[:MAX_NAME_CHARS]
    key = (key if key is not None else name.lower())[:MAX_NAME_CHARS]
    if not key:
        return None
    return Entity(type_, key, name, (alias or key)[:MAX_NAME_CHARS], role)


def normalise_path(path: str, project: str = "") -> str:
    """A path as an entity name: forward slashes, no ``./`` or line numbers, and relative to the
    project folder when it lies inside it (project: a path or a folder name)."""
    p = path.strip().strip("'\"`()[]{}<>,;").replace("\\", "/")
    p = p.removeprefix("file://")
    p = re.sub(r"^[A-Za-z]:/", "/", p)  # C:/Users/... -> /Users/...
    p = p.split("::", 1)[0]  # pytest node id
    p = re.sub(r":\d+(?::\d+)?$", "", p)  # path:line:col
    folder = project.replace("\\", "/").rstrip("/").rpartition("/")[2]
    if folder and p.startswith(("/", "~/")) and f"/{folder}/" in p:
        p = p.split(f"/{folder}/", 1)[1]
    p = re.sub(r"/{2,}", "/", p)
    while p.startswith("./"):
        p = p[2:]
    return p.rstrip("/") if len(p) > 1 else p


def _file(path: str, project: str, role: str = "mentions") -> list[Entity]:
    name = normalise_path(path, project)
    if not name or name in (".", "..", "/", "~") or not re.search(r"[A-Za-z]", name):
        return []
    entity = _entity("file", name, role, alias=name.rpartition("/")[2].lower())
    return [entity] if entity else []


def _files_in(text: str, project: str) -> tuple[list[Entity], str]:
    """File entities in ``text``, and the text with them blanked out (so ``test_client`` inside
    ``tests/test_client.py`` is not also a symbol)."""
    found: list[Entity] = []
    spans: list[tuple[int, int]] = []
    for pattern in (_FILE, _ROOTED_PATH):
        for m in pattern.finditer(text):
            if any(s <= m.start() < e for s, e in spans):
                continue
            found += _file(m.group(1), project)
            spans.append(m.span(1))
    rest = list(text)
    for s, e in spans:
        rest[s:e] = " " * (e - s)
    return found, "".join(rest)


def _errors(text: str) -> list[Entity]:
    found: list[Entity | None] = []
    for m in _ERROR_TYPE.finditer(text):
        found.append(_entity("error", m.group(1)))
    for m in _ERROR_CODE.finditer(text):
        code = next(g for g in m.groups() if g)
        found.append(_entity("error", code))
    for m in _HTTP_STATUS.finditer(text):
        code = next(g for g in m.groups() if g)
        found.append(_entity("error", f"HTTP {code}"))
    for m in _ERROR_PHRASE.finditer(text):
        found.append(_entity("error", m.group(1).lower()))
    return [e for e in found if e is not None]


def _package(name: str) -> Entity | None:
    name = name.strip().strip("'\",;")
    if (
        not name
        or name.startswith((".", "/", "-", "http:", "https:", "git+"))
        or name == "__future__"
    ):
        return None
    name = name.removeprefix("node:")
    if name.startswith("@"):  # @scope/name@version
        scope, _, rest = name.partition("/")
        name = f"{scope}/{re.split(r'[@/]', rest)[0]}" if rest else ""
    elif "/" in name and "." in name.split("/")[0]:  # go: github.com/x/y@v1
        name = name.split("@")[0]
    else:
        name = re.split(r"[=<>~!@\[;/:\s]", name)[0]
    name = name.split(".")[0] if not name.startswith("@") and "/" not in name else name
    if not re.fullmatch(r"[@\w][\w.@/-]*", name) or len(name) < 2 or name.isdigit():
        return None
    return _entity("package", name, key=name.lower().replace("_", "-"))


def _packages(text: str) -> list[Entity]:
    found: list[Entity | None] = []
    for m in _PY_IMPORT.finditer(text):
        names = m.group(1).split(",") if m.group(1) else [m.group(2)]
        found += (_package(n.strip().split(".")[0]) for n in names)
    found += (_package(m.group(1)) for m in _JS_IMPORT.finditer(text))
    for m in _INSTALL.finditer(text):
        args = next(g for g in m.groups() if g).split()
        skip_next = False
        for arg in args:
            if skip_next:
                skip_next = False
            elif arg in ("-r", "-c", "--requirement", "--constraint", "-e", "--index-url", "-i"):
                skip_next = True
            elif not arg.startswith("-"):
                found.append(_package(arg))
    if re.search(r"requirements|pyproject|dependencies", text, re.I):
        found += (_package(m.group(1)) for m in _REQUIREMENT.finditer(text))
    return [e for e in found if e is not None]


def command_name(command: str) -> list[str]:
    """The programs a shell line runs, with the sub-command of tools that have them:
    ``cd app && git commit -m x | tee log`` -> ["git commit", "tee"]."""
    names: list[str] = []
    for program, args in _segments(command):
        if program in ("python", "python3") and args[:1] == ["-m"] and len(args) > 1:
            program, args = args[1].lower(), args[2:]
        if (
            program in _TRIVIAL_PROGRAMS
            or not re.fullmatch(r"[a-z][\w.+-]{0,39}", program)
            or _HEXISH.search(program)
        ):
            continue
        sub = args[0] if args else ""
        if program in _SUBCOMMAND_PROGRAMS and re.fullmatch(r"[a-z][\w:-]{0,30}", sub):
            program = f"{program} {sub}"
        names.append(_COMMAND_ALIASES.get(program, program))
    return names


def _commands(command: str, role: str = "mentions") -> list[Entity]:
    return [e for n in command_name(command) if (e := _entity("command", n, role)) is not None]


def _commands_in(text: str) -> list[Entity]:
    found = [e for m in _SHELL_LINE.finditer(text) for e in _commands(m.group(1))]
    for m in _CODE_SPAN.finditer(text):  # `pytest -q` in a summary or a memory
        span = m.group(1).strip()
        if span.split(" ", 1)[0].lower() in _KNOWN_PROGRAMS:
            found += _commands(span)
    return found


def _symbol(token: str) -> Entity | None:
    for prefix in _SELF:
        token = token.removeprefix(prefix)
    parts = token.split(".")
    if (
        len(token) < 3
        or token.lower() in _JUNK_SYMBOLS
        or _HEXISH.search(token)
        or token.strip("_").isdigit()
        or not re.search(r"[A-Za-z]{2}", token)
    ):
        return None
    if len(parts) > 1:
        if parts[-1].lower() in _TLDS or parts[-1].lower() in _EXTENSIONS:
            return None
        if all(len(p) <= 2 for p in parts):  # e.g, i.e
            return None
    elif not ("_" in token.strip("_") or re.search(r"[a-z][A-Z]", token)):
        return None
    return _entity("symbol", token)


def _symbols(text: str) -> list[Entity]:
    found: list[Entity | None] = [
        _symbol(m.group(1))
        for m in _CALL.finditer(text)
        if "." in m.group(1) or len(m.group(1)) >= 3
    ]
    calls = {m.group(1) for m in _CALL.finditer(text)}
    for m in _IDENT.finditer(text):
        token = m.group(0)
        if token in calls or _ERROR_TYPE.fullmatch(token):
            continue
        if "." in token or "_" in token or re.search(r"[a-z][A-Z]", token):
            found.append(_symbol(token))
    # plain names written as calls (``compress()``) are symbols even without _ or CamelCase
    extra = [
        _entity("symbol", c)
        for c in calls
        if "." not in c and "_" not in c and len(c) >= 3 and c.lower() not in _JUNK_SYMBOLS
    ]
    return [e for e in (*found, *extra) if e is not None]


def _concept(concept: str) -> Entity | None:
    concept = concept.strip()
    return _entity("concept", concept) if concept else None


def document_columns(conn: Connection, docs: Sequence[KeywordDoc]) -> dict[str, dict[str, Any]]:
    """The store-of-record columns extraction reads besides the body, per document id."""
    obs_ids = [d.doc_id for d in docs if d.kind == "observation"]
    mem_ids = [d.doc_id for d in docs if d.kind == "memory"]
    columns: dict[str, dict[str, Any]] = {}
    if obs_ids:
        o = observations.c
        for row in conn.execute(
            select(o.id, o.files_read, o.files_modified, o.commands, o.errors, o.concepts).where(
                o.id.in_(obs_ids)
            )
        ):
            columns[row.id] = {
                name: loads(getattr(row, name), [])
                for name in ("files_read", "files_modified", "commands", "errors", "concepts")
            }
    if mem_ids:
        m = memories.c
        for mem in conn.execute(select(m.id, m.concepts).where(m.id.in_(mem_ids))):
            columns[mem.id] = {"concepts": loads(mem.concepts, [])}
    return columns
