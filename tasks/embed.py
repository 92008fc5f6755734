"""The embed task (distributed mode): drains the derive queue's ``vector`` target.

The drain itself is ``engram.drains.drain_vectors``; the embedded server runs the same drain on
its derived lane instead of this task.
"""

from __future__ import annotations

from engram import drains
from engram.tasks import dispatch, runtime
from engram.tasks.app import EMBED_TASK, celery_app

BATCHES_PER_TASK = 8
"""Batches one task drains before handing over (it re-dispatches itself when more is queued).
It hands over after one batch while capture has work waiting: a pool that consumes both
queues never keeps a capture waiting longer than one batch."""
YIELD_SECONDS = 1.0


@celery_app.task(name=EMBED_TASK)
def embed() -> dict[str, int]:
    services = runtime.services()
    services.flight(celery_app).started(EMBED_TASK)
    settings = services.settings
    result = drains.drain_vectors(
        services.store(),
        services.vectors(),
        settings.embedding_batch,
        batches=BATCHES_PER_TASK,
        keep_observations=settings.vector_max_observations,
        yield_to_capture=services.serves_capture,
    )
    if result.more and not result.failed:
        # after yielding to capture, come back a moment later: the capture tasks take the
        # worker's slots in between
        dispatch.send_drain(EMBED_TASK, countdown=YIELD_SECONDS)
    # a failed batch is leased for its backoff: the sweeper sends the task again while rows wait
    return {"embedded": result.embedded, "deleted": result.deleted, "more": int(result.more)}
