"""The capture inbox and the event ledger: the delivery guarantee.

``accept`` writes the ledger row and the inbox row in one transaction before the gateway answers.
From then on the event is durable whatever happens to the broker or the workers: a worker
``claim``s it, stores the observation and ``complete``s it (inbox row deleted, ledger "stored"), or
``fail``s it (retry with exponential backoff, then "dead"). The sweeper re-dispatches entries whose
task was lost. The ledger is never emptied, so a replayed eventId stays a duplicate for good.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from engram import activity
from engram.backoff import backoff_seconds
from engram.events import Event
from engram.pagination import keyset_page
from engram.schema import capture_inbox, event_ledger
from engram.store import Store, dumps, iso, loads, now

PENDING, PROCESSING, RETRYING, DEAD = "pending", "processing", "retrying", "dead"
WAITING_STATES = (PENDING, PROCESSING, RETRYING)
"""States that count against the inbox capacity: work a worker still has to do."""


class InboxFull(Exception):
    """The inbox holds ``inbox_max`` waiting entries; the client should spool and resend."""


@dataclasses.dataclass(frozen=True)
class Acceptance:
    status: str  # accepted | duplicate
    event_id: str
    observation_id: str
    state: str  # pending | processing | retrying | dead | stored | forgotten

    @property
    def is_new(self) -> bool:
        return self.status == "accepted" and self.state == PENDING


def _existing(conn: Connection, event_id: str) -> Acceptance | None:
    row = conn.execute(
        select(
            event_ledger.c.observation_id,
            event_ledger.c.state,
            capture_inbox.c.state.label("inbox_state"),
        )
        .select_from(
            event_ledger.outerjoin(
                capture_inbox, capture_inbox.c.event_id == event_ledger.c.event_id
            )
        )
        .where(event_ledger.c.event_id == event_id)
    ).first()
    if row is None:
        return None
    state = row.inbox_state or row.state
    if state == RETRYING:
        # Accepted before and failing: the client learns it is being retried, not lost.
        return Acceptance("accepted", event_id, row.observation_id, RETRYING)
    return Acceptance("duplicate", event_id, row.observation_id, state)


def has_work(conn: Connection) -> bool:
    """True while a worker has capture work now: an entry pending, being processed, or due for
    its retry. The embedded derived lane yields to capture while this holds."""
    at = now()
    return (
        conn.execute(
            select(capture_inbox.c.event_id)
            .where(
                or_(
                    capture_inbox.c.state.in_((PENDING, PROCESSING)),
                    and_(
                        capture_inbox.c.state == RETRYING,
                        func.coalesce(capture_inbox.c.next_attempt_at, 0) <= at,
                    ),
                )
            )
            .limit(1)
        ).first()
        is not None
    )


def waiting_count(conn: Connection) -> int:
    return int(
        conn.execute(
            select(func.count())
            .select_from(capture_inbox)
            .where(capture_inbox.c.state.in_(WAITING_STATES))
        ).scalar_one()
    )


def accept(store: Store, event: Event, inbox_max: int) -> Acceptance:
    """Record the event durably (ledger + inbox) or recognise it as a replay."""
    with store.read() as conn:
        known = _existing(conn, event.event_id)
    if known is not None:
        return known
    at = now()
    try:
        with store.write() as conn:
            if waiting_count(conn) >= inbox_max:
                raise InboxFull(f"capture inbox holds {inbox_max} waiting events")
            conn.execute(
                insert(event_ledger).values(
                    event_id=event.event_id,
                    observation_id=event.observation_id,
                    session_id=event.session_id,
                    state="accepted",
                    accepted_at=at,
                )
            )
            conn.execute(
                insert(capture_inbox).values(
                    event_id=event.event_id,
                    observation_id=event.observation_id,
                    session_id=event.session_id,
                    project=event.project,
                    payload=dumps(event.to_payload()),
                    state=PENDING,
                    attempts=0,
                    dispatched_at=at,
                    created_at=at,
                    updated_at=at,
                )
            )
    except IntegrityError:
        # The same eventId raced in through another request and won: answer as its duplicate.
        with store.read() as conn:
            known = _existing(conn, event.event_id)
        if known is None:
            raise
        return known
    return Acceptance("accepted", event.event_id, event.observation_id, PENDING)


@dataclasses.dataclass(frozen=True)
class Claim:
    event: Event
    attempts: int


def claim(store: Store, event_id: str, lease_seconds: float) -> Claim | None:
    """Take the entry for processing, or None when it is done, dead or held by a live claim.

    Every claim counts as an attempt, so an event that kills its worker each time still ends
    as a dead letter instead of looping forever.
    """
    at = now()
    with store.write() as conn:
        claimable = or_(
            capture_inbox.c.state.in_((PENDING, RETRYING)),
            and_(capture_inbox.c.state == PROCESSING, capture_inbox.c.claimed_until < at),
        )
        result = conn.execute(
            update(capture_inbox)
            .where(capture_inbox.c.event_id == event_id, claimable)
            .values(
                state=PROCESSING,
                claimed_until=at + lease_seconds,
                attempts=capture_inbox.c.attempts + 1,
                updated_at=at,
            )
        )
        if result.rowcount == 0:
            return None
        row = conn.execute(
            select(capture_inbox.c.payload, capture_inbox.c.attempts).where(
                capture_inbox.c.event_id == event_id
            )
        ).one()
    return Claim(Event.from_payload(loads(row.payload)), int(row.attempts))


def complete(conn: Connection, event_id: str) -> None:
    """Inside the transaction that stored the observation: retire the inbox entry."""
    conn.execute(delete(capture_inbox).where(capture_inbox.c.event_id == event_id))
    conn.execute(
        update(event_ledger)
        .where(event_ledger.c.event_id == event_id)
        .values(state="stored", stored_at=now())
    )


def fail(
    store: Store,
    event_id: str,
    error: str,
    attempts: int,
    max_attempts: int,
    base: float,
    cap: float,
) -> float | None:
    """Record a failed attempt. Returns the retry delay, or None when the entry is now dead."""
    at = now()
    dead = attempts >= max_attempts
    delay = None if dead else backoff_seconds(attempts, base, cap)
    with store.write() as conn:
        conn.execute(
            update(capture_inbox)
            .where(capture_inbox.c.event_id == event_id)
            .values(
                state=DEAD if dead else RETRYING,
                last_error=error[:4000],
                claimed_until=None,
                next_attempt_at=None if delay is None else at + delay,
                dispatched_at=at,
                updated_at=at,
            )
        )
        if dead:
            conn.execute(
                update(event_ledger).where(event_ledger.c.event_id == event_id).values(state=DEAD)
            )
            activity.record(conn, "capture.dead", eventId=event_id, error=error[:300])
    return delay


def unclaimed_count(conn: Connection) -> int:
    """Entries that should each have a task waiting in the broker: pending or retrying."""
    return int(
        conn.execute(
            select(func.count())
            .select_from(capture_inbox)
            .where(capture_inbox.c.state.in_((PENDING, RETRYING)))
        ).scalar_one()
    )


def _mark_dispatched(conn: Connection, ids: list[str], at: float) -> None:
    for start in range(0, len(ids), 500):
        conn.execute(
            update(capture_inbox)
            .where(capture_inbox.c.event_id.in_(ids[start : start + 500]))
            .values(dispatched_at=at)
        )


def dispatch_expired_claims(store: Store, limit: int) -> list[str]:
    """``processing`` entries whose claim expired (their worker died): each is returned once per
    expiry, marked as dispatched now, so the sweeper sends it once, not at every sweep."""
    at = now()
    with store.write() as conn:
        ids = list(
            conn.execute(
                select(capture_inbox.c.event_id)
                .where(
                    capture_inbox.c.state == PROCESSING,
                    capture_inbox.c.claimed_until < at,
                    capture_inbox.c.dispatched_at < capture_inbox.c.claimed_until,
                )
                .order_by(capture_inbox.c.created_at)
                .limit(limit)
            ).scalars()
        )
        _mark_dispatched(conn, ids, at)
    return ids


def dispatch_missing(
    store: Store, queued: set[str], delivered: Mapping[str, float], grace_seconds: float, limit: int
) -> list[str]:
    """Pending and retrying entries whose task the broker does not hold, oldest first, marked as
    dispatched now.

    ``queued``: event ids of tasks waiting in the broker's queues: held. ``delivered``: event id
    -> when its task was delivered to a worker that has not acknowledged it. A delivered task is
    held while its worker can still be alive: a pending entry's for ``grace_seconds`` after
    delivery (a live worker claims what it takes at once), a retrying entry's until
    ``grace_seconds`` past its retry time (the worker holds the countdown until then). Past
    that its worker died with it. An entry dispatched less than ``grace_seconds`` ago is left
    alone: its task may be on its way to the broker. An entry merely waiting its turn is
    queued, so a long backlog is never sent twice.
    """
    at = now()
    cutoff = at - grace_seconds
    with store.write() as conn:
        rows = conn.execute(
            select(capture_inbox.c.event_id, capture_inbox.c.state, capture_inbox.c.next_attempt_at)
            .where(
                capture_inbox.c.state.in_((PENDING, RETRYING)),
                capture_inbox.c.dispatched_at < cutoff,
            )
            .order_by(capture_inbox.c.created_at)
        )
        ids = []
        for row in rows:
            if row.event_id in queued:
                continue
            delivered_at = delivered.get(row.event_id)
            if delivered_at is not None:
                held_until = (
                    delivered_at
                    if row.state == PENDING
                    else max(delivered_at, row.next_attempt_at or 0.0)
                )
                if held_until + grace_seconds > at:
                    continue
            ids.append(row.event_id)
            if len(ids) >= limit:
                break
        _mark_dispatched(conn, ids, at)
    return ids


def dispatch_all_waiting(store: Store) -> list[str]:
    """Every waiting entry, marked as dispatched now: for an embedded server starting, whose
    in-memory broker died with the previous process (nothing queued survived)."""
    at = now()
    with store.write() as conn:
        ids = list(
            conn.execute(
                select(capture_inbox.c.event_id)
                .where(capture_inbox.c.state.in_(WAITING_STATES))
                .order_by(capture_inbox.c.created_at)
            ).scalars()
        )
        _mark_dispatched(conn, ids, at)
    return ids


def release_claims(store: Store) -> int:
    """Make every ``processing`` entry claimable again at once; returns how many.

    Only for an embedded server starting up: the claims were held by its previous process,
    which is gone, so waiting for their leases to expire would only delay recovery. The
    attempt those claims counted stays counted.
    """
    with store.write() as conn:
        result = conn.execute(
            update(capture_inbox)
            .where(capture_inbox.c.state == PROCESSING)
            .values(state=PENDING, claimed_until=None, updated_at=now())
        )
    return int(result.rowcount or 0)


def retry_dead(store: Store, event_id: str | None = None) -> list[str]:
    """Give dead letters (one, or all with ``event_id=None``) a fresh set of attempts."""
    at = now()
    with store.write() as conn:
        stmt = select(capture_inbox.c.event_id).where(capture_inbox.c.state == DEAD)
        if event_id is not None:
            stmt = stmt.where(capture_inbox.c.event_id == event_id)
        ids = list(conn.execute(stmt).scalars())
        if ids:
            conn.execute(
                update(capture_inbox)
                .where(capture_inbox.c.event_id.in_(ids))
                .values(
                    state=PENDING,
                    attempts=0,
                    next_attempt_at=None,
                    claimed_until=None,
                    dispatched_at=at,
                    updated_at=at,
                )
            )
            conn.execute(
                update(event_ledger)
                .where(event_ledger.c.event_id.in_(ids))
                .values(state="accepted")
            )
            activity.record(conn, "capture.retried", eventIds=ids[:50], count=len(ids))
    return ids


def counts(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        select(capture_inbox.c.state, func.count()).group_by(capture_inbox.c.state)
    ).all()
    found = {state: int(n) for state, n in rows}
    return {state: found.get(state, 0) for state in (*WAITING_STATES, DEAD)}


def pending_for_session(conn: Connection, session_id: str) -> int:
    return int(
        conn.execute(
            select(func.count())
            .select_from(capture_inbox)
            .where(
                capture_inbox.c.session_id == session_id, capture_inbox.c.state.in_(WAITING_STATES)
            )
        ).scalar_one()
    )


def list_entries(
    store: Store, limit: int, cursor: str | None = None, state: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """Inbox entries (waiting and dead), oldest first, keyset-paginated."""
    stmt = select(capture_inbox)
    if state:
        stmt = stmt.where(capture_inbox.c.state == state)
    with store.read() as conn:
        rows, next_cursor = keyset_page(
            conn,
            stmt,
            (capture_inbox.c.created_at, capture_inbox.c.event_id),
            limit,
            cursor,
            descending=False,
        )
    items = [
        {
            "eventId": r.event_id,
            "observationId": r.observation_id,
            "sessionId": r.session_id,
            "project": r.project,
            "state": r.state,
            "attempts": r.attempts,
            "lastError": r.last_error,
            "nextAttemptAt": iso(r.next_attempt_at),
            "createdAt": iso(r.created_at),
            "updatedAt": iso(r.updated_at),
        }
        for r in rows
    ]
    return items, next_cursor


def mark_forgotten(conn: Connection, event_id: str) -> None:
    """A forgotten observation keeps its ledger row, so a late replay stays a duplicate."""
    conn.execute(
        update(event_ledger).where(event_ledger.c.event_id == event_id).values(state="forgotten")
    )
