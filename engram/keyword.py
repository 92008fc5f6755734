"""Keyword (BM25) index behind one small interface, with one backend per store dialect.

- ``Fts5Index`` (SQLite): an FTS5 table with the porter stemmer; ``bm25()`` ranks.
- ``PostingsIndex`` (PostgreSQL, or any SQL store): postings in plain tables, terms stemmed in
  Python, Okapi BM25 computed in one SQL query.

Both write inside the caller's transaction, so a document is indexed exactly when its row is
stored. Scope (project, agent) is part of the ranking query itself. See docs/architecture.md for
why FTS5 is the default (measured in tests/benchmarks/bench_keyword_engines.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Connection,
    Select,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    true,
    tuple_,
    update,
)

from engram import analysis
from engram.schema import kw_docs, kw_postings, kw_stats
from engram.scope import Scope, Window

BM25_K1 = 1.2
BM25_B = 0.75


@dataclasses.dataclass(frozen=True)
class KeywordDoc:
    doc_id: str
    kind: str  # observation | memory | summary
    project: str
    body: str
    created_at: float
    agent_id: str | None = None
    session_id: str | None = None
    speaker: str | None = None  # who said it, in its session (``neighbours``); None: not a turn


@dataclasses.dataclass(frozen=True)
class KeywordHit:
    doc_id: str
    kind: str
    session_id: str | None
    score: float  # higher is better


class KeywordIndex(Protocol):
    name: str

    def create(self, conn: Connection) -> None: ...
    def upsert(self, conn: Connection, doc: KeywordDoc) -> None: ...
    def delete(self, conn: Connection, doc_id: str) -> None: ...
    def search(
        self,
        conn: Connection,
        query: str,
        scope: Scope,
        limit: int,
        kinds: tuple[str, ...] | None = None,
        window: Window | None = None,
    ) -> list[KeywordHit]: ...
    def count(self, conn: Connection) -> int: ...
    def frequencies(self, conn: Connection, terms: Mapping[str, str]) -> tuple[int, dict[str, int]]:
        """The number of documents in the index, and for each of ``terms`` (stemmed term:
        the word as the query spells it) how many hold it (``RememberedFrequencies``)."""
        ...


def _scope_clause(
    scope: Scope, kinds: tuple[str, ...] | None, window: Window | None = None
) -> ColumnElement[bool]:
    clauses: list[ColumnElement[bool]] = []
    if not scope.all_projects:
        clauses.append(kw_docs.c.project.in_(scope.projects()))
    if scope.agent_id is not None:
        # An agent sees its own items and the project's shared ones, never another agent's.
        clauses.append(or_(kw_docs.c.agent_id == scope.agent_id, kw_docs.c.agent_id.is_(None)))
    if kinds:
        clauses.append(kw_docs.c.kind.in_(kinds))
    if window:
        clauses.append(window.clause(kw_docs.c.created_at))
    return and_(*clauses) if clauses else true()


def _insert_doc(conn: Connection, doc: KeywordDoc, length: int) -> int:
    result = conn.execute(
        insert(kw_docs)
        .values(
            doc_id=doc.doc_id,
            kind=doc.kind,
            project=doc.project,
            agent_id=doc.agent_id,
            session_id=doc.session_id,
            speaker=doc.speaker,
            length=length,
            created_at=doc.created_at,
            body=doc.body,
        )
        .returning(kw_docs.c.id)
    )
    return int(result.scalar_one())


def scope_token(kind: str, value: str | None) -> str:
    """One indexable token standing for a scope value (``zp…`` project, ``za…`` agent,
    ``zk…`` kind). Digits only after the prefix: no tokenizer or stemmer can split or alter it,
    so equality of tokens is equality of values."""
    if value is None:
        return f"z{kind}none"
    digest = hashlib.sha1(value.encode("utf-8")).hexdigest()[:15]
    return f"z{kind}{int(digest, 16)}"


def scope_tokens(doc: KeywordDoc) -> str:
    return " ".join(
        (scope_token("p", doc.project), scope_token("a", doc.agent_id), scope_token("k", doc.kind))
    )


DF_DRIFT = 0.1
"""Remembered document frequencies are forgotten when the index has grown (or shrunk) by this
share since they were counted: an IDF moves by at most ~0.1 in between."""
DF_TERMS = 50_000
"""... or when this many terms are remembered (a few MB)."""
COMMON_SHARE = 0.5
"""FTS5 ranks every document that holds any of the query's words, and a word in half of them
or more adds nothing to its BM25: FTS5 floors such a word's IDF, log((N - n + 0.5) / (n +
0.5)), at 1e-6. So the words of a query that this share of the documents or more hold
("test", "py" and "src" in a store of tool outputs) are left out of its MATCH; only when the
rest match fewer documents than asked is it asked again whole. The same hits in the same
order, but the ranking reads a few thousand documents, not most of the store (a query with
"test" at 50,000 observations: 114 against 19 ms; docs/benchmarks.md, "Words that score
nothing")."""


class RememberedFrequencies:
    """Document frequencies kept between queries. Counting a common word's documents reads its
    whole posting list: over LongMemEval-S's 100,000 turns, counting every question word each
    time doubled the hybrid search's p50 (9.3 -> 18.7 ms); the common words are the ones every
    question repeats. Forgotten all at once (``DF_DRIFT``, ``DF_TERMS``)."""

    def __init__(self) -> None:
        self._df: dict[str, int] = {}
        self._n_docs = 0
        self._lock = threading.Lock()

    def get(
        self,
        n_docs: int,
        terms: Mapping[str, str],
        count: Callable[[Mapping[str, str]], dict[str, int]],
    ) -> dict[str, int]:
        """The frequency of each of ``terms`` in an index of ``n_docs`` documents, counting
        (``count``: term -> documents, absent for none) only those not remembered."""
        with self._lock:
            if (
                not self._n_docs
                or abs(n_docs - self._n_docs) > DF_DRIFT * self._n_docs
                or len(self._df) > DF_TERMS
            ):
                self._df, self._n_docs = {}, n_docs
            known = {term: self._df[term] for term in terms if term in self._df}
        missing = {term: word for term, word in terms.items() if term not in known}
        if missing:
            counted = count(missing)
            found = {term: counted.get(term, 0) for term in missing}
            with self._lock:
                self._df.update(found)
            known.update(found)
        return known


class Fts5Index:
    """SQLite FTS5, rowid-aligned with kw_docs.

    Scope is indexed as tokens in a second column and is part of the MATCH expression
    (``scope : zp… AND body : (...)``), so FTS5 intersects posting lists and ranks only the
    documents in scope; that column has weight 0 in bm25.
    """

    name = "fts5"

    def __init__(self) -> None:
        self._frequencies = RememberedFrequencies()
        self._phrases = RememberedFrequencies()  # keyed by the query's words as FTS5 reads them

    def create(self, conn: Connection) -> None:
        conn.exec_driver_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS kw_fts USING fts5("
            "body, scope, tokenize='porter unicode61 remove_diacritics 2')"
        )
        conn.exec_driver_sql("INSERT INTO kw_fts(kw_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)')")

    def upsert(self, conn: Connection, doc: KeywordDoc) -> None:
        self.delete(conn, doc.doc_id)
        body = analysis.expand_identifiers(doc.body)
        rowid = _insert_doc(conn, doc, len(body))
        conn.exec_driver_sql(
            "INSERT INTO kw_fts(rowid, body, scope) VALUES (?, ?, ?)",
            (rowid, body, scope_tokens(doc)),
        )

    def delete(self, conn: Connection, doc_id: str) -> None:
        rowid = conn.execute(select(kw_docs.c.id).where(kw_docs.c.doc_id == doc_id)).scalar()
        if rowid is None:
            return
        conn.exec_driver_sql("DELETE FROM kw_fts WHERE rowid = ?", (rowid,))
        conn.execute(delete(kw_docs).where(kw_docs.c.id == rowid))

    @staticmethod
    def query_groups(query: str) -> list[tuple[str, ...]]:
        return analysis.query_groups(analysis.expand_identifiers(query))

    @staticmethod
    def match_expression(
        groups: list[tuple[str, ...]],
        scope: Scope | None = None,
        kinds: tuple[str, ...] | None = None,
    ) -> str:
        """An FTS5 MATCH string: the scope tokens AND the OR of query words, each widened by
        its synonyms. Query words are quoted, so user text can never be read as syntax."""
        words = " OR ".join(
            "(" + " OR ".join('"' + alt.replace('"', '""') + '"' for alt in group) + ")"
            for group in groups
        )
        clauses = []
        if scope is not None and not scope.all_projects:
            clauses.append(" OR ".join(scope_token("p", p) for p in scope.projects()))
        if scope is not None and scope.agent_id is not None:
            clauses.append(f"{scope_token('a', scope.agent_id)} OR {scope_token('a', None)}")
        if kinds:
            clauses.append(" OR ".join(scope_token("k", k) for k in kinds))
        return " AND ".join([*(f"scope : ({c})" for c in clauses), f"body : ({words})"])

    def search(
        self,
        conn: Connection,
        query: str,
        scope: Scope,
        limit: int,
        kinds: tuple[str, ...] | None = None,
        window: Window | None = None,
    ) -> list[KeywordHit]:
        groups = self.query_groups(query)
        if not groups:
            return []

        def ranked(words: list[tuple[str, ...]]) -> list[KeywordHit]:
            expression = self.match_expression(words, scope, kinds)
            if window:
                return self._ranked_in(conn, expression, limit, window)
            return self._ranked(conn, expression, limit)

        scored = self._scored(conn, groups)
        if scored != groups:
            hits = ranked(scored)
            if len(hits) >= limit:  # below them, only documents the dropped words matched
                return hits
        return ranked(groups)

    def _scored(self, conn: Connection, groups: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """``groups`` without the words FTS5's BM25 scores at nothing (``COMMON_SHARE``); all of
        them when nothing else is left."""
        n_docs = self.count(conn)
        words = {word: word for group in groups for word in group}
        df = self._phrases.get(n_docs, words, lambda w: self._documents_with(conn, w))
        kept = [tuple(w for w in group if df.get(w, 0) < COMMON_SHARE * n_docs) for group in groups]
        return [group for group in kept if group] or groups

    @staticmethod
    def _ranked(conn: Connection, expression: str, limit: int) -> list[KeywordHit]:
        # Rank inside FTS5 (ORDER BY rank: bm25 with the scope column weighted 0), join the
        # few winners to kw_docs afterwards. rank is lower-is-better; hits are higher-is-better.
        rows = conn.exec_driver_sql(
            "SELECT d.doc_id, d.kind, d.session_id, f.rank FROM ("
            " SELECT rowid, rank FROM kw_fts WHERE kw_fts MATCH ? ORDER BY rank LIMIT ?"
            ") AS f JOIN kw_docs AS d ON d.id = f.rowid ORDER BY f.rank",
            (expression, limit),
        )
        return [KeywordHit(r.doc_id, r.kind, r.session_id, -float(r.rank)) for r in rows]

    @staticmethod
    def _ranked_in(
        conn: Connection, expression: str, limit: int, window: Window
    ) -> list[KeywordHit]:
        # A time window is not indexed in FTS5: every match is joined to kw_docs and filtered
        # on created_at before the cut, so the top ``limit`` are the best inside the window.
        params: list[str | float]
        bounds, params = "", [expression]
        if window.since is not None:
            bounds, params = bounds + " AND d.created_at >= ?", [*params, window.since]
        if window.until is not None:
            bounds, params = bounds + " AND d.created_at < ?", [*params, window.until]
        rows = conn.exec_driver_sql(
            "SELECT d.doc_id, d.kind, d.session_id, f.rank FROM kw_fts AS f"
            " JOIN kw_docs AS d ON d.id = f.rowid"
            f" WHERE kw_fts MATCH ?{bounds} ORDER BY f.rank LIMIT ?",
            (*params, limit),
        )
        return [KeywordHit(r.doc_id, r.kind, r.session_id, -float(r.rank)) for r in rows]

    def count(self, conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(kw_docs)).scalar_one())

    def frequencies(self, conn: Connection, terms: Mapping[str, str]) -> tuple[int, dict[str, int]]:
        n_docs = self.count(conn)
        return n_docs, self._frequencies.get(
            n_docs, terms, lambda words: self._documents_with(conn, words)
        )

    @staticmethod
    def _documents_with(conn: Connection, words: Mapping[str, str]) -> dict[str, int]:
        """How many documents hold each word (term -> word). FTS5 keeps no document frequency
        that SQL can read: each word is counted by a MATCH (the porter stemmer applies, as in
        the ranking)."""
        return {
            term: int(
                conn.exec_driver_sql(
                    "SELECT count(*) FROM kw_fts WHERE kw_fts MATCH ?",
                    ('body : "' + word.replace('"', '""') + '"',),
                ).scalar_one()
            )
            for term, word in words.items()
        }


class PostingsIndex:
    """Okapi BM25 over plain SQL tables; the keyword index for PostgreSQL stores."""

    name = "postings"

    def __init__(self) -> None:
        self._frequencies = RememberedFrequencies()

    def create(self, conn: Connection) -> None:
        if conn.execute(select(kw_stats.c.id).where(kw_stats.c.id == 1)).first() is None:
            conn.execute(insert(kw_stats).values(id=1, n_docs=0, total_length=0))

    def upsert(self, conn: Connection, doc: KeywordDoc) -> None:
        self.delete(conn, doc.doc_id)
        terms = Counter(t[:128] for t in analysis.index_terms(doc.body))
        length = sum(terms.values())
        rowid = _insert_doc(conn, doc, length)
        if terms:
            conn.execute(
                insert(kw_postings),
                [{"term": term, "doc": rowid, "tf": tf} for term, tf in terms.items()],
            )
        conn.execute(
            update(kw_stats)
            .where(kw_stats.c.id == 1)
            .values(n_docs=kw_stats.c.n_docs + 1, total_length=kw_stats.c.total_length + length)
        )

    def delete(self, conn: Connection, doc_id: str) -> None:
        row = conn.execute(
            select(kw_docs.c.id, kw_docs.c.length).where(kw_docs.c.doc_id == doc_id)
        ).first()
        if row is None:
            return
        conn.execute(delete(kw_postings).where(kw_postings.c.doc == row.id))
        conn.execute(delete(kw_docs).where(kw_docs.c.id == row.id))
        conn.execute(
            update(kw_stats)
            .where(kw_stats.c.id == 1)
            .values(n_docs=kw_stats.c.n_docs - 1, total_length=kw_stats.c.total_length - row.length)
        )

    def search(
        self,
        conn: Connection,
        query: str,
        scope: Scope,
        limit: int,
        kinds: tuple[str, ...] | None = None,
        window: Window | None = None,
    ) -> list[KeywordHit]:
        terms: set[str] = set()
        for group in analysis.query_groups(query):
            for alternative in group:
                terms.update(analysis.index_terms(alternative))
        if not terms:
            return []
        stats = conn.execute(select(kw_stats.c.n_docs, kw_stats.c.total_length)).first()
        if stats is None or stats.n_docs <= 0:
            return []
        n_docs, avgdl = stats.n_docs, max(stats.total_length / stats.n_docs, 1.0)
        df_rows = conn.execute(
            select(kw_postings.c.term, func.count().label("df"))
            .where(kw_postings.c.term.in_(terms))
            .group_by(kw_postings.c.term)
        )
        idf = {r.term: math.log(1 + (n_docs - r.df + 0.5) / (r.df + 0.5)) for r in df_rows}
        if not idf:
            return []
        # Per-term idf goes in as a CASE so the database sums the whole score in one pass.
        idf_expr = case(idf, value=kw_postings.c.term, else_=0.0)
        tf = kw_postings.c.tf
        norm = BM25_K1 * (1 - BM25_B + BM25_B * kw_docs.c.length / avgdl)
        score = func.sum(idf_expr * tf * (BM25_K1 + 1) / (tf + norm)).label("score")
        stmt = (
            select(kw_docs.c.doc_id, kw_docs.c.kind, kw_docs.c.session_id, score)
            .select_from(kw_postings.join(kw_docs, kw_docs.c.id == kw_postings.c.doc))
            .where(kw_postings.c.term.in_(list(idf)))
            .where(_scope_clause(scope, kinds, window))
            .group_by(kw_docs.c.id, kw_docs.c.doc_id, kw_docs.c.kind, kw_docs.c.session_id)
            .order_by(score.desc())
            .limit(limit)
        )
        return [
            KeywordHit(r.doc_id, r.kind, r.session_id, float(r.score)) for r in conn.execute(stmt)
        ]

    def count(self, conn: Connection) -> int:
        return int(conn.execute(select(func.count()).select_from(kw_docs)).scalar_one())

    def frequencies(self, conn: Connection, terms: Mapping[str, str]) -> tuple[int, dict[str, int]]:
        n_docs = int(conn.execute(select(kw_stats.c.n_docs)).scalar() or 0)

        def count(stems: Mapping[str, str]) -> dict[str, int]:
            rows = conn.execute(
                select(kw_postings.c.term, func.count().label("df"))
                .where(kw_postings.c.term.in_(list(stems)))
                .group_by(kw_postings.c.term)
            )
            return {r.term: int(r.df) for r in rows}

        return n_docs, self._frequencies.get(n_docs, terms, count)


def keyword_index_for(conn_or_engine: object) -> KeywordIndex:
    """The backend for a store: FTS5 on SQLite, postings BM25 elsewhere."""
    dialect = conn_or_engine.dialect.name  # type: ignore[attr-defined]
    return Fts5Index() if dialect == "sqlite" else PostingsIndex()


def term_weights(conn: Connection, index: KeywordIndex, query: str) -> dict[str, float]:
    """The query's terms (stemmed, identifiers split, as the index reads them), each weighted by
    its inverse document frequency over the whole index, log(1 + N / (1 + df)): a rare word
    counts for more than a common one. Empty for a query without words."""
    words: dict[str, str] = {}
    for word in analysis.words(query):
        words.setdefault(analysis.stem(word), word)
    if not words:
        return {}
    n_docs, df = index.frequencies(conn, words)
    return {term: math.log(1 + n_docs / (1 + df.get(term, 0))) for term in words}


# The search path's reads by doc id, built once: building a statement costs more than running
# it (three aliases of kw_docs make ~30 column proxies a call), and SQLAlchemy memoizes a built
# statement's cache key. ``ids`` expands to the list given.
_IDS: BindParameter[list[str]] = bindparam("ids", expanding=True)
_BODIES = select(kw_docs.c.doc_id, kw_docs.c.body).where(kw_docs.c.doc_id.in_(_IDS))
_DESCRIBED = select(kw_docs.c.doc_id, kw_docs.c.kind, kw_docs.c.session_id).where(
    kw_docs.c.doc_id.in_(_IDS)
)
_RECORDED = select(kw_docs.c.doc_id, kw_docs.c.created_at).where(kw_docs.c.doc_id.in_(_IDS))


def _neighbours_statement() -> Select[tuple[str, str | None, str | None, str | None]]:
    doc, other, prev = kw_docs.alias("doc"), kw_docs.alias("other"), kw_docs.alias("prev")
    before = (
        select(other.c.id)
        .where(
            other.c.session_id == doc.c.session_id,
            other.c.kind == doc.c.kind,
            tuple_(other.c.created_at, other.c.id) < tuple_(doc.c.created_at, doc.c.id),
        )
        .order_by(other.c.created_at.desc(), other.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    return (
        select(doc.c.doc_id, doc.c.speaker, prev.c.doc_id.label("prev"), prev.c.speaker.label("by"))
        .select_from(doc.outerjoin(prev, prev.c.id == before))
        .where(doc.c.doc_id.in_(_IDS), doc.c.session_id.is_not(None))
    )


_NEIGHBOURS = _neighbours_statement()


def coverage(
    conn: Connection, weights: Mapping[str, float], doc_ids: Sequence[str]
) -> dict[str, float]:
    """How much of a query each of ``doc_ids`` holds: the share of the query's ``weights``
    (``term_weights``) whose terms the document's indexed text contains. Documents the index no
    longer has are left out."""
    total = sum(weights.values())
    if total <= 0 or not doc_ids:
        return {}
    rows = conn.execute(_BODIES, {"ids": list(doc_ids)})
    held = {row.doc_id: analysis.held_terms(row.body or "", weights) for row in rows}
    return {
        doc_id: sum(w for term, w in weights.items() if term in terms) / total
        for doc_id, terms in held.items()
    }


def described(conn: Connection, hits: Sequence[KeywordHit]) -> list[KeywordHit]:
    """``hits`` (of another index, the vector stream's) with each one's kind and session as
    the keyword index has them, in their order; those it no longer has are left out (a
    derived index can lag behind a delete)."""
    if not hits:
        return []
    rows = conn.execute(_DESCRIBED, {"ids": [hit.doc_id for hit in hits]})
    known = {row.doc_id: (row.kind, row.session_id) for row in rows}
    return [
        KeywordHit(hit.doc_id, *known[hit.doc_id], hit.score) for hit in hits if hit.doc_id in known
    ]


def created_at(conn: Connection, doc_ids: Sequence[str]) -> dict[str, float]:
    """When each of ``doc_ids`` was recorded (its event's time, not its indexing), by doc id."""
    if not doc_ids:
        return {}
    rows = conn.execute(_RECORDED, {"ids": list(doc_ids)})
    return {row.doc_id: row.created_at for row in rows}


def neighbours(conn: Connection, doc_ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The neighbour of each of ``doc_ids``, by doc id: the document of its kind in its session
    recorded just before it (by time, then by indexing order), kept only where the other party
    said it (both have a speaker and the speakers differ), so a reply has the turn it answers: a
    question before its answer, a prompt before what the agent did about it. ``()`` where there
    is none: the first of a session, a turn after its own speaker's (a store of the user's turns
    alone has the replies between them missing) or without a speaker. Documents without a
    session, and those the index no longer has, are left out. Only the turn before: lifting a
    prompt by what followed it as well put prompts that merely opened a matching session above
    the answer (docs/benchmarks.md, "Neighbours by speaker")."""
    if not doc_ids:
        return {}
    rows = conn.execute(_NEIGHBOURS, {"ids": list(doc_ids)})
    return {
        row.doc_id: (row.prev,)
        if row.prev is not None and None not in (row.speaker, row.by) and row.speaker != row.by
        else ()
        for row in rows
    }
