"""The knowledge graph: entities and relations found by heuristics (no LLM), the third retrieval
stream.

Entities are file paths, symbols, packages, commands, error types and concepts, found in a keyword
document's body and, for observations, in the columns compression filled (files read and modified,
commands, errors, concepts). Relations: two entities ``co_occurs`` in one document; edited files
and errors of one session are ``same_session``; a session ``edits`` a file (``edited_in`` back).

The graph is derived from the keyword documents through the derive queue (target ``graph``) and
lives in the store of record, so a drain applies a batch and marks it done in one transaction.
Everything a document contributes is recorded per document (``graph_mentions``) or counted
(``doc_count``, edge weights, session member ``refs``), and ``apply`` first subtracts a document's
previous contribution: applying the same change twice leaves the same graph, and a delete leaves
the graph as if the document had never been there.

Scope is applied inside every query: entities are matched only in the scope's projects, documents
and edges are filtered by agent (and documents by kind) in the SQL that ranks them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    union_all,
    update,
)

from engram.compress import _segments
from engram.derive import UPSERT, Change
from engram.keyword import KeywordDoc, KeywordHit
from engram.schema import (
    graph_edges,
    graph_entities,
    graph_mentions,
    graph_session_members,
    memories,
    observations,
)
from engram.scope import Scope
from engram.sql import dialect_insert
from engram.store import loads

TYPES = ("file", "symbol", "package", "command", "error", "concept")
"""Entity types found in documents; a ``session`` node stands for each session with entities."""
SESSION = "session"
RELATIONS = ("co_occurs", "same_session", "edits", "edited_in")

MAX_ENTITIES_PER_DOC = 32
"""Entities kept per document, most specific first (edited files, read files, errors, ...)."""
MAX_PAIRED_PER_DOC = 8
"""Only a document's first entities get co_occurs edges: n entities make n·(n-1) directed edges."""
MAX_SESSION_PAIRED = 64
"""Members of one session (per agent) that get same_session edges; later ones are counted only."""
MAX_NAME_CHARS = 300
SCAN_CHARS = 20_000
"""Extraction reads at most this much of a body (indexed bodies are a few thousand characters)."""

ROLE_WEIGHTS = {"edits": 1.5, "reads": 1.2, "runs": 1.0, "mentions": 1.0}
"""How strongly a document is about an entity it names, by role (strongest first)."""
PER_ENTITY_DOCS = 3
"""Newest documents read per matched entity, per hit asked for: a common entity's older
documents rank low anyway, and a rare entity has fewer."""
NEIGHBOUR_WEIGHT = 0.3
"""A document reached through a 1-hop neighbour counts this much of a direct mention."""
NEIGHBOURS_PER_ENTITY = 5
EXPAND_ENTITIES = 3
"""Only the rarest few matched entities are expanded to neighbours in the search stream."""
PER_NEIGHBOUR_DOCS = 1
"""Per hit asked for, for each neighbour."""
MAX_QUERY_CANDIDATES = 64

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
    "vue svelte tf ex exs erl proto gradle lua r dart scala clj csv log pem dockerfile")
_BARE_FILES = (r"Makefile|Dockerfile|Containerfile|Gemfile|Procfile|Justfile|Rakefile|Vagrantfile"
               r"|Jenkinsfile|LICENSE|CODEOWNERS|\.gitignore|\.dockerignore|\.editorconfig"
               r"|\.env(?:\.\w+)?|\.npmrc|\.bashrc|\.zshrc")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I)
_FILE = re.compile(
    r"(?<![\w@/.:~-])((?:~|\.{1,2})?/?(?:[\w@.+-]+/+)*(?:[\w@+-][\w@.+-]*\.(?:"
    + "|".join(sorted(_EXTENSIONS, key=len, reverse=True))
    + r")|" + _BARE_FILES + r"))(?![\w/-])", re.I)
_ROOTED_PATH = re.compile(r"(?<![\w@/.:~-])((?:~|\.{1,2})?/[\w@.+-]+(?:/[\w@.+-]+)+)/?(?![\w/-])")
_ERROR_TYPE = re.compile(
    r"\b(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Warning)|KeyboardInterrupt|SystemExit"
    r"|StopIteration|GeneratorExit|TimeoutExpired|CalledProcessError)\b")
