"""Sessions: one agent session in one project, from start to summary."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, exists, or_, select, update

from engram import activity
from engram.errors import SessionConflict
from engram.pagination import keyset_page
from engram.privacy import scrub_text
from engram.schema import capture_inbox, sessions
from engram.scope import Scope, restrict
from engram.store import Store, insert_ignore, iso, loads, now


def check_owner(
    conn: Connection, session_id: str, project: str, agent_id: str | None = None
) -> None:
    """Raise SessionConflict when ``session_id`` exists in another project, or belongs to
    another agent (both agent ids given)."""
    row = conn.execute(
        select(sessions.c.project, sessions.c.agent_id).where(sessions.c.id == session_id)
    ).first()
    if row is None:
        return
    if row.project != project:
        raise SessionConflict(
            f"session {session_id!r} belongs to another project; a session id is used by one "
            "project only (start a new session)"
        )
    if agent_id is not None and row.agent_id is not None and row.agent_id != agent_id:
        raise SessionConflict(f"session {session_id!r} belongs to another agent")


def ensure(
    conn: Connection,
    session_id: str,
    project: str,
    *,
    host: str | None = None,
    agent_id: str | None = None,
    cwd: str | None = None,
    started_at: float | None = None,
) -> bool:
    """Create the session row if it is new; True when created. A session belongs to the project
    (and agent) it started in: raises SessionConflict for another one."""
    check_owner(conn, session_id, project, agent_id)
    created = insert_ignore(
        conn,
        sessions,
        {
            "id": session_id,
            "project": project,
            "host": host,
            "agent_id": agent_id,
            "cwd": scrub_text(cwd) if cwd else cwd,  # a path may hold a token (`~/x/ghp_…/repo`)
            "status": "active",
            "started_at": started_at or now(),
        },
    )
    if created:
        activity.record(conn, "session.started", id=session_id, project=project, host=host)
    return created


def start(
    store: Store,
    session_id: str,
    project: str,
    *,
    host: str | None,
    agent_id: str | None,
    cwd: str | None,
    at: float | None = None,
) -> tuple[dict[str, Any], bool]:
    """Start (or re-announce) a session. ``at`` is when the client saw the start: a start that
    happened before the session's end (a spooled start replayed after the end arrived) does
    not reopen it."""
    with store.write() as conn:
        created = ensure(
            conn, session_id, project, host=host, agent_id=agent_id, cwd=cwd, started_at=at
        )
        ended_at = (
            None
            if created
            else conn.execute(
                select(sessions.c.ended_at).where(sessions.c.id == session_id)
            ).scalar()
        )
        late_replay = at is not None and ended_at is not None and at <= ended_at
        if not created and not late_replay:
            # A restarted host re-announces its session: fill what was unknown, keep the rest.
            conn.execute(
                update(sessions)
                .where(sessions.c.id == session_id)
                .values(
                    host=sessions.c.host if host is None else host,
                    cwd=sessions.c.cwd if cwd is None else scrub_text(cwd),
                    status="active",
                    ended_at=None,
                )
            )
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).one()
    return to_dict(row), created


def end(
    store: Store,
    session_id: str,
    project: str | None = None,
    agent_id: str | None = None,
    at: float | None = None,
) -> dict[str, Any] | None:
    """End a session; with ``project`` (and ``agent_id``), only the caller's own (raises
    SessionConflict for another's). None when there is no such session. ``at``: when it ended
    by the host's clock (an imported transcript ended long before it was processed); now when
    the client did not say."""
    with store.write() as conn:
        if project is not None:
            check_owner(conn, session_id, project, agent_id)
        result = conn.execute(
            update(sessions)
            .where(sessions.c.id == session_id)
            .values(status="ended", ended_at=now() if at is None else at)
        )
        if result.rowcount == 0:
            return None
        ended = to_dict(conn.execute(select(sessions).where(sessions.c.id == session_id)).one())
        activity.record(conn, "session.ended", id=session_id, project=ended["project"])
        return ended


def get(store: Store, session_id: str) -> dict[str, Any] | None:
    with store.read() as conn:
        row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
    return to_dict(row) if row is not None else None


_WAITING = ("pending", "processing", "retrying")  # engram.inbox.WAITING_STATES (no import cycle)


def summary_due(conn: Connection, session_id: str) -> bool:
    """True when the session has ended, has no summary yet and none of its captured events is
    still waiting: the moment to summarise it. Checked by the capture task after it stores an
    event, so the summary follows the session's last event instead of polling for it."""
    row = conn.execute(
        select(sessions.c.status, sessions.c.summary).where(sessions.c.id == session_id)
    ).first()
    if row is None or row.status != "ended" or row.summary is not None:
        return False
    return (
        conn.execute(
            select(capture_inbox.c.event_id)
            .where(capture_inbox.c.session_id == session_id, capture_inbox.c.state.in_(_WAITING))
            .limit(1)
        ).first()
        is None
    )


