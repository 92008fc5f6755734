"""Memory-file sync: one agent memory file (CLAUDE.md, AGENTS.md, ...) into memories, idempotently
and without ever overwriting an edit made in Engram.

The watcher (``watcher/``) finds and parses the files; this module gets one file's facts and
decides, in one transaction, what each becomes. The import ledger remembers, per (user, source
key), which memory a fact became, at which content hash and memory version:

- a file whose hash the ledger holds writes nothing (``unchanged``);
- a fact whose hash is unchanged writes nothing; a changed one becomes a new memory version; a
  new one a new memory (a fact only moved to another anchor keeps its memory); a fact gone from
  the file is forgotten (audited);
- **never clobber**: a memory edited in Engram after the import the ledger recorded (its version
  is past the ledger's) is contested, and the whole source is skipped (``skipped-conflict``)
  unless ``force``. When the file genuinely diverged (its fact differs from both the last import
  and the memory's current content), the file's version is kept as a separate memory in the
  ``sync-conflict`` scope, linked by ``meta.conflict``; one live copy per contested memory,
  refreshed in place by later file edits, removed once the source is imported or reconciled;
- **reconcile**: with ``force``, a contested memory whose content equals the file's fact again
  (the file was updated to the Engram edit, or the copy pasted into the memory) is not written:
  the ledger is refreshed and it counts as ``reconciled``. A contested memory that still
  differs is overwritten (that is what ``force`` is for).

Keys are ``<tool>@<12-hex root fingerprint>:<relpath>[#anchor]``. A row under the older bare key
``<tool>:<relpath>[#anchor]`` is renamed in place on its file's first re-import.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import re
from typing import Any

from sqlalchemy import Connection, delete, select, text, update

from engram import audit, memories
from engram.db import is_sqlite
from engram.errors import FieldErrors
from engram.events import bound_text
from engram.keyword import KeywordIndex
from engram.memories import NewMemory
from engram.privacy import scrub_text
from engram.schema import import_ledger, memory_versions
from engram.schema import memories as memories_table
from engram.store import Store, loads, now

CONFLICT_SCOPE = "sync-conflict"
"""Memory scope of the file's version of a contested memory."""
TOOLS = ("claude-code", "codex", "gemini", "cursor", "copilot")
MAX_FACTS = 2000
_HEX = re.compile(r"[0-9a-f]{12}")
_HASH = re.compile(r"[0-9a-f]{64}")
_ANCHOR = re.compile(r"[^\s#]{1,300}")
_WORD = re.compile(r"\w+")


class InvalidSync(FieldErrors):
    what = "invalid sync request"


@dataclasses.dataclass(frozen=True)
class Fact:
    anchor: str
    content: str
    hash: str
    links: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class FileSync:
    user: str
    project: str
    scope: str
    tool: str
    root: str
    relpath: str
    path: str
    content_hash: str
    facts: tuple[Fact, ...]
    force: bool = False

    @property
    def source_key(self) -> str:
        return f"{self.tool}@{self.root}:{self.relpath}"

    @property
    def legacy_key(self) -> str:
        return f"{self.tool}:{self.relpath}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate(body: Any) -> FileSync:
    """A ``POST /v1/sync/files`` body, or InvalidSync with the field errors."""
    if not isinstance(body, dict):
        raise InvalidSync({"body": "must be a JSON object"})
    errors: dict[str, str] = {}

    def text(key: str, limit: int, default: str | None = None) -> str:
        value = body.get(key, default)
        if not isinstance(value, str) or not value.strip() or len(value) > limit:
            errors[key] = f"required, a non-empty string of at most {limit} characters"
            return ""
        return value.strip()

    user, project = text("user", 200), text("project", 200)
    scope, tool = text("scope", 64, "project"), text("tool", 32)
    root, relpath, path = text("root", 12), text("relpath", 1000), text("path", 4096)
    file_hash = text("contentHash", 64)
    if tool and tool not in TOOLS:
        errors["tool"] = f"one of {', '.join(TOOLS)}"
    if root and not _HEX.fullmatch(root):
        errors["root"] = "the root's 12-hex fingerprint"
    if file_hash and not _HASH.fullmatch(file_hash):
        errors["contentHash"] = "a sha256 hex digest"
    if relpath and (relpath.startswith("/") or ".." in relpath.split("/") or "#" in relpath):
        errors["relpath"] = "a path relative to the watched root, without '..' or '#'"
    for key, value in (("relpath", relpath), ("path", path)):
        if value and scrub_text(value) != value:
            errors[key] = "must not hold a secret (it is stored as provenance)"
    if scope == CONFLICT_SCOPE:
        errors["scope"] = f"{CONFLICT_SCOPE!r} is reserved for conflict copies"
    force = body.get("force", False)
    if not isinstance(force, bool):
        errors["force"] = "true or false"
    facts = _facts(body.get("facts"), errors)
    if errors:
        raise InvalidSync(errors)
    return FileSync(user, project, scope, tool, root, relpath, path, file_hash, facts, bool(force))