_ERROR_CODE = re.compile(r"\berror\s*\[(E\d{4})\]|\berror\s+(TS\d{4,5})\b|\b(E(?:NOENT|ACCES|PERM"
                         r"|EXIST|CONNREFUSED|CONNRESET|ADDRINUSE|PIPE|NOTDIR|ISDIR|NOSPC|MFILE"
                         r"|TIMEDOUT|HOSTUNREACH|NOTEMPTY|ROFS))\b")
_HTTP_STATUS = re.compile(
    r"\bHTTP(?:/\d(?:\.\d)?)?\s+([45]\d\d)\b|\bstatus(?:[ _]code)?\s*[:=]?\s*([45]\d\d)\b"
    r"|\b([45]\d\d)\s+(?:Bad Request|Unauthorized|Forbidden|Not Found|Method Not Allowed"
    r"|Conflict|Unprocessable|Too Many Requests|Internal Server Error|Bad Gateway"
    r"|Service Unavailable|Gateway Timeout)\b", re.I)
_ERROR_PHRASES = ("segmentation fault", "permission denied", "command not found",
                  "no such file or directory", "connection refused", "out of memory",
                  "merge conflict", "deadlock detected")
_ERROR_PHRASE = re.compile(r"\b(" + "|".join(_ERROR_PHRASES) + r")\b", re.I)
_PY_IMPORT = re.compile(r"^\s*(?:import\s+([\w.]+(?:\s*,\s*[\w.]+)*)|from\s+(\w[\w.]*)\s+import\b)",
                        re.M)
_JS_IMPORT = re.compile(r"""\b(?:import\s+(?:[\w*{}\s,]+\s+from\s+)?|require\(\s*|import\(\s*)"""
                        r"""['"]([^'"\s]+)['"]""")
_ARGS = r"([^\n;&|]+)"
_INSTALL = re.compile(rf"\b(?:pip3?|uv\s+pip|pipx)\s+install\s+{_ARGS}|\b(?:uv|poetry|pdm|cargo"
                      rf"|yarn|pnpm|bun)\s+add\s+{_ARGS}|\bnpm\s+(?:install|i|add)\s+{_ARGS}"
                      rf"|\bcargo\s+install\s+{_ARGS}|\bgo\s+(?:get|install)\s+{_ARGS}"
                      rf"|\bgem\s+install\s+{_ARGS}")
_WINDOWS_PATH = re.compile(r"\b[A-Za-z]:\\[^\s'\"`]+")
_REQUIREMENT = re.compile(r"^\s*([A-Za-z][\w.-]*)(?:\[[\w,\s-]+\])?\s*(?:==|>=|~=|<=)\s*\d[\w.*]*",
                          re.M)
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?![\w])")
_CALL = re.compile(r"(?<![\w.])([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)\(\)")
_CODE_SPAN = re.compile(r"`([^`\n]{2,300})`")
_SHELL_LINE = re.compile(r"^\s*\$\s+(.+)$", re.M)
_HEXISH = re.compile(r"[0-9a-f]{8,}|\d{4,}|(?=[A-Za-z0-9]{10})(?:[A-Za-z]*\d){3}", re.I)
"""Ids, hashes and tokens (``obs_e54b…``, ``toolu_01Jm5sK…``): never entity names."""
_COMMAND_ALIASES = {"npm i": "npm install", "npm add": "npm install", "pip3 install": "pip install",
                    "docker-compose up": "docker compose"}

_SUBCOMMAND_PROGRAMS = _words(
    "git gh npm yarn pnpm bun cargo go docker docker-compose podman kubectl helm pip pip3 uv "
    "poetry pdm terraform dotnet mvn gradle brew apt apt-get systemctl engram alembic flask "
    "django-admin rails bundle mix deno just make")
_KNOWN_PROGRAMS = _SUBCOMMAND_PROGRAMS | _words(
    "pytest tox nox ruff mypy flake8 pylint black isort node tsc jest vitest eslint prettier "
    "python python3 psql sqlite3 mysql redis-cli curl wget ssh scp rsync grep rg sed awk jq "
    "cmake gcc clang rustc celery uvicorn gunicorn")
_TRIVIAL_PROGRAMS = _words(
    "cd echo export set unset true false source exit sleep printf test [ pwd clear read "
    "then else fi do done for while if")
_JUNK_SYMBOLS = _words(
    "print len str int dict list set range type super open isinstance getattr setattr hasattr "
    "__init__ __main__ __name__ e.g i.e etc")
_TLDS = _words("com org net io dev ai app co uk de fr edu gov")
_SELF = ("self.", "this.", "cls.")


