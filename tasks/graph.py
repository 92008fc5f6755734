"""The graph task (distributed mode): drains the derive queue's ``graph`` target.

The drain itself is ``engram.drains.drain_graph``; the embedded server runs the same drain on its
derived lane instead of this task.
"""

from __future__ import annotations

from engram import derive, drains
from engram.tasks import dispatch, runtime
from engram.tasks.app import GRAPH_TASK, celery_app

GRAPH_MAX_BATCHES = 40
"""Batches per task run; a run that stops with work left (or that yielded to waiting capture
work after a batch) sends itself again, so other tasks get the worker in between."""
YIELD_SECONDS = 1.0


@celery_app.task(name=GRAPH_TASK)
def graph_extract() -> int:
    """Drain the graph queue for a bounded number of batches; send itself again when work is
    left. Any number of these may run at once: claims are leases."""
    services = runtime.services()
    services.flight(celery_app).started(GRAPH_TASK)
    store = services.store()
    applied = drains.drain_graph(
        store, max_batches=GRAPH_MAX_BATCHES, yield_to_capture=services.serves_capture
    )
    with store.read() as conn:
        left = derive.pending(conn, drains.GRAPH_TARGET)
    if left and applied:
        dispatch.send_drain(GRAPH_TASK, countdown=YIELD_SECONDS)
    return applied
