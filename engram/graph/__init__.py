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

The package's parts: ``extract`` (entities of a document), ``maintain`` (apply derive-queue changes)
and ``read`` (the search stream, ``query``, counts); ``facts`` keeps the facts between named
things that the optional LLM reads from sessions, with when each held.
"""

from engram.graph.extract import (
    MAX_ENTITIES_PER_DOC,
    NODE_TYPES,
    RELATIONS,
    SESSION,
    TYPES,
    Entity,
    command_name,
    extract,
    normalise_path,
)
from engram.graph.maintain import (
    MAX_SESSION_PAIRED,
    Prepared,
    add,
    apply,
    apply_prepared,
    collect,
    prepare,
    remove,
)
from engram.graph.read import Answer, Match, by_type, match, query, stats, stream

__all__ = [
    "MAX_ENTITIES_PER_DOC",
    "MAX_SESSION_PAIRED",
    "RELATIONS",
    "NODE_TYPES",
    "SESSION",
    "TYPES",
    "Answer",
    "Entity",
    "Match",
    "Prepared",
    "add",
    "apply",
    "apply_prepared",
    "by_type",
    "collect",
    "command_name",
    "extract",
    "match",
    "normalise_path",
    "prepare",
    "query",
    "remove",
    "stats",
    "stream",
]