def extract(body: str, *, project: str = "", files_read: Iterable[str] = (),
            files_modified: Iterable[str] = (), commands: Iterable[str] = (),
            errors: Iterable[str] = (), concepts: Iterable[str] = ()) -> list[Entity]:
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


def _entity(type_: str, name: str, role: str = "mentions", key: str | None = None,
            alias: str | None = None) -> Entity | None:
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
    if not name or name.startswith((".", "/", "-", "http:", "https:", "git+")) or name == "__future__":
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
        if (program in _TRIVIAL_PROGRAMS or not re.fullmatch(r"[a-z][\w.+-]{0,39}", program)
                or _HEXISH.search(program)):
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
    if (len(token) < 3 or token.lower() in _JUNK_SYMBOLS or _HEXISH.search(token)
            or token.strip("_").isdigit() or not re.search(r"[A-Za-z]{2}", token)):
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
    found: list[Entity | None] = [_symbol(m.group(1)) for m in _CALL.finditer(text)
                                  if "." in m.group(1) or len(m.group(1)) >= 3]
    calls = {m.group(1) for m in _CALL.finditer(text)}
    for m in _IDENT.finditer(text):
        token = m.group(0)
        if token in calls or _ERROR_TYPE.fullmatch(token):
            continue
        if "." in token or "_" in token or re.search(r"[a-z][A-Z]", token):
            found.append(_symbol(token))
    # plain names written as calls (``compress()``) are symbols even without _ or CamelCase
    extra = [_entity("symbol", c) for c in calls
             if "." not in c and "_" not in c and len(c) >= 3 and c.lower() not in _JUNK_SYMBOLS]
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
        for row in conn.execute(select(o.id, o.files_read, o.files_modified, o.commands,
                                       o.errors, o.concepts).where(o.id.in_(obs_ids))):
            columns[row.id] = {name: loads(getattr(row, name), []) for name in (
                "files_read", "files_modified", "commands", "errors", "concepts")}
    if mem_ids:
        m = memories.c
        for mem in conn.execute(select(m.id, m.concepts).where(m.id.in_(mem_ids))):
            columns[mem.id] = {"concepts": loads(mem.concepts, [])}
    return columns


# --- maintaining the graph ----------------------------------------------------------------


def apply(conn: Connection, changes: Sequence[Change]) -> None:
    """Bring the graph up to date with claimed derive-queue changes (in the caller's write
    transaction): each document's previous contribution is removed, an upsert adds the new one.
    Entities and edges left with nothing are deleted last, so re-applying a document keeps its
    entities' ids."""
    docs = [c.doc for c in changes if c.op == UPSERT and c.doc is not None]
    columns = document_columns(conn, docs)
    touched: set[int] = set()
    for change in sorted(changes, key=lambda c: c.doc_id):
        touched |= _subtract(conn, change.doc_id)
        if change.op == UPSERT and change.doc is not None:
            add(conn, change.doc, columns.get(change.doc_id, {}))
    _collect(conn, touched)


def add(conn: Connection, doc: KeywordDoc, columns: Mapping[str, Any] | None = None) -> None:
    """Add one document's contribution (the caller has removed any previous one)."""
    entities = extract(doc.body, project=doc.project, **(columns or {}))
    if not entities:
        return
    agent = doc.agent_id or ""
    ids = _upsert_entities(conn, doc.project, entities, doc.created_at)
    conn.execute(insert(graph_mentions), [
        {"doc_id": doc.doc_id, "entity_id": ids[(e.type, e.key)], "role": e.role, "rank": rank,
         "kind": doc.kind, "agent": agent, "session_id": doc.session_id,
         "created_at": doc.created_at} for rank, e in enumerate(entities)])
    paired = [ids[(e.type, e.key)] for e in entities[:MAX_PAIRED_PER_DOC]]
    _bump(conn, _pairs(paired, "co_occurs"), agent, +1)
    if doc.session_id is None:
        return
    session = _upsert_entities(conn, doc.project, [_session_entity(doc.session_id)],
                               doc.created_at)[(SESSION, doc.session_id)]
    edited = [ids[(e.type, e.key)] for e in entities if e.type == "file" and e.role == "edits"]
    _bump(conn, _edits(session, edited), agent, +1)
    members = [ids[(e.type, e.key)] for e in entities if _session_member(e.type, e.role)]
    _join_session(conn, doc.session_id, agent, members)


