"""Engine creation and schema migrations for the store of record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import (
    Connection,
    Engine,
    create_engine,
    event,
    insert,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url

from engram import schema

SQLITE_BUSY_TIMEOUT_MS = 10_000
"""How long a SQLite writer waits for the lock; gateway threads and workers share one file."""


WRITE_OPTION = "engram_write"
"""Execution option marking a connection whose transactions write (SQLite: BEGIN IMMEDIATE)."""


def is_sqlite(engine_or_conn: Engine | Connection) -> bool:
    return engine_or_conn.dialect.name == "sqlite"


def create_store_engine(database_url: str) -> Engine:
    """An engine for the store of record, with SQLite tuned for many readers and one writer."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_size=16,
            max_overflow=16,
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            # Let SQLAlchemy, not pysqlite, decide where transactions begin, so BEGIN IMMEDIATE
            # below takes the write lock up front instead of failing on upgrade (SQLITE_BUSY).
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
            # Writers take the lock at BEGIN (see write_connection); readers never block them.
            mode = "IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "DEFERRED"
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine
    connect_args = POSTGRES_SESSION if url.get_backend_name() == "postgresql" else {}
    return create_engine(
        url, pool_size=10, max_overflow=20, pool_pre_ping=True, connect_args=connect_args
    )


DEAD_PEER = {"idle": 10, "interval": 5, "count": 3, "unacked_ms": 25_000}
"""How both ends of a PostgreSQL connection find a vanished peer (a worker host cut off
mid-transaction, a gateway whose link dropped): TCP keepalive after 10 s idle, 3 probes 5 s
apart, and ``tcp_user_timeout``: data unacknowledged for 25 s ends the connection (with an
answer in flight to the lost host, keepalives never start and only the kernel's retransmission
limit, ~15 min, would). Without them the server keeps the vanished session in its transaction,
with its row locks, and every other worker waits behind it: tests/test_multihost.py stalled
capture for the whole idle-in-transaction limit until the server side was set."""
IDLE_IN_TRANSACTION_MS = 120_000
"""A session that opened a transaction and then sent nothing for two minutes (a frozen or
stopped process) is ended by the server, releasing its locks; no Engram transaction waits on
its client that long."""
POSTGRES_SESSION = {
    "keepalives": 1,
    "keepalives_idle": DEAD_PEER["idle"],
    "keepalives_interval": DEAD_PEER["interval"],
    "keepalives_count": DEAD_PEER["count"],
    "tcp_user_timeout": DEAD_PEER["unacked_ms"],
    "options": " ".join(
        [
            f"-c tcp_keepalives_idle={DEAD_PEER['idle']}",
            f"-c tcp_keepalives_interval={DEAD_PEER['interval']}",
            f"-c tcp_keepalives_count={DEAD_PEER['count']}",
            f"-c tcp_user_timeout={DEAD_PEER['unacked_ms']}",
            f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}",
        ]
    ),
}
"""libpq parameters of every store connection: the client's keepalives, and the server's for
this session (``options``; each is a per-session setting any user may change)."""


Migration = Callable[[Connection], None]


def _initial(conn: Connection) -> None:
    schema.metadata.create_all(conn)


def _keyword_backend_tables(conn: Connection) -> None:
    from engram.keyword import keyword_index_for

    keyword_index_for(conn).create(conn)


def _heartbeats(conn: Connection) -> None:
    schema.heartbeats.create(conn, checkfirst=True)


def _fts_scope_column(conn: Connection) -> None:
    """FTS5 gained a scope column (scope inside MATCH): rebuild the table of a store made
    before, carrying every indexed document over. PostgreSQL has nothing to do."""
    if not is_sqlite(conn):
        return
    columns = [row[1] for row in conn.exec_driver_sql("PRAGMA table_info(kw_fts)")]
    if "scope" in columns:
        return
    from engram.keyword import Fts5Index, KeywordDoc, scope_tokens

    conn.exec_driver_sql("ALTER TABLE kw_fts RENAME TO kw_fts_old")
    Fts5Index().create(conn)
    rows = conn.exec_driver_sql(
        "SELECT f.rowid, f.body, d.doc_id, d.kind, d.project, d.agent_id FROM kw_fts_old AS f "
        "JOIN kw_docs AS d ON d.id = f.rowid"
    ).all()
    for row in rows:
        doc = KeywordDoc(row.doc_id, row.kind, row.project, row.body, 0.0, agent_id=row.agent_id)
        conn.exec_driver_sql(
            "INSERT INTO kw_fts(rowid, body, scope) VALUES (?, ?, ?)",
            (row.rowid, row.body, scope_tokens(doc)),
        )
    conn.exec_driver_sql("DROP TABLE kw_fts_old")


