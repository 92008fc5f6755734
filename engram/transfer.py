"""Export the whole store as one JSON document, and import one back.

Import strategies: ``skip`` keeps what exists and adds the rest; ``merge`` adds the rest and lets
imported data win (a memory whose content differs gets a new version, so nothing is lost);
``replace`` empties sessions, observations and memories first. Everything imported is scrubbed
and indexed, and the observations' eventIds enter the ledger so replays stay duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from engram import audit
from engram.errors import FieldErrors
from engram.events import parse_timestamp
from engram.keyword import KeywordDoc
from engram.observations import speaker
from engram.privacy import scrub
from engram.schema import event_ledger, kw_docs, memories, memory_versions, observations, sessions
from engram.store import Store, dumps, insert_ignore, iso, loads, now
from engram.summary import summary_doc_id

FORMAT_VERSION = 1
STRATEGIES = ("merge", "replace", "skip")
_JSON_COLUMNS = ("files_read", "files_modified", "commands", "errors", "concepts")
_NULLABLE_JSON_COLUMNS = ("summary_json", "tool_input", "tool_output", "meta")


class InvalidImport(FieldErrors):
    what = "invalid import"


EXPORT_PAGE = 500
"""Rows read at a time while exporting (and memories whose versions are read together)."""
EXPORT_CHUNK_CHARS = 64 * 1024
"""Text handed to the response at a time."""


def export(store: Store) -> dict[str, Any]:
    """The whole store as one document (``export_stream`` parsed: for small stores and tests)."""
    document: dict[str, Any] = json.loads("".join(export_stream(store)))
    return document


def export_stream(store: Store) -> Iterator[str]:
    """The export document as JSON text, in pieces of about ``EXPORT_CHUNK_CHARS``: rows are read
    ``EXPORT_PAGE`` at a time from one read transaction and written as they come, so a store of
    any size is exported in bounded memory (a 100,000-observation store is a ~135 MB document;
    built whole, its Python objects were several times that). One item per line."""
    pending: list[str] = []
    size = 0

    def piece(text: str) -> Iterator[str]:
        nonlocal size
        pending.append(text)
        size += len(text)
        if size >= EXPORT_CHUNK_CHARS:
            yield "".join(pending)
            pending.clear()
            size = 0

    def section(name: str, items: Iterator[dict[str, Any]], last: bool = False) -> Iterator[str]:
        yield from piece(f'"{name}": [')
        for n, item in enumerate(items):
            yield from piece(("\n" if not n else ",\n") + json.dumps(item, ensure_ascii=False))
        yield from piece("\n]" + ("" if last else ",\n"))

    head = {"format": "engram-export", "version": FORMAT_VERSION, "exportedAt": iso(now())}
    with store.read() as conn:
        paged = conn.execution_options(yield_per=EXPORT_PAGE)
        yield from piece(json.dumps(head)[:-1] + ",\n")
        yield from section(
            "sessions",
            (
                _row(r, ("started_at", "ended_at"))
                for r in paged.execute(select(sessions).order_by(sessions.c.started_at))
            ),
        )
        yield from section(
            "observations",
            (
                _row(r, ("created_at", "stored_at"))
                for r in paged.execute(select(observations).order_by(observations.c.created_at))
            ),
        )
        yield from section("memories", _memories(conn, paged), last=True)
    yield "".join(pending) + "}\n"


def _memories(conn: Connection, paged: Connection) -> Iterator[dict[str, Any]]:
    """Live memories with their versions, oldest first; versions read per page of memories."""
    page: list[dict[str, Any]] = []
    for r in paged.execute(
        select(memories).where(memories.c.forgotten_at.is_(None)).order_by(memories.c.created_at)
    ):
        item = _row(r, ("created_at", "updated_at", "forgotten_at"))
        item["versions"] = []
        page.append(item)
        if len(page) == EXPORT_PAGE:
            yield from _with_versions(conn, page)
            page = []
    yield from _with_versions(conn, page)


def _with_versions(conn: Connection, page: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if not page:
        return
    by_id = {item["id"]: item for item in page}
    for v in conn.execute(
        select(memory_versions)
        .where(memory_versions.c.memory_id.in_(list(by_id)))
        .order_by(memory_versions.c.memory_id, memory_versions.c.version)
    ):
        by_id[v.memory_id]["versions"].append(
            {
                "version": v.version,
                "content": v.content,
                "createdAt": iso(v.created_at),
                "supersededAt": iso(v.superseded_at),
            }
        )
    yield from page


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _row(row: Any, times: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row._mapping.items():
        if key in times:
            value = iso(value)
        elif key in _JSON_COLUMNS or key in _NULLABLE_JSON_COLUMNS:
            value = loads(value)
        out[_camel(key)] = value
    return out


def _unrow(item: dict[str, Any], columns: Any, times: tuple[str, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for column in columns:
        key = _camel(column.name)
        if key not in item:
            continue
        value = item[key]
        if column.name in times and value is not None:
            value = parse_timestamp(value)
        elif column.name in _JSON_COLUMNS:
            value = dumps(value if value is not None else [])
        elif column.name in _NULLABLE_JSON_COLUMNS:
            value = None if value is None else dumps(value)
        values[column.name] = scrub(value)
    return values


SECTIONS = ("sessions", "observations", "memories")
"""An export's lists, in the order they import: sessions first, so observations find theirs."""
_REQUIRED = {
    "sessions": ("id", "project"),
    "observations": ("id", "eventId", "sessionId", "project"),
    "memories": ("id", "content"),
}


