"""Backup and restore as docs/operations.md tells an operator to do them, tried under load: the
online backup of a running embedded server's SQLite store while hooks keep capturing, then that
copy restored into a fresh data dir (without the vectors, which are derived) and started. What the copy had accepted must all end stored,
exactly once, and a search must find it; what came after the copy is the operator's to replay
(the hooks' spool, `engram import`), never half in the copy."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from engram.schema import event_ledger
from tests.support import Cluster, assert_cluster_stored_exactly_once, observe_body, wait_for

pytestmark = pytest.mark.slow


def _accepted(db: Path) -> list[str]:
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(event_ledger.c.event_id)).scalars())
    finally:
        engine.dispose()


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 command is not installed")
def test_online_backup_under_load_restores_to_exactly_what_it_had(tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    live = Cluster(tmp_path / "live", ENGRAM_EMBEDDER="local")
    accepted: list[str] = []
    stop = threading.Event()
    failures: list[Any] = []

    def capture() -> None:  # a hook's stream: long outputs, several sessions
        n = 0
        while not stop.is_set():
            body = observe_body(
                "shop", f"s-{n % 5}", n, toolOutput="FAILED test_checkout\n" + "x" * 4000
            )
            status, answer = live.request("POST", "/v1/observe", body)
            if status != 201:
                failures.append((status, answer))
                return
            accepted.append(answer["eventId"])
            n += 1

    backup = tmp_path / "engram-backup.db"
    try:
        live.serve()
        hook = threading.Thread(target=capture)
        hook.start()
        wait_for(lambda: len(accepted) >= 80, 60, message="capture under way")
        # the command docs/operations.md gives, while the server writes
        done = subprocess.run(
            ["sqlite3", str(tmp_path / "live" / "data" / "engram.db"), f".backup {backup}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        wait_for(lambda: len(accepted) >= 130, 60, message="capture after the backup")
        stop.set()
        hook.join(30)
    finally:
        stop.set()
        live.stop_all()
    assert not failures, failures
    in_copy = _accepted(backup)
    assert 80 <= len(in_copy) < len(accepted)
    assert set(in_copy) <= set(accepted)
    # restore: a fresh data dir holding only the copy, no WAL, no vectors; start; let it work
    restored = Cluster(tmp_path / "restored", ENGRAM_EMBEDDER="local")
    (tmp_path / "restored" / "data").mkdir(parents=True)
    shutil.copy(backup, tmp_path / "restored" / "data" / "engram.db")
    try:
        restored.serve()

        def drained() -> bool:
            counts = restored.request("GET", "/v1/capture?limit=1")[1]["counts"]
            return not (counts["pending"] or counts["processing"] or counts["retrying"])

        wait_for(drained, 120, message="the copy's waiting events processed")
        assert_cluster_stored_exactly_once(restored, in_copy)
        # the vectors are not in the copy (docs: remove <data dir>/chroma): rebuilt from the
        # restored store in the background, then semantic search answers from them
        wait_for(
            lambda: restored.request("GET", "/v1/status")[1]["derived"]["vector"]["pending"] == 0,
            180,
            message="the vectors rebuilt",
        )
        for mode in ("hybrid", "semantic"):
            status, found = restored.request(
                "POST",
                "/v1/search",
                {"query": "test_checkout failed", "project": "shop", "mode": mode},
            )
            assert status == 200 and found["items"], (mode, found)
        # a replay of everything (the hooks' spool, an import) adds only what the copy lacked
        for n in range(len(accepted)):
            body = observe_body(
                "shop", f"s-{n % 5}", n, toolOutput="FAILED test_checkout\n" + "x" * 4000
            )
            status, answer = restored.request("POST", "/v1/observe", body)
            assert status in (200, 201), answer
            assert (status == 200) == (answer["eventId"] in set(in_copy))
        wait_for(drained, 120, message="the replay processed")
        assert_cluster_stored_exactly_once(restored, accepted)
    finally:
        restored.stop_all()