def _derive_queue(conn: Connection) -> None:
    """Derived indexes (vectors, graph): kw_docs keeps each document's body, and a queue of
    changes to derive. Bodies of documents indexed before are rebuilt from the store of record
    the way the write paths build them; every document is queued for the graph."""
    if "body" not in {c["name"] for c in inspect(conn).get_columns("kw_docs")}:
        conn.execute(text("ALTER TABLE kw_docs ADD COLUMN body TEXT"))
    schema.derive_queue.create(conn, checkfirst=True)
    obs, mem, ses, kw = (schema.observations, schema.memories, schema.sessions, schema.kw_docs)
    for row in conn.execute(select(kw.c.doc_id, kw.c.kind)).all():
        body: str | None = None
        if row.kind == "observation":
            o = conn.execute(
                select(obs.c.text, obs.c.files_read, obs.c.files_modified).where(
                    obs.c.id == row.doc_id
                )
            ).first()
            if o is not None:
                files = " ".join(
                    json.loads(o.files_read or "[]") + json.loads(o.files_modified or "[]")
                )
                body = f"{o.text}\n{files}" if files else o.text
        elif row.kind == "memory":
            m = conn.execute(
                select(mem.c.content, mem.c.concepts).where(mem.c.id == row.doc_id)
            ).first()
            if m is not None:
                concepts = " ".join(json.loads(m.concepts or "[]"))
                body = f"{m.content}\n{concepts}" if concepts else m.content
        elif row.kind == "summary":
            body = conn.execute(
                select(ses.c.summary).where(ses.c.id == row.doc_id.removeprefix("sum_"))
            ).scalar()
        if body is not None:
            conn.execute(update(kw).where(kw.c.doc_id == row.doc_id).values(body=body))
    from engram.derive import enqueue_all

    enqueue_all(conn, "graph")


def _graph_tables(conn: Connection) -> None:
    """The knowledge graph's tables; every indexed document is queued so the graph of an
    existing store is built in the background (documents already queued keep their row)."""
    for table in (
        schema.graph_entities,
        schema.graph_mentions,
        schema.graph_edges,
        schema.graph_session_members,
    ):
        table.create(conn, checkfirst=True)
    from engram.derive import enqueue_all

    enqueue_all(conn, "graph")


def _import_ledger(conn: Connection) -> None:
    """Memory-file sync: the import ledger, and a JSON provenance column on memories."""
    if "meta" not in {c["name"] for c in inspect(conn).get_columns("memories")}:
        conn.execute(text("ALTER TABLE memories ADD COLUMN meta TEXT"))
    schema.import_ledger.create(conn, checkfirst=True)


def _ledger_positions(conn: Connection) -> None:
    """Where each synced fact stood in its file: an edited fact is known by its neighbours."""
    if "position" not in {c["name"] for c in inspect(conn).get_columns("import_ledger")}:
        conn.execute(text("ALTER TABLE import_ledger ADD COLUMN position INTEGER"))


def _load_indexes(conn: Connection) -> None:
    """Indexes for work under load: the inbox by session (the capture task asks, for each event
    of an ended session, whether the session still has events waiting: its summary follows the
    last) and keyword documents by kind and time (the vector index keeps the newest
    observations)."""
    for table, name in (
        (schema.capture_inbox, "ix_capture_inbox_session"),
        (schema.kw_docs, "ix_kw_docs_kind_created"),
    ):
        next(i for i in table.indexes if i.name == name).create(conn, checkfirst=True)


def _empty_edges_index(conn: Connection) -> None:
    """Emptied graph edges by destination: graph.collect scanned every edge for them (47 ms at
    341,000 edges) in each graph transaction, inside the write lock a live capture waits for."""
    index = next(i for i in schema.graph_edges.indexes if i.name == "ix_graph_edges_empty_dst")
    index.create(conn, checkfirst=True)


def _context_injections(conn: Connection) -> None:
    """Per-prompt context: what each session was already given."""
    schema.context_injections.create(conn, checkfirst=True)


def _llm_usage(conn: Connection) -> None:
    """LLM spend by day, provider, model and task: what the daily budgets read."""
    schema.llm_usage.create(conn, checkfirst=True)


def _observation_llm(conn: Connection) -> None:
    """The LLM's reading of an observation (compression opted in per project)."""
    if "llm" not in {c["name"] for c in inspect(conn).get_columns("observations")}:
        conn.execute(text("ALTER TABLE observations ADD COLUMN llm TEXT"))


