#!/usr/bin/env python3
"""Benchmark: which keyword (BM25) engine should Engram use?

Standalone measurement script, not a pytest test. It compares on the same corpus
and the same queries:

  fts5             SQLite FTS5, tokenize='porter unicode61', bm25() ranking,
                   scope = UNINDEXED project column compared in WHERE
  fts5-scope-match the same, but the scope is an indexed project token inside MATCH
  postings-sqlite  BM25 over plain SQL tables (docs / postings / stats), Python
                   tokenising + snowball stemming, scoring in one SQL query, SQLite
  postings-pg      the same tables and query on PostgreSQL (if reachable)
  tsvector-pg      PostgreSQL ts_rank_cd on a GIN-indexed tsvector (NOT BM25)
  bm25s            bm25s with PyStemmer english stemmer (in-memory, full rebuild on add)
  rank_bm25        rank_bm25.BM25Okapi (in-memory, full rebuild on add)

Queries are the OR of the query's terms (stopwords removed), top 10, unscoped and
scoped to one of the 20 projects.

Corpus: coding-agent-like observations built at run time from the public data in
shared/data (LongMemEval-S user and assistant turns, the coding-agent-life-v1
sessions) mixed with synthesised coding observations (commands, paths, error
lines), spread over 20 projects with a Zipf-like size distribution. Nothing is
copied into the repository; everything temporary lives under a temp directory
that is removed at the end, and PostgreSQL tables (kwbench_*) are dropped.

Each engine runs in its own subprocess per corpus size, so the RSS figures are
per engine. Run with a Python that has the optional packages installed:

  python tests/benchmarks/bench_keyword_engines.py --sizes 10000,50000 --queries 200
  (--data-dir defaults to ../shared/data beside the checkout; --engines to pick some;
   --pg-dsn or KWBENCH_PG_DSN for PostgreSQL, default postgresql://postgres@127.0.0.1:5432/test)

Optional packages: bm25s, PyStemmer, rank_bm25, snowballstemmer, numpy,
psycopg[binary], psutil. Missing ones make their engines be skipped.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

K1 = 1.2
B = 0.75
TOP_K = 10
ADD_REPEATS = 20  # inserts timed per engine (median reported)
REBUILD_ADD_BUDGET_S = 20  # engines that rebuild on add stop after this (min 3 inserts)
RANK_BM25_MAX_QUERY_S = 1.0  # skip rank_bm25 at a size where one query takes longer
QUALITY_QUESTIONS = 50
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"
PG_PREFIX = "kwbench_"
ALL_ENGINES = [
    "fts5",
    "fts5-scope-match",
    "postings-sqlite",
    "postings-pg",
    "tsvector-pg",
    "bm25s",
    "rank_bm25",
]
PG_ENGINES = {"postings-pg", "tsvector-pg"}


def log(msg: str) -> None:
    print(msg, flush=True)


# --------------------------------------------------------------------------------------
# Shared helpers: timing, tokenising, stemming
# --------------------------------------------------------------------------------------


def timed(fn, *args, **kwargs):
    """Run fn and return (result, elapsed seconds)."""
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - t0


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    idx = min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))
    return s[idx]


# Alphanumeric runs; '_' splits like FTS5's unicode61 tokenizer does.
TOKEN_RE = re.compile(r"[^\W_]+")

_STOPWORDS_TEXT = """
a about above after again against all am an and any are aren't as at be because been before
being below between both but by can can't cannot could couldn't did didn't do does doesn't doing
don't down during each few for from further had hadn't has hasn't have haven't having he he'd
he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into
is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only
or other ought our ours ourselves out over own same shan't she she'd she'll she's should
shouldn't so some such than that that's the their theirs them themselves then there there's
these they they'd they'll they're they've this those through to too under until up very was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while
who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours
yourself yourselves s t d ll m re ve just also can will
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def tokenize(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def query_terms(text: str) -> list[str]:
    """The query terms every engine gets: lowercased, stopwords removed, deduplicated."""
    seen, out = set(), []
    for tok in tokenize(text):
        if tok not in STOPWORDS and tok not in seen:
            seen.add(tok)
            out.append(tok)
    return out


class SnowballAnalyzer:
    """Tokenise + snowball english stem (snowballstemmer; uses PyStemmer's C code if present)."""

    def __init__(self):
        import snowballstemmer

        self._stemmer = snowballstemmer.stemmer("english")
        self._cache: dict[str, str] = {}

    def stem(self, tok: str) -> str:
        s = self._cache.get(tok)
        if s is None:
            s = self._stemmer.stemWord(tok)
            self._cache[tok] = s
        return s

    def doc(self, text: str) -> tuple[int, Counter]:
        """(length in tokens incl. stopwords, Counter of stemmed non-stopword terms)."""
        toks = tokenize(text)
        return len(toks), Counter(self.stem(t) for t in toks if t not in STOPWORDS)

    def doc_tokens(self, text: str) -> list[str]:
        return [self.stem(t) for t in tokenize(text) if t not in STOPWORDS]

    def query(self, terms: list[str]) -> list[str]:
        return list(dict.fromkeys(self.stem(t) for t in terms))


def rss_mb() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def dir_size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.glob("*") if f.is_file()) / 2**20


# --------------------------------------------------------------------------------------
# Engines. Each: build(docs), add(doc), search(terms, project=None, k) -> [doc_id],
# disk_mb(), close(). docs are (doc_id:int, project:str, text:str).
# --------------------------------------------------------------------------------------