def awaiting_summary(conn: Connection, ended_before: float, limit: int) -> list[str]:
    """Sessions ended before ``ended_before`` with no summary and no event still waiting:
    their summary task was lost (or never sent), oldest first."""
    waiting = exists().where(
        capture_inbox.c.session_id == sessions.c.id, capture_inbox.c.state.in_(_WAITING)
    )
    return list(
        conn.execute(
            select(sessions.c.id)
            .where(
                sessions.c.status == "ended",
                sessions.c.summary.is_(None),
                sessions.c.ended_at < ended_before,
                ~waiting,
            )
            .order_by(sessions.c.ended_at)
            .limit(limit)
        ).scalars()
    )


def save_summary(conn: Connection, session_id: str, text: str, data: str) -> None:
    conn.execute(
        update(sessions).where(sessions.c.id == session_id).values(summary=text, summary_json=data)
    )


def list_sessions(
    store: Store, scope: Scope, limit: int, cursor: str | None = None, status: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Newest first, keyset-paginated on (started_at, id)."""
    stmt = restrict(select(sessions), scope, sessions)
    if status:
        stmt = stmt.where(sessions.c.status == status)
    with store.read() as conn:
        rows, next_cursor = keyset_page(
            conn, stmt, (sessions.c.started_at, sessions.c.id), limit, cursor, descending=True
        )
    return [to_dict(r) for r in rows], next_cursor


def last_summarised(conn: Connection, scope: Scope, exclude: str | None = None) -> Any:
    stmt = (
        select(sessions)
        .where(sessions.c.summary.is_not(None), sessions.c.summary != "")
        .order_by(sessions.c.ended_at.desc())
        .limit(1)
    )
    if not scope.all_projects:
        stmt = stmt.where(sessions.c.project == scope.project)
    if scope.agent_id is not None:
        stmt = stmt.where(or_(sessions.c.agent_id == scope.agent_id, sessions.c.agent_id.is_(None)))
    if exclude:
        stmt = stmt.where(sessions.c.id != exclude)
    return conn.execute(stmt).first()


def recent_summarised(conn: Connection, scope: Scope, limit: int) -> list[Any]:
    """Summarised sessions in scope, the last ended first (by the host's clock)."""
    stmt = (
        select(sessions)
        .where(sessions.c.summary.is_not(None), sessions.c.summary != "")
        .order_by(sessions.c.ended_at.desc())
        .limit(limit)
    )
    if not scope.all_projects:
        stmt = stmt.where(sessions.c.project == scope.project)
    if scope.agent_id is not None:
        stmt = stmt.where(or_(sessions.c.agent_id == scope.agent_id, sessions.c.agent_id.is_(None)))
    return list(conn.execute(stmt))


AGENT_ANSWER = "Agent finished: "
"""How an observation of the agent's end-of-turn answer begins (``compress.SESSION_LABELS``)."""


def final_answers(conn: Connection, session_ids: list[str], per_session: int = 2) -> dict[str, str]:
    """The agent's last answers of each session (what changed, why, what is left), oldest first,
    without the label."""
    if not session_ids:
        return {}
    from engram.schema import observations

    o = observations.c
    rows = conn.execute(
        select(o.session_id, o.text)
        .where(o.session_id.in_(session_ids), o.kind == "session", o.title.like("Agent finished%"))
        .order_by(o.created_at)
    )
    found: dict[str, list[str]] = {}
    for row in rows:
        found.setdefault(row.session_id, []).append((row.text or "").removeprefix(AGENT_ANSWER))
    return {sid: "\n".join(texts[-per_session:]) for sid, texts in found.items()}


def to_dict(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "project": row.project,
        "agentId": row.agent_id,
        "host": row.host,
        "cwd": row.cwd,
        "status": row.status,
        "startedAt": iso(row.started_at),
        "endedAt": iso(row.ended_at),
        "summary": row.summary,
        "summaryData": loads(row.summary_json),
    }