_TABLES = {
    "sessions": (sessions, ("started_at", "ended_at")),
    "observations": (observations, ("created_at", "stored_at")),
    "memories": (memories, ("created_at", "updated_at", "forgotten_at")),
}
_VERSION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "version": int,
    "content": str,
    "createdAt": (str, int, float),
}


def _item_problem(section: str, item: Any) -> str | None:
    """What is wrong with one item of a section, or None. Types follow the store's columns, so
    a row that passes cannot fail its insert (an id that is a list, a timestamp past 2100, a
    name longer than its column)."""
    if not isinstance(item, dict):
        return "must be an object"
    missing = [f for f in _REQUIRED[section] if not item.get(f)]
    if missing:
        return "missing " + ", ".join(missing)
    table, times = _TABLES[section]
    for column in table.c:
        key = _camel(column.name)
        value = item.get(key)
        if value is None or column.name in _JSON_COLUMNS + _NULLABLE_JSON_COLUMNS:
            continue
        if column.name in times:
            try:
                parse_timestamp(value)
            except (TypeError, ValueError):
                return f"{key}: an ISO 8601 time or epoch seconds (1970-2100)"
            continue
        wanted = column.type.python_type
        if wanted is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif wanted is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, wanted)
        if not ok:
            return f"{key}: must be {wanted.__name__}"
        length = getattr(column.type, "length", None)
        if length and isinstance(value, str) and len(value) > length:
            return f"{key}: at most {length} characters"
    if section == "memories":
        return _versions_problem(item.get("versions"))
    return None


def _versions_problem(versions: Any) -> str | None:
    if versions is None:
        return None
    if not isinstance(versions, list):
        return "versions: must be a list"
    for index, version in enumerate(versions):
        if not isinstance(version, dict):
            return f"versions[{index}]: must be an object"
        for key, wanted in _VERSION_FIELDS.items():
            value = version.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, wanted)):
                return f"versions[{index}].{key}: wrong type"
        for key in ("createdAt", "supersededAt"):
            if version.get(key):
                try:
                    parse_timestamp(version[key])
                except (TypeError, ValueError):
                    return f"versions[{index}].{key}: an ISO 8601 time or epoch seconds"
    return None


def _head_problems(head: dict[str, Any], strategy: Any) -> dict[str, str]:
    problems: dict[str, str] = {}
    if strategy not in STRATEGIES:
        problems["strategy"] = f"one of {', '.join(STRATEGIES)}"
    if head.get("version") != FORMAT_VERSION:
        problems["version"] = f"unsupported export version {head.get('version')!r}"
    return problems


