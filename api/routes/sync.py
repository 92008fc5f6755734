"""Memory-file sync: POST /v1/sync/files (one file's facts; engram.memsync)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from engram import memsync
from engram.api.util import json_body, store

bp = Blueprint("sync", __name__)


@bp.post("/v1/sync/files")
def sync_file() -> Any:
    request = memsync.validate(json_body())
    return jsonify(memsync.sync_file(store(), store().keyword, request).to_dict())
