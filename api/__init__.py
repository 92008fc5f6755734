"""The Flask gateway: auth, validation, the capture inbox and reads. No processing happens here:
captures are written to the inbox and enqueued; workers do the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request

from engram import __version__
from engram.activity import Feed
from engram.api import auth, errors
from engram.api.routes import (
    admin,
    capture,
    graph,
    health,
    memories,
    projects,
    recall,
    sessions,
    sync,
    viewer,
)
from engram.api.util import check_contract, check_request_text
from engram.metrics import Counts
from engram.settings import Settings
from engram.store import Store
from engram.vectors import Vectors
from engram.webauth import ViewerAuth

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
DOCUMENT_WRITES = ("/v1/memories", "/v1/observations/", "/v1/import")
NOT_LIVE = ("/v1/import", "/v1/export", "/mcp", "/v1/events")
"""Requests that do not make background work step aside: bulk transfers (background work
themselves), the MCP mount (a streamable HTTP session can stay open for minutes) and the
viewer's live stream (open for minutes)."""
"""Paths whose writes change indexed documents outside the capture pipeline (captures and
summaries are kicked by their own tasks; POST /v1/search, /v1/context and /v1/graph/query read)."""


def create_app(
    settings: Settings,
    store: Store,
    *,
    secret: str,
    dispatch: Callable[[str], None],
    enqueue_summary: Callable[[str], None],
    broker_probe: Callable[[], str | None],
    worker_probe: Callable[[], dict[str, Any]],
    vectors: Vectors | None = None,
    derived_changed: Callable[[], None] | None = None,
    queue_probe: Callable[[], dict[str, int]] | None = None,
) -> Flask:
    """Build the gateway. The callables connect it to the task queue (see tasks.client)."""
    app = Flask("engram", static_folder=None)  # the viewer serves its own files
    app.config.update(
        MAX_CONTENT_LENGTH=settings.max_body_bytes,
        JSON_SORT_KEYS=False,
        ENGRAM_VERSION=__version__,
    )
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions.update(
        {
            "engram.settings": settings,
            "engram.store": store,
            "engram.dispatch": dispatch,
            "engram.enqueue_summary": enqueue_summary,
            "engram.broker_probe": broker_probe,
            "engram.worker_probe": worker_probe,
            "engram.vectors": vectors,
            "engram.viewer_auth": ViewerAuth(store, settings.viewer_session_hours),
            "engram.feed": Feed(store),
            "engram.stream_slots": viewer.StreamSlots(settings.viewer_max_streams),
            "engram.queue_probe": queue_probe or dict,
            "engram.capture_answers": Counts(),
        }
    )
    errors.register(app)
    auth.install(app, settings, secret, app.extensions["engram.viewer_auth"], viewer.is_public)
    app.before_request(admin.larger_body_for_import)
    app.before_request(check_request_text)
    app.before_request(check_contract)
    for blueprint in (
        health.bp,
        capture.bp,
        sessions.bp,
        recall.bp,
        memories.bp,
        admin.bp,
        graph.bp,
        projects.bp,
        sync.bp,
        viewer.bp,
    ):
        app.register_blueprint(blueprint)
    app.wsgi_app = _live_requests(app.wsgi_app, store)  # type: ignore[method-assign]
    if derived_changed is not None:
        kick = derived_changed

        @app.after_request
        def _derived_indexes_follow(response: Response) -> Response:
            # memories, forget and import change documents the vector and graph indexes
            # derive from
            if (
                request.method in WRITE_METHODS
                and response.status_code < 300
                and request.path.startswith(DOCUMENT_WRITES)
            ):
                kick()
            return response

    return app


def _live_requests(wsgi_app: Callable[..., Any], store: Store) -> Callable[..., Any]:
    """Mark each request live in the store's gate (``Store.live``) while the gateway builds its
    answer, so the in-process background work (imports, derived lanes) steps aside for it."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if str(environ.get("PATH_INFO", "")).startswith(NOT_LIVE):
            return wsgi_app(environ, start_response)
        with store.live():
            return wsgi_app(environ, start_response)

    return app