def remove(conn: Connection, doc_id: str) -> None:
    """Subtract everything ``doc_id`` contributed; nothing when it contributed nothing."""
    _collect(conn, _subtract(conn, doc_id))


def _subtract(conn: Connection, doc_id: str) -> set[int]:
    """Subtract a document's contribution, leaving emptied rows for ``_collect``; returns the
    ids of the entities it touched."""
    m, e = graph_mentions.c, graph_entities.c
    rows = conn.execute(
        select(m.entity_id, m.role, m.rank, m.agent, m.session_id, e.type, e.project)
        .select_from(graph_mentions.join(graph_entities, graph_entities.c.id == m.entity_id))
        .where(m.doc_id == doc_id).order_by(m.rank)).all()
    if not rows:
        return set()
    conn.execute(delete(graph_mentions).where(m.doc_id == doc_id))
    ids = [r.entity_id for r in rows]
    agent, session_id, project = rows[0].agent, rows[0].session_id, rows[0].project
    _bump(conn, _pairs([r.entity_id for r in rows if r.rank < MAX_PAIRED_PER_DOC], "co_occurs"),
          agent, -1)
    if session_id is not None:
        session = conn.execute(select(e.id).where(
            e.project == project, e.type == SESSION, e.key == session_id)).scalar()
        members = [r.entity_id for r in rows if _session_member(r.type, r.role)]
        _leave_session(conn, session_id, agent, members)
        if session is not None:
            edited = [r.entity_id for r in rows if r.type == "file" and r.role == "edits"]
            _bump(conn, _edits(session, edited), agent, -1)
            ids.append(session)
    conn.execute(update(graph_entities).where(e.id == bindparam("eid")).values(
        doc_count=e.doc_count - 1), [{"eid": i} for i in ids])
    return set(ids)


def _collect(conn: Connection, touched: set[int]) -> None:
    """Delete the edges (weight 0) and entities (no document) that ``touched`` left empty."""
    if not touched:
        return
    ids, g = sorted(touched), graph_edges.c
    for column in (g.src, g.dst):
        conn.execute(delete(graph_edges).where(column.in_(ids), g.weight <= 0))
    conn.execute(delete(graph_entities).where(graph_entities.c.id.in_(ids),
                                              graph_entities.c.doc_count <= 0))


def _session_entity(session_id: str) -> Entity:
    return Entity(SESSION, session_id[:MAX_NAME_CHARS], session_id[:MAX_NAME_CHARS],
                  session_id[:MAX_NAME_CHARS])


def _session_member(type_: str, role: str) -> bool:
    """What same_session relates: the files a session edited and the errors it met."""
    return type_ == "error" or (type_ == "file" and role == "edits")


def _pairs(ids: Sequence[int], relation: str) -> list[tuple[int, int, str]]:
    return [(a, b, relation) for a in ids for b in ids if a != b]


def _edits(session: int, files: Sequence[int]) -> list[tuple[int, int, str]]:
    return [t for f in files for t in ((session, f, "edits"), (f, session, "edited_in"))]


@functools.lru_cache(maxsize=4)
def _statements(dialect: str) -> dict[str, Any]:
    """The maintenance statements of one dialect, built once: building an upsert (its
    ``excluded`` columns, its ``case``) cost more than running it, ~40 % of a document's graph
    time (measured with cProfile on the spine benchmark's realistic corpus)."""
    insert = dialect_insert(dialect)
    t = graph_entities
    ins = insert(t)
    entities = ins.on_conflict_do_update(
        index_elements=[t.c.project, t.c.type, t.c.key],
        set_={"doc_count": t.c.doc_count + 1,
              "first_seen": case((ins.excluded.first_seen < t.c.first_seen,
                                  ins.excluded.first_seen), else_=t.c.first_seen),
              "last_seen": case((ins.excluded.last_seen > t.c.last_seen,
                                 ins.excluded.last_seen), else_=t.c.last_seen)},
    ).returning(t.c.id, t.c.type, t.c.key)
    e = graph_edges
    ins_edges = insert(e)
    edges_up = ins_edges.on_conflict_do_update(
        index_elements=[e.c.src, e.c.dst, e.c.relation, e.c.agent],
        set_={"weight": e.c.weight + ins_edges.excluded.weight})
    edges_down = update(e).where(
        e.c.src == bindparam("s"), e.c.dst == bindparam("d"), e.c.relation == bindparam("r"),
        e.c.agent == bindparam("a")).values(weight=e.c.weight - bindparam("n"))
    m = graph_session_members
    join = insert(m).values(
        session_id=bindparam("sid"), agent=bindparam("agent"), entity_id=bindparam("eid"),
        refs=1, paired=0).on_conflict_do_update(
        index_elements=[m.c.session_id, m.c.agent, m.c.entity_id],
        set_={"refs": m.c.refs + 1}).returning(m.c.refs)
    return {"entities": entities, "edges_up": edges_up, "edges_down": edges_down, "join": join}