def _facts(raw: Any, errors: dict[str, str]) -> tuple[Fact, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_FACTS:
        errors["facts"] = f"a list of at most {MAX_FACTS} facts"
        return ()
    facts: dict[str, Fact] = {}
    for n, item in enumerate(raw):
        where = f"facts[{n}]"
        if not isinstance(item, dict):
            errors[where] = "an object {anchor, content, hash, links?}"
            continue
        anchor, content = item.get("anchor"), item.get("content")
        links = item.get("links", [])
        if not isinstance(anchor, str) or not _ANCHOR.fullmatch(anchor):
            errors[f"{where}.anchor"] = "1-300 characters without spaces or '#'"
        elif anchor in facts:
            errors[f"{where}.anchor"] = f"duplicate anchor {anchor!r}"
        if not isinstance(content, str) or not content.strip():
            errors[f"{where}.content"] = "a non-empty string"
        if not isinstance(links, list) or not all(isinstance(x, str) for x in links):
            errors[f"{where}.links"] = "a list of anchors"
        if not any(k.startswith(where) for k in errors):
            if scrub_text(str(anchor)) != anchor:
                errors[f"{where}.anchor"] = "must not hold a secret (it becomes a ledger key)"
                continue
            clean = scrub_text(str(content).strip())
            # The hash is the server's own, of the whole text: a client cannot make two contents
            # look alike, and an edit in the middle of an oversized fact is still an edit. The
            # stored text of an oversized fact (a long code block) keeps head and tail rather
            # than failing the whole file.
            facts[str(anchor)] = Fact(
                str(anchor),
                bound_text(clean, memories.MAX_CONTENT_CHARS),
                content_hash(clean),
                tuple(str(x) for x in links),
            )
    return tuple(facts.values())


@dataclasses.dataclass
class Outcome:
    source_key: str
    outcome: str = "imported"
    created: int = 0
    updated: int = 0
    removed: int = 0
    reconciled: int = 0
    conflicts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    memories: dict[str, str] = dataclasses.field(default_factory=dict)
    renamed: dict[str, str] = dataclasses.field(default_factory=dict)  # old anchor -> new anchor

    def to_dict(self) -> dict[str, Any]:
        return {
            "sourceKey": self.source_key,
            "outcome": self.outcome,
            "created": self.created,
            "updated": self.updated,
            "removed": self.removed,
            "reconciled": self.reconciled,
            "conflicts": self.conflicts,
            "memories": self.memories,
            "renamed": self.renamed,
        }


def sync_file(store: Store, keyword: KeywordIndex, req: FileSync) -> Outcome:
    """Apply one file's facts (see the module docstring); one transaction."""
    actor = f"sync:{req.user}"
    with store.write() as conn:
        _serialise(conn, req)
        _rename_legacy(conn, req)
        rows = _ledger_rows(conn, req)
        file_row = rows.pop(req.source_key, None)
        out = Outcome(req.source_key)
        if file_row is not None and file_row.content_hash == req.content_hash and not req.force:
            # the file is what was last imported: nothing to write, and no copy of a diverged
            # version of it can still be current
            _clear_conflict_copies(
                conn,
                keyword,
                req,
                [r.memory_id for r in rows.values()],
                actor,
                reason="the file is back to its last import",
            )
            out.outcome = "unchanged"
            out.memories = {_anchor(k): r.memory_id for k, r in rows.items()}
            return out
        current = _memories(conn, [r.memory_id for r in rows.values()], lock=True)
        for old_key, new_key in _rekey_edited(conn, req, rows, current).items():
            rows[new_key] = rows.pop(old_key)  # the same fact, edited: it keeps its memory
            out.renamed[_anchor(old_key)] = _anchor(new_key)
        by_anchor = {f.anchor: f for f in req.facts}
        contested = {
            key: row
            for key, row in rows.items()
            if row.memory_id in current
            and current[row.memory_id].version > (row.memory_version or 0)
        }
        if contested and not req.force:
            _keep_conflict_copies(conn, keyword, req, contested, current, by_anchor, out, actor)
            out.outcome = "skipped-conflict"
            out.memories = {_anchor(k): r.memory_id for k, r in rows.items()}
            return out
        _import(conn, keyword, req, rows, current, contested, by_anchor, out, actor)
        _clear_conflict_copies(conn, keyword, req, [r.memory_id for r in rows.values()], actor)
        _put(conn, req, req.source_key, None, req.content_hash, None)
        if not (out.created or out.updated or out.removed or out.renamed):
            out.outcome = "reconciled" if out.reconciled else "unchanged"
        return out


def _import(
    conn: Connection,
    keyword: KeywordIndex,
    req: FileSync,
    rows: dict[str, Any],
    current: dict[str, Any],
    contested: dict[str, Any],
    by_anchor: dict[str, Fact],
    out: Outcome,
    actor: str,
) -> None:
    prefix = req.source_key + "#"
    gone = {key: row for key, row in rows.items() if _anchor(key) not in by_anchor}
    for position, fact in enumerate(req.facts):
        key = prefix + fact.anchor
        row = rows.get(key)
        memory = current.get(row.memory_id) if row is not None else None
        if row is not None and row.position != position:
            conn.execute(
                update(import_ledger)
                .where(import_ledger.c.user_name == req.user, import_ledger.c.source_key == key)
                .values(position=position)
            )
        if row is not None and memory is None and row.content_hash == fact.hash:
            # forgotten in Engram: that was a decision about this fact; keep to it while the
            # fact is unchanged, import it afresh when the file changes it
            continue
        if memory is not None and key in contested and memory.content == fact.content:
            out.reconciled += 1  # converged: refresh the ledger, write nothing
            _put(conn, req, key, memory.id, fact.hash, memory.version, position=position)
        elif (
            memory is not None
            and row is not None
            and row.content_hash == fact.hash
            and key not in contested
        ):
            pass  # unchanged
        elif memory is not None:
            written = memories.new_version(
                conn, keyword, memory.id, fact.content, actor=actor, meta=_provenance(req, fact)
            )
            assert written is not None  # current holds only memories that are not forgotten
            out.updated += 1
            _put(conn, req, key, memory.id, fact.hash, written["version"], position=position)
        else:
            created = memories.insert_memory(
                conn,
                keyword,
                NewMemory(
                    content=fact.content,
                    project=req.project,
                    scope=req.scope,
                    source=f"file:{req.tool}",
                ),
                actor=actor,
                meta=_provenance(req, fact),
            )
            out.created += 1
            _put(conn, req, key, created["id"], fact.hash, 1, position=position)
        out.memories[fact.anchor] = (
            memory.id if memory is not None else _ledger_memory(conn, req, key)
        )
    for key, row in gone.items():
        if memories.forget_in(
            conn, keyword, row.memory_id, actor=actor, reason=f"removed from {req.relpath}"
        ):
            out.removed += 1
        conn.execute(
            delete(import_ledger).where(
                import_ledger.c.user_name == req.user, import_ledger.c.source_key == key
            )
        )
    _resolve_links(conn, req, out)


SIMILAR_IN_SECTION = 0.3
"""Least word-level similarity for an edited fact to keep its memory within its section."""
SIMILAR_ELSEWHERE = 0.6
MAX_COMPARED_PAIRS = 2_500
"""Past this many (gone × new) pairs, only pairs within one section are compared."""
"""... and across sections (its heading renamed, or the fact moved to another one)."""


def _rekey_edited(
    conn: Connection, req: FileSync, rows: dict[str, Any], current: dict[str, Any]
) -> dict[str, str]:
    """Which facts gone from their anchor are facts new to the file, edited: an anchor is made
    from a fact's first words, so an edit gives it a new one. Pairs, in order of evidence:

    1. the same text as last imported, or as the memory reads now (moved, or the file edited
       to match an Engram edit);
    2. position: a new fact standing where a gone one stood, between the same two neighbours
       (each the same fact as before, itself perhaps moved by rule 1), whatever the edit;
    3. similarity of words (difflib), most similar pair first, each fact paired once: at least
       SIMILAR_IN_SECTION within a section, SIMILAR_ELSEWHERE across sections.

    A fact replaced in place (its bullet deleted and another written in its slot) is read as
    an edit by rule 2: the old text stays in the memory's history. A rewording that moves the
    fact and shares too few words is a retirement and a new memory.

    A split keeps the memory with the more similar half and creates the other; a merge keeps the
    more similar one's memory and retires the other (its text stays in its history): no text
    is lost and none doubled. The pairs' ledger rows are renamed here, before anything else
    reads them; returns {old key: new key}."""
    prefix = req.source_key + "#"
    anchors = {f.anchor for f in req.facts}
    gone = {k: r for k, r in rows.items() if k.startswith(prefix) and _anchor(k) not in anchors}
    new = [f for f in req.facts if prefix + f.anchor not in rows]
    if not gone or not new:
        return {}
    pairs: dict[str, Fact] = {}
    for fact in new:  # 1. the same text
        for key, row in gone.items():
            memory = current.get(row.memory_id)
            same = row.content_hash == fact.hash or (
                memory is not None and memory.content == fact.content
            )
            if same and key not in pairs:
                pairs[key] = fact
                break
    left_keys = [k for k in gone if k not in pairs]
    left_facts = [f for f in new if all(f is not p for p in pairs.values())]
    for key, fact in _same_slot(req, rows, pairs, left_keys, left_facts).items():  # 2.
        pairs[key] = fact
    left_keys = [k for k in left_keys if k not in pairs]
    left_facts = [f for f in left_facts if all(f is not p for p in pairs.values())]
    if left_keys and left_facts:  # 3. similar words
        before = _imported_texts(conn, {k: gone[k] for k in left_keys}, current)
        # A rewritten file (hundreds gone, hundreds new) is compared within sections only:
        # each comparison is ~20 us and the whole sync holds the write lock.
        local = len(left_keys) * len(left_facts) > MAX_COMPARED_PAIRS
        scored = sorted(
            (
                (_similarity(before[key], fact.content), i, key, fact)
                for key in left_keys
                for i, fact in enumerate(left_facts)
                if not local or _section(_anchor(key)) == _section(fact.anchor)
            ),
            key=lambda s: (-s[0], s[1], s[2]),
        )
        taken: set[int] = set()
        for similarity, i, key, fact in scored:
            same_section = _section(_anchor(key)) == _section(fact.anchor)
            least = SIMILAR_IN_SECTION if same_section else SIMILAR_ELSEWHERE
            if similarity >= least and key not in pairs and i not in taken:
                pairs[key] = fact
                taken.add(i)
    renamed = {}
    for key, fact in pairs.items():
        conn.execute(
            update(import_ledger)
            .where(import_ledger.c.user_name == req.user, import_ledger.c.source_key == key)
            .values(source_key=prefix + fact.anchor)
        )
        renamed[key] = prefix + fact.anchor
        audit.record(  # the mapping stays on record: which anchor the memory was known by
            conn,
            f"sync:{req.user}",
            "sync.rekey",
            "memory",
            gone[key].memory_id or "",
            {"from": key, "to": prefix + fact.anchor},
        )
    return renamed


def _same_slot(
    req: FileSync,
    rows: dict[str, Any],
    pairs: dict[str, Fact],
    keys: list[str],
    facts: list[Fact],
) -> dict[str, Fact]:
    """Gone facts whose slot a new fact took: the same fact before it and the same after it as
    at the last import. Both must be facts: at an end of the file, a fact deleted and another
    appended are as likely as an edit."""
    prefix = req.source_key + "#"
    placed = sorted(
        (r.position, k) for k, r in rows.items() if k.startswith(prefix) and r.position is not None
    )
    order = [k for _, k in placed]
    now = {k: pairs[k].anchor if k in pairs else _anchor(k) for k in order}
    anchors = [f.anchor for f in req.facts]
    at = {id(f): i for i, f in enumerate(req.facts)}

    def around(i: int, names: list[str]) -> tuple[str | None, str | None]:
        return (names[i - 1] if i > 0 else None, names[i + 1] if i + 1 < len(names) else None)

    found: dict[str, Fact] = {}
    for key in keys:
        if key not in now:
            continue  # imported before positions were recorded
        i = order.index(key)
        before, after = (now[k] if k else None for k in around(i, order))
        if before is None or after is None:
            continue
        same = [
            f
            for f in facts
            if around(at[id(f)], anchors) == (before, after)
            and all(f is not taken for taken in found.values())
        ]
        if len(same) == 1:
            found[key] = same[0]
    return found


def _imported_texts(
    conn: Connection, rows: dict[str, Any], current: dict[str, Any]
) -> dict[str, str]:
    """Each row's fact as it was last imported (its memory at the ledger's version), else as
    the memory reads now, else empty."""
    texts = {}
    for key, row in rows.items():
        text_ = conn.execute(
            select(memory_versions.c.content).where(
                memory_versions.c.memory_id == row.memory_id,
                memory_versions.c.version == (row.memory_version or 0),
            )
        ).scalar()
        memory = current.get(row.memory_id)
        texts[key] = text_ or (memory.content if memory is not None else "")
    return texts


def _section(anchor: str) -> str:
    return anchor.rsplit("/", 1)[0] if "/" in anchor else ""


def _similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(
        None, _WORD.findall(a.lower()), _WORD.findall(b.lower()), autojunk=False
    ).ratio()


def _keep_conflict_copies(
    conn: Connection,
    keyword: KeywordIndex,
    req: FileSync,
    contested: dict[str, Any],
    current: dict[str, Any],
    by_anchor: dict[str, Fact],
    out: Outcome,
    actor: str,
) -> None:
    """The skip: contested memories are never touched; where the file genuinely diverged, its
    version is kept as one live conflict copy per contested memory."""
    for key, row in contested.items():
        memory = current[row.memory_id]
        fact = by_anchor.get(_anchor(key))
        entry: dict[str, Any] = {"memoryId": memory.id, "anchor": _anchor(key), "copyId": None}
        diverged = (
            fact is not None and fact.hash != row.content_hash and fact.content != memory.content
        )
        copy_key = f"conflict:{memory.id}"
        copy_row = conn.execute(
            select(import_ledger).where(
                import_ledger.c.user_name == req.user, import_ledger.c.source_key == copy_key
            )
        ).first()
        copy = (
            _memories(conn, [copy_row.memory_id]).get(copy_row.memory_id)
            if copy_row is not None
            else None
        )
        if diverged and fact is not None:
            meta = {
                "conflict": {
                    "memoryId": memory.id,
                    "sourceKey": key,
                    "sourcePath": req.path,
                    "contentHash": fact.hash,
                }
            }
            if copy is None:
                made = memories.insert_memory(
                    conn,
                    keyword,
                    NewMemory(
                        content=fact.content,
                        project=req.project,
                        scope=CONFLICT_SCOPE,
                        source=f"file:{req.tool}",
                    ),
                    actor=actor,
                    meta=meta,
                )
                _put(conn, req, copy_key, made["id"], fact.hash, 1, path=key)
                entry["copyId"] = made["id"]
            elif copy_row is not None and copy_row.content_hash != fact.hash:
                # a further file edit: refresh the copy in place
                written = memories.new_version(
                    conn, keyword, copy.id, fact.content, actor=actor, meta=meta
                )
                assert written is not None
                _put(conn, req, copy_key, copy.id, fact.hash, written["version"], path=key)
                entry["copyId"] = copy.id
            else:
                entry["copyId"] = copy.id  # the same conflict again: nothing to do
        elif copy is not None:
            # the file no longer diverges (reverted, or already equal to the Engram edit): the
            # copy holds a version that is neither in the file nor in Engram
            memories.forget_in(
                conn, keyword, copy.id, actor=actor, reason="the file no longer diverges"
            )
            conn.execute(
                delete(import_ledger).where(
                    import_ledger.c.user_name == req.user, import_ledger.c.source_key == copy_key
                )
            )
        out.conflicts.append(entry)


def _clear_conflict_copies(
    conn: Connection,
    keyword: KeywordIndex,
    req: FileSync,
    memory_ids: list[str],
    actor: str,
    reason: str = "sync conflict resolved",
) -> None:
    """The source was imported or reconciled (or is back to its last import): its conflicts are
    over, their copies go."""
    for memory_id in memory_ids:
        copy_key = f"conflict:{memory_id}"
        row = conn.execute(
            select(import_ledger.c.memory_id).where(
                import_ledger.c.user_name == req.user, import_ledger.c.source_key == copy_key
            )
        ).first()
        if row is None:
            continue
        memories.forget_in(conn, keyword, row.memory_id, actor=actor, reason=reason)
        conn.execute(
            delete(import_ledger).where(
                import_ledger.c.user_name == req.user, import_ledger.c.source_key == copy_key
            )
        )


def _resolve_links(conn: Connection, req: FileSync, out: Outcome) -> None:
    """Links between facts, as memory ids, in each linking memory's provenance."""
    for fact in req.facts:
        targets = [out.memories[a] for a in fact.links if a in out.memories]
        memory_id = out.memories.get(fact.anchor)
        if not targets or memory_id is None:
            continue
        row = conn.execute(
            select(memories_table.c.meta).where(memories_table.c.id == memory_id)
        ).first()
        meta = loads(row.meta, {}) if row is not None else {}
        if meta.get("links") != targets:
            from engram.store import dumps

            conn.execute(
                update(memories_table)
                .where(memories_table.c.id == memory_id)
                .values(meta=dumps({**meta, "links": targets}))
            )


def _rename_legacy(conn: Connection, req: FileSync) -> None:
    """Rows under the older bare key ``<tool>:<relpath>`` become this root's, in place: the same
    memories, no duplicates."""
    legacy = conn.execute(
        select(import_ledger.c.source_key).where(
            import_ledger.c.user_name == req.user,
            # only this file's rows: two checkouts both had a bare `codex:AGENTS.md`
            import_ledger.c.path == req.path,
            (import_ledger.c.source_key == req.legacy_key)
            | import_ledger.c.source_key.startswith(req.legacy_key + "#", autoescape=True),
        )
    ).all()
    taken = set(_ledger_rows(conn, req))
    for (key,) in legacy:
        new_key = req.source_key + key[len(req.legacy_key) :]
        if new_key in taken:  # already imported under the new key: the old row is stale
            conn.execute(
                delete(import_ledger).where(
                    import_ledger.c.user_name == req.user, import_ledger.c.source_key == key
                )
            )
            continue
        conn.execute(
            update(import_ledger)
            .where(import_ledger.c.user_name == req.user, import_ledger.c.source_key == key)
            .values(source_key=new_key)
        )


def _ledger_rows(conn: Connection, req: FileSync) -> dict[str, Any]:
    rows = conn.execute(
        select(import_ledger).where(
            import_ledger.c.user_name == req.user,
            (import_ledger.c.source_key == req.source_key)
            | import_ledger.c.source_key.startswith(req.source_key + "#", autoescape=True),
        )
    ).all()
    return {r.source_key: r for r in rows}


def _ledger_memory(conn: Connection, req: FileSync, key: str) -> str:
    return str(
        conn.execute(
            select(import_ledger.c.memory_id).where(
                import_ledger.c.user_name == req.user, import_ledger.c.source_key == key
            )
        ).scalar()
    )


def _memories(conn: Connection, ids: list[str], *, lock: bool = False) -> dict[str, Any]:
    """Current memories by id; ``lock`` holds their rows until the sync commits (PostgreSQL:
    an Engram edit arriving meanwhile waits, then finds the new version, instead of being
    overwritten unseen; SQLite's write transaction holds the whole database already)."""
    wanted = [i for i in ids if i]
    if not wanted:
        return {}
    stmt = select(memories_table).where(
        memories_table.c.id.in_(wanted), memories_table.c.forgotten_at.is_(None)
    )
    if lock:
        stmt = stmt.with_for_update()
    return {r.id: r for r in conn.execute(stmt).all()}


def _serialise(conn: Connection, req: FileSync) -> None:
    """One sync of a file at a time (two watchers, a daemon and a cron run): on PostgreSQL a
    transaction lock per (user, file), the bare legacy key first; SQLite's write transaction
    serialises everything already."""
    if is_sqlite(conn):
        return
    for key in (req.legacy_key, req.source_key):
        conn.execute(
            text("SELECT pg_advisory_xact_lock(hashtext(:k))"),
            {"k": f"engram-sync|{req.user}|{key}"},
        )


def _put(
    conn: Connection,
    req: FileSync,
    key: str,
    memory_id: str | None,
    hash_: str,
    version: int | None,
    *,
    path: str | None = None,
    position: int | None = None,
) -> None:
    values = {
        "memory_id": memory_id,
        "content_hash": hash_,
        "memory_version": version,
        "path": path or req.path,
        "imported_at": now(),
        "position": position,
    }
    changed = conn.execute(
        update(import_ledger)
        .where(import_ledger.c.user_name == req.user, import_ledger.c.source_key == key)
        .values(**values)
    ).rowcount
    if not changed:
        conn.execute(import_ledger.insert().values(user_name=req.user, source_key=key, **values))


def _provenance(req: FileSync, fact: Fact) -> dict[str, Any]:
    return {
        "source": req.tool,
        "path": req.path,
        "anchor": fact.anchor,
        "sourceKey": f"{req.source_key}#{fact.anchor}",
        "contentHash": fact.hash,
    }


def _anchor(key: str) -> str:
    return key.split("#", 1)[1] if "#" in key else ""
