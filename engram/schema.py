"""Tables of the store of record (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Times are UNIX epoch seconds (float); JSON-shaped columns hold JSON text so both dialects store
them the same way. The keyword index keeps its own tables (see ``engram.keyword``).
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

ID = 200  # ids come from hosts (session ids) or are derived hashes; bound them, but generously

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(ID), primary_key=True),
    Column("project", String(ID), nullable=False),
    Column("agent_id", String(ID)),
    Column("host", String(64)),
    Column("cwd", Text),
    Column("status", String(16), nullable=False, default="active"),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float),
    Column("summary", Text),
    Column("summary_json", Text),
    Index("ix_sessions_project_started", "project", "started_at"),
)

observations = Table(
    "observations",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("event_id", String(ID), nullable=False, unique=True),
    Column("session_id", String(ID), nullable=False),
    Column("project", String(ID), nullable=False),
    Column("agent_id", String(ID)),
    Column("host", String(64), nullable=False),
    Column("hook_type", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("tool_name", String(ID)),
    Column("title", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("prompt", Text),
    Column("tool_input", Text),
    Column("tool_output", Text),
    Column("files_read", Text, nullable=False, default="[]"),
    Column("files_modified", Text, nullable=False, default="[]"),
    Column("commands", Text, nullable=False, default="[]"),
    Column("errors", Text, nullable=False, default="[]"),
    Column("concepts", Text, nullable=False, default="[]"),
    Column("created_at", Float, nullable=False),
    Column("stored_at", Float, nullable=False),
    Column("llm", Text),  # JSON: the LLM's reading of it (engram.llm.work), when a project opted in
    Index("ix_observations_session_created", "session_id", "created_at"),
    Index("ix_observations_project_created", "project", "created_at"),
)

memories = Table(
    "memories",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("project", String(ID), nullable=False),  # "" for scope=global
    Column("scope", String(64), nullable=False, default="project"),
    Column("agent_id", String(ID)),
    Column("concepts", Text, nullable=False, default="[]"),
    Column("content", Text, nullable=False),  # the current version's content
    Column("version", Integer, nullable=False, default=1),
    Column("source", String(64), nullable=False, default="api"),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("forgotten_at", Float),
    # Use and decay (engram.consolidate): when it was last returned by search or given to a
    # session, how often; an evicted memory (decayed) is out of every index but kept, and can be
    # restored until it is forgotten for good.
    Column("accessed_at", Float),
    Column("access_count", Integer, nullable=False, default=0, server_default="0"),
    Column("evicted_at", Float),
    # JSON: provenance of a memory imported from a file ({source, path, anchor, sourceKey,
    # contentHash, links}) or, for a sync-conflict copy, {conflict: {memoryId, sourceKey, ...}}
    Column("meta", Text),
    Index("ix_memories_project_updated", "project", "updated_at"),
)

memory_versions = Table(
    "memory_versions",
    metadata,
    Column("memory_id", String(64), primary_key=True),
    Column("version", Integer, primary_key=True),
    Column("content", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("superseded_at", Float),
)

# Memory-file sync (engram.memsync): which memory each imported file fact became, at which
# content and memory version. Keys are namespaced per watched root, `<tool>@<12-hex root
# fingerprint>:<relpath>[#anchor]`; the row without an anchor is the file itself. Rows keyed
# `conflict:<memory id>` point at the live sync-conflict copy of a contested memory.
import_ledger = Table(
    "import_ledger",
    metadata,
    Column("user_name", String(ID), primary_key=True),
    Column("source_key", String(1000), primary_key=True),
    Column("memory_id", String(64)),  # None for the file row
    Column("content_hash", String(64), nullable=False),  # of the fact (or file) as imported
    Column("memory_version", Integer),  # the memory's version this import wrote or confirmed
    Column("path", Text),
    Column("imported_at", Float, nullable=False),
    Column("position", Integer),  # the fact's place in its file at that import (its neighbours)
    Index("ix_import_ledger_memory", "memory_id"),
)

# What the per-prompt context (POST /v1/context with forPrompt) already gave a session: each
# item (an observation, a memory) is injected into one session once.
context_injections = Table(
    "context_injections",
    metadata,
    Column("session_id", String(ID), primary_key=True),
    Column("item_id", String(64), primary_key=True),
    Column("injected_at", Float, nullable=False),
)

# The capture inbox is the delivery guarantee: an accepted event lives here until a worker has
# stored it (row deleted) or given up on it (state "dead"). The broker only dispatches.
capture_inbox = Table(
    "capture_inbox",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("observation_id", String(64), nullable=False),
    Column("session_id", String(ID), nullable=False),
    Column("project", String(ID), nullable=False),
    Column("payload", Text, nullable=False),
    Column("state", String(16), nullable=False),  # pending | processing | retrying | dead
    Column("attempts", Integer, nullable=False, default=0),
    Column("last_error", Text),
    Column("next_attempt_at", Float),
    Column("dispatched_at", Float),
    Column("claimed_until", Float),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Index("ix_capture_inbox_state", "state"),
    Index("ix_capture_inbox_session", "session_id", "state"),
)

# The event ledger remembers every accepted eventId for good, so a replay is a duplicate even
# after the inbox row is gone or the observation was forgotten.
event_ledger = Table(
    "event_ledger",
    metadata,
    Column("event_id", String(ID), primary_key=True),
    Column("observation_id", String(64), nullable=False),
    Column("session_id", String(ID), nullable=False),
    Column("state", String(16), nullable=False),  # accepted | stored | dead | forgotten
    Column("accepted_at", Float, nullable=False),
    Column("stored_at", Float),
    Index("ix_event_ledger_stored_at", "stored_at"),  # recent latency (engram.metrics)
)

audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("actor", String(64), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target_kind", String(32), nullable=False),
    Column("target_id", String(ID), nullable=False),
    Column("details", Text, nullable=False, default="{}"),
    Index("ix_audit_log_target", "target_kind", "target_id"),
)

# Liveness of singleton services (the sweeper run by `engram beat`): status reads it to say
# when nothing is sweeping.
heartbeats = Table(
    "heartbeats",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("at", Float, nullable=False),
    Column("detail", Text, nullable=False, default="{}"),
)

# LLM spend (engram.llm.budget): one row per UTC day, provider, model and task, counted from each
# response's usage. The budget reads today's rows before every call, across every process.
# ``refused``: calls not made because a budget was spent; ``invalid``: answers that were not usable
# (empty, reasoning only, malformed); ``dropped``: work given up before any call (the LLM backlog
# full, or older than its maximum age): its heuristic result stands.
llm_usage = Table(
    "llm_usage",
    metadata,
    Column("day", String(10), primary_key=True),  # YYYY-MM-DD, UTC
    Column("provider", String(32), primary_key=True),
    Column("model", String(ID), primary_key=True),
    Column("task", String(32), primary_key=True),
    Column("calls", Integer, nullable=False, default=0),
    Column("failures", Integer, nullable=False, default=0),
    Column("invalid", Integer, nullable=False, default=0),
    Column("refused", Integer, nullable=False, default=0),
    Column("dropped", Integer, nullable=False, default=0),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("usd", Float, nullable=False, default=0.0),
)

schema_migrations = Table(
    "schema_migrations",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("applied_at", Float, nullable=False),
)

# Keyword index bookkeeping shared by both backends: which documents are indexed, under which
# scope. The FTS5 backend adds a virtual table keyed by kw_docs.id; the postings backend adds
# kw_postings and kw_stats.
kw_docs = Table(
    "kw_docs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("doc_id", String(64), nullable=False),
    Column("kind", String(16), nullable=False),  # observation | memory | summary
    Column("project", String(ID), nullable=False),
    Column("agent_id", String(ID)),
    Column("session_id", String(ID)),
    Column("speaker", String(ID)),  # who said it (user | agent for observations); neighbours
    Column("length", Integer, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("body", Text),  # the indexed text, as given: what derived indexes (vectors, graph) read
    UniqueConstraint("doc_id", name="uq_kw_docs_doc_id"),
    Index("ix_kw_docs_project", "project"),
    Index("ix_kw_docs_kind_created", "kind", "created_at"),
    Index("ix_kw_docs_session_created", "session_id", "kind", "created_at"),
)

kw_postings = Table(
    "kw_postings",
    metadata,
    Column("term", String(128), primary_key=True),
    Column("doc", Integer, primary_key=True),
    Column("tf", Integer, nullable=False),
    Index("ix_kw_postings_doc", "doc"),
)

kw_stats = Table(
    "kw_stats",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("n_docs", Integer, nullable=False),
    Column("total_length", Integer, nullable=False),
)


# Work for the indexes derived from the keyword documents (vectors, graph): one row per target and
# document, written in the transaction that changed the document, deleted once the derived index
# has caught up with that change. Like the capture inbox, the store is the guarantee and the
# broker only dispatches.
derive_queue = Table(
    "derive_queue",
    metadata,
    Column("target", String(16), primary_key=True),  # vector | graph
    Column("doc_id", String(64), primary_key=True),
    Column("op", String(8), nullable=False),  # upsert | delete
    Column("enqueued_at", Float, nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("claimed_until", Float),
    Column("last_error", Text),
    Index("ix_derive_queue_target_enqueued", "target", "enqueued_at"),
)


# The knowledge graph (engram.graph), derived from the keyword documents through the derive
# queue. Entities are per project; everything a document contributed is recorded per document
# (graph_mentions) or as reference counts, so removing a document subtracts exactly what it
# added. ``agent`` columns hold "" for shared items (no agent): they are part of unique keys,
# where NULLs would never conflict.
graph_entities = Table(
    "graph_entities",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project", String(ID), nullable=False),
    Column("type", String(16), nullable=False),  # file | symbol | package | command | error |
    #                                              concept | session
    Column("key", String(300), nullable=False),  # normalised name: what identity and lookup use
    Column("alias", String(300), nullable=False),  # what a query word matches (a file's basename)
    Column("name", String(300), nullable=False),  # as first seen, for display
    Column("doc_count", Integer, nullable=False, default=0),
    Column("first_seen", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    UniqueConstraint("project", "type", "key", name="uq_graph_entities_project_type_key"),
    Index("ix_graph_entities_alias", "alias", "project"),
)

graph_mentions = Table(
    "graph_mentions",
    metadata,
    Column("doc_id", String(64), primary_key=True),
    Column("entity_id", Integer, primary_key=True),
    Column("role", String(16), nullable=False),  # edits | reads | runs | mentions
    Column("rank", Integer, nullable=False),  # position in the document's entity list
    Column("kind", String(16), nullable=False),  # the document's kind
    Column("agent", String(ID), nullable=False, default=""),
    Column("session_id", String(ID)),
    Column("created_at", Float, nullable=False),
    Index("ix_graph_mentions_entity_created", "entity_id", "created_at"),
)

# Weighted, directed (symmetric relations are stored both ways): co_occurs (in one document),
# same_session (edited files and errors of one session), edits / edited_in (session ↔ file).
graph_edges = Table(
    "graph_edges",
    metadata,
    Column("src", Integer, primary_key=True),
    Column("dst", Integer, primary_key=True),
    Column("relation", String(16), primary_key=True),
    Column("agent", String(ID), primary_key=True),
    Column("weight", Integer, nullable=False),
    Index("ix_graph_edges_src_weight", "src", "weight"),
    # Emptied edges by their destination, for graph.collect: only an edge whose weight reaches
    # 0 enters it, and collect deletes it in the same transaction, so the index stays near
    # empty and an ordinary edge write never touches it.
    Index(
        "ix_graph_edges_empty_dst",
        "dst",
        sqlite_where=text("weight <= 0"),
        postgresql_where=text("weight <= 0"),
    ),
)

# Facts between named things (engram.graph.facts), beyond what heuristics extract from code:
# "orders-service uses PostgreSQL", with when each held. A fact contradicted later is never
# deleted: it gets ``valid_to`` and ``replaced_by`` (the fact that replaced it). Names are kept
# normalised (``subject_key``, ``object_key``: what merging compares) and as first written.
graph_facts = Table(
    "graph_facts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project", String(ID), nullable=False),
    Column("subject_key", String(300), nullable=False),
    Column("subject", String(300), nullable=False),
    Column("relation", String(64), nullable=False),
    Column("object_key", String(300), nullable=False),
    Column("object", String(300), nullable=False),
    Column("exclusive", Integer, nullable=False, default=0),  # holds one object at a time
    Column("valid_from", Float, nullable=False),
    Column("valid_to", Float),
    Column("replaced_by", Integer),
    Column("source_doc", String(64)),  # the summary document it was read from
    Column("session_id", String(ID)),
    Column("by", String(300), nullable=False),  # provider:model
    Column("created_at", Float, nullable=False),
    Index("ix_graph_facts_project_subject", "project", "subject_key"),
    Index("ix_graph_facts_project_object", "project", "object_key"),
)

# Which entities a session holds for same_session edges, with how many of its documents name
# each one; ``paired`` marks the members that have their same_session edges (at most
# graph.MAX_SESSION_PAIRED per session and agent).
graph_session_members = Table(
    "graph_session_members",
    metadata,
    Column("session_id", String(ID), primary_key=True),
    Column("agent", String(ID), primary_key=True),
    Column("entity_id", Integer, primary_key=True),
    Column("refs", Integer, nullable=False),
    Column("paired", Integer, nullable=False, default=0),
)

# What happened, newest last, for the viewer's live stream (engram.activity): one row per
# stored observation, session start and end, memory change and capture problem, written in the
# transaction of the change. Ids only and short titles, never payloads; pruned to the newest
# ``activity.KEEP`` rows. Every gateway replica reads the same table, so an event reaches all.
activity = Table(
    "activity",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("type", String(64), nullable=False),
    Column("data", Text, nullable=False),
)

# The viewer's sign-in (engram.webauth): one-time links (``kind`` "link", redeemed once) and the
# browser sessions they became (``kind`` "session", an HttpOnly cookie). Only hashes are kept.
viewer_tokens = Table(
    "viewer_tokens",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("csrf", String(64)),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("used_at", Float),
)
