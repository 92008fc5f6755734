"""Secrets never reach storage, in any field: after every write path the REST API offers has
carried secrets in ids, names, `cwd`, object keys, non-string values under secret-named keys and
a forget's reason, no byte of any secret is in any file of the data dir (database, WAL, Chroma),
and every file there is private to its owner."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from tests.conftest import Api

GITHUB = "ghp_" + "Q7w8" * 9
SHOPIFY = "shpat_" + "0123456789abcdef" * 2
DATABRICKS = "dapi" + "fedcba9876543210" * 2
PIN = 482917365021
PASSWORD = "hunter2-" + "Zx9" * 4
SECRETS = [GITHUB, SHOPIFY, DATABRICKS, str(PIN), PASSWORD]


def write_everywhere(api: Api) -> None:
    session = f"sess-{GITHUB}"
    project = f"proj-{SHOPIFY}"
    status, _ = api.post(
        "/v1/sessions",
        {"sessionId": session, "project": project, "cwd": f"/home/dev/{DATABRICKS}/repo"},
    )
    assert status == 201
    event = {
        "eventId": f"evt-{GITHUB}",
        "sessionId": session,
        "project": project,
        "host": "raw",
        "hookType": "PostToolUse",
        "toolName": f"mcp-{SHOPIFY}",
        "agentId": f"agent-{DATABRICKS}",
        "toolInput": {
            GITHUB: "a key that is a token",
            "db_password": PIN,
            "password": [PASSWORD],
            "env": {"credentials": {"user": "bob", "pass": PASSWORD}},
        },
        "toolOutput": {"stdout": f"deployed with {DATABRICKS}"},
    }
    assert api.post("/v1/observe", event)[0] == 201
    api.wait_drained()
    status, memory = api.post("/v1/memories", {"project": project, "content": f"use {SHOPIFY}"})
    assert status == 201
    memory_id = memory["id"]
    status, _ = api.call(
        "DELETE", f"/v1/memories/{memory_id}", query_string={"reason": f"leaked {GITHUB}"}
    )
    assert status == 200
    document = {
        "version": 1,
        "sessions": [{"id": f"imp-{GITHUB}", "project": project, "cwd": f"/x/{SHOPIFY}"}],
        "memories": [
            {"id": f"mem-{DATABRICKS}", "project": project, "content": f"password={PASSWORD}"}
        ],
    }
    assert api.post("/v1/import", {"strategy": "merge", "data": document})[0] == 200


def test_no_secret_reaches_any_file_of_the_data_dir(own_api: Api, tmp_path: Path) -> None:
    write_everywhere(own_api)
    status, sessions = own_api.get("/v1/sessions?project=*")
    assert status == 200 and len(sessions["items"]) == 2
    assert all("[REDACTED:" in s["id"] for s in sessions["items"])  # kept, without the secret
    data = tmp_path / "gw" / "data"
    own_api.store.close()  # let SQLite write back its WAL: what is on disk is all there is

    found: dict[str, Any] = {}
    files = [p for p in data.rglob("*") if p.is_file()]
    assert any(p.name == "engram.db" for p in files)
    for path in files:
        raw = path.read_bytes()
        for secret in SECRETS:
            if secret.encode() in raw or secret.encode("utf-16-le") in raw:
                found.setdefault(str(path.relative_to(data)), []).append(secret[:8])
    assert not found, found


def test_every_file_of_a_served_data_dir_is_private(tmp_path: Path) -> None:
    from tests.support import Cluster

    cluster = Cluster(tmp_path)
    data = Path(cluster.env["ENGRAM_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    left = data / "left-by-an-older-version.json"
    left.write_text("{}")
    left.chmod(0o644)
    try:
        cluster.serve()
        assert (
            cluster.request("POST", "/v1/memories", {"project": "p", "content": "a fact"})[0] == 201
        )
        loose = [
            f"{p} {oct(p.stat().st_mode)}"
            for p in data.rglob("*")
            if not p.is_symlink() and stat.S_IMODE(p.stat().st_mode) & 0o077
        ]
        assert not loose and (data / "engram.db").exists(), loose
    finally:
        cluster.stop_all()
