"""The Celery app and its configuration for both modes.

Embedded (no ENGRAM_BROKER_URL): an in-memory broker polled every 10 ms, consumed by a worker
thread inside the gateway process. Distributed: Redis, consumed by ``engram worker`` processes.
Either way the broker only dispatches: durability comes from the capture inbox.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.worker.control import inspect_command

from engram.memory import process_memory
from engram.settings import Settings

CAPTURE_QUEUE, MAINTENANCE_QUEUE, EMBED_QUEUE, GRAPH_QUEUE, LLM_QUEUE = (
    "capture",
    "maintenance",
    "embed",
    "graph",
    "llm",
)
LEGACY_QUEUES = ("observe", "summarize")
"""Queue names before capture and derived work were split: a worker still drains them, so tasks an
older gateway queued are not stranded by an upgrade."""
OBSERVE_TASK, SUMMARIZE_TASK, SWEEP_TASK = "engram.observe", "engram.summarize", "engram.sweep"
CONSOLIDATE_TASK = "engram.consolidate"
EMBED_TASK, GRAPH_TASK, LLM_TASK = "engram.embed", "engram.graph_extract", "engram.llm"
ALL_QUEUES = (
    CAPTURE_QUEUE,
    MAINTENANCE_QUEUE,
    EMBED_QUEUE,
    GRAPH_QUEUE,
    LLM_QUEUE,
    *LEGACY_QUEUES,
)
MEMORY_POLLING_INTERVAL = 0.01
"""Seconds between polls of the in-memory broker; kombu's default (1 s) caps a worker at a few
tasks per second."""

celery_app = Celery(
    "engram",
    include=[
        "engram.tasks.capture",
        "engram.tasks.sweeper",
        "engram.tasks.embed",
        "engram.tasks.graph",
        "engram.tasks.llm",
        "engram.tasks.consolidate",
    ],
)


def configure(settings: Settings) -> Celery:
    """Point the one Celery app at the configured broker; call before sending or working."""
    broker = settings.broker_url if not settings.embedded else "memory://"
    transport: dict[str, Any]
    if broker.startswith("memory://"):
        transport = {"polling_interval": MEMORY_POLLING_INTERVAL}
    else:
        # acks_late tasks of a killed worker come back after visibility_timeout; the inbox
        # sweeper re-dispatches them sooner (after the lease), and whenever the broker lost them.
        transport = {
            # Longer than the longest retry countdown: Redis re-delivers an ETA task a worker
            # holds past the visibility timeout, which would run the retry twice.
            "visibility_timeout": int(
                max(settings.inbox_lease_seconds, settings.retry_max_seconds) + 60
            ),
            "unacked_restore_interval": 5,
            "unacked_restore_throttle": 1,
            "socket_connect_timeout": 2,
            "socket_timeout": 5,
        }
    if celery_app.conf.broker_url not in (None, broker):
        # Re-pointed in the same process (tests; a demo gateway after another): publishing goes
        # through cached connection and producer pools bound to the old broker, drop them.
        celery_app._pool = None
        celery_app.amqp._producer_pool = None
    celery_app.conf.update(
        broker_url=broker,
        broker_transport_options=transport,
        broker_connection_retry_on_startup=True,
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=CAPTURE_QUEUE,
        # Capture never waits behind derived work: each kind has its queue, so pools can be
        # sized per queue (`engram worker --queues`).
        task_routes={
            OBSERVE_TASK: {"queue": CAPTURE_QUEUE},
            SUMMARIZE_TASK: {"queue": MAINTENANCE_QUEUE},
            SWEEP_TASK: {"queue": MAINTENANCE_QUEUE},
            CONSOLIDATE_TASK: {"queue": MAINTENANCE_QUEUE},
            GRAPH_TASK: {"queue": GRAPH_QUEUE},
            EMBED_TASK: {"queue": EMBED_QUEUE},
            LLM_TASK: {"queue": LLM_QUEUE},
        },
        # An LLM task may wait out every retry of its call; past that it is stuck, not slow.
        task_annotations={
            LLM_TASK: {
                "soft_time_limit": settings.llm_timeout_seconds * (settings.llm_max_retries + 1)
                + 60,
                "time_limit": settings.llm_timeout_seconds * (settings.llm_max_retries + 1) + 90,
            }
        },
        # A hook is waiting on /v1/observe: never block it on a broker that is down. The event
        # is already in the inbox; the sweeper dispatches it once the broker is back.
        task_publish_retry=True,
        task_publish_retry_policy={
            "max_retries": 1,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 0.2,
        },
        beat_schedule={
            "sweep-capture-inbox": {
                "task": SWEEP_TASK,
                "schedule": settings.sweep_interval_seconds,
                "options": {"queue": MAINTENANCE_QUEUE, "expires": settings.sweep_interval_seconds},
            },
            "consolidate-memories": {
                "task": CONSOLIDATE_TASK,
                "schedule": settings.consolidate_interval_seconds,
                "options": {
                    "queue": MAINTENANCE_QUEUE,
                    "expires": settings.consolidate_interval_seconds,
                },
            },
        },
        beat_schedule_filename=str(settings.data_dir / "beat-schedule"),
        worker_hijack_root_logger=False,
        # Task events feed Flower. No "task-sent" event: that would be a second publish on
        # every /v1/observe, which must stay fast.
        worker_send_task_events=True,
        timezone="UTC",
    )
    # Threads that Celery did not start (the embedded worker's pool, the gateway's request
    # threads) resolve signatures through the *default* app; without this a retry would be
    # published through an unconfigured app to its default broker.
    celery_app.set_default()
    celery_app.set_current()
    return celery_app


@inspect_command(name="engram_memory")
def engram_memory(state: Any, **_: Any) -> dict[str, Any]:
    """Resident memory of this worker's process and its pool's child processes (prefork), for
    `/v1/status`: a worker answers for itself, whatever machine it runs on."""
    pids = [os.getpid()]
    info = getattr(getattr(state.consumer, "pool", None), "info", None) or {}
    pids += [int(pid) for pid in info.get("processes", ()) if int(pid) != os.getpid()]
    found = {str(pid): process_memory(pid) for pid in pids}
    return {"processes": {pid: mem for pid, mem in found.items() if mem is not None}}