def _upsert_entities(conn: Connection, project: str, entities: Sequence[Entity],
                     at: float) -> dict[tuple[str, str], int]:
    """Insert or count one more document for each entity; their ids by (type, key)."""
    stmt = _statements(conn.dialect.name)["entities"]
    # one cached statement run as executemany (insertmanyvalues batches it into one INSERT);
    # sorted so concurrent writers lock rows in the same order
    rows = sorted(({"project": project, "type": x.type, "key": x.key, "alias": x.alias,
                    "name": x.name, "doc_count": 1, "first_seen": at, "last_seen": at}
                   for x in entities), key=lambda v: (v["type"], v["key"]))
    return {(r.type, r.key): r.id for r in conn.execute(stmt, rows)}


def _bump(conn: Connection, edges: Iterable[tuple[int, int, str]], agent: str,
          delta: int) -> None:
    counted = Counter(edges)
    if not counted:
        return
    statements = _statements(conn.dialect.name)
    if delta > 0:
        conn.execute(statements["edges_up"], [
            {"src": s, "dst": d, "relation": r, "agent": agent, "weight": n * delta}
            for (s, d, r), n in sorted(counted.items())])
        return
    conn.execute(statements["edges_down"],
                 [{"s": s, "d": d, "r": r, "a": agent, "n": n * -delta}
                  for (s, d, r), n in sorted(counted.items())])


def _join_session(conn: Connection, session_id: str, agent: str, members: Sequence[int]) -> None:
    t = graph_session_members
    join = _statements(conn.dialect.name)["join"]
    for entity in sorted(set(members)):
        refs = conn.execute(join, {"sid": session_id, "agent": agent, "eid": entity}
                            ).scalar_one()
        if refs != 1:
            continue
        others = list(conn.execute(select(t.c.entity_id).where(
            t.c.session_id == session_id, t.c.agent == agent, t.c.paired == 1)).scalars())
        if len(others) >= MAX_SESSION_PAIRED:
            continue
        conn.execute(update(t).where(t.c.session_id == session_id, t.c.agent == agent,
                                     t.c.entity_id == entity).values(paired=1))
        _bump(conn, [x for o in others for x in ((entity, o, "same_session"),
                                                 (o, entity, "same_session"))], agent, +1)


def _leave_session(conn: Connection, session_id: str, agent: str,
                   members: Sequence[int]) -> None:
    t = graph_session_members
    for entity in sorted(set(members), reverse=True):
        row = conn.execute(update(t).where(
            t.c.session_id == session_id, t.c.agent == agent, t.c.entity_id == entity,
        ).values(refs=t.c.refs - 1).returning(t.c.refs, t.c.paired)).first()
        if row is None or row.refs > 0:
            continue
        conn.execute(delete(t).where(t.c.session_id == session_id, t.c.agent == agent,
                                     t.c.entity_id == entity))
        if row.paired:
            others = list(conn.execute(select(t.c.entity_id).where(
                t.c.session_id == session_id, t.c.agent == agent, t.c.paired == 1)).scalars())
            _bump(conn, [x for o in others for x in ((entity, o, "same_session"),
                                                     (o, entity, "same_session"))], agent, -1)


# --- reading the graph --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Match:
    id: int
    type: str
    key: str
    name: str
    project: str
    doc_count: int


def rarity(doc_count: int) -> float:
    """Weight of an entity by how few documents name it: 1 for one document, falling slowly."""
    return 1.0 / math.log2(1 + max(doc_count, 1))


def _project_clause(scope: Scope) -> ColumnElement[bool]:
    return true() if scope.all_projects else graph_entities.c.project.in_(scope.projects())


def _agent_clause(column: Any, scope: Scope) -> ColumnElement[bool]:
    # An agent sees its own items and the project's shared ones, never another agent's.
    return true() if scope.agent_id is None else or_(column == scope.agent_id, column == "")