def fts5_or_query(terms) -> str:
    """OR of the terms, each quoted so user text can never be FTS5 syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


class Fts5Engine:
    """SQLite FTS5, porter+unicode61, bm25() ranking, project as UNINDEXED column."""

    name = "fts5"
    rebuilds_on_add = False
    schema = "body, project UNINDEXED, tokenize='porter unicode61'"
    rank = "bm25(obs)"

    def __init__(self, workdir: Path, **_):
        self.workdir = workdir
        self.db = None

    def _open(self):
        if self.db is not None:
            self.db.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        self.db = sqlite3.connect(self.workdir / "fts5.db")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(f"CREATE VIRTUAL TABLE obs USING fts5({self.schema})")

    def _project_value(self, project: str) -> str:
        return project

    def build(self, docs):
        self._open()
        with self.db:
            self.db.executemany(
                "INSERT INTO obs(rowid, body, project) VALUES (?,?,?)",
                ((d, t, self._project_value(p)) for d, p, t in docs),
            )

    def add(self, doc):
        d, p, t = doc
        with self.db:
            self.db.execute(
                "INSERT INTO obs(rowid, body, project) VALUES (?,?,?)",
                (d, t, self._project_value(p)),
            )

    def search(self, terms, project=None, k=TOP_K):
        if not terms:
            return []
        match = fts5_or_query(terms)
        if project is None:
            rows = self.db.execute(
                f"SELECT rowid FROM obs WHERE obs MATCH ? ORDER BY {self.rank} LIMIT ?", (match, k)
            )
        else:
            rows = self.db.execute(
                f"SELECT rowid FROM obs WHERE obs MATCH ? AND project = ? "
                f"ORDER BY {self.rank} LIMIT ?",
                (match, project, k),
            )
        return [r[0] for r in rows]

    def disk_mb(self):
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # count pages in the DB, not the WAL
        return dir_size_mb(self.workdir)

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None


class Fts5ScopeInMatchEngine(Fts5Engine):
    """Variant (not in the brief): project stored as one indexed token and the scope put into
    MATCH ('project : tok AND (...)'), so FTS5 intersects posting lists instead of reading
    the UNINDEXED column of every matching row; bm25 gives the project column weight 0."""

    name = "fts5-scope-match"
    schema = "body, project, tokenize='porter unicode61'"
    rank = "bm25(obs, 1.0, 0.0)"

    def _project_value(self, project: str) -> str:
        return "prj" + hashlib.sha1(project.encode()).hexdigest()[:16]

    def search(self, terms, project=None, k=TOP_K):
        if not terms:
            return []
        match = fts5_or_query(terms)
        if project is not None:
            match = f'project : "{self._project_value(project)}" AND ({match})'
        rows = self.db.execute(
            f"SELECT rowid FROM obs WHERE obs MATCH ? ORDER BY {self.rank} LIMIT ?", (match, k)
        )
        return [r[0] for r in rows]


def postings_sql(prefix: str, ph: str, terms_sql: str, scoped: bool) -> str:
    """One BM25 query over docs/postings/stats (same text for SQLite and PostgreSQL).

    prefix: table-name prefix; ph: the driver's placeholder; terms_sql: the term filter, which
    appears twice (the caller passes the terms twice).
    idf = ln(1 + (N - df + 0.5) / (df + 0.5)); tf part = tf*(k1+1) / (tf + k1*(1-b+b*len/avgdl)).
    The term filter is repeated on the outer postings scan on purpose: PostgreSQL cannot tell
    that the df subquery yields only a few terms and would otherwise seq-scan all postings
    (measured 130 ms instead of 13 ms at 50k docs). A materialised CTE of the query's postings
    also fixes PostgreSQL but makes SQLite about 1.6x slower.
    """
    f = "DOUBLE PRECISION"
    return f"""
SELECT p.doc_id,
       SUM(w.idf * CAST(p.tf AS {f}) * {K1 + 1}
           / (p.tf + {K1} * (1 - {B} + {B} * CAST(d.length AS {f}) / st.avgdl))) AS score
FROM (SELECT t.term, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf
      FROM (SELECT term, CAST(COUNT(*) AS {f}) AS df FROM {prefix}postings
            WHERE term {terms_sql} GROUP BY term) t,
           (SELECT CAST(n AS {f}) AS n FROM {prefix}stats) st) w