def validate(document: Any, strategy: Any) -> None:
    if not isinstance(document, dict):
        problems = _head_problems({"version": FORMAT_VERSION}, strategy)
        raise InvalidImport({**problems, "data": "must be an export document (a JSON object)"})
    problems = _head_problems(document, strategy)
    for key in SECTIONS:
        items = document.get(key, [])
        if not isinstance(items, list):
            problems[key] = "must be a list"
            continue
        for index, item in enumerate(items):
            problem = _item_problem(key, item)
            if problem:
                problems[f"{key}[{index}]"] = problem
                break
    if problems:
        raise InvalidImport(problems)


class ExportFile:
    """An export document on disk, read in passes and never held whole: a 136 MB export took
    492 MB to import when it was parsed at once. ``check`` validates it as ``validate`` does and
    counts its items; ``parts`` then yields documents of at most ``size`` items to send.

    Malformed JSON raises ``ValueError``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.head: dict[str, Any] = {}
        self.counts = dict.fromkeys(SECTIONS, 0)

    def check(self, strategy: Any) -> int:
        """Read the whole file once; raise InvalidImport as ``validate`` would. Returns the
        number of items."""
        problems: dict[str, str] = {}
        self.counts = dict.fromkeys(SECTIONS, 0)
        for section, item in self._walk(set(SECTIONS), problems):
            index = self.counts[section]
            self.counts[section] += 1
            problem = _item_problem(section, item)
            if problem and not any(k.startswith(section + "[") for k in problems):
                problems[f"{section}[{index}]"] = problem
        head = {"version": FORMAT_VERSION} if "data" in problems else self.head
        problems = {**_head_problems(head, strategy), **problems}
        if problems:
            raise InvalidImport(problems)
        return sum(self.counts.values())

    def parts(self, strategy: str, size: int) -> Iterator[tuple[dict[str, Any], str, int]]:
        """Like ``chunks``: one pass over the file per list, so sessions go first whatever the
        file's order."""
        head = {k: v for k, v in self.head.items() if k not in SECTIONS}
        sent = False
        for section in SECTIONS:
            if not self.counts[section]:
                continue
            batch: list[Any] = []
            for _, item in self._walk({section}, {}):
                batch.append(item)
                if len(batch) == size:
                    yield {**head, section: batch}, strategy if not sent else _after(strategy), size
                    sent, batch = True, []
            if batch:
                yield (
                    {**head, section: batch},
                    strategy if not sent else _after(strategy),
                    len(batch),
                )
                sent = True
        if not sent:
            yield dict(head), strategy, 0

    def _walk(self, wanted: set[str], problems: dict[str, str]) -> Iterator[tuple[str, Any]]:
        """The items of the ``wanted`` lists, in file order; top-level scalars go to ``head``
        and shape problems (not an object, a list that is not a list) to ``problems``."""
        import ijson  # the CLI's import only; the C backend parses ~50 MB/s

        with self.path.open("rb") as fp:
            events = _events(ijson, fp)
            first = next(events, None)
            if first is None or first[1] != "start_map":
                problems["data"] = "must be an export document (a JSON object)"
                for _ in events:  # still a JSON error if it is not JSON at all
                    pass
                return
            builder: Any = None
            section = ""
            for prefix, event, value in events:
                if builder is not None:
                    builder.event(event, value)
                    if prefix == section + ".item" and event in ("end_map", "end_array"):
                        yield section, builder.value
                        builder = None
                elif prefix in SECTIONS and "." not in prefix:
                    if event == "start_array":
                        section = prefix
                    elif event != "end_array":
                        problems[prefix] = "must be a list"
                elif section and prefix == section + ".item":
                    if section not in wanted:
                        continue
                    if event in ("start_map", "start_array"):
                        builder = ijson.ObjectBuilder()
                        builder.event(event, value)
                    else:
                        yield section, value
                elif "." not in prefix and event not in ("map_key", "end_map") and prefix:
                    self.head[prefix] = value