def _query_candidates(text: str) -> tuple[set[str], set[str]]:
    """(aliases, full keys) a query names: the entities extraction finds in it, its words and
    adjacent word pairs ("git commit")."""
    entities = extract(text[:4000])
    aliases = {e.alias for e in entities}
    keys = {e.key for e in entities}
    words = [w.strip(".,;:!?()[]{}'\"`").lower() for w in text[:4000].split()]
    words = [w for w in words if len(w) >= 2]
    aliases.update(words)
    aliases.update(f"{a} {b}" for a, b in zip(words, words[1:], strict=False))
    return set(sorted(aliases)[:MAX_QUERY_CANDIDATES * 2]), keys


def match(conn: Connection, text: str, scope: Scope, type_: str | None = None) -> list[Match]:
    """Entities in scope that the text names (never session nodes). When the text gives a full
    path, other files with the same basename are left out."""
    aliases, keys = _query_candidates(text)
    return _lookup(conn, aliases, keys, scope, type_)


def _lookup(conn: Connection, aliases: set[str], keys: set[str], scope: Scope,
            type_: str | None) -> list[Match]:
    if not aliases and not keys:
        return []
    e = graph_entities.c
    columns = (e.id, e.type, e.key, e.name, e.project, e.doc_count)
    wanted = [type_] if type_ else [t for t in TYPES]
    # Two index lookups rather than one OR: with the OR, SQLite scans every entity of the
    # project (75 ms p50 at 50k observations); each part alone is an index range scan.
    parts = []
    if aliases:  # ix_graph_entities_alias (alias, project)
        parts.append(select(*columns).where(e.alias.in_(sorted(aliases)), _project_clause(scope),
                                            e.type.in_(wanted)))
    key_types = [t for t in wanted if t != "file"] if aliases else wanted
    if keys and key_types:  # uq_graph_entities_project_type_key (project, type, key)
        parts.append(select(*columns).where(e.key.in_(sorted(keys)), _project_clause(scope),
                                            e.type.in_(key_types)))
    if not parts:
        return []
    rows = conn.execute(union_all(*parts) if len(parts) > 1 else parts[0])
    seen: set[int] = set()
    found = []
    for r in rows:
        if r.id not in seen:
            seen.add(r.id)
            found.append(Match(r.id, r.type, r.key, r.name, r.project, r.doc_count))
    exact_files = {m.key.rpartition("/")[2] for m in found if m.type == "file" and m.key in keys}
    return [m for m in found if m.type != "file" or m.key in keys
            or m.key.rpartition("/")[2] not in exact_files]


def _docs_of(conn: Connection, limits: Mapping[int, int], scope: Scope,
             kinds: tuple[str, ...] | None) -> dict[int, list[Any]]:
    """Per entity, its newest ``limits[entity]`` in-scope documents: one round trip (a UNION
    of index range scans on (entity_id, created_at))."""
    if not limits:
        return {}
    m = graph_mentions.c
    parts = []
    for entity_id, limit in sorted(limits.items()):
        stmt = (select(m.entity_id, m.doc_id, m.kind, m.session_id, m.role, m.created_at)
                .where(m.entity_id == entity_id, _agent_clause(m.agent, scope))
                .order_by(m.created_at.desc()).limit(limit))
        if kinds:
            stmt = stmt.where(m.kind.in_(kinds))
        parts.append(select(stmt.subquery()))
    found: dict[int, list[Any]] = {}
    for row in conn.execute(union_all(*parts) if len(parts) > 1 else parts[0]):
        found.setdefault(row.entity_id, []).append(row)
    return found


def _neighbours(conn: Connection, entity_ids: Sequence[int], scope: Scope, per_entity: int,
                relations: Sequence[str] = RELATIONS) -> list[tuple[int, int, str, int]]:
    """(source, neighbour, relation, weight) for each source's strongest in-scope edges,
    heaviest first. Reads at most a few rows per source through the (src, weight) index, so a
    common entity's thousands of edges cost no more than a rare one's."""
    if not entity_ids:
        return []
    g = graph_edges.c
    parts = [select(select(g.src, g.dst, g.relation, g.weight)
                    .where(g.src == src, g.relation.in_(relations), _agent_clause(g.agent, scope))
                    .order_by(g.weight.desc()).limit(per_entity * 4).subquery())
             for src in sorted(set(entity_ids))]
    summed: Counter[tuple[int, int, str]] = Counter()
    for row in conn.execute(union_all(*parts) if len(parts) > 1 else parts[0]):
        summed[(row.src, row.dst, row.relation)] += row.weight  # one row per agent
    best: dict[int, list[tuple[int, int, str, int]]] = {}
    for (src, dst, relation), weight in sorted(summed.items(), key=lambda kv: (-kv[1], kv[0])):
        best.setdefault(src, []).append((src, dst, relation, weight))
    return [edge for src in entity_ids for edge in best.get(src, [])[:per_entity]]


