"""An edited fact keeps its identity through the real path: `engram watch --once` against a
real `engram serve`, on real files. For each kind of edit, without an Engram edit the fact
becomes a new version of the same memory; with one, the edit leaves exactly one live conflict
copy linked to the contested memory, re-running changes nothing, a further edit refreshes the
copy, and reconciling with --force removes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import Cluster
from tests.test_watch import watch_once as run_watch_once

BASE = """# Conventions

- Keep functions small and named for what they do
- Use uv for dependency management (wmarkA) now
- Run tests with pytest -q

# Tooling

- Format with ruff format before committing
"""
A = "Use uv for dependency management (wmarkA) now"
B = "Run tests with pytest -q"


def replace(old: str, new: str) -> Callable[[str], str]:
    return lambda text: text.replace(old, new)


SUMMARY = {  # what `engram watch --once` says of AGENTS.md after each edit
    "extend": "1 updated, 1 re-anchored",
    "shorten": "1 updated, 1 re-anchored",
    "reword-start": "1 updated, 1 re-anchored",
    "reword-end": "1 updated, 1 re-anchored",
    "reword-in-place": "1 updated, 1 re-anchored",
    "split": "1 created, 1 updated, 1 re-anchored",
    "merge": "1 updated, 1 removed, 1 re-anchored",
    "move": "1 re-anchored",
    "rename-heading": "3 re-anchored",
    "delete": "1 removed",
}
EDITS: dict[str, tuple[Callable[[str], str], str | None]] = {
    # name: (the edit, what A's memory reads after it; None: A is retired)
    "extend": (replace(A, A + ", pinned in CI (wmarkC)"), A + ", pinned in CI (wmarkC)"),
    "shorten": (replace(A, "Use uv (wmarkA)"), "Use uv (wmarkA)"),
    "reword-start": (
        replace(A, "Use poetry for dependency management (wmarkC)"),
        "Use poetry for dependency management (wmarkC)",
    ),
    "reword-end": (
        replace(A, "Use uv for dependency management (wmarkA) always, everywhere"),
        "Use uv for dependency management (wmarkA) always, everywhere",
    ),
    "split": (
        replace(
            f"- {A}\n", "- Use uv for dependency management (wmarkA)\n- Pin uv in CI (wmarkD)\n"
        ),
        "Use uv for dependency management (wmarkA)",
    ),
    "merge": (
        replace(f"- {A}\n- {B}\n", f"- {A} and run tests with pytest -q\n"),
        f"{A} and run tests with pytest -q",
    ),
    "reword-in-place": (
        replace(A, "Pin the package manager (wmarkC)"),
        "Pin the package manager (wmarkC)",
    ),
    "move": (
        lambda t: t.replace(f"- {A}\n", "").replace("# Tooling\n\n", f"# Tooling\n\n- {A}\n"),
        A,
    ),
    "rename-heading": (replace("# Conventions", "# House rules"), A),
    "delete": (replace(f"- {A}\n", ""), None),
}
DIVERGING = ("extend", "shorten", "reword-start", "reword-end", "reword-in-place", "split", "merge")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("identity"))
    cluster.serve()
    yield cluster
    cluster.stop_all()


def checkout(tmp_path: Path, name: str) -> Path:
    repo = tmp_path / name
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text(BASE)
    return repo


def watch_once(cluster: Cluster, repo: Path, *extra: str) -> str:
    done = run_watch_once(cluster, repo, *extra)
    assert done.returncode == 0, done.stderr
    return done.stderr


def live(cluster: Cluster, project: str, scope: str | None = None) -> list[dict[str, Any]]:
    query = f"/v1/memories?project={project}&limit=1000" + (f"&scope={scope}" if scope else "")
    status, page = cluster.request("GET", query)
    assert status == 200, page
    return list(page["items"])


def memory(cluster: Cluster, memory_id: str) -> dict[str, Any]:
    status, item = cluster.request("GET", f"/v1/memories/{memory_id}")
    assert status == 200, item
    return item


def first_import(cluster: Cluster, tmp_path: Path, name: str) -> tuple[Path, str]:
    repo = checkout(tmp_path, name)
    watch_once(cluster, repo)
    found = [m for m in live(cluster, name) if m["content"] == A]
    assert len(found) == 1
    return repo, found[0]["id"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edited_fact_is_a_new_version_of_the_same_memory(
    server: Cluster, tmp_path: Path, kind: str
) -> None:
    project = f"ident-{kind}"
    repo, memory_id = first_import(server, tmp_path, project)
    edit, expected = EDITS[kind]
    (repo / "AGENTS.md").write_text(edit(BASE))
    shown = watch_once(server, repo)
    assert f"synced codex AGENTS.md: {SUMMARY[kind]}\n" in shown, shown
    contents = sorted(m["content"] for m in live(server, project))
    if expected is None:  # retired: no longer readable, its text only in its history
        assert server.request("GET", f"/v1/memories/{memory_id}")[0] == 404
        assert A not in contents
        return
    item = memory(server, memory_id)
    assert item["content"] == expected
    assert item["version"] == (1 if expected == A else 2)
    assert contents.count(expected) == 1  # never doubled
    if kind == "merge":  # the other half is retired; its text stays in its history
        assert B not in contents
    if kind == "split":
        assert "Pin uv in CI (wmarkD)" in contents
    assert watch_once(server, repo).count("synced") == 0  # and again: nothing to do


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(EDITS))
def test_an_edit_of_a_fact_edited_in_engram_is_one_conflict_copy(
    server: Cluster, tmp_path: Path, kind: str
) -> None:
    project = f"conflict-{kind}"
    repo, memory_id = first_import(server, tmp_path, project)
    engram_edit = "Use uv pinned (wmarkB)"
    assert server.request("PATCH", f"/v1/memories/{memory_id}", {"content": engram_edit})[0] == 200
    edit, expected = EDITS[kind]
    (repo / "AGENTS.md").write_text(edit(BASE))
    shown = watch_once(server, repo)
    assert "1 skipped-conflict" in shown, shown
    assert memory(server, memory_id)["content"] == engram_edit  # the Engram edit survives
    copies = live(server, project, "sync-conflict")
    if kind not in DIVERGING:  # moved, renamed or deleted: the file holds nothing new
        assert copies == []
        return
    assert len(copies) == 1 and copies[0]["content"] == expected
    assert copies[0]["meta"]["conflict"]["memoryId"] == memory_id
    watch_once(server, repo)  # re-running: the same single copy
    assert [c["id"] for c in live(server, project, "sync-conflict")] == [copies[0]["id"]]
    (repo / "AGENTS.md").write_text(edit(BASE).replace(expected, expected + " (wmarkE)"))
    watch_once(server, repo)  # a further edit refreshes the copy in place
    again = live(server, project, "sync-conflict")
    assert [c["id"] for c in again] == [copies[0]["id"]]
    assert again[0]["content"] == expected + " (wmarkE)"
    (repo / "AGENTS.md").write_text(edit(BASE).replace(expected, engram_edit))
    watch_once(server, repo, "--force")  # reconciled: the file now says what Engram says
    assert live(server, project, "sync-conflict") == []
    assert memory(server, memory_id)["content"] == engram_edit


@pytest.mark.slow
def test_the_daemon_keeps_an_edited_facts_identity(server: Cluster, tmp_path: Path) -> None:
    import signal
    import subprocess

    from tests.support import ENGRAM, REPO, wait_for

    project = "ident-daemon"
    repo = checkout(tmp_path, project)
    daemon = subprocess.Popen(
        [ENGRAM, "watch", str(repo)],
        env=server.env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: any(m["content"] == A for m in live(server, project)), 30)
        memory_id = next(m["id"] for m in live(server, project) if m["content"] == A)
        reworded = "Use poetry for dependency management (wmarkC)"
        (repo / "AGENTS.md").write_text(BASE.replace(A, reworded))
        wait_for(lambda: memory(server, memory_id)["content"] == reworded, 30)
        assert memory(server, memory_id)["version"] == 2
        assert sorted(m["content"] for m in live(server, project)).count(reworded) == 1
    finally:
        daemon.send_signal(signal.SIGTERM)
        output, _ = daemon.communicate(timeout=30)
    assert "1 updated, 1 re-anchored" in output, output
