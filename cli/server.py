"""Wiring for the processes Engram runs: the gateway (with its embedded worker by default),
a distributed worker pool, the scheduler."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask

from engram import drains
from engram import secret as secret_mod
from engram.memory import bound_heap
from engram.settings import Settings
from engram.status import redact_url
from engram.store import Store
from engram.vectors import Vectors

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("engram.server")


QUIET_LOGGERS = {
    "kombu.connection": logging.ERROR,  # "No hostname was supplied" for memory:// on every send
    "celery.worker.strategy": logging.WARNING,  # one line per task received
    "celery.app.trace": logging.WARNING,  # one line per task finished
    "httpx": logging.WARNING,  # one line per HTTP call: every Chroma server call, every LLM call
    "httpcore": logging.WARNING,
}
"""Per-task and per-call chatter that drowns the ``engram.*`` lines at INFO; shown again with
ENGRAM_LOG_LEVEL=DEBUG."""
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (ENGRAM_LOG_FORMAT=json): time (UTC, ISO 8601), level, logger,
    message, and ``exc`` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        import json
        from datetime import datetime, timezone

        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(level: str, fmt: str = "text") -> None:
    """The process's one logging set-up (serve, worker, beat): stderr, ``level``, ``fmt``
    (``text`` or ``json``); the chatty libraries quieted unless ``level`` is DEBUG."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)  # a library's warning is a line in the same format too
    if level.upper() != "DEBUG":
        for name, quiet in QUIET_LOGGERS.items():
            logging.getLogger(name).setLevel(quiet)


def prepare_dirs(settings: Settings, *, private: bool = False) -> None:
    """The data and config dirs, 0700. ``private`` (the server, a worker, beat: the processes
    that own the data dir): this process creates its files 0600 and its dirs 0700 from now on
    (the store, its WAL, Chroma's files, the beat schedule), and files an older version left
    readable are tightened."""
    import os

    if private:
        os.umask(0o077)
    for directory in (settings.data_dir, settings.config_dir):
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        if private:
            tighten(directory)


def tighten(directory: Path) -> None:
    """Take group and other access off everything under ``directory`` (owner's files only)."""
    import os
    import stat

    uid = os.getuid()
    for root, dirs, files in os.walk(directory):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
                if info.st_uid == uid and not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
                    os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
            except OSError:
                continue  # gone meanwhile, or not ours to change
    try:
        if directory.stat().st_mode & 0o077:
            directory.chmod(0o700)
    except OSError:
        pass


@dataclass
class Gateway:
    settings: Settings
    store: Store
    secret: str
    vectors: Vectors
    app: Flask = field(init=False)
    embedded: Any = None  # tasks.embedded.EmbeddedWorker, once started

    def start_worker(self) -> None:
        """Start the in-process worker, the derived lane and the scheduler (embedded mode)."""
        from engram.lane import GRAPH, LLM, VECTOR, DerivedLane, DerivedLanes
        from engram.llm import work as llm_work
        from engram.tasks import runtime
        from engram.tasks.embedded import EmbeddedWorker

        if not self.settings.embedded or self.embedded is not None:
            return
        store = self.store
        services = runtime.Services(self.settings, self.store, self.vectors)
        llm = services.llm()
        kinds = (GRAPH, VECTOR) if llm is None else (GRAPH, VECTOR, LLM)
        lane = DerivedLanes(
            [
                DerivedLane(
                    store,
                    self.vectors,
                    capture_busy=functools.partial(drains.capture_waiting, store),
                    vector_batch=self.settings.embedding_batch,
                    keep_observations=self.settings.vector_max_observations,
                    bulk_busy=store.bulk_running,
                    work=(kind,),
                    llm_drain=None
                    if llm is None
                    else functools.partial(llm_work.drain, store, llm, self.settings),
                )
                for kind in kinds
            ]
        )
        services.lane = lane
        # the in-process worker shares this store and vector index
        runtime.install(services)
        self.embedded = EmbeddedWorker(self.settings, lane)
        self.embedded.start()

    def worker_alive(self) -> bool:
        return self.embedded is not None and bool(self.embedded.alive)

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.stop()
        mcp = self.app.extensions.get("engram.mcp") if hasattr(self, "app") else None
        if mcp is not None:
            mcp.close()  # the /mcp event loop, if a client started it
        feed = self.app.extensions.get("engram.feed") if hasattr(self, "app") else None
        if feed is not None:
            feed.close()  # open viewer streams end (their browsers reconnect elsewhere)
        self.vectors.close()
        self.store.close()