def _rank(conn: Connection, matched: Sequence[Match], scope: Scope, limit: int,
          kinds: tuple[str, ...] | None, expand: bool) -> list[KeywordHit]:
    scores: dict[str, list[Any]] = {}

    def credit(rows: Iterable[Any], weight: float) -> None:
        for row in rows:
            entry = scores.setdefault(row.doc_id, [0.0, row.kind, row.session_id, row.created_at])
            entry[0] += weight * ROLE_WEIGHTS.get(row.role, 1.0)

    weights = {m.id: rarity(m.doc_count) for m in matched}
    limits = dict.fromkeys(weights, max(PER_ENTITY_DOCS * limit, 30))
    if expand:
        rarest = sorted(matched, key=lambda m: (m.doc_count, m.id))[:EXPAND_ENTITIES]
        edges = [e for e in _neighbours(conn, [m.id for m in rarest], scope,
                                        NEIGHBOURS_PER_ENTITY, ("co_occurs", "same_session"))
                 if e[1] not in weights]
        strongest = max((w for *_, w in edges), default=1)
        counts = _doc_counts(conn, {dst for _, dst, _, _ in edges})
        for _, dst, _, weight in edges:
            nweight = NEIGHBOUR_WEIGHT * rarity(counts.get(dst, 1)) * weight / strongest
            if nweight > weights.get(dst, 0.0):
                weights[dst] = nweight
                limits[dst] = max(PER_NEIGHBOUR_DOCS * limit, 10)
    for entity_id, rows in _docs_of(conn, limits, scope, kinds).items():
        credit(rows, weights[entity_id])
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1][0], -kv[1][3], kv[0]))[:limit]
    return [KeywordHit(doc_id, kind, session_id, score)
            for doc_id, (score, kind, session_id, _) in ranked]


def _doc_counts(conn: Connection, ids: set[int]) -> dict[int, int]:
    if not ids:
        return {}
    e = graph_entities.c
    return dict(conn.execute(select(e.id, e.doc_count).where(e.id.in_(sorted(ids)))).all())


def stream(conn: Connection, query: str, scope: Scope, limit: int,
           kinds: tuple[str, ...] | None = None) -> list[KeywordHit]:
    """The graph retrieval stream: documents that name the entities the query names (rarer
    entities and stronger roles score higher), then documents naming their strongest 1-hop
    neighbours at a lower weight. Best first; empty when the query names no known entity."""
    matched = match(conn, query, scope)
    if not matched:
        return []
    return _rank(conn, matched, scope, limit, kinds, expand=True)


@dataclasses.dataclass(frozen=True)
class Answer:
    entities: list[dict[str, Any]]
    neighbours: list[dict[str, Any]]
    hits: list[KeywordHit]


MAX_MATCHED_ENTITIES = 10


def query(conn: Connection, scope: Scope, *, name: str | None = None, text: str | None = None,
          type: str | None = None, depth: int = 1, limit: int = 20) -> Answer:  # noqa: A002
    """Entity lookup and neighbourhood for the API: the entities ``name`` (one entity's name) or
    ``text`` (free text) names, their neighbours up to ``depth`` hops with relation and weight,
    and the documents most about them. Only what has an in-scope document is returned."""
    if name is not None:
        aliases = {e.alias for t in TYPES for e in _named(t, name)} | {name.strip().lower()}
        keys = {e.key for t in TYPES for e in _named(t, name)} | {name.strip().lower()}
        if type == SESSION:
            aliases, keys = {name.strip()}, {name.strip()}
        found = _lookup(conn, aliases, keys, scope, type)
    else:
        found = match(conn, text or "", scope, type)
    counts = _scoped_counts(conn, found, scope)
    found = sorted((m for m in found if counts.get(m.id)),
                   key=lambda m: (-counts[m.id], m.type, m.key))[:MAX_MATCHED_ENTITIES]
    entities = [_entity_json(conn, m, counts[m.id]) for m in found]
    neighbours: list[dict[str, Any]] = []
    seen = {m.id for m in found}
    frontier = [m.id for m in found]
    names = {m.id: m.name for m in found}
    for hop in range(1, max(1, min(depth, 2)) + 1):
        edges = _neighbours(conn, frontier, scope, limit + len(seen))  # seen ones are skipped
        edges.sort(key=lambda e: (-e[3], e[1]))
        info = _entity_rows(conn, {dst for _, dst, _, _ in edges})
        added: list[int] = []
        for src, dst, relation, weight in edges:
            if dst in seen or dst not in info or len(neighbours) >= limit * hop:
                continue
            row = info[dst]
            neighbours.append({"type": row.type, "name": row.name, "key": row.key,
                               "relation": relation, "weight": weight, "via": names[src],
                               "depth": hop})
            names[dst] = row.name
            seen.add(dst)
            added.append(dst)
        frontier = added[:NEIGHBOURS_PER_ENTITY]
    docs = [m for m in found if m.type != SESSION]
    hits = _rank(conn, docs, scope, limit, None, expand=False) if docs else []
    if any(m.type == SESSION for m in found):
        hits += _session_hits(conn, [m for m in found if m.type == SESSION], scope, limit)
    return Answer(entities, neighbours, hits[:limit])


