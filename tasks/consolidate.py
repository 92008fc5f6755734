"""The consolidation task: scheduled by beat (embedded and distributed) on the maintenance
queue. The heuristic pass runs here (milliseconds a project, in the store); with a provider set,
the LLM's pass is queued to the LLM backlog (``engram.llm.work``) instead of waiting here, so a
slow provider never holds a maintenance worker."""

from __future__ import annotations

from typing import Any

from engram import consolidate
from engram.llm import work
from engram.tasks import dispatch, runtime
from engram.tasks.app import CONSOLIDATE_TASK, celery_app


@celery_app.task(name=CONSOLIDATE_TASK)
def consolidate_projects() -> dict[str, Any]:
    services = runtime.services()
    settings = services.settings
    queue_llm = None
    if services.llm() is not None:

        def queue_llm(conn: Any, project: str, newest: str) -> bool:
            return work.queue_consolidation(conn, newest, settings)

    report = consolidate.run(
        services.store(),
        queue_llm,
        half_life_days=settings.memory_half_life_days,
        grace_days=settings.memory_eviction_grace_days,
    )
    if any(counts.get("llmQueued") for counts in report["projects"].values()):
        dispatch.kick_derived()
    return report
