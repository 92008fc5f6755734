"""`engram connect` / `engram disconnect` on copies of realistic host config files.

Every test points HOME, ENGRAM_CONFIG_DIR and the working directory at tmp paths: the real home
is never read or written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit
import yaml

from engram.agents.connect import hooks_connected
from engram.agents.hostconfig import formats
from engram.cli.main import main
from engram.settings import load_settings

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
ENGRAM = str(Path(sys.executable).with_name("engram"))

HOST_FILES: dict[str, list[tuple[str, str]]] = {
    "claude-code": [
        ("claude/claude.json", ".claude.json"),
        ("claude/settings.json", ".claude/settings.json"),
    ],
    "codex": [
        ("codex/config.toml", ".codex/config.toml"),
        ("codex/hooks.json", ".codex/hooks.json"),
    ],
    "cursor": [
        ("cursor/mcp.json", ".cursor/mcp.json"),
        ("cursor/hooks.json", ".cursor/hooks.json"),
    ],
    "gemini-cli": [("gemini/settings.json", ".gemini/settings.json")],
    "copilot-cli": [("copilot/mcp-config.json", ".copilot/mcp-config.json")],
    "opencode": [("opencode/opencode.json", ".config/opencode/opencode.json")],
    "zed": [("zed/settings.json", ".config/zed/settings.json")],
    "continue": [("continue/config.yaml", ".continue/config.yaml")],
    "windsurf": [
        ("windsurf/mcp_config.json", ".codeium/windsurf/mcp_config.json"),
        ("windsurf/hooks.json", ".codeium/windsurf/hooks.json"),
    ],
    "kimi": [
        ("kimi/mcp.json", ".kimi-code/mcp.json"),
        ("kimi/config.toml", ".kimi-code/config.toml"),
    ],
}
HOOK_HOSTS = ("claude-code", "codex", "cursor", "gemini-cli", "copilot-cli", "windsurf", "kimi")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home, config, project = tmp_path / "home", tmp_path / "config", tmp_path / "project"
    for d in (home, project):
        d.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ENGRAM_CONFIG_DIR", str(config))
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(project)
    return {"home": home, "config": config, "project": project}


def install(home: Path, host: str) -> list[Path]:
    paths = []
    for source, target in HOST_FILES[host]:
        path = home / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(FIXTURES / source, path)
        paths.append(path)
    return paths


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def parsed(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomlkit.parse(text).unwrap()
    if path.suffix == ".yaml":
        return yaml.safe_load(text)
    return formats.parse_json(text, comments=True).value


def contains(big: Any, small: Any) -> bool:
    """Every entry of ``small`` is still in ``big`` (lists: every item still present)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            k in big and contains(big[k], v) for k, v in small.items()
        )
    if isinstance(small, list):
        return isinstance(big, list) and all(item in big for item in small)
    return bool(big == small)