def _events(ijson: Any, fp: Any) -> Iterator[tuple[str, str, Any]]:
    try:
        yield from ijson.parse(fp, use_float=True)
    except ijson.JSONError as exc:  # not a ValueError: say it as json.loads would
        raise ValueError(str(exc).strip() or "incomplete JSON") from None


def _after(strategy: str) -> str:
    """The strategy for every part after the first: ``replace`` empties the store once."""
    return "merge" if strategy == "replace" else strategy


IMPORT_BATCH = 5
"""Most items per import transaction. The store's write lock (on SQLite: every writer's) is
held for one transaction at a time; it ends early when a live request arrives
(``Store.live_pending``), and the next waits while live requests are in flight, so a hook waits
for one item at most. An item costs ~5 ms in an empty store and ~13 ms at 100k observations
(the row, the ledger, the keyword index, the derive queue, with the derived lanes sharing the
cores). A hook's accept p95 during a 100k import was 375 ms with 50 items a batch, 71 ms with 5
and 73 ms with 2 before transactions ended for live requests (docs/benchmarks.md)."""


def import_(
    store: Store,
    document: dict[str, Any],
    strategy: str,
    actor: str = "api",
    batch: int = IMPORT_BATCH,
) -> dict[str, int]:
    """Import in bounded transactions of ``batch`` items. The whole document is validated first,
    so a malformed one changes nothing; a failure part-way (the store went away) leaves the
    batches before it imported, and importing the same document again completes it (items are
    inserted by id: merge overwrites, skip leaves what is there). The store counts it as bulk
    work while it runs (``Store.bulk``): the embedded vector lane waits for it."""
    with store.bulk():
        validate(document, strategy)
        counts = _import_items(store, document, strategy, batch)
        with store.write() as conn:
            audit.record(conn, actor, "import", "store", strategy, counts)
    return counts


def _import_items(
    store: Store, document: dict[str, Any], strategy: str, batch: int
) -> dict[str, int]:
    counts = {"sessions": 0, "observations": 0, "memories": 0, "skipped": 0, "updated": 0}
    per_item = strategy
    if strategy == "replace":
        with store.write() as conn:
            _empty(store, conn)
        per_item = "merge"  # the store is empty now: every item is new
    steps = (
        (_import_session, document.get("sessions", [])),
        (_import_observation, document.get("observations", [])),
        (_import_memory, document.get("memories", [])),
    )
    for step, items in steps:
        start = 0
        while start < len(items):
            store.step_aside()
            with store.write(background=True) as conn:
                end = start
                while end < len(items) and end - start < batch:
                    step(store, conn, items[end], per_item, counts)
                    end += 1
                    if store.live_pending():  # a hook arrived: let it have the lock next
                        break
            start = end
    return counts


def _empty(store: Store, conn: Connection) -> None:
    for doc_id in list(conn.execute(select(kw_docs.c.doc_id)).scalars()):
        store.keyword.delete(conn, doc_id)
    for table in (observations, memory_versions, memories, sessions):
        conn.execute(delete(table))
    # Forgotten events stay known, so a late replay of one is still a duplicate.
    conn.execute(delete(event_ledger).where(event_ledger.c.state == "stored"))


def _import_session(
    store: Store, conn: Connection, item: dict[str, Any], strategy: str, counts: dict[str, int]
) -> None:
    values = _unrow(item, sessions.c, ("started_at", "ended_at"))
    values.setdefault("status", "ended")
    values.setdefault("started_at", now())
    if insert_ignore(conn, sessions, values):
        counts["sessions"] += 1
    elif strategy == "merge":
        conn.execute(update(sessions).where(sessions.c.id == values["id"]).values(**values))
        counts["updated"] += 1
    else:
        counts["skipped"] += 1
    if values.get("summary"):
        store.keyword.upsert(
            conn,
            KeywordDoc(
                doc_id=summary_doc_id(values["id"]),
                kind="summary",
                project=values["project"],
                body=values["summary"],
                created_at=values.get("ended_at") or now(),
                agent_id=values.get("agent_id"),
                session_id=values["id"],
            ),
        )