def build_gateway(settings: Settings, *, start_worker: bool = True) -> Gateway:
    """Open the store, configure the queue, build the Flask app and (embedded mode, unless
    ``start_worker`` is False) start the in-process worker. The same wiring serves
    `engram serve`, the demo and the tests."""
    from engram.api import create_app, mcp_http
    from engram.tasks import client
    from engram.tasks.app import configure

    prepare_dirs(settings)
    bound_heap()
    store = Store.open(settings.database_url)
    configure(settings)
    gateway = Gateway(
        settings, store, secret_mod.load_or_create(settings), Vectors(settings, store)
    )
    gateway.app = create_app(
        settings,
        store,
        secret=gateway.secret,
        dispatch=client.dispatch_observe,
        enqueue_summary=client.enqueue_summary,
        broker_probe=client.broker_probe(settings),
        worker_probe=client.worker_probe(
            settings, gateway.worker_alive if settings.embedded else None
        ),
        vectors=gateway.vectors,
        derived_changed=client.derived_changed,
        queue_probe=client.queue_probe(settings),
    )
    mcp_http.install(gateway.app, _mcp_server(gateway.app, gateway.secret))  # /mcp, same auth
    if start_worker:
        gateway.start_worker()
    if gateway.vectors.enabled:
        # load the embedder, open Chroma and queue a back-fill off the start path: the server
        # answers at once, and search uses vectors from when they are ready
        threading.Thread(
            target=_open_vectors, args=(gateway,), name="engram-vectors-open", daemon=True
        ).start()
    return gateway


def _mcp_server(app: Flask, secret: str) -> Callable[[], MCPServer]:
    """The ``/mcp`` server factory. The MCP SDK and the tools' models (~25 MB resident) are
    imported by the first ``/mcp`` request, not at start: most hosts reach Engram over stdio
    (`engram mcp`, its own process) and a gateway that nobody asks over HTTP never needs them."""

    def make() -> MCPServer:
        from engram.agents.mcp_server import for_gateway

        return for_gateway(app, secret)()

    return make


def local_gateway(settings: Settings) -> Gateway:
    """The gateway `engram mcp` falls back on when none answers: the same store and secret, no
    embedder and no worker (Chroma's files belong to the gateway, and captures wait in the
    inbox for it)."""
    from engram.settings import load_settings

    local = load_settings(
        overrides={
            "data_dir": settings.data_dir,
            "config_dir": settings.config_dir,
            "embedder": "none",
        }
    )
    for name, level in QUIET_LOGGERS.items():  # kombu's memory:// chatter
        logging.getLogger(name).setLevel(level)
    return build_gateway(local, start_worker=False)


def _open_vectors(gateway: Gateway) -> None:
    if gateway.vectors.index() is not None and gateway.embedded is not None:
        gateway.embedded.lane.kick()  # a back-fill may have been queued


