"""The read scope: one required object passed down every read path.

Scope is applied inside each index before ranking, never as a filter on results afterwards, so a
top-k cut can never be filled by another project's or agent's items. A read with no resolvable
scope fails closed (``ScopeError``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

ALL_PROJECTS = "*"
"""Explicit opt-in to read across every project (never the default)."""

GLOBAL_PROJECT = ""
"""Project value of memories saved with scope "global": visible from every project."""


class ScopeError(ValueError):
    """No project could be resolved for a read: it is refused rather than widened."""


@dataclasses.dataclass(frozen=True)
class Scope:
    project: str
    agent_id: str | None = None

    @classmethod
    def resolve(cls, project: object, agent_id: object = None) -> Scope:
        if not isinstance(project, str) or not project.strip():
            raise ScopeError(
                'a project is required to read memory; pass "project": "<name>", '
                'or "project": "*" to read every project explicitly'
            )
        if agent_id is not None and (not isinstance(agent_id, str) or not agent_id.strip()):
            raise ScopeError("agentId must be a non-empty string when given")
        return cls(project=project.strip(), agent_id=agent_id.strip() if agent_id else None)

    @property
    def all_projects(self) -> bool:
        return self.project == ALL_PROJECTS

    def projects(self) -> tuple[str, ...]:
        """Project values visible in this scope: the project itself and global memories."""
        return (self.project, GLOBAL_PROJECT)


def restrict(stmt: Any, scope: Scope, table: Any) -> Any:
    """Restrict a select on ``table`` (observations or sessions: both have ``project`` and
    ``agent_id``) to ``scope``: its project unless all projects, and its agent's rows plus
    those of no agent."""
    from sqlalchemy import or_

    if not scope.all_projects:
        stmt = stmt.where(table.c.project == scope.project)
    if scope.agent_id is not None:
        stmt = stmt.where(or_(table.c.agent_id == scope.agent_id, table.c.agent_id.is_(None)))
    return stmt


@dataclasses.dataclass(frozen=True)
class Window:
    """A time window for a read, ``[since, until)`` in epoch seconds; either end may be open.

    Like the scope it is applied inside each index before ranking, to the time each document
    carries: an observation's event time, a memory's last change, a summary's session end."""

    since: float | None = None
    until: float | None = None

    def __bool__(self) -> bool:
        return self.since is not None or self.until is not None

    def clause(self, column: Any) -> Any:
        """A SQL condition on ``column`` (epoch seconds) for this window (``true()`` if open)."""
        from sqlalchemy import and_, true

        parts = []
        if self.since is not None:
            parts.append(column >= self.since)
        if self.until is not None:
            parts.append(column < self.until)
        return and_(*parts) if parts else true()