def _import_observation(
    store: Store, conn: Connection, item: dict[str, Any], strategy: str, counts: dict[str, int]
) -> None:
    values = _unrow(item, observations.c, ("created_at", "stored_at"))
    values.setdefault("created_at", now())
    values.setdefault("stored_at", now())
    values.setdefault("host", "import")
    values.setdefault("hook_type", "import")
    values.setdefault("kind", "note")
    values.setdefault("title", str(values.get("text", ""))[:120])
    values.setdefault("text", values["title"])
    insert_ignore(
        conn,
        sessions,
        {
            "id": values["session_id"],
            "project": values["project"],
            "status": "ended",
            "started_at": values["created_at"],
        },
    )
    if insert_ignore(conn, observations, values):
        counts["observations"] += 1
    elif strategy == "merge":
        conn.execute(update(observations).where(observations.c.id == values["id"]).values(**values))
        counts["updated"] += 1
    else:
        counts["skipped"] += 1
        return
    insert_ignore(
        conn,
        event_ledger,
        {
            "event_id": values["event_id"],
            "observation_id": values["id"],
            "session_id": values["session_id"],
            "state": "stored",
            "accepted_at": now(),
            "stored_at": now(),
        },
    )
    files = " ".join(loads(values.get("files_read"), []) + loads(values.get("files_modified"), []))
    store.keyword.upsert(
        conn,
        KeywordDoc(
            doc_id=values["id"],
            kind="observation",
            project=values["project"],
            body=f"{values['text']}\n{files}".strip(),
            created_at=values["created_at"],
            agent_id=values.get("agent_id"),
            session_id=values["session_id"],
            speaker=speaker(values["kind"]),
        ),
    )


def _import_memory(
    store: Store, conn: Connection, item: dict[str, Any], strategy: str, counts: dict[str, int]
) -> None:
    values = _unrow(item, memories.c, ("created_at", "updated_at", "forgotten_at"))
    values.pop("forgotten_at", None)
    values.setdefault("project", "")
    values.setdefault("created_at", now())
    values.setdefault("updated_at", values["created_at"])
    versions = [v for v in item.get("versions") or [] if isinstance(v, dict) and v.get("content")]
    existing = conn.execute(select(memories).where(memories.c.id == values["id"])).first()
    if existing is None:
        values["version"] = max([int(v.get("version", 1)) for v in versions] or [1])
        conn.execute(insert(memories).values(**values))
        for v in versions or [{"version": 1, "content": values["content"]}]:
            conn.execute(
                insert(memory_versions).values(
                    memory_id=values["id"],
                    version=int(v.get("version", 1)),
                    content=scrub(v["content"]),
                    created_at=parse_timestamp(v["createdAt"]) if v.get("createdAt") else now(),
                    superseded_at=parse_timestamp(v["supersededAt"])
                    if v.get("supersededAt")
                    else None,
                )
            )
        counts["memories"] += 1
    elif strategy == "merge" and existing.content != values["content"]:
        version = existing.version + 1
        conn.execute(
            update(memory_versions)
            .where(
                memory_versions.c.memory_id == existing.id,
                memory_versions.c.version == existing.version,
            )
            .values(superseded_at=now())
        )
        conn.execute(
            insert(memory_versions).values(
                memory_id=existing.id, version=version, content=values["content"], created_at=now()
            )
        )
        conn.execute(
            update(memories)
            .where(memories.c.id == existing.id)
            .values(content=values["content"], version=version, updated_at=now(), forgotten_at=None)
        )
        counts["updated"] += 1
    else:
        counts["skipped"] += 1
        return
    row = conn.execute(select(memories).where(memories.c.id == values["id"])).one()
    concepts = loads(row.concepts, [])
    store.keyword.upsert(
        conn,
        KeywordDoc(
            doc_id=row.id,
            kind="memory",
            project=row.project,
            body=f"{row.content}\n{' '.join(concepts)}".strip(),
            created_at=row.updated_at,
            agent_id=row.agent_id,
        ),
    )
