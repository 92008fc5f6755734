"""The embed task (distributed mode): drains the derive queue's ``vector`` target.

The drain itself is ``engram.drains.drain_vectors``; the embedded server runs the same drain on
its derived lane instead of this task.
"""

from __future__ import annotations

from engram import drains
from tasks import runtime
from tasks.app import celery_app

BATCHES_PER_TASK = 8
"""Batches one task drains before handing over (it re-dispatches itself when more is queued)."""


@celery_app.task(name="engram.embed")
def embed() -> dict[str, int]:
    runtime.flight().started(embed.name)
    settings = runtime.settings()
    result = drains.drain_vectors(runtime.store(), runtime.vectors(), settings.embedding_batch,
                                  batches=BATCHES_PER_TASK,
                                  keep_observations=settings.vector_max_observations)
    if result.more and not result.failed:
        runtime.send_drain(embed)
    # a failed batch is leased for its backoff: the sweeper sends the task again while rows wait
    return {"embedded": result.embedded, "deleted": result.deleted, "more": int(result.more)}
