"""Errors the core raises for bad input; the API turns them into its one error shape."""

from __future__ import annotations


class FieldErrors(ValueError):
    """Input that is well-formed but invalid; ``fields`` maps each field to its problem."""

    what = "invalid input"

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__(f"{self.what}: " + "; ".join(f"{k}: {v}" for k, v in fields.items()))
        self.fields = fields


class SessionConflict(Exception):
    """A session id already belongs to another project (or another agent): nothing of it is
    returned or changed for a caller from elsewhere. Permanent: resending cannot succeed."""