def serve(settings: Settings, announce: Callable[[str], None] = print) -> int:
    """Run the gateway under waitress until SIGINT/SIGTERM; returns the exit code."""
    from waitress.server import create_server

    prepare_dirs(settings, private=True)
    gateway = build_gateway(settings, start_worker=False)
    try:
        # Bind before starting the worker: a taken port fails before any work begins. Waitress
        # refuses a Content-Length over the largest body any route takes before reading it (or
        # checking the secret); Flask answers a body over a route's own limit with the JSON 413.
        server = create_server(
            gateway.app,
            host=settings.host,
            port=settings.port,
            threads=settings.server_threads,
            ident="engram",
            max_request_body_size=max(settings.max_body_bytes, settings.max_import_bytes) + 1,
            clear_untrusted_proxy_headers=True,
        )
    except OSError:
        gateway.close()
        raise
    gateway.start_worker()
    port = server.effective_port
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    mode = (
        "embedded (in-process worker, no other server needed)"
        if settings.embedded
        else f"distributed (broker {redact_url(settings.broker_url)}; run `engram worker` and "
        "`engram beat`)"
    )
    announce(f"Engram {gateway.app.config['ENGRAM_VERSION']} listening on http://{host}:{port}")
    announce(f"  mode:    {mode}")
    announce(f"  data:    {settings.data_dir}")
    announce(f"  store:   {redact_url(settings.database_url)}")
    announce(f"  secret:  {'ENGRAM_SECRET' if settings.secret else settings.secret_file}")
    if settings.embedder == "none":
        announce("  vectors: off (ENGRAM_EMBEDDER=none): search is keyword + graph")
    else:
        where = settings.chroma_url or str(settings.data_dir / "chroma")
        model = f" ({settings.local_model})" if settings.embedder == "local" else ""
        announce(
            f"  vectors: {settings.embedder}{model} embedder, Chroma at {where} "
            "(loading in the background; `engram status` tells when ready)"
        )
    if settings.reranker != "off":
        target = f" at {settings.reranker_url or '(ENGRAM_RERANKER_URL is empty)'}"
        budget = (
            f" (as many as fit in {settings.rerank_budget_ms:g} ms)"
            if settings.reranker == "local" and settings.rerank_budget_ms > 0
            else ""
        )
        announce(
            f"  rerank:  {settings.reranker}{target if settings.reranker == 'http' else ''}, "
            f"the top {settings.rerank_depth}{budget} of each /v1/search (never hook context)"
        )
    viewer = gateway.app.extensions["engram.viewer_auth"]
    announce(
        f"  viewer:  http://{host}:{port}/login?token={viewer.mint_link()} "
        "(one-time, 5 minutes; `engram open` makes another)"
    )
    announce("Press Ctrl-C to stop.")

    def _terminate(_signum: int, _frame: Any) -> None:
        raise SystemExit(0)  # waitress's run() treats it like Ctrl-C: stops its task threads

    signal.signal(signal.SIGTERM, _terminate)
    # Also for SIGINT: a shell starting us in the background leaves SIGINT ignored.
    signal.signal(signal.SIGINT, _terminate)
    if drain_spool(settings, port):
        announce(
            "  spool:   hook events spooled on this machine; sending them now "
            "(`engram capture` shows them)"
        )
    try:
        server.run()  # returns after Ctrl-C or SIGTERM
    finally:
        announce("Stopping…")
        # Whatever is still running (an embedding batch, an import, a slow request) must not
        # keep the process: everything durable is already committed, and what was cut short
        # is still in the inbox or the derive queue for the next start.
        deadline = threading.Timer(STOP_DEADLINE_SECONDS, _exit_now, args=(announce,))
        deadline.daemon = True
        deadline.start()
        server.close()
        gateway.close()
        deadline.cancel()
    announce("Stopped.")
    return 0


STOP_DEADLINE_SECONDS = 4.0
"""After SIGTERM or Ctrl-C the server is gone within this long (plus the exit itself)."""


def _exit_now(announce: Callable[[str], None]) -> None:
    import os

    announce(
        f"Stopped (work still running after {STOP_DEADLINE_SECONDS:.0f}s was cut short; "
        "it resumes from the inbox at the next start)."
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def drain_spool(settings: Settings, port: int) -> bool:
    """Start draining this machine's hook spool into this server, when it holds anything: the
    same detached drain a hook starts (one at a time; replays are deduplicated). The socket is
    bound already, so the drain's requests wait in its backlog until the server runs."""
    import os
    import subprocess

    directory = settings.data_dir / "spool"
    waiting = (
        (directory / "events.jsonl").exists()
        and (directory / "events.jsonl").stat().st_size > 0
        or any(directory.glob("draining-*.jsonl"))
    )
    if not waiting:
        return False
    host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(settings.host, settings.host)
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    env = {
        **os.environ,
        "ENGRAM_DATA_DIR": str(settings.data_dir),
        "ENGRAM_CONFIG_DIR": str(settings.config_dir),
        "ENGRAM_URL": url,
    }
    subprocess.Popen(
        [sys.executable, "-m", "engram.agents.capture", "--drain-quietly"],  # noqa: S603
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return True