def _memory_use(conn: Connection) -> None:
    """Memories: when they were last used, how often, and when they were evicted (decay)."""
    have = {c["name"] for c in inspect(conn).get_columns("memories")}
    for name, kind in (
        ("accessed_at", "FLOAT"),
        ("access_count", "INTEGER NOT NULL DEFAULT 0"),
        ("evicted_at", "FLOAT"),
    ):
        if name not in have:
            conn.execute(text(f"ALTER TABLE memories ADD COLUMN {name} {kind}"))


def _graph_facts(conn: Connection) -> None:
    """Facts between named things, with when each held (engram.graph.facts)."""
    schema.graph_facts.create(conn, checkfirst=True)


def _viewer(conn: Connection) -> None:
    """The viewer: the activity feed its live stream reads, and its sign-in tokens."""
    schema.activity.create(conn, checkfirst=True)
    schema.viewer_tokens.create(conn, checkfirst=True)


def _ledger_stored_index(conn: Connection) -> None:
    """The event ledger by stored time: /metrics reads the events stored in the last minutes
    (accept-to-stored latency) without scanning every event ever captured."""
    index = next(i for i in schema.event_ledger.indexes if i.name == "ix_event_ledger_stored_at")
    index.create(conn, checkfirst=True)


def _session_order_index(conn: Connection) -> None:
    """Keyword documents by session, kind and time: search reads each candidate's neighbour,
    the document of its kind in its session recorded just before it (``keyword.neighbours``;
    with session and time alone SQLite chose the kind-and-time index and scanned)."""
    index = next(i for i in schema.kw_docs.indexes if i.name == "ix_kw_docs_session_created")
    index.create(conn, checkfirst=True)


def _speakers(conn: Connection) -> None:
    """Who said each keyword document: search's neighbours lift only the other party's turn
    (``keyword.neighbours``). Observations already indexed get theirs from their kind, by the
    rule ``observations.speaker`` applies to new ones: a prompt is the user's, the rest the
    agent's."""
    if "speaker" not in {c["name"] for c in inspect(conn).get_columns("kw_docs")}:
        conn.execute(text(f"ALTER TABLE kw_docs ADD COLUMN speaker VARCHAR({schema.ID})"))
    conn.execute(
        text(
            "UPDATE kw_docs SET speaker = (SELECT CASE WHEN o.kind = 'prompt' THEN 'user' "
            "ELSE 'agent' END FROM observations AS o WHERE o.id = kw_docs.doc_id) "
            "WHERE kind = 'observation' AND speaker IS NULL"
        )
    )


# Append-only. A fresh database runs every step; an existing one runs the steps it lacks.
# A step that changes a table must also leave schema.py describing the new shape.
MIGRATIONS: tuple[tuple[int, str, Migration], ...] = (
    (1, "initial tables", _initial),
    (2, "keyword index backend", _keyword_backend_tables),
    (3, "service heartbeats", _heartbeats),
    (4, "FTS5 scope column", _fts_scope_column),
    (5, "derived index queue and document bodies", _derive_queue),
    (6, "knowledge graph tables", _graph_tables),
    (7, "memory-file sync ledger and memory provenance", _import_ledger),
    (8, "indexes for load: inbox by session, documents by kind and time", _load_indexes),
    (9, "memory-file sync: each fact's position in its file", _ledger_positions),
    (10, "per-prompt context: items each session was given", _context_injections),
    (11, "graph: emptied edges by destination", _empty_edges_index),
    (12, "LLM spend by day, provider, model and task", _llm_usage),
    (13, "observations: the LLM's reading", _observation_llm),
    (14, "memories: use, access count, eviction", _memory_use),
    (15, "graph facts with temporal validity", _graph_facts),
    (16, "viewer: activity feed and sign-in tokens", _viewer),
    (17, "event ledger by stored time, for metrics", _ledger_stored_index),
    (18, "keyword documents by session and time, for neighbours", _session_order_index),
    (19, "keyword documents: who said each, for neighbours", _speakers),
)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that writes: on SQLite it holds the write lock from its first statement."""
    with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
        yield conn


def migrate(engine: Engine) -> list[int]:
    """Apply pending migrations; returns the versions applied. Safe to call on every start,
    from several processes at once (SQLite write lock, PostgreSQL advisory lock)."""
    applied: list[int] = []
    with write_transaction(engine) as conn:
        if not is_sqlite(conn):
            conn.execute(text("SELECT pg_advisory_xact_lock(7437001)"))
        schema.schema_migrations.create(conn, checkfirst=True)
        done = set(conn.execute(select(schema.schema_migrations.c.version)).scalars())
        for version, name, step in MIGRATIONS:
            if version in done:
                continue
            step(conn)
            conn.execute(
                insert(schema.schema_migrations).values(
                    version=version, name=name, applied_at=time.time()
                )
            )
            applied.append(version)
    return applied


def schema_version(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT max(version) FROM schema_migrations")).scalar() or 0)
