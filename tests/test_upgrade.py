"""A rolling upgrade of a team deployment on PostgreSQL and Redis, under load, the way
docs/operations.md describes it: a store one migration behind, its gateway, worker pool and
scheduler started at once (racing to apply the migration under the advisory lock); capture
running; a new gateway and pool started beside them; the old pool drained by SIGTERM, capture
moved to the new gateway, the old gateway stopped. Every accepted event is stored exactly once;
every migration is applied once.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from engram.db import MIGRATIONS, schema_version
from engram.schema import schema_migrations
from tests.conftest import POSTGRES_URL
from tests.support import (
    REPO,
    Cluster,
    assert_stored_exactly_once,
    observe_body,
    postgres_database,
    wait_for,
)

pytestmark = pytest.mark.slow

ONE_BEHIND = """
import sys
from engram import db
db.MIGRATIONS = db.MIGRATIONS[:-1]
db.migrate(db.create_store_engine(sys.argv[1]))
"""


def _workers(cluster: Cluster) -> int:
    status, report = cluster.request("GET", "/v1/status")
    return int(report.get("workers", {}).get("alive", 0)) if status == 200 else 0


@pytest.mark.skipif(not POSTGRES_URL, reason="needs the test PostgreSQL server")
def test_rolling_upgrade_under_load(tmp_path: Path, redis_url: str) -> None:
    with postgres_database(POSTGRES_URL) as database:
        subprocess.run(
            [sys.executable, "-c", ONE_BEHIND, database], check=True, cwd=REPO, timeout=120
        )
        behind = create_engine(database)
        try:
            assert schema_version(behind) == MIGRATIONS[-2][0]
        finally:
            behind.dispose()
        env = {
            "ENGRAM_BROKER_URL": redis_url,
            "ENGRAM_DATABASE_URL": database,
            "ENGRAM_INBOX_LEASE_SECONDS": "3",
            "ENGRAM_SWEEP_INTERVAL_SECONDS": "1",
        }
        old = Cluster(tmp_path, **env)  # same data and config dirs (one secret), own port
        new = Cluster(tmp_path, **env)
        accepted: list[str] = []
        target = {"gateway": old}
        stop = threading.Event()
        refused: list[Any] = []

        def hook() -> None:
            n = 0
            while not stop.is_set():
                body = observe_body("roll", f"s-{n % 6}", n)
                try:
                    status, answer = target["gateway"].request("POST", "/v1/observe", body)
                except OSError:
                    # the old gateway stopped with this request in flight (the load balancer had
                    # already moved on): resend it, as the hook resends what it spooled
                    time.sleep(0.05)
                    continue
                if status not in (200, 201):  # 200: the dropped request had been accepted
                    refused.append((status, answer))
                    return
                accepted.append(answer["eventId"])
                n += 1

        producer = threading.Thread(target=hook)
        try:
            # three processes start at once against the store one migration behind
            old_pool = old.start("worker", "--concurrency", "1", "--name", "old@%h")
            old.start("beat")
            old.serve()
            wait_for(lambda: _workers(old) == 1, 60, message="the old pool")
            producer.start()
            wait_for(lambda: len(accepted) >= 100, 60, message="capture under way")
            # the new generation comes up beside the old one
            new_pool = new.start("worker", "--concurrency", "1", "--name", "new@%h")
            new.serve()
            wait_for(lambda: _workers(new) == 2, 60, message="both pools")
            old_pool.stop(60)  # SIGTERM: warm shutdown, running tasks finish
            target["gateway"] = new  # the load balancer moves to the new gateway
            wait_for(lambda: len(accepted) >= 250, 60, message="capture through the new one")
            old.procs[2].stop(30)  # the old gateway
            wait_for(lambda: len(accepted) >= 300, 60, message="capture after the old is gone")
            stop.set()
            producer.join(30)
            assert not refused, refused

            def drained() -> bool:
                counts = new.request("GET", "/v1/capture?limit=1")[1]["counts"]
                return not (counts["pending"] or counts["processing"] or counts["retrying"])

            wait_for(drained, 90, message="every accepted event processed by the new pool")
            assert new_pool.popen.poll() is None
        finally:
            stop.set()
            new.stop_all()
            old.stop_all()
        engine = create_engine(database)
        try:
            with engine.connect() as conn:
                assert_stored_exactly_once(conn, accepted)
                versions = list(conn.execute(select(schema_migrations.c.version)).scalars())
                assert sorted(versions) == [v for v, _, _ in MIGRATIONS]  # each applied once
                assert conn.execute(
                    select(func.count()).select_from(schema_migrations)
                ).scalar_one() == len(MIGRATIONS)
        finally:
            engine.dispose()