def engram_commands(data: Any) -> list[str]:
    """Every string anywhere in ``data`` that is an `engram hook` command."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and " hook " in node and "engram" in node:
            found.append(node)

    walk(data)
    return found


def has_engram_server(data: Any) -> bool:
    if isinstance(data, dict):
        if "engram" in data and isinstance(data["engram"], dict):
            return True
        if data.get("name") == "engram":
            return True
        return any(has_engram_server(v) for v in data.values())
    if isinstance(data, list):
        return any(has_engram_server(v) for v in data)
    return False


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".engram-backup-*"))


# --- the whole cycle, for every host -------------------------------------------------------------


@pytest.mark.parametrize("host", list(HOST_FILES))
def test_connect_is_idempotent_and_disconnect_restores(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], host: str
) -> None:
    paths = install(env["home"], host)
    original_bytes = {p: p.read_bytes() for p in paths}
    original = {p: parsed(p) for p in paths}
    args = ["connect", host] + (["--with-hooks"] if host in HOOK_HOSTS else [])

    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "connected" in out
    combined: list[Any] = []
    for path in paths:
        after = parsed(path)
        assert contains(after, original[path]), f"{path} lost a user entry"
        assert len(backups(path)) == 1 and backups(path)[0].read_bytes() == original_bytes[path]
        combined.append(after)
    assert has_engram_server(combined)
    if host in HOOK_HOSTS:
        hook_files = list(env["home"].rglob("*")) + list(env["project"].rglob("*"))
        commands = [
            c
            for f in hook_files
            if f.is_file() and "backup" not in f.name and f.suffix in (".json", ".toml")
            for c in engram_commands(parsed(f))
        ]
        assert commands and all(f"hook {host} " in c for c in commands)

    connected_bytes = {p: p.read_bytes() for p in paths}
    code, out, err = run(capsys, *args)
    assert code == 0, err
    assert "already connected; nothing changed" in out
    assert all(p.read_bytes() == connected_bytes[p] for p in paths)
    assert all(len(backups(p)) == 1 for p in paths)  # no backup when nothing changes

    code, out, err = run(capsys, "disconnect", host)
    assert code == 0, err
    assert "disconnected" in out
    for path in paths:
        assert parsed(path) == original[path]
        assert path.read_bytes() == original_bytes[path]
    assert not list((env["project"] / ".github").rglob("*.json"))  # Copilot's own hooks file

    code, out, _ = run(capsys, "disconnect", host)
    assert code == 0 and "nothing of Engram found" in out


def test_claude_code_entries(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    claude_json, settings = install(env["home"], "claude-code")
    assert run(capsys, "connect", "claude-code", "--with-hooks")[0] == 0
    server = parsed(claude_json)["mcpServers"]["engram"]
    assert server["type"] == "stdio" and server["args"] == ["mcp"]
    assert os.path.basename(server["command"]) == "engram"
    hooks = parsed(settings)["hooks"]
    post = hooks["PostToolUse"]
    assert post[0]["matcher"] == "Edit|Write"  # the user's own hook is first and untouched
    assert post[-1]["matcher"] == "*"
    assert post[-1]["hooks"][0]["command"].endswith("hook claude-code PostToolUse")
    assert "matcher" not in hooks["SessionStart"][0]
    from engram.agents.adapters.claude_code import EVENTS

    registered = {e for e, groups in hooks.items() if engram_commands(groups)}
    assert registered <= set(EVENTS)
    assert {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd"} <= registered
    assert "PreToolUse" not in registered


def test_stale_engram_hook_is_replaced_not_doubled(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = env["home"] / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": "/old/venv/bin/engram hook claude-code Stop",
                                },
                                {"type": "command", "command": "say done"},
                            ]
                        }
                    ]
                }
            }
        )
    )
    assert run(capsys, "connect", "claude-code", "--with-hooks")[0] == 0
    stop = parsed(settings)["hooks"]["Stop"]
    commands = engram_commands(stop)
    assert len(commands) == 1 and not commands[0].startswith("/old/")
    assert stop[0]["hooks"] == [{"type": "command", "command": "say done"}]


def test_comments_are_kept_in_zed_jsonc(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (path,) = install(env["home"], "zed")
    code, out, _ = run(capsys, "connect", "zed")
    assert code == 0
    text = path.read_text()
    for comment in ("// Zed settings", "// the one I actually use", "/* MCP servers */"):
        assert comment in text
    assert parsed(path)["context_servers"]["engram"]["args"] == ["mcp"]
    assert "comments could not be kept" not in out


def test_toml_and_yaml_keep_comments(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    codex, _ = install(env["home"], "codex")
    (continue_yaml,) = install(env["home"], "continue")
    assert run(capsys, "connect", "codex", "--with-hooks")[0] == 0
    assert run(capsys, "connect", "continue")[0] == 0
    text = codex.read_text()
    assert "# Documentation lookups" in text and "# low | medium | high" in text
    data = parsed(codex)
    assert data["mcp_servers"]["engram"]["args"] == ["mcp"]
    assert data["mcp_servers"]["context7"]["env"] == {"CONTEXT7_LOG": "warn"}
    assert data["features"]["codex_hooks"] is True
    text = continue_yaml.read_text()
    assert "# local browser automation" in text and "# chat and autocomplete" in text
    assert [s["name"] for s in parsed(continue_yaml)["mcpServers"]] == ["Playwright", "engram"]


def test_codex_flag_set_by_the_user_survives_disconnect(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    config = env["home"] / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"\n\n[features]\ncodex_hooks = true\n')
    assert run(capsys, "connect", "codex", "--with-hooks")[0] == 0
    assert run(capsys, "disconnect", "codex")[0] == 0
    assert config.read_text() == 'model = "o3"\n\n[features]\ncodex_hooks = true\n'


def test_dry_run_prints_a_diff_and_writes_nothing(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    paths = install(env["home"], "cursor")
    before = {p: p.read_bytes() for p in paths}
    code, out, _ = run(capsys, "connect", "cursor", "--with-hooks", "--dry-run")
    assert code == 0
    assert f"--- {paths[0]}" in out and f"+++ {paths[0]}" in out
    assert '+    "engram": {' in out and "hook cursor sessionStart" in out
    assert "dry run" in out
    assert all(p.read_bytes() == before[p] for p in paths)
    assert not any(backups(p) for p in paths)
    assert not (env["config"] / "connected.json").exists()


def test_dry_run_of_a_new_file_and_of_disconnect(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "connect", "windsurf", "--dry-run")
    assert code == 0 and "--- /dev/null" in out
    assert not (env["home"] / ".codeium").exists()
    install(env["home"], "windsurf")
    assert run(capsys, "connect", "windsurf", "--with-hooks")[0] == 0
    code, out, _ = run(capsys, "disconnect", "windsurf", "--dry-run")
    assert code == 0 and '-    "engram": {' in out
    assert has_engram_server(parsed(env["home"] / ".codeium/windsurf/mcp_config.json"))


@pytest.mark.parametrize(
    "host,target,text,line",
    [
        ("claude-code", ".claude/settings.json", '{\n  "model": "opus",\n  "env": {,\n}\n', 3),
        ("codex", ".codex/config.toml", 'model = "o3"\n[mcp_servers\n', 2),
        ("continue", ".continue/config.yaml", "name: x\nmodels:\n  - a: [1,\n", 4),
        ("zed", ".config/zed/settings.json", '// c\n{\n  "a": 1 "b": 2\n}\n', 3),
    ],
)
def test_invalid_file_is_a_clear_error_and_nothing_changes(
    env: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
    host: str,
    target: str,
    text: str,
    line: int,
) -> None:
    paths = install(env["home"], host)
    bad = env["home"] / target
    bad.write_text(text)
    before = {p: p.read_bytes() for p in paths}
    code, out, err = run(capsys, "connect", host, "--with-hooks")
    assert code == 1
    assert str(bad) in err and f"line {line}" in err
    assert "Traceback" not in err
    assert all(p.read_bytes() == before[p] for p in paths)  # the valid sibling too
    assert not any(backups(p) for p in paths)
    assert run(capsys, "disconnect", host)[0] == 1


def test_wrong_shape_is_a_clear_error(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = env["home"] / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{"mcpServers": ["not", "an", "object"]}\n')
    code, _, err = run(capsys, "connect", "cursor")
    assert code == 1 and "mcpServers" in err and str(path) in err
    assert path.read_text() == '{"mcpServers": ["not", "an", "object"]}\n'


def test_missing_files_and_directories_are_created(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "connect", "cursor", "--with-hooks")
    assert code == 0 and "created" in out
    mcp, hooks = env["home"] / ".cursor/mcp.json", env["home"] / ".cursor/hooks.json"
    assert parsed(mcp) == {
        "mcpServers": {
            "engram": {"command": parsed(mcp)["mcpServers"]["engram"]["command"], "args": ["mcp"]}
        }
    }
    data = parsed(hooks)
    assert data["version"] == 1
    assert data["hooks"]["sessionStart"] == [{"command": engram_commands(data)[0]}]
    assert oct(mcp.stat().st_mode & 0o777) != oct(0o600)  # the umask's mode, not mkstemp's
    assert run(capsys, "disconnect", "cursor")[0] == 0
    assert not mcp.exists() and not hooks.exists()  # only Engram's entries were in them


def test_continue_refuses_to_shadow_a_legacy_config_json(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = env["home"] / ".continue" / "config.json"
    legacy.parent.mkdir()
    legacy.write_text('{"models": []}\n')
    code, _, err = run(capsys, "connect", "continue")
    assert code == 1 and "config.json" in err
    assert not (env["home"] / ".continue" / "config.yaml").exists()


def test_connected_json_records_hooks(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    install(env["home"], "claude-code")
    assert run(capsys, "connect", "claude-code", "--with-hooks")[0] == 0
    assert run(capsys, "connect", "cursor")[0] == 0
    record = json.loads((env["config"] / "connected.json").read_text())
    assert record["claude-code"]["hooks"] == str(env["home"] / ".claude/settings.json")
    assert record["claude-code"]["mcp"] == str(env["home"] / ".claude.json")
    assert record["cursor"]["hooks"] is None
    settings = load_settings(
        environ={
            "ENGRAM_CONFIG_DIR": str(env["config"]),
            "ENGRAM_DATA_DIR": str(env["config"].parent / "data"),
        }
    )
    assert hooks_connected(settings) == {"claude-code"}
    assert run(capsys, "connect", "claude-code")[0] == 0  # without --with-hooks: still hooked
    assert hooks_connected(settings) == {"claude-code"}
    assert run(capsys, "disconnect", "claude-code")[0] == 0
    assert hooks_connected(settings) == set()


def test_config_option_points_at_a_specific_file(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    custom = env["project"] / "elsewhere" / "mcp.json"
    code, out, _ = run(capsys, "connect", "gemini-cli", "--config", str(custom))
    assert code == 0 and str(custom) in out
    assert has_engram_server(parsed(custom))
    assert not (env["home"] / ".gemini").exists()
    assert run(capsys, "disconnect", "gemini-cli")[0] == 0  # finds it through connected.json
    assert not custom.exists()


def test_project_scope(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "connect", "claude-code", "--with-hooks", "--scope", "project")
    assert code == 0, err
    assert has_engram_server(parsed(env["project"] / ".mcp.json"))
    assert engram_commands(parsed(env["project"] / ".claude" / "settings.json"))
    assert not (env["home"] / ".claude.json").exists()
    code, _, err = run(capsys, "connect", "continue", "--scope", "project")
    assert code == 2 and "no project-scope" in err


def test_copilot_hooks_go_to_the_repository(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    install(env["home"], "copilot-cli")
    assert run(capsys, "connect", "copilot-cli", "--with-hooks")[0] == 0
    server = parsed(env["home"] / ".copilot/mcp-config.json")["mcpServers"]["engram"]
    assert server["type"] == "local" and server["tools"] == ["*"]
    hooks = parsed(env["project"] / ".github/hooks/engram.json")
    assert hooks["version"] == 1
    entry = hooks["hooks"]["sessionStart"][0]
    assert entry["type"] == "command" and entry["bash"].endswith("hook copilot-cli sessionStart")


def test_unknown_host_and_listing(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "connect", "notepad")
    assert code == 2 and "unknown host" in err and "claude-code" in err
    code, out, _ = run(capsys, "connect", "--list")
    assert code == 0
    for name in HOST_FILES:
        assert name in out
    assert "~/.codex/config.toml" in out and "~/.config/zed/settings.json" in out


def test_real_subprocess(tmp_path: Path) -> None:
    home = tmp_path / "home"
    install(home, "cursor")
    env = {
        **os.environ,
        "HOME": str(home),
        "ENGRAM_CONFIG_DIR": str(tmp_path / "config"),
        "ENGRAM_DATA_DIR": str(tmp_path / "data"),
        "PATH": os.path.dirname(ENGRAM) + os.pathsep + os.environ.get("PATH", ""),
    }
    env.pop("XDG_CONFIG_HOME", None)
    done = subprocess.run(
        [ENGRAM, "connect", "cursor", "--with-hooks"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    data = parsed(home / ".cursor/mcp.json")
    assert data["mcpServers"]["engram"]["command"] == ENGRAM  # the absolute path on PATH
    assert data["mcpServers"]["postgres"]["command"] == "npx"
    hook = parsed(home / ".cursor/hooks.json")["hooks"]["postToolUse"][0]["command"]
    assert hook == f"{ENGRAM} hook cursor postToolUse"
    again = subprocess.run(
        [ENGRAM, "connect", "cursor", "--with-hooks"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert again.returncode == 0 and "already connected" in again.stdout
    helped = subprocess.run(
        [ENGRAM, "connect", "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "--with-hooks" in helped.stdout and "~/.claude.json" in helped.stdout


def test_a_file_the_user_made_is_never_deleted(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = env["home"] / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{\n  "mcpServers": {}\n}\n')
    assert run(capsys, "connect", "cursor")[0] == 0
    assert run(capsys, "disconnect", "cursor")[0] == 0
    assert path.exists() and parsed(path) == {}  # the emptied container goes, the file stays


def test_hooks_config_option(env: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    hooks = env["project"] / "my-hooks.json"
    assert run(capsys, "connect", "windsurf", "--with-hooks", "--hooks-config", str(hooks))[0] == 0
    assert engram_commands(parsed(hooks))
    assert not (env["home"] / ".codeium/windsurf/hooks.json").exists()
    assert run(capsys, "disconnect", "windsurf", "--hooks-config", str(hooks))[0] == 0
    assert not hooks.exists()


# --- files the user keeps elsewhere or writes with CRLF ------------------------------------------


def test_a_symlinked_config_stays_a_link_and_its_target_is_edited(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Dotfile managers (stow, chezmoi, a dotfiles repository) link the config into place:
    connect edits the file the link points at and leaves the link alone."""
    claude_json, settings = install(env["home"], "claude-code")
    dotfiles = env["home"] / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    target = dotfiles / "settings.json"
    settings.replace(target)
    link = os.path.relpath(target, settings.parent)  # stow makes relative links
    settings.symlink_to(link)
    original = target.read_bytes()

    code, _, err = run(capsys, "connect", "claude-code", "--with-hooks")
    assert code == 0, err
    assert settings.is_symlink() and os.readlink(settings) == link
    assert engram_commands(parsed(target))
    assert contains(parsed(target), json.loads(original))
    assert not backups(settings) and [b.read_bytes() for b in backups(target)] == [original]
    assert not list(settings.parent.glob("*.engram-tmp"))

    code, _, err = run(capsys, "disconnect", "claude-code")
    assert code == 0, err
    assert settings.is_symlink() and os.readlink(settings) == link
    assert target.read_bytes() == original


def test_a_dangling_symlink_gets_its_target_created(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    settings = env["home"] / ".claude" / "settings.json"
    settings.parent.mkdir()
    target = env["home"] / "dotfiles" / "settings.json"
    target.parent.mkdir()
    settings.symlink_to(target)
    code, _, err = run(capsys, "connect", "claude-code", "--with-hooks")
    assert code == 0, err
    assert settings.is_symlink() and engram_commands(parsed(target))


@pytest.mark.parametrize("host", list(HOST_FILES))
def test_crlf_line_endings_are_kept(
    env: dict[str, Path], capsys: pytest.CaptureFixture[str], host: str
) -> None:
    paths = install(env["home"], host)
    for path in paths:
        path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    original = {p: p.read_bytes() for p in paths}
    args = ["connect", host] + (["--with-hooks"] if host in HOOK_HOSTS else [])

    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert any(p.read_bytes() != original[p] for p in paths)
    for path in paths:
        data = path.read_bytes()
        assert data.count(b"\n") == data.count(b"\r\n"), f"{path} has LF-only lines"
    assert has_engram_server([parsed(p) for p in paths])

    code, _, err = run(capsys, "disconnect", host)
    assert code == 0, err
    assert {p: p.read_bytes() for p in paths} == original
