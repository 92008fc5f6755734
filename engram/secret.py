"""The API's bearer secret: ENGRAM_SECRET, or generated once into the config dir (mode 0600)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from engram.settings import Settings

SECRET_BYTES = 32


def load_or_create(settings: Settings) -> str:
    if settings.secret:
        return settings.secret
    existing = read(settings.secret_file)
    if existing:
        return existing
    settings.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = secrets.token_urlsafe(SECRET_BYTES)
    # O_EXCL: two processes starting together must not both write; the loser reads the winner's.
    try:
        fd = os.open(settings.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read(settings.secret_file) or value
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return value


def read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def client_secret(settings: Settings) -> str | None:
    """The secret a local client sends: ENGRAM_SECRET, else the one in the config dir."""
    return settings.secret or read(settings.secret_file)
