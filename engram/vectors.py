"""The vector index: dense embeddings of the keyword documents in ChromaDB.

Collections are named by embedding model and dimension (``engram-<model>-<dim>``), one per
project under that name (see ``VectorIndex``), cosine space.
Embedded mode opens a PersistentClient in ``<data dir>/chroma``; with ``ENGRAM_CHROMA_URL`` every
process talks to one Chroma server (required when the gateway and the workers are separate
processes: a PersistentClient is not shared across processes).

The index follows the store through the derive queue (target ``vector``): a drain claims
changes, embeds each body's gist (``engram.gist``) in batches and upserts or deletes by document
id, which makes a repeated batch harmless. A collection seen for the first time (a new model, or vectors just
turned on) is back-filled: every indexed document is queued, and the collection is marked once
that is committed, so a crash in between queues them again rather than leaving gaps. The server
always starts: when the embedder or Chroma cannot be used, ``VectorIndex.problem`` says why and
search runs without the vector stream.

Each document carries its scope as metadata (project, agent, kind; "" for none) and queries
filter on it inside Chroma, before ranking.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from engram import derive
from engram.embedders.base import Embedder, EmbedderError
from engram.gist import gist
from engram.keyword import KeywordHit
from engram.scope import Scope, Window

if TYPE_CHECKING:
    from engram.settings import Settings
    from engram.store import Store

log = logging.getLogger("engram.vectors")

TARGET = "vector"
BACKFILL_MARK = "engram_backfill_queued"
RETRY_OPEN_SECONDS = 30.0
"""How often an index that could not be opened is tried again."""
NONE = ""  # metadata value for "no agent" / "no session" (Chroma metadata cannot be null)


class VectorsUnavailable(RuntimeError):
    """Chroma or the embedder cannot be used; the message says why and what to do."""


def collection_name(embedder: Embedder) -> str:
    """``engram-<model>-<dim>`` within Chroma's name rules (3-512 of [a-zA-Z0-9._-], alnum at
    both ends)."""
    slug = re.sub(r"[^a-zA-Z0-9._-]+", "-", embedder.name).strip("-._") or "model"
    return f"engram-{slug}-{embedder.dim}"[:200]


OTLP_GRPC_EXPORTER = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"


class _NoOtlpExport:
    """Stands in for OpenTelemetry's gRPC span exporter, which chromadb imports for its own
    tracing (used only with Chroma's ``chroma_otel_collection_endpoint``, which Engram never
    sets): importing it loads grpc, 18 MB of every process that opens Chroma (measured)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise VectorsUnavailable("Chroma's OpenTelemetry export is not available inside Engram")


def _skip_otlp_grpc() -> None:
    """Keep chromadb from loading grpc: install the stand-in exporter module, unless the real
    one is loaded already (then there is nothing to save)."""
    import sys
    import types

    if OTLP_GRPC_EXPORTER not in sys.modules:
        stub = types.ModuleType(OTLP_GRPC_EXPORTER, _NoOtlpExport.__doc__)
        stub.OTLPSpanExporter = _NoOtlpExport  # type: ignore[attr-defined]
        sys.modules[OTLP_GRPC_EXPORTER] = stub


