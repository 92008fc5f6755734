"""(being built)"""

from __future__ import annotations

from typing import Any


def add_commands(sub: Any, common: Any, client_args: Any) -> dict[str, Any]:
    return {}