def _named(type_: str, name: str) -> list[Entity]:
    """The entity ``name`` would be if it were of ``type_`` (normalised the same way)."""
    if type_ == "file":
        return _file(name, "")
    if type_ == "package":
        e = _package(name)
        return [e] if e else []
    entity = _entity(type_, name)
    return [entity] if entity else []


def _scoped_counts(conn: Connection, found: Sequence[Match], scope: Scope) -> dict[int, int]:
    """Documents in scope per entity (per session for session nodes, which have no mentions of
    their own). An entity with none is invisible in this scope."""
    counts: dict[int, int] = {}
    m = graph_mentions.c
    plain = [x.id for x in found if x.type != SESSION]
    if plain:
        counts.update(conn.execute(
            select(m.entity_id, func.count()).where(m.entity_id.in_(plain),
                                                    _agent_clause(m.agent, scope))
            .group_by(m.entity_id)).all())
    sessions = {x.key: x.id for x in found if x.type == SESSION}
    if sessions:
        counts.update((sessions[key], n) for key, n in conn.execute(
            select(m.session_id, func.count(func.distinct(m.doc_id)))
            .where(m.session_id.in_(sorted(sessions)), _agent_clause(m.agent, scope))
            .group_by(m.session_id)).all())
    return counts


def _entity_rows(conn: Connection, ids: set[int]) -> dict[int, Any]:
    if not ids:
        return {}
    e = graph_entities.c
    return {r.id: r for r in conn.execute(
        select(e.id, e.type, e.key, e.name).where(e.id.in_(sorted(ids))))}


def _entity_json(conn: Connection, m: Match, count: int) -> dict[str, Any]:
    from engram.store import iso

    e = graph_entities.c
    row = conn.execute(select(e.first_seen, e.last_seen).where(e.id == m.id)).one()
    return {"type": m.type, "name": m.name, "key": m.key, "project": m.project,
            "docCount": count, "firstSeen": iso(row.first_seen), "lastSeen": iso(row.last_seen)}


def _session_hits(conn: Connection, sessions: Sequence[Match], scope: Scope,
                  limit: int) -> list[KeywordHit]:
    """A session node's documents: every in-scope document that session contributed."""
    m = graph_mentions.c
    rows = conn.execute(
        select(m.doc_id, m.kind, m.session_id, func.max(m.created_at).label("at"))
        .where(m.session_id.in_([s.key for s in sessions]), _agent_clause(m.agent, scope))
        .group_by(m.doc_id, m.kind, m.session_id).order_by(func.max(m.created_at).desc())
        .limit(limit))
    return [KeywordHit(r.doc_id, r.kind, r.session_id, 1.0) for r in rows]


def stats(conn: Connection) -> dict[str, int]:
    """Sizes of the graph, for status: entities (session nodes included), mentions, edges."""
    return {name: int(conn.execute(select(func.count()).select_from(table)).scalar_one())
            for name, table in (("entities", graph_entities), ("mentions", graph_mentions),
                                ("edges", graph_edges))}


def by_type(conn: Connection) -> dict[str, int]:
    e = graph_entities.c
    return dict(conn.execute(select(e.type, func.count()).group_by(e.type)).all())


__all__ = ["TYPES", "Answer", "Entity", "Match", "add", "apply", "by_type", "command_name",
           "document_columns", "extract", "match", "normalise_path", "query", "remove",
           "stats", "stream"]
