"""Shared fixtures: isolated settings, a real store on SQLite (and PostgreSQL when
ENGRAM_TEST_POSTGRES_URL is set), an in-process gateway, and real server/worker processes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.settings import Settings, load_settings
from engram.store import Store
from tests.support import Api, postgres_database, redis_available

POSTGRES_URL = os.environ.get("ENGRAM_TEST_POSTGRES_URL", "")
REDIS_URL = os.environ.get("ENGRAM_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")


def make_settings(tmp: Path, **env: str) -> Settings:
    # No embedder unless a test asks for one: loading it and Chroma in every test gateway
    # would only slow the suite (tests/test_vectors.py covers the vector stream).
    environ = {
        "ENGRAM_DATA_DIR": str(tmp / "data"),
        "ENGRAM_CONFIG_DIR": str(tmp / "config"),
        "ENGRAM_LOG_LEVEL": "WARNING",
        "ENGRAM_EMBEDDER": "none",
        **env,
    }
    return load_settings(environ=environ)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


STORE_BACKENDS = ["sqlite"] + (["postgresql"] if POSTGRES_URL else [])


@pytest.fixture(params=STORE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store on each configured backend, empty, closed afterwards."""
    if request.param == "sqlite":
        opened = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
        yield opened
        opened.close()
    else:
        with postgres_database(POSTGRES_URL) as url:
            opened = Store.open(url)
            yield opened
            opened.close()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An embedded gateway (real worker thread, real SQLite) shared by a test module.

    Tests sharing it use their own project names, so they never see each other's data.
    """
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path_factory.mktemp("gateway")))
    yield built
    built.close()


def api_for(gateway: Any) -> Api:
    """A test client of ``gateway``. Task bodies find their store and vectors through
    process-wide state (as Celery tasks must); a test that built a gateway of its own re-pointed
    it, so point it back at this one."""
    from engram.tasks import runtime
    from engram.tasks.app import configure

    lane = gateway.embedded.lane if gateway.embedded is not None else None
    runtime.install(runtime.Services(gateway.settings, gateway.store, gateway.vectors, lane=lane))
    configure(gateway.settings)
    return Api(gateway.app.test_client(), gateway.secret, gateway.store)


@pytest.fixture
def api(gateway: Any) -> Api:
    return api_for(gateway)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    """A real `engram serve` (embedded, its own data and config dirs), stopped afterwards."""
    from tests.support import Cluster

    cluster = Cluster(tmp_path)
    cluster.serve()
    yield cluster
    cluster.stop_all()


@pytest.fixture
def own_api(tmp_path: Path) -> Iterator[Api]:
    """A client of a gateway of this test's own, for tests whose data has fixed ids (fixture
    transcripts) and so cannot share the module's gateway."""
    from engram.cli.server import build_gateway

    built = build_gateway(make_settings(tmp_path / "gw"))
    try:
        yield api_for(built)
    finally:
        built.close()


@pytest.fixture
def project() -> str:
    return f"proj-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def redis_url() -> str:
    if not redis_available(REDIS_URL):
        if os.environ.get("CI"):
            pytest.fail(f"Redis is not reachable at {REDIS_URL}; .ci/run must start it")
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    return REDIS_URL
