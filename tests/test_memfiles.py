"""Native memory files: which files are sources, and the facts and anchors each one becomes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from engram.watcher.memfiles import (
    MAX_FILE_BYTES,
    FileTooLarge,
    NotRegularFile,
    Source,
    classify,
    discover,
    discover_all,
    facts_of,
    import_markdown,
    import_plaintext,
    read_source,
    resolve_aliases,
    root_fingerprint,
    slug,
    source_for,
    sync_body,
)

AGENTS = """\
# Acme API

Service that bills customers. See [build](#build-and-test).

## Build and test

- Run make check before pushing
- Tests need Docker:
  - start it with `make services`
  - stop it with `make down`

## Style

- Format with ruff
- Never commit secrets
"""


def anchors(text: str) -> dict[str, str]:
    return {fact.anchor: fact.content for fact in import_markdown(text)}


def write(root: Path, relpath: str, text: str = "- a fact\n") -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- sections and list items -------------------------------------------------------------------


def test_sections_and_bullets_get_anchors_from_their_headings_and_first_words() -> None:
    facts = anchors(AGENTS)
    # Sections holding only a list are no facts: their items are.
    assert list(facts) == [
        "acme-api",
        "build-and-test/run-make-check-before-pushing",
        "build-and-test/tests-need-docker",
        "style/format-with-ruff",
        "style/never-commit-secrets",
    ]
    assert facts["build-and-test/run-make-check-before-pushing"] == "Run make check before pushing"
    # A nested list belongs to its parent item, dedented, and is no fact of its own.
    assert facts["build-and-test/tests-need-docker"] == (
        "Tests need Docker:\n- start it with `make services`\n- stop it with `make down`"
    )
    # A lone title is not part of the other anchors' paths.
    assert facts["acme-api"].startswith("# Acme API\n\nService that bills customers.")


def test_anchors_survive_insertions_reorders_and_title_changes() -> None:
    before = anchors(AGENTS)
    edited = (
        AGENTS.replace("# Acme API", "# Acme billing API")
        .replace(
            "- Format with ruff\n- Never commit secrets\n",
            "- Never commit secrets\n- Prefer small functions\n- Format with ruff\n",
        )
        .replace(
            "## Build and test\n\n", "## Build and test\n\nRead this first.\n\n- Install uv first\n"
        )
        .replace("## Style", "## Release\n\n- Tag from main\n\n## Style")
    )
    after = anchors(edited)
    unchanged = {a for a in before if a in after and before[a] == after[a]}
    # Every list item kept its anchor and its content; only the renamed title differs, and the
    # section that gained text of its own became a fact.
    assert unchanged == set(before) - {"acme-api"}
    assert after["build-and-test"] == "## Build and test\n\nRead this first."
    assert set(after) - set(before) == {
        "acme-billing-api",
        "build-and-test",
        "build-and-test/install-uv-first",
        "style/prefer-small-functions",
        "release/tag-from-main",
    }


def test_a_nested_item_does_not_move_its_parent_anchor() -> None:
    grown = AGENTS.replace(
        "  - stop it with `make down`\n",
        "  - stop it with `make down`\n  - or with docker compose down\n",
    )
    assert set(anchors(grown)) == set(anchors(AGENTS))


def test_nested_headings_make_a_path_and_collisions_get_a_content_suffix() -> None:
    text = (
        "# One\n\n## Setup\n\n### Linux\n\n- Use the package manager of the distro for "
        "everything\n- Use the package manager of the distro for system packages\n\n"
        "### macOS\n\n- Use the package manager of the distro for nothing\n\n"
        "# Two\n\n## Setup\n\n- anything\n"
    )
    facts = anchors(text)
    base = "one/setup/linux/use-the-package-manager-of-the-distro-for"
    # Same first 8 words in one section: each gets 6 hex of its first line, never a number.
    everything = f"{base}-{sha('Use the package manager of the distro for everything')[:6]}"
    system = f"{base}-{sha('Use the package manager of the distro for system packages')[:6]}"
    assert facts[everything].endswith("for everything")
    assert facts[system].endswith("for system packages")
    assert base not in facts
    # Another section is no collision.
    assert "one/setup/macos/use-the-package-manager-of-the-distro-for" in facts
    # Two level-1 headings: no lone title, both are part of the paths. Same heading path twice:
    assert "two/setup/anything" in facts
    text += "\n# Two\n\n## Setup\n\nAgain.\n\n## Setup\n\nOnce more.\n"
    assert {a for a in anchors(text) if a.startswith("two/setup-")} == {
        f"two/setup-{sha('Again.')[:6]}",
        f"two/setup-{sha('Once more.')[:6]}",
    }


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_identical_facts_in_one_file_are_sent_once() -> None:
    facts = import_markdown("## A\n\n- Run make check\n\n## B\n\n- Run make check\n- Other\n")
    contents = [f.content for f in facts]
    assert contents.count("Run make check") == 1
    assert [f.anchor for f in facts] == ["a/run-make-check", "b/other"]


def test_code_fences_hold_no_headings_or_items() -> None:
    facts = anchors("## Commands\n\n```bash\n# not a heading\n- not an item\n```\n\n- real\n")
    assert list(facts) == ["commands", "commands/real"]
    assert "# not a heading" in facts["commands"]


def test_a_list_only_file_without_headings_is_its_items() -> None:
    facts = anchors("- Use pnpm, not npm\n- [x] Run `make check` before pushing\n1. Numbered\n")
    assert facts == {
        "use-pnpm-not-npm": "Use pnpm, not npm",
        "run-make-check-before-pushing": "Run `make check` before pushing",
        "numbered": "Numbered",
    }


def test_bullet_anchors_use_at_most_eight_words() -> None:
    facts = anchors("- one two three four five six seven eight nine ten\n")
    assert list(facts) == ["one-two-three-four-five-six-seven-eight"]
    assert (
        slug("**Don't** use `git push --force` [ever](http://x)") == "don-t-use-git-push-force-ever"
    )
    assert slug("🚀") == "item"


def test_mdc_front_matter_is_kept_at_the_top_of_the_first_fact() -> None:
    text = (
        '---\ndescription: Python style\nglobs: "*.py"\nalwaysApply: false\n---\n'
        "# Python\n\n- Type every function\n"
    )
    facts = import_markdown(text)
    assert facts[0].anchor == "python"
    assert facts[0].content.startswith(
        '---\ndescription: Python style\nglobs: "*.py"\nalwaysApply: false\n---\n# Python'
    )
    assert facts[1].content == "Type every function"  # not repeated in every fact
    only = import_markdown("---\nalwaysApply: true\n---\n")
    assert [(f.anchor, f.content) for f in only] == [
        ("front-matter", "---\nalwaysApply: true\n---")
    ]


def test_cursorrules_paragraphs_are_facts() -> None:
    facts = import_plaintext(
        "You are an expert in TypeScript.\n\nAlways write tests\nfor new "
        "code.\n\n\nYou are an expert in TypeScript.\n"
    )
    assert [(f.anchor, f.content) for f in facts] == [
        ("you-are-an-expert-in-typescript", "You are an expert in TypeScript."),
        ("always-write-tests", "Always write tests\nfor new code."),
    ]


def test_links_to_headings_in_the_file_resolve_to_anchors() -> None:
    text = (
        "## Build & test\n\n- make check\n\n## Release\n\n- Run the checks in "
        "[Build & test](#build--test) first, see [style](#code-style) and [out](https://x)\n"
        "\n## Code style\n\n- ruff\n"
    )
    release = next(f for f in import_markdown(text) if f.anchor.startswith("release/"))
    assert release.links == ["build-test", "code-style"]


def test_claude_imports_resolve_to_relpaths(tmp_path: Path) -> None:
    write(tmp_path, "docs/style.md", "style")
    write(
        tmp_path,
        "CLAUDE.md",
        "# Memory\n\n- Follow @docs/style.md and @./README.md\n"
        "- Install @types/node; mail me@example.com; `@not/code.md`\n",
    )
    source = next(discover(tmp_path))
    body = sync_body(
        source, user="u", project="p", scope="project", force=False, data=source.path.read_bytes()
    )
    links = {f["anchor"]: f["links"] for f in body["facts"]}
    assert links["memory/follow-docs-style-md-and-readme-md"] == ["docs/style.md", "README.md"]
    assert links["memory/install-types-node-mail-me-example-com-not"] == []


# --- sources -----------------------------------------------------------------------------------

SOURCES = {
    "CLAUDE.md": "claude-code",
    "CLAUDE.local.md": "claude-code",
    "packages/web/CLAUDE.md": "claude-code",
    ".claude/memory/notes.md": "claude-code",
    ".claude/projects/acme/memory/decisions.md": "claude-code",
    "AGENTS.md": "codex",
    "services/api/AGENTS.md": "codex",
    "GEMINI.md": "gemini",
    ".cursor/rules/python.mdc": "cursor",
    ".cursor/rules/backend/db/sql.mdc": "cursor",
    "apps/site/.cursor/rules/css.mdc": "cursor",
    ".cursorrules": "cursor",
    ".github/copilot-instructions.md": "copilot",
    ".github/instructions/python.instructions.md": "copilot",
    ".github/instructions/lang/go/go.instructions.md": "copilot",
}

NOT_SOURCES = [
    "README.md",
    "docs/AGENTS.txt",
    ".claude/settings.json",
    ".claude/notes.md",
    ".cursor/rules/readme.md",
    ".github/instructions/python.md",
    ".github/workflows/ci.yml",
    "node_modules/pkg/CLAUDE.md",
    ".venv/lib/AGENTS.md",
    ".git/AGENTS.md",
    "build/CLAUDE.md",
    "env/AGENTS.md",
]


def test_every_source_pattern_is_found_and_skipped_dirs_are_not_searched(tmp_path: Path) -> None:
    for relpath in [*SOURCES, *NOT_SOURCES]:
        write(tmp_path, relpath)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a virtualenv by any name
    found = {s.relpath: s.tool for s in discover(tmp_path)}
    assert found == SOURCES


def test_watching_the_claude_folder_itself_finds_its_memory(tmp_path: Path) -> None:
    home_claude = tmp_path / ".claude"
    write(home_claude, "CLAUDE.md")
    write(home_claude, "projects/-src-acme/memory/MEMORY.md")
    assert {s.relpath for s in discover(home_claude)} == {
        "CLAUDE.md",
        "projects/-src-acme/memory/MEMORY.md",
    }


def test_events_map_to_the_innermost_root(tmp_path: Path) -> None:
    outer, inner = tmp_path, tmp_path / "nested"
    inner.mkdir()
    found = source_for([outer, inner], inner / "AGENTS.md")
    assert found is not None and found.root == inner and found.relpath == "AGENTS.md"
    assert source_for([outer], outer / "node_modules" / "x" / "AGENTS.md") is None
    assert source_for([outer], outer / "AGENTS.md.swp") is None
    assert classify(outer, "AGENTS.md") == ("codex", "markdown")


# --- the request body --------------------------------------------------------------------------


def test_sync_body_follows_the_contract_and_scrubs_secrets(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "a" * 40
    data = f"## Deploy\n\n- Use the key {key} for staging\n".encode()
    path = write(tmp_path, "AGENTS.md", data.decode())
    source = Source("codex", "markdown", tmp_path.resolve(), "AGENTS.md")
    body = sync_body(
        source, user="alice", project="acme-api", scope="project", force=True, data=data
    )
    assert {k: body[k] for k in ("user", "project", "scope", "tool", "relpath", "force")} == {
        "user": "alice",
        "project": "acme-api",
        "scope": "project",
        "tool": "codex",
        "relpath": "AGENTS.md",
        "force": True,
    }
    assert body["path"] == str(path.resolve())
    assert body["root"] == root_fingerprint(tmp_path) and len(body["root"]) == 12
    assert body["contentHash"] == hashlib.sha256(data).hexdigest()
    assert all(key not in f["content"] and "sk-ant" not in f["anchor"] for f in body["facts"])
    for fact in body["facts"]:
        assert fact["hash"] == hashlib.sha256(fact["content"].encode()).hexdigest()
    gone = sync_body(source, user="alice", project="p", scope="project", force=False, data=None)
    assert gone["facts"] == [] and gone["contentHash"] == hashlib.sha256(b"").hexdigest()


def test_root_fingerprint_differs_per_checkout(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert root_fingerprint(tmp_path / "a") != root_fingerprint(tmp_path / "b")
    assert root_fingerprint(tmp_path / "a" / ".." / "a") == root_fingerprint(tmp_path / "a")


@pytest.mark.parametrize("crlf", [False, True])
def test_line_endings_do_not_change_facts(crlf: bool) -> None:
    text = AGENTS.replace("\n", "\r\n") if crlf else AGENTS
    source = Source("codex", "markdown", Path("/r"), "AGENTS.md")
    body = sync_body(
        source, user="u", project="p", scope="project", force=False, data=text.encode()
    )
    assert [f["anchor"] for f in body["facts"]] == list(anchors(AGENTS))


# --- fixes: what a section holds, stable anchors, odd files ------------------------------------


def test_a_section_fact_is_its_heading_and_own_text_never_its_items() -> None:
    text = (
        "## Deploy\n\nShip from main only.\n\n- Tag the release\n- Push the tag\n  with care\n"
        "\nThen watch the dashboards.\n\n```sh\nmake deploy\n```\n\n## Lint\n\n- ruff\n"
    )
    facts = anchors(text)
    assert facts["deploy"] == (
        "## Deploy\n\nShip from main only.\n\nThen watch the dashboards.\n\n```sh\nmake deploy\n```"
    )
    assert facts["deploy/tag-the-release"] == "Tag the release"
    assert facts["deploy/push-the-tag"] == "Push the tag\nwith care"
    # Every item is stored once: no fact holds another fact's text.
    assert not any(
        "Tag the release" in c for a, c in facts.items() if a != "deploy/tag-the-release"
    )
    assert "lint" not in facts and facts["lint/ruff"] == "ruff"  # only bullets: only its bullets
    # Text before the first heading is `preamble`, without its items.
    pre = anchors("Read me.\n\n- one\n\n# T\n\n- two\n\n# U\n\n- three\n")
    assert pre["preamble"] == "Read me." and pre["one"] == "one"


def test_punctuation_headings_keep_their_meaning_and_their_anchors_on_reorder() -> None:
    c_sharp, c_plus = "### C#\n\nUse dotnet format.\n", "### C++\n\nUse clang-format.\n"
    facts = anchors("## Languages\n\n" + c_sharp + "\n" + c_plus)
    assert facts["languages/c-sharp"].endswith("Use dotnet format.")
    assert facts["languages/c-plus-plus"].endswith("Use clang-format.")
    assert anchors("## Languages\n\n" + c_plus + "\n" + c_sharp) == facts
    assert slug("Notepad++ and F# (issue #42, a+b)") == "notepad-plus-plus-and-f-sharp-issue-42-a-b"


def test_colliding_bullets_keep_their_anchors_when_reordered() -> None:
    first = "- Run the tests with pytest before every single push please\n"
    second = "- Run the tests with pytest before every single release tag\n"
    ours = anchors("## CI\n\n" + first + second)
    assert len(ours) == 2 and all(
        a.startswith("ci/run-the-tests-with-pytest-before-every-") for a in ours
    )
    assert anchors("## CI\n\n" + second + first) == ours
    # Two headings whose slugs still collide (emoji only): also by content, not by position.
    rockets = "## 🚀\n\nShip it.\n\n## 🔥\n\nBurn it.\n"
    swapped = "## 🔥\n\nBurn it.\n\n## 🚀\n\nShip it.\n"
    assert anchors(rockets) == anchors(swapped) and len(anchors(rockets)) == 2


def test_a_utf8_bom_does_not_hide_the_first_heading() -> None:
    source = Source("codex", "markdown", Path("/r"), "AGENTS.md")
    with_bom = facts_of(source, b"\xef\xbb\xbf" + AGENTS.encode())
    assert [f.anchor for f in with_bom] == list(anchors(AGENTS))
    assert with_bom[0].content.startswith("# Acme API")


def test_an_at_token_too_long_for_a_file_name_is_no_import(tmp_path: Path) -> None:
    long = "x" * 300  # ENAMETOOLONG from stat(): it must not escape the importer
    write(tmp_path, "CLAUDE.md", f"- Mention @{long} and @docs/a.md\n")
    source = next(discover(tmp_path))
    facts = facts_of(source, source.path.read_bytes())
    assert [f.links for f in facts] == [["docs/a.md"]]


def test_nested_roots_discover_each_file_once_under_the_innermost(tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md")
    write(tmp_path, "sub/AGENTS.md")
    write(tmp_path, "sub/deeper/CLAUDE.md")
    outer, inner = tmp_path.resolve(), (tmp_path / "sub").resolve()
    found = [(s.root, s.relpath) for s in discover_all([outer, inner])]
    assert found == [(outer, "AGENTS.md"), (inner, "AGENTS.md"), (inner, "deeper/CLAUDE.md")]


def test_two_sources_that_are_one_file_are_one_import(tmp_path: Path) -> None:
    write(tmp_path, "AGENTS.md")
    (tmp_path / "CLAUDE.md").symlink_to("AGENTS.md")
    (tmp_path / "GEMINI.md").symlink_to("CLAUDE.md")  # a chain: the same file too
    write(tmp_path, "docs/shared.md")
    write(tmp_path, "b/AGENTS.md").unlink()
    (tmp_path / "b" / "AGENTS.md").symlink_to("../docs/shared.md")
    write(tmp_path, "a/CLAUDE.md").unlink()
    (tmp_path / "a" / "CLAUDE.md").symlink_to("../docs/shared.md")
    sources = {s.relpath: s for s in discover(tmp_path)}
    aliases = {a.relpath: p.relpath for a, p in resolve_aliases(list(sources.values())).items()}
    # The link target's own source wins; links to a file that is no source: the first of them.
    assert aliases == {
        "CLAUDE.md": "AGENTS.md",
        "GEMINI.md": "AGENTS.md",
        "b/AGENTS.md": "a/CLAUDE.md",
    }


def test_reading_skips_non_regular_files_and_stops_past_the_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "AGENTS.md"
    os.mkfifo(fifo)  # reading it would block forever: no writer
    with pytest.raises(NotRegularFile):
        read_source(fifo)
    big = write(tmp_path, "CLAUDE.md", "- x\n" * (MAX_FILE_BYTES // 4 + 1))
    with pytest.raises(FileTooLarge, match="over 1000000"):
        read_source(big)
    assert read_source(write(tmp_path, "GEMINI.md", "- ok\n")) == b"- ok\n"