JOIN {prefix}postings p ON p.term = w.term
JOIN {prefix}docs d ON d.doc_id = p.doc_id
JOIN (SELECT CAST(total_len AS {f}) / n AS avgdl FROM {prefix}stats) st ON 1 = 1
WHERE p.term {terms_sql} {f"AND d.project = {ph}" if scoped else ""}
GROUP BY p.doc_id
ORDER BY score DESC
LIMIT {ph}"""


def postings_rows(analyzer, docs):
    """(docs rows, postings rows sorted by (term, doc_id), total length)."""
    doc_rows, post_rows, total = [], [], 0
    for d, p, t in docs:
        length, counts = analyzer.doc(t)
        total += length
        doc_rows.append((d, p, length))
        post_rows.extend((term, d, tf) for term, tf in counts.items())
    post_rows.sort()
    return doc_rows, post_rows, total


class PostingsSqliteEngine:
    """BM25 in plain SQL tables on SQLite (file DB, WAL)."""

    name = "postings-sqlite"
    rebuilds_on_add = False

    def __init__(self, workdir: Path, **_):
        self.workdir = workdir
        self.db = None
        self.an = SnowballAnalyzer()

    def _open(self):
        if self.db is not None:
            self.db.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        self.db = sqlite3.connect(self.workdir / "postings.db")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        try:
            self.db.execute("SELECT ln(2.0)")
        except sqlite3.OperationalError:  # SQLite built without math functions
            self.db.create_function("ln", 1, math.log, deterministic=True)
        self.db.executescript("""
            CREATE TABLE docs(doc_id INTEGER PRIMARY KEY, project TEXT NOT NULL,
                              length INTEGER NOT NULL);
            CREATE TABLE postings(term TEXT NOT NULL, doc_id INTEGER NOT NULL,
                                  tf INTEGER NOT NULL, PRIMARY KEY (term, doc_id)) WITHOUT ROWID;
            CREATE TABLE stats(id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL,
                               total_len INTEGER NOT NULL);
        """)

    def build(self, docs):
        self._open()
        doc_rows, post_rows, total = postings_rows(self.an, docs)
        with self.db:
            self.db.executemany("INSERT INTO docs VALUES (?,?,?)", doc_rows)
            self.db.executemany("INSERT INTO postings VALUES (?,?,?)", post_rows)
            self.db.execute("INSERT INTO stats VALUES (1, ?, ?)", (len(doc_rows), total))
        self.db.execute("ANALYZE")

    def add(self, doc):
        d, p, t = doc
        length, counts = self.an.doc(t)
        with self.db:
            self.db.execute("INSERT INTO docs VALUES (?,?,?)", (d, p, length))
            self.db.executemany(
                "INSERT INTO postings VALUES (?,?,?)",
                [(term, d, tf) for term, tf in counts.items()],
            )
            self.db.execute("UPDATE stats SET n = n + 1, total_len = total_len + ?", (length,))

    def search(self, terms, project=None, k=TOP_K):
        stems = self.an.query(terms)
        if not stems:
            return []
        sql = postings_sql("", "?", "IN (" + ",".join("?" * len(stems)) + ")", project is not None)
        params = [*stems, *stems, *([project] if project is not None else []), k]
        return [r[0] for r in self.db.execute(sql, params)]

    def disk_mb(self):
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # count pages in the DB, not the WAL
        return dir_size_mb(self.workdir)

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None


class _PgBase:
    rebuilds_on_add = False
    tables: tuple[str, ...] = ()

    def __init__(self, workdir: Path, pg_dsn: str = DEFAULT_PG_DSN, **_):
        import psycopg

        self.conn = psycopg.connect(pg_dsn, autocommit=True)
        # JIT compilation adds tens of ms to these short queries once the planner's cost
        # estimate crosses jit_above_cost; OLTP deployments usually turn it off.
        self.conn.execute("SET jit = off")
        self._drop()

    def _drop(self):
        for t in self.tables:
            self.conn.execute(f"DROP TABLE IF EXISTS {PG_PREFIX}{t} CASCADE")

    def _vacuum(self):
        for t in self.tables:
            self.conn.execute(f"VACUUM ANALYZE {PG_PREFIX}{t}")

    def disk_mb(self):
        total = 0
        for t in self.tables:
            total += self.conn.execute(
                "SELECT pg_total_relation_size(%s)", (PG_PREFIX + t,)
            ).fetchone()[0]
        return total / 2**20

    def close(self):
        if self.conn is not None:
            self._drop()
            self.conn.close()
            self.conn = None


class PostingsPgEngine(_PgBase):
    """The same docs/postings/stats BM25, on PostgreSQL."""

    name = "postings-pg"
    tables = ("docs", "postings", "stats")

    def __init__(self, workdir: Path, **kw):
        super().__init__(workdir, **kw)
        self.an = SnowballAnalyzer()

    def build(self, docs):
        self._drop()
        self.conn.execute(f"""
            CREATE TABLE {PG_PREFIX}docs(doc_id integer PRIMARY KEY, project text NOT NULL,
                                         length integer NOT NULL);
            CREATE TABLE {PG_PREFIX}postings(term text NOT NULL, doc_id integer NOT NULL,
                                             tf integer NOT NULL);
            CREATE TABLE {PG_PREFIX}stats(id integer PRIMARY KEY CHECK (id = 1),
                                          n bigint NOT NULL, total_len bigint NOT NULL);
        """)
        doc_rows, post_rows, total = postings_rows(self.an, docs)
        with self.conn.transaction(), self.conn.cursor() as cur:
            with cur.copy(f"COPY {PG_PREFIX}docs (doc_id, project, length) FROM STDIN") as cp:
                for row in doc_rows:
                    cp.write_row(row)
            with cur.copy(f"COPY {PG_PREFIX}postings (term, doc_id, tf) FROM STDIN") as cp:
                for row in post_rows:
                    cp.write_row(row)
            cur.execute(f"INSERT INTO {PG_PREFIX}stats VALUES (1, %s, %s)", (len(doc_rows), total))
        # Covering index: term lookups become index-only scans.
        self.conn.execute(
            f"ALTER TABLE {PG_PREFIX}postings ADD PRIMARY KEY (term, doc_id) INCLUDE (tf)"
        )
        self._vacuum()

    def add(self, doc):
        d, p, t = doc
        length, counts = self.an.doc(t)
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.execute(f"INSERT INTO {PG_PREFIX}docs VALUES (%s,%s,%s)", (d, p, length))
            cur.executemany(
                f"INSERT INTO {PG_PREFIX}postings VALUES (%s,%s,%s)",
                [(term, d, tf) for term, tf in counts.items()],
            )
            cur.execute(
                f"UPDATE {PG_PREFIX}stats SET n = n + 1, total_len = total_len + %s", (length,)
            )

    def search(self, terms, project=None, k=TOP_K):
        stems = self.an.query(terms)
        if not stems:
            return []
        sql = postings_sql(PG_PREFIX, "%s", "= ANY(%s)", project is not None)
        params = [stems, stems, *([project] if project is not None else []), k]
        return [r[0] for r in self.conn.execute(sql, params)]


class TsvectorPgEngine(_PgBase):
    """PostgreSQL full-text search: GIN on a stored tsvector, ts_rank_cd (not BM25)."""

    name = "tsvector-pg"
    tables = ("ts",)

    def build(self, docs):
        self._drop()
        self.conn.execute(f"""
            CREATE TABLE {PG_PREFIX}ts(
                doc_id integer PRIMARY KEY, project text NOT NULL, body text NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)""")
        copy_sql = f"COPY {PG_PREFIX}ts (doc_id, project, body) FROM STDIN"
        with self.conn.transaction(), self.conn.cursor() as cur, cur.copy(copy_sql) as cp:
            for d, p, t in docs:
                cp.write_row((d, p, t))
        self.conn.execute(f"CREATE INDEX {PG_PREFIX}ts_gin ON {PG_PREFIX}ts USING gin (tsv)")
        self._vacuum()

    def add(self, doc):
        d, p, t = doc
        self.conn.execute(
            f"INSERT INTO {PG_PREFIX}ts (doc_id, project, body) VALUES (%s,%s,%s)", (d, p, t)
        )

    def search(self, terms, project=None, k=TOP_K):
        if not terms:
            return []
        q = " or ".join(terms)  # websearch syntax never raises on user input
        scope = "AND project = %s" if project is not None else ""
        sql = (
            f"SELECT doc_id FROM {PG_PREFIX}ts, websearch_to_tsquery('english', %s) q "
            f"WHERE tsv @@ q {scope} ORDER BY ts_rank_cd(tsv, q) DESC LIMIT %s"
        )
        params = [q, *([project] if project is not None else []), k]
        return [r[0] for r in self.conn.execute(sql, params)]


class _InMemoryBase:
    """In-memory engines: doc ids kept in a list, full rebuild on every add."""

    rebuilds_on_add = True

    def __init__(self, workdir: Path, **_):
        self.ids: list[int] = []
        self.projects: list[str] = []
        self.tokens: list[list[str]] = []
        self.by_project: dict = {}

    def _set_docs(self, docs):
        self.ids = [d for d, _, _ in docs]
        self.projects = [p for _, p, _ in docs]
        self.tokens = self._tokenize([t for _, _, t in docs])

    def build(self, docs):
        self._set_docs(docs)
        self._index()

    def add(self, doc):
        d, p, t = doc
        self.ids.append(d)
        self.projects.append(p)
        self.tokens.extend(self._tokenize([t]))
        self._index()  # no incremental API: rebuild from cached token lists

    def _project_positions(self):
        import numpy as np

        pos: dict[str, list[int]] = {}
        for i, p in enumerate(self.projects):
            pos.setdefault(p, []).append(i)
        return {p: np.array(v) for p, v in pos.items()}

    def disk_mb(self):
        return None

    def close(self):
        pass


class Bm25sEngine(_InMemoryBase):
    """bm25s ('lucene' BM25, same idf as the postings engine), PyStemmer english stemmer."""

    name = "bm25s"

    def __init__(self, workdir: Path, **kw):
        super().__init__(workdir, **kw)
        import bm25s

        self.bm25s = bm25s
        try:
            import Stemmer

            self.stem = Stemmer.Stemmer("english").stemWords
        except ImportError:
            self.stem = None

    def _tokenize(self, texts):
        return self.bm25s.tokenize(
            texts, stopwords="en", stemmer=self.stem, return_ids=False, show_progress=False
        )

    def _index(self):
        import numpy as np

        self.retriever = self.bm25s.BM25(k1=K1, b=B)
        self.retriever.index(self.tokens, show_progress=False)
        self.masks = {}
        for p, pos in self._project_positions().items():
            m = np.zeros(len(self.ids), dtype=np.float32)
            m[pos] = 1
            self.masks[p] = m

    def search(self, terms, project=None, k=TOP_K):
        q = self._tokenize([" ".join(terms)])
        if not q or not q[0]:
            return []
        k = min(k, len(self.ids))
        mask = self.masks.get(project) if project is not None else None
        if project is not None and mask is None:
            return []
        docs, scores = self.retriever.retrieve(q, k=k, show_progress=False, weight_mask=mask)
        return [self.ids[i] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]


class RankBm25Engine(_InMemoryBase):
    """rank_bm25.BM25Okapi over snowball-stemmed tokens (its idf: log((N-df+.5)/(df+.5)))."""

    name = "rank_bm25"

    def __init__(self, workdir: Path, **kw):
        super().__init__(workdir, **kw)
        from rank_bm25 import BM25Okapi

        self.cls = BM25Okapi
        self.an = SnowballAnalyzer()

    def _tokenize(self, texts):
        return [self.an.doc_tokens(t) or ["_empty_"] for t in texts]

    def _index(self):
        self.model = self.cls(self.tokens, k1=K1, b=B)
        self.positions = self._project_positions()

    def search(self, terms, project=None, k=TOP_K):
        import numpy as np

        q = self.an.query(terms)
        if not q:
            return []
        if project is None:
            scores = self.model.get_scores(q)
            positions = None
        else:
            positions = self.positions.get(project)
            if positions is None:
                return []
            scores = np.asarray(self.model.get_batch_scores(q, positions.tolist()))
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        if positions is not None:
            return [self.ids[positions[i]] for i in top if scores[i] > 0]
        return [self.ids[i] for i in top if scores[i] > 0]


ENGINE_CLASSES = {
    "fts5": Fts5Engine,
    "fts5-scope-match": Fts5ScopeInMatchEngine,
    "postings-sqlite": PostingsSqliteEngine,
    "postings-pg": PostingsPgEngine,
    "tsvector-pg": TsvectorPgEngine,
    "bm25s": Bm25sEngine,
    "rank_bm25": RankBm25Engine,
}


# --------------------------------------------------------------------------------------
# Corpus and queries (built once by the parent, read by the workers)
# --------------------------------------------------------------------------------------

PROJECTS = [
    "engram",
    "shipctl",
    "billing-api",
    "web-dashboard",
    "ml-pipeline",
    "auth-service",
    "mobile-app",
    "data-warehouse",
    "infra-terraform",
    "search-indexer",
    "docs-site",
    "payments-gateway",
    "notification-worker",
    "cli-tools",
    "analytics-etl",
    "chat-backend",
    "image-resizer",
    "recommendation-svc",
    "legacy-monolith",
    "k8s-operator",
]
PROJECT_WEIGHTS = [1 / (r + 1) for r in range(len(PROJECTS))]  # Zipf-like sizes

CODE_QUERIES = [
    "fix failing login test",
    "ImportError numpy",
    "ModuleNotFoundError no module named requests",
    "docker build fails on arm64",
    "flaky integration test timeout",
    "database migration rollback",
    "KeyError user_id in session middleware",
    "pytest fixture scope error",
    "TypeScript type error in component props",
    "connection refused postgres port 5432",
    "retry with exponential backoff",
    "why did we pin sqlalchemy version",
    "memory leak in worker process",
    "CI pipeline cache invalidation",
    "rate limit 429 from api",
    "null pointer exception in payment handler",
    "how to run the linter",
    "segfault after upgrading dependencies",
    "redis cache eviction policy",
    "webpack bundle size too large",
    "git rebase conflict in config",
    "add index to orders table",
    "UnicodeDecodeError reading csv",
    "jwt token expired refresh",
    "kubernetes pod crashloopbackoff",
    "helm chart values override",
    "slow query on users table",
    "environment variable not set",
    "async await deadlock",
    "permission denied writing log file",
    "upgrade python to 3.12",
    "AttributeError NoneType object has no attribute",
    "cors error from frontend",
    "terraform state lock",
    "decision to use fastapi instead of flask",
]

_PKGS = [
    "numpy",
    "pandas",
    "requests",
    "fastapi",
    "flask",
    "django",
    "sqlalchemy",
    "pydantic",
    "pytest",
    "redis",
    "celery",
    "boto3",
    "httpx",
    "uvicorn",
    "alembic",
    "psycopg",
    "torch",
    "react",
    "webpack",
    "typescript",
    "express",
    "prisma",
    "jest",
    "eslint",
    "tokio",
    "serde",
]
_MODS = [
    "auth",
    "login",
    "session",
    "cache",
    "db",
    "api",
    "models",
    "utils",
    "config",
    "migrations",
    "billing",
    "search",
    "orders",
    "users",
    "payments",
    "worker",
    "scheduler",
    "router",
    "middleware",
    "handlers",
    "client",
    "storage",
    "metrics",
    "retry",
    "parser",
]
_ERRS = [
    "ImportError: cannot import name '{sym}' from '{pkg}'",
    "ModuleNotFoundError: No module named '{pkg}'",
    "KeyError: '{sym}'",
    "TypeError: {sym}() missing 1 required positional argument: 'ctx'",
    "AttributeError: 'NoneType' object has no attribute '{sym}'",
    "AssertionError: expected {n} got {m}",
    "TimeoutError: operation timed out after {n}s",
    "ConnectionRefusedError: [Errno 111] Connection refused 127.0.0.1:{port}",
    'sqlalchemy.exc.IntegrityError: duplicate key value violates unique constraint "{mod}_pkey"',
    "UnicodeDecodeError: 'utf-8' codec can't decode byte 0x{n}",
    "PermissionError: [Errno 13] Permission denied: '/var/log/{mod}.log'",
    "error TS2345: Argument of type 'string' is not assignable to parameter of type 'number'",
    "panic: runtime error: index out of range [{n}] with length {m}",
]
_TEMPLATES = [
    "[tool] ran `pytest tests/test_{mod}.py -k {sym}` -> {n} failed, {m} passed\n{err}\n"
    '  File "src/{proj}/{mod}.py", line {line}, in {sym}',
    "[assistant] fixed {err_short} in src/{proj}/{mod}.py:{line}; root cause was {cause}. "
    "Added regression test test_{sym} in tests/test_{mod}.py.",
    "[tool] $ pip install {pkg}=={ver}\n{err}",
    "[assistant] decided to use {pkg} for {mod} because {reason}; rejected {pkg2} ({reason2}).",
    '[tool] $ git commit -m "{verb} {mod}: {cause}"\n[main {sha}] {n} files changed, '
    "{m} insertions(+)",
    "[user] the {mod} endpoint returns 500 in staging, logs say: {err}",
    "[tool] $ docker compose up {mod}\n{mod}-1 exited with code 1\n{err}",
    "[assistant] refactored {sym} out of src/{proj}/{mod}.py into src/{proj}/{mod2}.py; "
    "{n} call sites updated, behaviour unchanged, tests green.",
    "[tool] $ npm run build\nsrc/components/{Comp}.tsx({line},{n}): {err}",
    "[assistant] {mod} is slow: EXPLAIN shows seq scan on {mod2}; added index on "
    "{mod2}({sym}_id), p95 went from {m}ms to {n}ms.",
]
_CAUSES = [
    "a missing await",
    "an off-by-one in pagination",
    "stale cache entries",
    "a race between two workers",
    "wrong env var precedence",
    "a timezone-naive datetime",
    "an unpinned transitive dependency",
    "a circular import",
    "missing null check",
    "the retry loop swallowing exceptions",
]
_REASONS = [
    "it is async-native",
    "it has fewer dependencies",
    "the team already knows it",
    "it supports streaming",
    "licence is permissive",
    "it is faster in our benchmark",
]


def synth_observation(rng: random.Random, proj: str) -> str:
    pkg, pkg2 = rng.sample(_PKGS, 2)
    mod, mod2 = rng.sample(_MODS, 2)
    sym = rng.choice(
        [
            "get_user",
            "parse_config",
            "refresh_token",
            "load_orders",
            "compute_total",
            "handle_webhook",
            "render_page",
            "connect_db",
            "retry_with_backoff",
            "validate_input",
            "send_email",
            "resize_image",
        ]
    )
    f = dict(
        pkg=pkg,
        pkg2=pkg2,
        mod=mod,
        mod2=mod2,
        sym=sym,
        proj=proj.replace("-", "_"),
        n=rng.randint(1, 99),
        m=rng.randint(100, 999),
        port=rng.choice([5432, 6379, 8080]),
        line=rng.randint(10, 900),
        ver=f"{rng.randint(0, 3)}.{rng.randint(0, 20)}.0",
        cause=rng.choice(_CAUSES),
        reason=rng.choice(_REASONS),
        reason2=rng.choice(_REASONS),
        verb=rng.choice(["fix", "feat", "refactor", "chore"]),
        sha=f"{rng.getrandbits(28):07x}",
        Comp=mod.capitalize() + "View",
    )
    f["err"] = rng.choice(_ERRS).format(**f)
    f["err_short"] = f["err"].split(":")[0]
    return rng.choice(_TEMPLATES).format(**f)


def clip(text: str, limit: int = 1500) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > 0 else limit]


def prepare_data(data_dir: Path, n_docs: int, n_queries: int, out: Path, seed: int = 7):
    """Write corpus.jsonl (n_docs + ADD_REPEATS held-out docs), queries.json, quality.json."""
    rng = random.Random(seed)
    lme_path = data_dir / "longmemeval" / "longmemeval_s_cleaned_498.json.gz"
    log(f"loading {lme_path} ...")
    with gzip.open(lme_path, "rt") as f:
        lme = json.load(f)

    # Unique LongMemEval turns, each session assigned to one project.
    turns, seen = [], set()
    for q in lme:
        for sid, sess in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True):
            if sid in seen:
                continue
            seen.add(sid)
            proj = rng.choices(PROJECTS, PROJECT_WEIGHTS)[0]
            for turn in sess:
                if turn["content"].strip():
                    turns.append((proj, f"[{turn['role']}] " + clip(turn["content"])))
    rng.shuffle(turns)

    cal = json.loads((data_dir / "coding-agent-life-v1" / "sessions.json").read_text())
    cal_queries = json.loads((data_dir / "coding-agent-life-v1" / "queries.json").read_text())

    total = n_docs + ADD_REPEATS + 50
    n_synth = int(total * 0.15)
    n_lme = total - n_synth - len(cal)
    if n_lme > len(turns):
        raise SystemExit(f"only {len(turns)} LongMemEval turns, need {n_lme}")
    docs = turns[:n_lme] + [("shipctl", s["content"]) for s in cal]
    for _ in range(n_synth):
        proj = rng.choices(PROJECTS, PROJECT_WEIGHTS)[0]
        docs.append((proj, synth_observation(rng, proj)))
    rng.shuffle(docs)
    with open(out / "corpus.jsonl", "w") as f:
        for i, (proj, text) in enumerate(docs, start=1):
            f.write(json.dumps({"id": i, "project": proj, "text": text}) + "\n")

    # Queries: 3/4 LongMemEval questions, 1/4 code-ish (coding-agent-life + handwritten).
    code_pool = [q["question"] for q in cal_queries] + CODE_QUERIES
    n_code = min(len(code_pool), n_queries // 4)
    rng = random.Random(seed + 1)  # queries (and the quality sample) do not depend on the sizes
    lme_qs = rng.sample([q["question"] for q in lme], n_queries - n_code)
    texts = lme_qs + rng.sample(code_pool, n_code)
    queries = [{"text": t, "terms": query_terms(t), "project": rng.choice(PROJECTS)} for t in texts]
    (out / "queries.json").write_text(json.dumps(queries))

    # Quality: per-question haystack, sessions as documents (user turns only).
    eligible = [q for q in lme if not q["question_id"].endswith("_abs")]
    sample = random.Random(seed + 2).sample(eligible, QUALITY_QUESTIONS)
    quality = []
    for q in sample:
        sessions = [
            " ".join(t["content"] for t in s if t["role"] == "user") for s in q["haystack_sessions"]
        ]
        gold = [
            i
            for i, sid in enumerate(q["haystack_session_ids"])
            if sid in set(q["answer_session_ids"])
        ]
        quality.append({"terms": query_terms(q["question"]), "sessions": sessions, "gold": gold})
    (out / "quality.json").write_text(json.dumps(quality))
    del lme
    log(
        f"corpus: {len(docs)} docs ({n_synth} synthesised, {len(cal)} coding-agent-life, "
        f"rest LongMemEval-S turns clipped to 1500 chars), {len(queries)} queries "
        f"({n_code} code-ish), {len(quality)} quality questions"
    )


# --------------------------------------------------------------------------------------
# Worker: one engine, one size, in its own process
# --------------------------------------------------------------------------------------


def load_corpus(path: Path, n: int):
    docs, extra = [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            (docs if len(docs) < n else extra).append((r["id"], r["project"], r["text"]))
            if len(extra) >= ADD_REPEATS:
                break
    return docs, extra


def measure_engine(engine_name: str, size: int, data: Path, pg_dsn: str) -> dict:
    docs, extra = load_corpus(data / "corpus.jsonl", size)
    queries = json.loads((data / "queries.json").read_text())
    gc.collect()
    rss0 = rss_mb()
    tag = f"  [{engine_name} @ {size}]"
    eng = ENGINE_CLASSES[engine_name](data / f"wd-{engine_name}", pg_dsn=pg_dsn)
    res: dict = {"engine": engine_name, "size": size}
    try:
        log(f"{tag} building index ...")
        _, res["build_s"] = timed(eng.build, docs)
        gc.collect()
        res["rss_delta_mb"] = rss_mb() - rss0
        res["peak_rss_mb"] = peak_rss_mb()
        res["disk_mb"] = eng.disk_mb()
        log(f"{tag} built in {res['build_s']:.1f} s")

        warm = [timed(eng.search, q["terms"])[1] for q in queries[:5]]  # caches, plans
        if engine_name == "rank_bm25" and statistics.median(warm) > RANK_BM25_MAX_QUERY_S:
            res["skipped"] = (
                f"skipped: a query takes {statistics.median(warm):.2f} s "
                f"(median of 5) > {RANK_BM25_MAX_QUERY_S} s"
            )
            log(f"{tag} {res['skipped']}")
            return res

        for mode in ("unscoped", "scoped"):
            lat, tops = [], []
            for q in queries:
                project = q["project"] if mode == "scoped" else None
                ids, t = timed(eng.search, q["terms"], project)
                lat.append(t * 1000)
                tops.append(ids)
            res[f"{mode}_p50_ms"] = percentile(lat, 50)
            res[f"{mode}_p95_ms"] = percentile(lat, 95)
            res[f"{mode}_top"] = tops
            log(
                f"{tag} {mode}: p50 {res[f'{mode}_p50_ms']:.2f} ms, "
                f"p95 {res[f'{mode}_p95_ms']:.2f} ms"
            )

        add_times, t_start = [], time.perf_counter()
        for i, (d, p, text) in enumerate(extra):
            marker = f"kwbenchuniq{i}x"
            doc = (d, p, f"{text} {marker}")
            _, t = timed(eng.add, doc)
            add_times.append(t * 1000)
            if d not in eng.search([marker]):
                raise RuntimeError(f"{engine_name}: added doc {d} not searchable")
            if (
                eng.rebuilds_on_add
                and len(add_times) >= 3
                and time.perf_counter() - t_start > REBUILD_ADD_BUDGET_S
            ):
                break
        res["add_ms"] = statistics.median(add_times)
        res["add_n"] = len(add_times)
        log(f"{tag} add one doc: median {res['add_ms']:.2f} ms over {len(add_times)}")
    finally:
        eng.close()
        shutil.rmtree(data / f"wd-{engine_name}", ignore_errors=True)
    return res


def measure_quality(engine_name: str, data: Path, pg_dsn: str) -> dict:
    """recall_any@5 and recall_all@5 at session level; each haystack indexed alone (user turns)."""
    quality = json.loads((data / "quality.json").read_text())
    eng = ENGINE_CLASSES[engine_name](data / f"wdq-{engine_name}", pg_dsn=pg_dsn)
    hit_any = hit_all = 0
    try:
        for q in quality:
            eng.build([(i, "q", s) for i, s in enumerate(q["sessions"])])
            top = set(eng.search(q["terms"], None, 5))
            hit_any += bool(top & set(q["gold"]))
            hit_all += set(q["gold"]) <= top
    finally:
        eng.close()
        shutil.rmtree(data / f"wdq-{engine_name}", ignore_errors=True)
    n = len(quality)
    return {"engine": engine_name, "recall_any@5": hit_any / n, "recall_all@5": hit_all / n, "n": n}


def worker_main(args) -> None:
    data = Path(args.work)
    if args.quality:
        res = measure_quality(args.worker, data, args.pg_dsn)
    else:
        res = measure_engine(args.worker, args.size, data, args.pg_dsn)
    Path(args.result).write_text(json.dumps(res))


# --------------------------------------------------------------------------------------
# Parent: prepare data, run workers, print tables
# --------------------------------------------------------------------------------------

REQUIRED_MODULES = {
    "postings-sqlite": ["snowballstemmer"],
    "postings-pg": ["snowballstemmer", "psycopg"],
    "tsvector-pg": ["psycopg"],
    "bm25s": ["bm25s", "numpy"],
    "rank_bm25": ["rank_bm25", "snowballstemmer", "numpy"],
}


def available_engines(requested, pg_dsn):
    out, notes = [], []
    for name in requested:
        if name not in ENGINE_CLASSES:
            notes.append(f"{name}: unknown engine (known: {', '.join(ALL_ENGINES)})")
            continue
        mods = REQUIRED_MODULES.get(name, [])
        missing = [m for m in mods if not _importable(m)]
        if missing:
            notes.append(f"{name}: skipped, missing {', '.join(missing)}")
            continue
        if name in PG_ENGINES:
            try:
                import psycopg

                psycopg.connect(pg_dsn, connect_timeout=3).close()
            except Exception as e:  # noqa: BLE001 - any failure means "not reachable"
                notes.append(f"{name}: skipped, PostgreSQL not reachable ({type(e).__name__})")
                continue
        out.append(name)
    return out, notes


def _importable(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def run_worker(engine: str, work: Path, pg_dsn: str, size: int | None = None) -> dict:
    result = work / f"result-{engine}-{size or 'quality'}.json"
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        engine,
        "--work",
        str(work),
        "--result",
        str(result),
        "--pg-dsn",
        pg_dsn,
    ]
    cmd += ["--size", str(size)] if size else ["--quality"]
    proc = subprocess.run(cmd)
    if proc.returncode != 0 or not result.exists():
        return {"engine": engine, "size": size, "error": f"worker exit {proc.returncode}"}
    return json.loads(result.read_text())


def overlap(a: list[list[int]], b: list[list[int]]) -> float:
    """Mean |top10(a) ∩ top10(b)| / 10 over queries where the reference returned anything."""
    vals = [len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(a, b, strict=True) if y]
    return sum(vals) / len(vals) if vals else float("nan")


def fmt(v, spec=".1f"):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def print_tables(results, quality, notes, n_queries):
    ref_name = "postings-sqlite"
    log("\n=== Keyword engine benchmark ===")
    log(
        f"queries per run: {n_queries} (OR of terms, top {TOP_K}); scoped = same queries "
        f"filtered to one of {len(PROJECTS)} projects; times in ms unless marked"
    )
    hdr = (
        f"{'size':>7} {'engine':<16} {'build s':>8} {'add ms':>9} {'(n)':>4} "
        f"{'p50':>7} {'p95':>7} {'sc p50':>7} {'sc p95':>7} {'RSSΔ MB':>8} "
        f"{'disk MB':>8} {'ovl@10':>6}"
    )
    log(hdr)
    log("-" * len(hdr))
    for size in sorted({r["size"] for r in results}):
        rows = [r for r in results if r["size"] == size]
        ref = next((r for r in rows if r["engine"] == ref_name and "unscoped_top" in r), None)
        for r in rows:
            if "error" in r or "skipped" in r:
                why = r.get("error") or r.get("skipped")
                extra = f" (built in {r['build_s']:.1f} s)" if "build_s" in r else ""
                log(f"{size:>7} {r['engine']:<16} {why}{extra}")
                continue
            ovl = overlap(r["unscoped_top"], ref["unscoped_top"]) if ref else None
            pg = r["engine"] in PG_ENGINES
            log(
                f"{size:>7} {r['engine']:<16} {fmt(r['build_s'])[:8]:>8} "
                f"{fmt(r['add_ms'], '.2f'):>9} {r['add_n']:>4} "
                f"{fmt(r['unscoped_p50_ms'], '.2f'):>7} {fmt(r['unscoped_p95_ms'], '.2f'):>7} "
                f"{fmt(r['scoped_p50_ms'], '.2f'):>7} {fmt(r['scoped_p95_ms'], '.2f'):>7} "
                f"{'server' if pg else fmt(r['rss_delta_mb']):>8} {fmt(r['disk_mb']):>8} "
                f"{fmt(ovl, '.2f'):>6}"
            )
    log(
        "\ncolumns: add ms = median time to insert one doc and commit (rebuild engines: full "
        "rebuild), (n) inserts timed, each then verified searchable; RSSΔ = client RSS growth "
        "from building the index (PG engines keep it in the server); disk = DB files or PG "
        "relation sizes incl. indexes; ovl@10 = mean top-10 overlap with postings-sqlite "
        "(unscoped), a sanity figure, not a quality metric."
    )
    if quality:
        log(
            f"\nQuality sanity check (cheap, NOT the official protocol): LongMemEval-S, "
            f"{quality[0].get('n', '?')} random non-abstention questions, each question's own "
            f"haystack indexed alone, sessions as documents (user turns only), "
            f"session-level recall_any@5 / recall_all@5:"
        )
        for q in quality:
            if "error" in q:
                log(f"  {q['engine']:<16} {q['error']}")
            else:
                log(f"  {q['engine']:<16} {q['recall_any@5']:.2f} / {q['recall_all@5']:.2f}")
    for n in notes:
        log(f"note: {n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,50000,100000")
    ap.add_argument("--queries", type=int, default=200)
    here = Path(__file__).resolve()
    ap.add_argument(
        "--data-dir",
        default=str(here.parents[3] / "shared" / "data"),
        help="folder with longmemeval/ and coding-agent-life-v1/",
    )
    ap.add_argument("--engines", default=",".join(ALL_ENGINES))
    ap.add_argument("--pg-dsn", default=os.environ.get("KWBENCH_PG_DSN", DEFAULT_PG_DSN))
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--json-out", help="also write raw results (without top lists) here")
    # internal: worker mode
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--quality", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main(args)

    t_start = time.perf_counter()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    engines, notes = available_engines(args.engines.split(","), args.pg_dsn)
    log(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
        f"nproc {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, "
        f"engines: {', '.join(engines)}"
    )
    work = Path(tempfile.mkdtemp(prefix="kwbench-"))
    results, quality = [], []
    try:
        prepare_data(Path(args.data_dir), max(sizes), args.queries, work)
        rank_prev = None  # (size, p50 ms) of rank_bm25 at the previous size
        for size in sizes:
            for engine in engines:
                if engine == "rank_bm25" and rank_prev:
                    est = rank_prev[1] * size / rank_prev[0] / 1000
                    if est > RANK_BM25_MAX_QUERY_S:
                        results.append(
                            {
                                "engine": engine,
                                "size": size,
                                "skipped": f"skipped: estimated {est:.2f} s per query",
                            }
                        )
                        continue
                log(f"[size {size}] {engine} ... ({time.perf_counter() - t_start:.0f} s elapsed)")
                r = run_worker(engine, work, args.pg_dsn, size)
                results.append(r)
                if engine == "rank_bm25" and "unscoped_p50_ms" in r:
                    rank_prev = (size, r["unscoped_p50_ms"])
        if not args.no_quality:
            for engine in engines:
                log(f"[quality] {engine} ...")
                quality.append(run_worker(engine, work, args.pg_dsn))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_tables(results, quality, notes, args.queries)
    if args.json_out:
        slim = [{k: v for k, v in r.items() if not k.endswith("_top")} for r in results]
        Path(args.json_out).write_text(json.dumps({"results": slim, "quality": quality}, indent=1))
    log(
        f"\ntotal wall time {time.perf_counter() - t_start:.0f} s; load average (1/5/15 min) "
        f"at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
