"""SQL that differs by dialect, written once for every module that writes (SQLite by default,
PostgreSQL for teams)."""

from __future__ import annotations

from typing import Any


def dialect_insert(dialect: str) -> Any:
    """The ``insert`` of a dialect (``sqlite`` or ``postgresql``): the one with
    ``on_conflict_do_update``/``do_nothing``, which both spell alike."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert

    return postgresql_insert
