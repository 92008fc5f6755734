"""Memory-file sync on the store of record (SQLite, and PostgreSQL when configured): the import
ledger, never-clobber, conflict copies and reconcile, one test per guarantee."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from sqlalchemy import func, insert, select

from engram import memories, memsync
from engram.memsync import CONFLICT_SCOPE, FileSync
from engram.schema import import_ledger
from engram.schema import memories as memories_table
from engram.store import Store

ROOT_A, ROOT_B = "a1b2c3d4e5f6", "0f9e8d7c6b5a"


def request(
    facts: dict[str, str],
    *,
    root: str = ROOT_A,
    relpath: str = "AGENTS.md",
    user: str = "alice",
    force: bool = False,
    links: dict[str, list[str]] | None = None,
) -> FileSync:
    text = "\n".join(f"{a}: {c}" for a, c in facts.items())
    return memsync.validate(
        {
            "user": user,
            "project": "acme",
            "tool": "codex",
            "root": root,
            "relpath": relpath,
            "path": f"/src/{root}/{relpath}",
            "force": force,
            "contentHash": hashlib.sha256(text.encode()).hexdigest(),
            "facts": [
                {"anchor": a, "content": c, "hash": "x" * 64, "links": (links or {}).get(a, [])}
                for a, c in facts.items()
            ],
        }
    )


def sync(store: Store, req: FileSync) -> dict[str, Any]:
    return memsync.sync_file(store, store.keyword, req).to_dict()


def current(store: Store, memory_id: str) -> dict[str, Any]:
    found = memories.get(store, memory_id)
    assert found is not None
    return found


def live_memories(store: Store, scope: str | None = None) -> int:
    stmt = (
        select(func.count())
        .select_from(memories_table)
        .where(memories_table.c.forgotten_at.is_(None))
    )
    if scope:
        stmt = stmt.where(memories_table.c.scope == scope)
    with store.read() as conn:
        return int(conn.execute(stmt).scalar() or 0)


def ledger_keys(store: Store) -> list[str]:
    with store.read() as conn:
        return sorted(conn.execute(select(import_ledger.c.source_key)).scalars())


FACTS = {
    "build": "Run make check before pushing",
    "style": "Use ruff for lint and format",
    "db": "Migrations are append-only",
}


def test_first_import_creates_memories_with_provenance_and_links(store: Store) -> None:
    out = sync(store, request(FACTS, links={"build": ["style", "nowhere"]}))
    assert out["outcome"] == "imported" and out["created"] == 3
    assert out["sourceKey"] == f"codex@{ROOT_A}:AGENTS.md"
    build = current(store, out["memories"]["build"])
    assert build["content"] == "Run make check before pushing" and build["source"] == "file:codex"
    meta = build["meta"]
    assert meta["sourceKey"] == f"codex@{ROOT_A}:AGENTS.md#build"
    assert meta["path"] == f"/src/{ROOT_A}/AGENTS.md" and meta["anchor"] == "build"
    assert meta["contentHash"] == hashlib.sha256(b"Run make check before pushing").hexdigest()
    assert meta["links"] == [out["memories"]["style"]]  # resolved; the dangling one dropped
    assert ledger_keys(store) == sorted(
        [f"codex@{ROOT_A}:AGENTS.md"] + [f"codex@{ROOT_A}:AGENTS.md#{a}" for a in FACTS]
    )


def test_an_unchanged_file_writes_nothing_and_only_changed_facts_update(store: Store) -> None:
    first = sync(store, request(FACTS))
    again = sync(store, request(FACTS))
    assert again["outcome"] == "unchanged" and again["memories"] == first["memories"]
    assert (again["created"], again["updated"], again["removed"]) == (0, 0, 0)
    changed = {**FACTS, "style": "Use ruff; line length 100"}
    del changed["db"]
    changed["tests"] = "Every test asserts behaviour"
    out = sync(store, request(changed))
    assert (out["created"], out["updated"], out["removed"]) == (1, 1, 1)
    assert current(store, first["memories"]["build"])["version"] == 1  # untouched
    assert current(store, first["memories"]["style"])["content"] == "Use ruff; line length 100"
    assert memories.get(store, first["memories"]["db"]) is None  # removed from the file
    # a fact that only moved to another anchor keeps its memory
    moved = {("building" if a == "build" else a): c for a, c in changed.items()}
    out = sync(store, request(moved))
    assert out["memories"]["building"] == first["memories"]["build"]
    assert (out["created"], out["removed"]) == (0, 0)


def test_two_roots_with_the_same_file_never_share_rows(store: Store) -> None:
    a = sync(store, request(FACTS, root=ROOT_A))
    b = sync(store, request(FACTS, root=ROOT_B))
    assert b["outcome"] == "imported" and b["created"] == 3
    assert set(a["memories"].values()).isdisjoint(b["memories"].values())
    other_user = sync(store, request(FACTS, root=ROOT_A, user="bob"))
    assert other_user["created"] == 3  # (user, sourceKey) is the key


def test_rows_under_the_old_bare_key_are_renamed_in_place(store: Store) -> None:
    made = memories.remember(
        store,
        store.keyword,
        memories.NewMemory(content="Run make check before pushing", project="acme"),
    )
    with store.write() as conn:
        for key, memory_id, digest in (
            ("codex:AGENTS.md", None, "0" * 64),
            (
                "codex:AGENTS.md#build",
                made["id"],
                hashlib.sha256(b"Run make check before pushing").hexdigest(),
            ),
        ):
            conn.execute(
                insert(import_ledger).values(
                    user_name="alice",
                    source_key=key,
                    memory_id=memory_id,
                    content_hash=digest,
                    memory_version=1,
                    path=f"/src/{ROOT_A}/AGENTS.md",
                    imported_at=1.0,
                )
            )
    # another checkout's AGENTS.md does not take the old rows over
    other = sync(store, request(FACTS, root=ROOT_B))
    assert made["id"] not in other["memories"].values()
    out = sync(store, request(FACTS))
    assert out["memories"]["build"] == made["id"]  # the same memory, not a duplicate
    assert current(store, made["id"])["version"] == 1
    assert live_memories(store) == 6  # 3 per checkout
    assert not [k for k in ledger_keys(store) if k.startswith("codex:")]


def test_an_engram_edit_is_never_clobbered(store: Store) -> None:
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Run make check and make docs")
    edited_file = {
        **FACTS,
        "build": "Run make lint before pushing",
        "style": "Use ruff, black is gone",
    }
    out = sync(store, request(edited_file))
    assert out["outcome"] == "skipped-conflict"
    assert current(store, build)["content"] == "Run make check and make docs"
    # the whole source is skipped: the uncontested change waits too
    assert current(store, first["memories"]["style"])["content"] == "Use ruff for lint and format"
    forced = sync(store, request(edited_file, force=True))
    assert forced["outcome"] == "imported" and forced["updated"] == 2
    assert current(store, build)["content"] == "Run make lint before pushing"


def test_a_genuinely_diverged_file_is_kept_as_one_live_conflict_copy(store: Store) -> None:
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Run make check and make docs")
    before = live_memories(store)
    diverged = {**FACTS, "build": "Run make lint before pushing"}
    out = sync(store, request(diverged))
    [conflict] = out["conflicts"]
    assert conflict["memoryId"] == build and conflict["anchor"] == "build"
    copy = current(store, conflict["copyId"])
    assert copy["scope"] == CONFLICT_SCOPE and copy["content"] == "Run make lint before pushing"
    assert copy["meta"]["conflict"] == {
        "memoryId": build,
        "sourceKey": f"codex@{ROOT_A}:AGENTS.md#build",
        "sourcePath": f"/src/{ROOT_A}/AGENTS.md",
        "contentHash": hashlib.sha256(b"Run make lint before pushing").hexdigest(),
    }
    assert current(store, build)["content"] == "Run make check and make docs"
    assert live_memories(store) == before + 1
    # the same conflict again: a no-op
    again = sync(store, request(diverged))
    assert again["conflicts"][0]["copyId"] == copy["id"] and live_memories(store) == before + 1
    assert current(store, copy["id"])["version"] == 1
    # a further file edit refreshes that copy in place
    further = sync(store, request({**FACTS, "build": "Run make lint and make test"}))
    assert further["conflicts"][0]["copyId"] == copy["id"]
    assert current(store, copy["id"])["content"] == "Run make lint and make test"
    assert live_memories(store, CONFLICT_SCOPE) == 1


@pytest.mark.parametrize("case", ["memory-only edit", "file equals the Engram edit"])
def test_no_copy_for_noise(store: Store, case: str) -> None:
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Run make check and make docs")
    if case == "memory-only edit":  # the file changes elsewhere; this fact as last imported
        facts = {**FACTS, "style": "Use ruff, black is gone"}
    else:
        facts = {**FACTS, "build": "Run make check and make docs"}
    out = sync(store, request(facts))
    assert out["outcome"] == "skipped-conflict"
    assert out["conflicts"] == [{"memoryId": build, "anchor": "build", "copyId": None}]
    assert live_memories(store, CONFLICT_SCOPE) == 0


@pytest.mark.parametrize("how", ["file updated to the Engram edit", "copy pasted into memory"])
def test_reconcile_with_force_refreshes_the_ledger_and_removes_the_copy(
    store: Store, how: str
) -> None:
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Run make check and make docs")
    diverged = {**FACTS, "build": "Run make lint before pushing"}
    copy_id = sync(store, request(diverged))["conflicts"][0]["copyId"]
    assert copy_id
    if how == "file updated to the Engram edit":
        facts = {**FACTS, "build": "Run make check and make docs"}
    else:
        memories.update_content(store, store.keyword, build, "Run make lint before pushing")
        facts = diverged
    version = current(store, build)["version"]
    out = sync(store, request(facts, force=True))
    assert out["outcome"] == "reconciled" and out["reconciled"] == 1
    assert current(store, build)["version"] == version  # the memory is not written
    assert memories.get(store, copy_id) is None  # the conflict cleared, its copy gone
    assert sync(store, request(facts))["outcome"] == "unchanged"
    # and the next file edit imports normally: no conflict any more
    later = sync(store, request({**facts, "build": "Run make all"}))
    assert later["outcome"] == "imported" and later["updated"] == 1


def test_a_fact_forgotten_in_engram_stays_forgotten_until_the_file_changes_it(store: Store) -> None:
    first = sync(store, request(FACTS))
    memories.forget(store, store.keyword, first["memories"]["db"])
    touched = {**FACTS, "style": "Use ruff, black is gone"}
    out = sync(store, request(touched))
    assert "db" not in out["memories"] and out["created"] == 0
    out = sync(store, request({**touched, "db": "Migrations are append-only and tested"}))
    assert out["created"] == 1


def test_bad_requests_name_their_fields() -> None:
    with pytest.raises(memsync.InvalidSync) as caught:
        memsync.validate(
            {
                "user": "",
                "project": "acme",
                "tool": "vim",
                "root": "xyz",
                "relpath": "../AGENTS.md",
                "path": "/a",
                "contentHash": "0" * 64,
                "facts": [{"anchor": "a b", "content": ""}, "x"],
                "scope": CONFLICT_SCOPE,
            }
        )
    fields = caught.value.fields
    assert {
        "user",
        "tool",
        "root",
        "relpath",
        "scope",
        "facts[0].anchor",
        "facts[0].content",
        "facts[1]",
    } <= set(fields)


def test_migration_adds_the_ledger_to_an_existing_store(tmp_path: Any) -> None:
    """A store from before memory-file sync keeps its memories and gains the ledger."""
    from engram.db import create_store_engine, migrate

    engine = create_store_engine(f"sqlite:///{tmp_path / 'old.db'}")
    assert 7 in migrate(engine)
    with engine.begin() as conn:  # back to the version-6 shape, with one memory
        conn.exec_driver_sql("DROP TABLE import_ledger")
        conn.exec_driver_sql("ALTER TABLE memories DROP COLUMN meta")
        conn.exec_driver_sql("DELETE FROM schema_migrations WHERE version = 7")
        conn.exec_driver_sql(
            "INSERT INTO memories (id, project, scope, concepts, content, version, source,"
            " created_at, updated_at) VALUES ('mem_1', 'acme', 'project', '[]', 'kept', 1,"
            " 'api', 0, 0)"
        )
    assert migrate(engine) == [7]
    engine.dispose()
    store = Store.open(f"sqlite:///{tmp_path / 'old.db'}")
    try:
        assert current(store, "mem_1")["content"] == "kept"
        assert sync(store, request(FACTS))["created"] == 3
    finally:
        store.close()


def test_an_oversized_fact_is_kept_bounded_not_refused(store: Store) -> None:
    big = "## Generated schema\n" + "x" * 50_000 + "\nEND-OF-SECTION"
    out = sync(store, request({"schema": big, **FACTS}))
    kept = current(store, out["memories"]["schema"])["content"]
    assert len(kept) <= memories.MAX_CONTENT_CHARS and kept.endswith("END-OF-SECTION")
    assert "chars omitted" in kept and out["created"] == 4


def test_a_reverted_file_drops_its_conflict_copy(store: Store) -> None:
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Run make check and make docs")
    copy_id = sync(store, request({**FACTS, "build": "Run make lint"}))["conflicts"][0]["copyId"]
    assert copy_id and memories.get(store, copy_id) is not None
    assert sync(store, request(FACTS))["outcome"] == "unchanged"  # reverted to the last import
    assert memories.get(store, copy_id) is None
    assert current(store, build)["content"] == "Run make check and make docs"


def test_reconcile_finds_the_memory_when_the_file_edit_moved_its_anchor(store: Store) -> None:
    """The file is updated to the Engram edit, whose first words differ: its anchor changes
    with them; reconcile must still find the memory, not forget it and make a duplicate."""
    first = sync(store, request(FACTS))
    build = first["memories"]["build"]
    memories.update_content(store, store.keyword, build, "Always run make check first")
    moved = {
        ("always-run" if a == "build" else a): (
            "Always run make check first" if a == "build" else c
        )
        for a, c in FACTS.items()
    }
    assert sync(store, request(moved))["outcome"] == "skipped-conflict"
    out = sync(store, request(moved, force=True))
    assert out["outcome"] == "reconciled" and out["memories"]["always-run"] == build
    assert current(store, build)["version"] == 2 and live_memories(store) == 3
    assert sync(store, request({**moved, "style": "Use ruff only"}))["outcome"] == "imported"


def test_two_syncs_of_one_file_at_once_make_one_set_of_memories(store: Store) -> None:
    import threading

    barrier = threading.Barrier(2)
    results: list[dict[str, Any]] = []

    def run() -> None:
        barrier.wait()
        results.append(sync(store, request(FACTS)))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(r["outcome"] for r in results) == ["imported", "unchanged"]
    assert live_memories(store) == 3


def test_secrets_in_anchors_or_paths_are_refused() -> None:
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    with pytest.raises(memsync.InvalidSync) as caught:
        memsync.validate(
            {
                "user": "u",
                "project": "p",
                "tool": "codex",
                "root": ROOT_A,
                "relpath": f"{key}.md",
                "path": "/a",
                "contentHash": "0" * 64,
                "facts": [{"anchor": f"token-{key}", "content": "x"}],
            }
        )
    assert {"relpath", "facts[0].anchor"} <= set(caught.value.fields)