def chroma_client(settings: Settings) -> Any:
    """A Chroma client for the settings: HTTP when ENGRAM_CHROMA_URL is set, else persistent
    in the data dir. Telemetry off."""
    _skip_otlp_grpc()
    try:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
    except ImportError as exc:
        raise VectorsUnavailable(
            f"chromadb is not installed ({exc}); run `pip install chromadb`"
        ) from None
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_url:
        url = urlsplit(settings.chroma_url)
        try:
            client = chromadb.HttpClient(
                host=url.hostname or "127.0.0.1",
                port=url.port or (443 if url.scheme == "https" else 8000),
                ssl=url.scheme == "https",
                settings=chroma_settings,
            )
            client.heartbeat()
        except Exception as exc:  # noqa: BLE001 - any client failure means "no server there"
            raise VectorsUnavailable(
                f"cannot reach the Chroma server at {settings.chroma_url} ({exc}); start it "
                "(`chroma run --path DIR --port N`) or unset ENGRAM_CHROMA_URL"
            ) from None
        return client
    path = settings.data_dir / "chroma"
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def _where(
    scope: Scope, kinds: Sequence[str] | None, window: Window | None = None
) -> dict[str, Any] | None:
    """The filter inside one project's collection: the agent, the kinds and the time window
    (on each document's ``created``), when asked for."""
    clauses: list[dict[str, Any]] = []
    if scope.agent_id is not None:
        clauses.append({"agent": {"$in": [scope.agent_id, NONE]}})
    if kinds:
        clauses.append({"kind": {"$in": list(kinds)}})
    if window is not None and window.since is not None:
        clauses.append({"created": {"$gte": window.since}})
    if window is not None and window.until is not None:
        clauses.append({"created": {"$lt": window.until}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _project_key(project: str) -> str:
    return hashlib.sha1(project.encode("utf-8")).hexdigest()[:16]


class VectorIndex:
    """One embedder's vectors: a collection per project (``<name>-p<hash>``) and a registry
    collection ``<name>`` holding only metadata (the back-fill mark).

    Partitioning by project puts the project scope inside the index: a query reads only the
    collections of the projects in scope (the project and global memories) and needs no
    metadata filter, which Chroma's local mode applies slowly (measured at 50k documents: 4 ms
    unfiltered, 124-194 ms with a filter matching most of the collection). The agent and kind
    filters, when a read asks for them, are ``where`` clauses inside the project's collection.
    """

    def __init__(self, client: Any, embedder: Embedder) -> None:
        self.client = client
        self.embedder = embedder
        self.name = collection_name(embedder)
        self.registry = client.get_or_create_collection(
            self.name,
            metadata={"model": embedder.name, "dim": embedder.dim},
            embedding_function=None,
        )
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _collection(self, project: str, create: bool) -> Any | None:
        with self._lock:
            found = self._collections.get(project)
            if found is not None:
                return found
            name = f"{self.name}-p{_project_key(project)}"
            if create:
                found = self.client.get_or_create_collection(
                    name,
                    metadata={
                        "hnsw:space": "cosine",
                        "project": project,
                        "model": self.embedder.name,
                    },
                    embedding_function=None,
                )
            else:
                try:
                    found = self.client.get_collection(name, embedding_function=None)
                except Exception:  # noqa: BLE001 - Chroma raises different types per mode
                    return None
            self._collections[project] = found
            return found

    def _project_collections(self) -> list[Any]:
        prefix = f"{self.name}-p"
        names = [c if isinstance(c, str) else c.name for c in self.client.list_collections()]
        return [
            self.client.get_collection(n, embedding_function=None)
            for n in names
            if n.startswith(prefix)
        ]

    # -- keeping up with the store --------------------------------------------------------

    def backfill_queued(self) -> bool:
        return bool((self.registry.metadata or {}).get(BACKFILL_MARK))

    def ensure_backfill(self, store: Store) -> int:
        """Queue every document for a model that has never been filled; 0 when it was."""
        if self.backfill_queued():
            return 0
        with store.write() as conn:
            queued = derive.enqueue_all(conn, TARGET)
        self.registry.modify(metadata={**(self.registry.metadata or {}), BACKFILL_MARK: True})
        log.info("vectors %s: %d documents queued for back-fill", self.name, queued)
        return queued

    def apply(self, changes: Sequence[derive.Change], drop: Collection[str] = ()) -> None:
        """Bring the collections up to date with ``changes`` (idempotent). Documents in
        ``drop`` are not kept in the index: an upsert of one removes it instead (an observation
        past the project's newest, or of a kind that gets no vector)."""
        upserts, dropped, deletes = [], [], []
        for c in changes:
            doc = c.doc
            if c.op != derive.UPSERT or doc is None:
                deletes.append(c.doc_id)
            elif doc.doc_id in drop:
                dropped.append(doc)
            else:
                upserts.append(doc)
        if upserts:
            vectors = self.embedder.embed([gist(doc.kind, doc.body) for doc in upserts])
            by_project: dict[str, list[int]] = {}
            for i, doc in enumerate(upserts):
                by_project.setdefault(doc.project, []).append(i)
            for project, rows in by_project.items():
                collection = self._collection(project, create=True)
                assert collection is not None  # create=True always gives one
                collection.upsert(
                    ids=[upserts[i].doc_id for i in rows],
                    embeddings=[vectors[i] for i in rows],
                    metadatas=[
                        {
                            "agent": upserts[i].agent_id or NONE,
                            "kind": upserts[i].kind,
                            "session": upserts[i].session_id or NONE,
                            "created": upserts[i].created_at,
                        }
                        for i in rows
                    ],
                )
        for project in {doc.project for doc in dropped}:
            self.forget(project, [doc.doc_id for doc in dropped if doc.project == project])
        if deletes:
            # a deleted document's project is no longer known: delete from every collection
            for collection in self._project_collections():
                collection.delete(ids=deletes)

    def forget(self, project: str, doc_ids: Sequence[str]) -> None:
        """Remove ``doc_ids`` from ``project``'s collection (ids it does not hold are ignored)."""
        collection = self._collection(project, create=False)
        if collection is not None and doc_ids:
            collection.delete(ids=list(doc_ids))

    def count(self) -> int:
        return sum(int(c.count()) for c in self._project_collections())

    def close(self) -> None:
        """Let go of the Chroma client: an HTTP client's connections, an embedded store's files
        (Chroma stops its system when the last client on it closes)."""
        close = getattr(self.client, "close", None)
        if close is not None:
            close()
        # Chroma's HTTP API keeps its httpx client open when its system stops
        # (chroma-core/chroma#2702): close the client's and its admin client's, if any
        for owner in (self.client, getattr(self.client, "_admin_client", None)):
            session = getattr(getattr(owner, "_server", None), "_session", None)
            if session is not None and callable(getattr(session, "close", None)):
                session.close()

    # -- reading --------------------------------------------------------------------------

    def embed_query(self, query: str) -> list[float]:
        embed_query = getattr(self.embedder, "embed_query", None)
        vectors = embed_query([query]) if callable(embed_query) else self.embedder.embed([query])
        return list(vectors[0])

    def search(
        self,
        query: str,
        scope: Scope,
        limit: int,
        kinds: Sequence[str] | None = None,
        vector: Sequence[float] | None = None,
        window: Window | None = None,
        vectors_out: dict[str, Sequence[float]] | None = None,
        described: bool = True,
    ) -> list[KeywordHit]:
        """Nearest documents in scope (and ``window``), best first; score = cosine similarity.
        ``vectors_out``, when given, receives the stored vector of every document the index
        answered with (for ``engram.search.feedback_ranking``: cheaper than asking again).
        Without ``described`` the hits' kind and session are left empty ("" and None) and
        Chroma reads no metadata (half its time at 50k documents): for a caller that reads
        them from the keyword index (``keyword.described``)."""
        if scope.all_projects:
            collections = self._project_collections()
        else:
            collections = [
                c
                for c in (self._collection(p, create=False) for p in scope.projects())
                if c is not None
            ]
        if not collections:
            return []
        if vector is None:
            vector = self.embed_query(query)
        where = _where(scope, kinds, window)
        hits: list[KeywordHit] = []
        for collection in collections:
            result = collection.query(
                query_embeddings=[list(vector)],
                n_results=limit,
                where=where,
                include=(["metadatas", "distances"] if described else ["distances"])
                + (["embeddings"] if vectors_out is not None else []),
            )
            ids = result["ids"][0] if result["ids"] else []
            if vectors_out is not None and result.get("embeddings") is not None:
                vectors_out.update(zip(ids, result["embeddings"][0], strict=True))
            dists = (result.get("distances") or [[]])[0] or []
            metas = ((result.get("metadatas") or [[]])[0] or []) if described else [{}] * len(ids)
            hits.extend(
                KeywordHit(
                    doc_id=doc_id,
                    kind=str(meta.get("kind", "observation")) if described else "",
                    session_id=str(meta.get("session") or "") or None,
                    score=1.0 - float(dist),
                )
                for doc_id, meta, dist in zip(ids, metas, dists, strict=True)
            )
        hits.sort(key=lambda h: -h.score)
        return hits[:limit]


class Vectors:
    """The process's view of the vector stream: the index when it can be used, else the
    reason it cannot. Opened lazily on first use and at most once at a time."""

    def __init__(self, settings: Settings, store: Store, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = store
        self._embedder = embedder
        self._index: VectorIndex | None = None
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._opened = False
        self._opened_at = 0.0

    @property
    def enabled(self) -> bool:
        return self.settings.embedder != "none" or self._embedder is not None

    def index(self, wait: bool = True) -> VectorIndex | None:
        """The vector index, or None (``problem`` says why when vectors are enabled). Opens it
        on first use; with ``wait=False``, None while another thread is opening it (a search
        does not wait for the model to load)."""
        if not self.enabled:
            return None
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            if not self._opened:
                self._opened = True
                self._opened_at = time.monotonic()
                self._open()
            return self._index
        finally:
            self._lock.release()

    @property
    def opening(self) -> bool:
        return self._lock.locked()

    def _open(self) -> None:
        from engram.embedders.factory import embedder_from_settings

        if self.settings.broker_url and not self.settings.chroma_url:
            self.problem = (
                "vectors need a Chroma server when the gateway and the workers are "
                "separate processes: set ENGRAM_CHROMA_URL (e.g. `chroma run --path "
                "DIR --port 8001` and ENGRAM_CHROMA_URL=http://127.0.0.1:8001)"
            )
            log.warning("vector search off: %s", self.problem)
            return
        try:
            embedder = self._embedder or embedder_from_settings(self.settings)
            if embedder is None:
                return
            self._index = VectorIndex(chroma_client(self.settings), embedder)
            self._index.ensure_backfill(self.store)
            self.problem = None
        except (EmbedderError, VectorsUnavailable) as exc:
            self.problem = str(exc)
            log.warning("vector search off: %s", exc)
        except Exception as exc:  # noqa: BLE001 - the server always starts; status tells why
            self.problem = f"{type(exc).__name__}: {exc}"
            log.exception("vector search off")

    def close(self) -> None:
        """Close the index, if open; it stays closed (``index()`` answers None)."""
        with self._lock:
            self._opened = True  # never opened again
            index, self._index = self._index, None
            self.problem = "the vector index is closed"
        if index is not None:
            index.close()

    def retry(self) -> None:
        """Forget a failed open, so the next use tries again (Chroma came back, say) — at most
        once per RETRY_OPEN_SECONDS, so a broken embedder is not reloaded (and logged) at every
        capture."""
        with self._lock:
            if self._index is None and time.monotonic() - self._opened_at >= RETRY_OPEN_SECONDS:
                self._opened = False

    def status(self) -> dict[str, Any]:
        report: dict[str, Any] = {"enabled": self.enabled, "embedder": self.settings.embedder}
        if not self.enabled:
            report["hint"] = (
                "set ENGRAM_EMBEDDER=local (offline) or openai to add the vector "
                "stream to hybrid search"
            )
            return report
        index = self.index()
        with self.store.read() as conn:
            pending = derive.pending(conn, TARGET)
            error = derive.last_error(conn, TARGET)
            total = self.store.keyword.count(conn)
        report.update({"ok": index is not None, "pending": pending})
        if error:
            report["lastError"] = error
        if index is None:
            report["problem"] = self.problem
            return report
        try:
            indexed = index.count()
        except Exception as exc:  # noqa: BLE001 - status reports, never raises
            report.update({"ok": False, "problem": f"Chroma: {type(exc).__name__}: {exc}"})
            return report
        # progress by what is left to drain: with ENGRAM_VECTOR_MAX_OBSERVATIONS the index
        # holds fewer documents than the store by design
        report.update(
            {
                "collection": index.name,
                "model": index.embedder.name,
                "dim": index.embedder.dim,
                "indexed": indexed,
                "documents": total,
                "keepObservations": self.settings.vector_max_observations or None,
                "backfill": {
                    "done": pending == 0,
                    "progress": round(1 - min(pending, total) / total, 4) if total else 1.0,
                },
            }
        )
        return report
