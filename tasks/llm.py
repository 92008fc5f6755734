"""The LLM task (distributed mode): works through the LLM backlog (``engram.llm.work``) on the
``llm`` queue, one item at a time, so a pool's concurrency is the number of calls in flight
(size it to the provider's limit: `engram worker -Q llm -c N`).

The embedded server runs the same drain on an LLM lane of its own instead of this task.
"""

from __future__ import annotations

from engram.llm import work
from engram.tasks import dispatch, runtime
from engram.tasks.app import LLM_TASK, celery_app

ITEMS_PER_TASK = 5
"""Items one task works through before handing over (it sends itself again when more wait)."""


@celery_app.task(name=LLM_TASK)
def llm_work() -> int:
    services = runtime.services()
    services.flight(celery_app).started(LLM_TASK)
    llm = services.llm()
    if llm is None:  # a worker without a provider set: leave the backlog to one that has one
        return 0
    done = 0
    for _ in range(ITEMS_PER_TASK):
        claimed = work.drain(services.store(), llm, services.settings)
        if not claimed:
            return done
        done += claimed
    dispatch.send_drain(LLM_TASK)
    return done
