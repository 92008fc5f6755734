"""The embedded default: a Celery worker and scheduler running as threads of the gateway, and
the derived lanes beside them.

One process, no other server. Two lanes, so capture never queues behind derived work: the
Celery worker's threads consume only the capture and maintenance queues (observe, summarize,
sweep), and embedding and graph extraction run on the derived lanes (``engram.lane``), which
yield to capture. The in-memory broker lives in this process, so on start every waiting inbox
entry is dispatched again (whatever was queued died with the previous process).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.beat import EmbeddedService

from engram.lane import DerivedLanes
from engram.settings import Settings
from engram.tasks.app import CAPTURE_QUEUE, LEGACY_QUEUES, MAINTENANCE_QUEUE, celery_app

log = logging.getLogger("engram.embedded")

SHUTDOWN_TIMEOUT = 3.0
"""How long stopping waits for the worker thread and the derived lanes (each); `engram serve`
must be gone within 5 s of SIGTERM. What is cut short stays in the inbox or the derive queue."""


class EmbeddedWorker:
    def __init__(self, settings: Settings, lane: DerivedLanes) -> None:
        self.settings = settings
        self.lane = lane
        self._worker: Any = None
        self._thread: threading.Thread | None = None
        self._beat: EmbeddedService | None = None

    def start(self) -> None:
        from engram import derive, inbox
        from engram.tasks import runtime
        from engram.tasks.sweeper import sweep_once

        # Before our own worker claims anything: every claim in the inbox belonged to the
        # previous embedded process (one per data dir), which died holding it.
        store = runtime.services().store()
        released = inbox.release_claims(store)
        if released:
            log.info("released %d inbox claims left by the previous process", released)
        with store.write() as conn:
            leases = derive.release_claims(conn)
        if leases:
            log.info("released %d derived-index leases left by the previous process", leases)

        self._worker = celery_app.WorkController(
            app=celery_app,
            concurrency=self.settings.worker_concurrency,
            pool="threads",
            hostname=f"embedded@{_hostname()}",
            queues=[CAPTURE_QUEUE, MAINTENANCE_QUEUE, *LEGACY_QUEUES],
            loglevel=self.settings.log_level,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
        )
        self._thread = threading.Thread(
            target=self._worker.start, name="engram-worker", daemon=True
        )
        self._thread.start()
        self.lane.start()
        self._beat = EmbeddedService(
            celery_app, thread=True, schedule_filename=str(self.settings.data_dir / "beat-schedule")
        )
        self._beat.start()
        recovered = sweep_once(starting=True)
        if recovered["events"] or recovered["summaries"]:
            log.info(
                "re-dispatched %d waiting events and %d summaries from the inbox",
                recovered["events"],
                recovered["summaries"],
            )

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> None:
        if self._beat is not None:
            self._beat.stop()
        self.lane.stop(SHUTDOWN_TIMEOUT)
        if self._worker is not None:
            self._worker.stop(in_sighandler=False)
        if self._thread is not None:
            self._thread.join(SHUTDOWN_TIMEOUT)


def _hostname() -> str:
    import socket

    return socket.gethostname()
