"""Synthetic compression: one captured hook event becomes one compact, search-friendly observation.

No LLM is involved: the tool name (or, for hosts without one, the hook name and payload shape)
picks the kind, and a few regular expressions pull out what a later search needs. ``compress`` is
total: an odd payload degrades to a generic "tool" or "session" observation, so a capture is never
lost to a parsing detail.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engram.wire import EVENT_KINDS

DEFAULT_MAX_CHARS = 2000
"""Bound on ``Compressed.text``: a command, its error lines and an output excerpt fit."""
TITLE_MAX_CHARS = 120
MAX_ERRORS = 5
"""Error lines kept per event: the first few name the failure, later ones mostly repeat it."""
MAX_CONCEPTS = 6
SCAN_CHARS = 100_000
"""Longer outputs are scanned for errors at the head (20%) and tail (80%): failures print last."""

# Tool names as hook_key() spells them, across hosts (Claude Code, Codex, Gemini, Kimi, Copilot...).
_TOOL_KINDS = {
    tool: kind
    for kind, tools in {
        "command": "bash shell runshellcommand runcommand execcommand localshell runterminalcmd "
        "terminal shellcommand executecommand powershell",
        "edit": "edit multiedit write notebookedit applypatch patch writefile replace editfile "
        "writecode create createfile searchreplace writetofile strreplacefile strreplaceeditor",
        "read": "read readfile readmanyfiles view viewfile openfile notebookread",
        "search": "grep glob searchfilecontent codebasesearch grepsearch filesearch find search "
        "list ls listdirectory listdir findfiles",
        "web": "webfetch websearch googlewebsearch fetch fetchurl searchweb",
        "agent": "task agent subagent delegate runsubagent",
        "note": "todowrite settodolist writetodos updateplan exitplanmode savememory think",
    }.items()
    for tool in tools.split()
}
SESSION_LABELS = {
    "session_start": "Session started",
    "session_end": "Session ended",
    "subagent_stop": "Subagent finished",
    "notification": "Notification",
    "compact": "Context compacted",
    "agent_response": "Agent finished",
}
"""Event kinds that are not a tool call or a prompt, as an observation's title says them."""
TOOL_EVENTS = frozenset({"tool_pre", "tool_post", "tool_failure", "file_edit"})
# What a hook's name says when a client sent no eventKind (words any host may use; adapters
# always send the kind): checked in order, on the name as ``hook_key`` spells it.
_HOOK_WORDS = (
    ("subagentstart", "other"),  # a subagent starting is no kind of its own, and not its stop
    ("subagent", "subagent_stop"),
    ("prompt", "prompt"),
    ("sessionstart", "session_start"),
    ("sessionend", "session_end"),
    ("compact", "compact"),
    ("compress", "compact"),
    ("notification", "notification"),
    ("failure", "tool_failure"),
    ("stop", "agent_response"),
    ("response", "agent_response"),
    ("edit", "file_edit"),
    ("writecode", "file_edit"),
    ("pre", "tool_pre"),
    ("before", "tool_pre"),
)


def event_kind(event: Mapping[str, Any]) -> str:
    """What an observe event is (``engram.wire.EVENT_KINDS``): the ``eventKind`` its client
    sent, or, for a client that sent none, what its hook name and fields say."""
    sent = event.get("eventKind")
    if isinstance(sent, str) and sent in EVENT_KINDS:
        return sent
    hook = hook_key(_first(event, "hookType"))
    for word, kind in _HOOK_WORDS:
        if word in hook and (kind != "tool_pre" or hook.startswith(word)):
            return kind
    if _first(event, "toolName") or event.get("toolInput") not in (None, "", {}, []):
        return "tool_post"
    return "prompt" if _text(event.get("prompt")).strip() else "other"


_EXT_LANG = {
    ext: lang
    for lang, exts in {
        "python": "py pyi",
        "typescript": "ts tsx",
        "javascript": "js jsx mjs cjs",
        "go": "go",
        "rust": "rs",
        "java": "java",
        "kotlin": "kt",
        "ruby": "rb",
        "php": "php",
        "c": "c h",
        "cpp": "cc cpp hpp",
        "csharp": "cs",
        "swift": "swift",
        "shell": "sh bash",
        "sql": "sql",
        "markdown": "md",
        "yaml": "yml yaml",
        "toml": "toml",
        "html": "html",
        "css": "css scss",
        "terraform": "tf",
        "elixir": "ex exs",
    }.items()
    for ext in exts.split()
}
_CONCEPT_PROGRAMS = {
    "git": "git gh",
    "test": "pytest tox nox jest vitest mocha rspec phpunit",
    "python": "python python3 pip pip3 pytest tox nox ruff mypy flake8 pylint",
    "javascript": "node npm yarn pnpm bun jest vitest mocha eslint",
    "typescript": "tsc",
    "lint": "ruff mypy flake8 pylint eslint",
    "docker": "docker docker-compose podman",
    "kubernetes": "kubectl helm",
    "go": "go",
    "rust": "cargo",
    "build": "make cmake",
    "java": "mvn gradle",
    "database": "psql sqlite3 mysql",
    "http": "curl wget",
}
# Programs whose "test..." sub-command runs tests: `npm test`, `go test ./...`, `python -m pytest`.
_TEST_RUNNERS = "npm yarn pnpm bun go cargo make dotnet mvn gradle mix deno just python python3"
_WRAPPERS = {"sudo", "time", "env", "nice", "exec", "uv", "poetry", "pipenv", "npx", "run", "-m"}
# Commands that print content (files, logs, matches): "Error:" in their output is not their failure.
_CONTENT_PROGRAMS = {
    "cat",
    "head",
    "tail",
    "less",
    "grep",
    "rg",
    "find",
    "ls",
    "echo",
    "sed",
    "awk",
    "jq",
    "diff",
    "wc",
    "git diff",
    "git log",
    "git show",
    "git grep",
    "git blame",
}

_PATH_KEYS = ("file_path", "filePath", "absolute_path", "path", "notebook_path", "target_file")
_TEXT_KEYS = (
    "stdout",
    "stderr",
    "output",
    "llmContent",
    "content",
    "result",
    "textResultForLlm",
    "text",
    "error",
    "message",
    "file",
    "filenames",
    "results",
)  # in output order
_MESSAGE_KEYS = (
    "last_assistant_message",
    "lastAssistantMessage",
    "prompt_response",
    "response",
    "message",
    "text",
    "reason",
    "source",
)
_EXIT_KEYS = ("exit_code", "exitCode", "returncode", "exit_status", "exitStatus")
_EXIT_RE = re.compile(r"\bexit(?:ed with)?[ _](?:code|status)\b[\s:=]*(-?\d{1,5})\b", re.I)
_ERROR_RE = re.compile(
    r"^\s*(?:E\s+)?(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b(?::|$)"  # Python exception lines
    r"|(?i:\berror(?:\[\w+\]| TS\d+)?:)"  # error:, Error:, error[E0308]:, error TS2322:
    r"|^\s*(?:---\s+)?(?:FAILED|FAIL|ERROR)\b"  # pytest, jest, go test, unittest
    r"|^\s*(?:npm ERR!|npm error|fatal:|panic:)|\bmake(?:\[\d+\])?: \*\*\*"
    r"|\b[1-9]\d* (?:failed|failing|errors?)\b"  # "1 failed, 3 passed", "Found 2 errors"
    r"|command not found|No such file or directory"
)
_NOT_AN_ERROR = re.compile(r"(?i)\berror:\s*(?:\(none\)|none|null)?\s*$")  # Gemini: "Error: (none)"
_PATCH_FILE_RE = re.compile(
    r"^(?:\*\*\* (?:Add|Update|Delete) File:|\*\*\* Move to:|\+\+\+ (?:b/)?)\s*(\S.*?)\s*$", re.M
)


@dataclass(frozen=True)
class Compressed:
    """The observation derived from one event; ``text`` is what the indexes see."""

    kind: str
    title: str
    text: str
    files_read: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    concepts: tuple[str, ...] = ()


def compress(event: Mapping[str, Any], max_chars: int = DEFAULT_MAX_CHARS) -> Compressed:
    """Compress one normalised observe event (camelCase keys). Never raises on odd input."""
    ev = _mapping(event)
    limit = max_chars if isinstance(max_chars, int) and max_chars > 0 else DEFAULT_MAX_CHARS
    hook_name, tool = _first(ev, "hookType"), _first(ev, "toolName").strip()
    hook, raw_in, out = hook_key(hook_name), ev.get("toolInput"), ev.get("toolOutput")
    kind = event_kind(ev)
    prompt = _text(ev.get("prompt")).strip()  # Kimi sends a list of text parts
    has_tool = (
        bool(tool)
        or kind in TOOL_EVENTS
        or "mcp" in hook
        or (kind != "prompt" and raw_in not in (None, "", {}, []))
    )
    if kind in SESSION_LABELS or not (has_tool or prompt):
        label = SESSION_LABELS.get(kind) or f"{hook_name or 'Session'} event"
        found = (
            s if isinstance(s, str) else _first(_mapping(s), *_MESSAGE_KEYS)
            for s in (out, raw_in, ev)
        )  # wherever the adapter put the message
        message = next((m.strip() for m in found if m.strip()), "")
        failure = _text(ev.get("error")).strip()
        if failure or "error" in hook:  # a host-level error hook (Copilot's errorOccurred)
            error = failure or message or f"{label} without details"
            return _finish(
                "error", f"Error: {error}", limit, tail=error, errors=[one_line(error, 300)]
            )
        return _finish("session", f"{label}: {message}" if message else label, limit, tail=message)
    if prompt and (kind == "prompt" or not has_tool):
        return _finish("prompt", f"Prompt: {prompt}", limit, tail=prompt)
    return _tool_event(ev, kind, tool, limit)


def _tool_event(ev: Mapping[str, Any], event: str, tool: str, limit: int) -> Compressed:
    raw_in, out, project = ev.get("toolInput"), ev.get("toolOutput"), _first(ev, "project")
    inp, out_map = _mapping(raw_in), (out if isinstance(out, Mapping) else {})
    hook = hook_key(_first(ev, "hookType"))
    mcp = tool.lower().startswith("mcp_") or "mcp" in hook
    kind = (
        "tool"
        if mcp
        else _TOOL_KINDS.get(hook_key(tool))
        or (
            "command"
            if isinstance(inp.get("command"), (str, list))
            else "edit"
            if event == "file_edit"
            else "tool"
        )
    )
    flagged = True in (out_map.get("is_error"), out_map.get("isError"))  # also Copilot's below
    failure = _text(ev.get("error") or out_map.get("error")) or (
        _text(out) if flagged or out_map.get("resultType") == "failure" else ""
    )
    path = _first(inp, *_PATH_KEYS) or _first(out_map, *_PATH_KEYS)
    shown, tail = _display(path, project), _text(out)
    parts = [f"File: {path}"] if path and kind in ("edit", "read") else []
    read: list[str] = []
    modified: list[str] = []
    commands: list[str] = []
    concepts = [kind] if kind in ("web", "agent") else []
    # Outside commands the output is content, not a log: only explicitly flagged errors count.
    errors = _scan_errors(failure) or ([one_line(failure, 300)] if failure else [])
    if kind == "command":
        cmd = _command(inp, raw_in)
        tail = "\n".join(t for t in (_text(_mapping(out) or out), failure) if t)
        code = _exit_code(out_map or _mapping(out), tail)
        shows_content = all(
            prog in _CONTENT_PROGRAMS or " ".join([prog, *args[:1]]) in _CONTENT_PROGRAMS
            for prog, args in _segments(cmd)
        )
        if code or (code is None and not shows_content):  # a known exit 0 is a success
            errors = _scan_errors(tail) or errors
        if code and not errors:  # a silent non-zero exit is still a failure worth finding
            errors = [f"exit code {code}: {one_line(cmd)}"]
        suffix = f" (exit {code})" if code else " (failed)" if errors else ""
        short = one_line(cmd, TITLE_MAX_CHARS - len("Failed: Ran ``") - len(suffix))
        title = f"Ran `{short}`{suffix}" if cmd else f"Ran {tool or 'a command'}{suffix}"
        parts, commands = ([clip(f"$ {cmd}", max(limit // 4, 80))], [cmd]) if cmd else ([], [])
    elif kind == "edit":
        patch = raw_in if isinstance(raw_in, str) and not inp else _first(inp, "input", "patch")
        edits = [e for e in [inp, *_list(inp.get("edits"))] if isinstance(e, Mapping)]
        diff = "\n".join(d for d in (_diff(e, limit) for e in edits) if d)
        content = _first(inp, "content", "file_text", "new_content")
        modified = (
            [path] if path else [f for f in _PATCH_FILE_RE.findall(patch) if f != "/dev/null"]
        )
        names = ", ".join(_display(f, project) for f in modified[:3]) or "a file"
        names += f" (+{len(modified) - 3} more)" if len(modified) > 3 else ""
        if path and content and not diff:
            lines = content.count("\n") + (not content.endswith("\n"))
            title, tail = f"Wrote {shown} ({lines} lines)", content
        else:
            title, tail = f"Edited {names}", diff or patch or tail
    elif kind == "read":
        read = [path] if path else [p for p in _list(inp.get("paths")) if isinstance(p, str)]
        title, tail = f"Read {shown or ', '.join(read[:3]) or 'a file'}", clip(tail, limit // 3)
    elif kind == "search":
        pattern = _first(inp, "pattern", "query", "regex", "glob", "search_term", "q")
        where = _display(_first(inp, "path", "dir_path", "directory", "include"), project)
        title = (
            f"Listed {where or 'files'}"
            if not pattern
            else f"Searched for `{pattern}`" + (f" in {where}" if where else "")
        )
    elif kind == "web":
        ask = _first(inp, "query", "q", "prompt")  # Gemini's web_fetch has only a prompt
        url = _first(inp, "url", "uri") or next(iter(re.findall(r"https?://\S+", ask)), "")
        title, parts = (f"Fetched {url}" if url else f"Searched the web for `{ask}`"), [ask]
    elif kind == "agent":
        who = _first(inp, "subagent_type", "subagentType", "agent_type")
        task = _first(inp, "description", "task", "prompt") or tool
        title = f"Delegated to {who + ' ' if who else ''}agent: {task}"
        parts = [clip(_first(inp, "prompt"), limit // 3)]
    elif kind == "note":
        todos = [t for t in _list(inp.get("todos")) if isinstance(t, Mapping)]
        done = [t.get("status") in ("completed", "done") for t in todos]
        title = f"Updated todo list ({sum(done)}/{len(todos)} done)" if todos else tool
        tail = "\n".join(
            f"[{'x' if d else ' '}] {_first(t, 'content', 'title')}"
            for t, d in zip(todos, done, strict=True)
        ) or _text(raw_in)
    else:
        server, _, fn = tool.rpartition("__")
        server = server.rpartition("__")[2]  # "mcp__github__get_issue" -> github, get_issue
        title = f"Called {server}.{fn} (MCP)" if mcp and server else f"Called {tool or 'a tool'}"
        concepts = ["mcp", server.lower()] if mcp else []
        parts = ["Input: " + clip(_dump(raw_in), limit // 3)] if raw_in is not None else []
        tail = "Output: " + _dump(out) if out is not None else ""
    if event == "tool_failure" or "error" in hook:  # the tool call itself failed
        kind, title = "error", f"Failed: {title}"
        errors = errors or [f"{tool or 'tool call'} failed"]
    return _finish(
        kind,
        title,
        limit,
        parts=parts,
        tail=tail,
        read=read,
        modified=modified,
        commands=commands,
        errors=errors,
        concepts=concepts,
    )


def _finish(
    kind: str,
    title: str,
    limit: int,
    *,
    parts: Iterable[str] = (),
    tail: str = "",
    read: Iterable[str] = (),
    modified: Iterable[str] = (),
    commands: Iterable[str] = (),
    errors: Iterable[str] = (),
    concepts: Iterable[str] = (),
) -> Compressed:
    title = one_line(title) or "Event"
    errors, read, modified = _unique(errors)[:MAX_ERRORS], _unique(read), _unique(modified)
    commands = _unique(clip(c, 1000) for c in commands)
    head = "\n".join(p for p in (title, *parts) if p)
    tail = tail.rstrip().lstrip("\n")
    if len(tail) < 4 * TITLE_MAX_CHARS and one_line(tail, len(tail)) in title:
        tail = ""  # a short prompt or message is its own title
    body = clip(tail, limit - len(head) - 1, head_share=0.4)  # the tail end carries the outcome
    lost = [e for e in errors if e not in " ".join(f"{head} {body}".split())]
    if lost:  # error lines cut out of the excerpt are what a search most needs: keep them
        head += "\n" + "\n".join(lost)
        body = clip(tail, limit - len(head) - 1, head_share=0.4)
    text = f"{head}\n{body}" if body.strip() and limit - len(head) > 40 else head
    found = [*concepts, *(c for command in commands for c in command_concepts(command))]
    for path in (*read, *modified):
        name = path.replace("\\", "/").rpartition("/")[2].lower()
        found.append(_EXT_LANG.get(name.rpartition(".")[2], "") if "." in name else "")
        found.append("docker" if name.startswith(("dockerfile", "docker-compose")) else "")
        found.append(
            "test" if re.search(r"(^|/)tests?/|test_|_test\.|\.(test|spec)\.", path) else ""
        )
    return Compressed(
        kind,
        title,
        clip(text, limit),
        read,
        modified,
        commands,
        errors,
        _unique(found)[:MAX_CONCEPTS],
    )


def clip(text: str, max_chars: int, head_share: float = 0.5) -> str:
    """Shorten ``text`` to at most ``max_chars``, keeping head and tail around an omission marker.

    Cuts snap to a nearby line break when there is one, and never split a surrogate pair.
    """
    if len(text) <= max_chars:
        return text
    room = max_chars - len(f"\n… [{len(text)} chars omitted] …\n")  # its digits: an upper bound
    if room < 20:  # too small for head, marker and tail to be readable: a plain cut
        return text[: _safe(text, max(max_chars, 0), -1)]
    head_end = _safe(text, int(room * head_share), -1)
    tail_start = _safe(text, len(text) - (room - head_end), 1)
    newline = text.rfind("\n", int(head_end * 0.75), head_end)
    head_end = newline if newline > 0 else head_end
    newline = text.find("\n", tail_start, tail_start + (len(text) - tail_start) // 4)
    tail_start = newline + 1 if newline >= 0 else tail_start
    return f"{text[:head_end]}\n… [{tail_start - head_end} chars omitted] …\n{text[tail_start:]}"


def _safe(text: str, i: int, step: int) -> int:
    """Move a cut index by ``step`` when it falls between the halves of a surrogate pair."""
    pair = (
        0 < i < len(text)
        and "\ud800" <= text[i - 1] <= "\udbff"
        and "\udc00" <= text[i] <= "\udfff"
    )
    return i + step if pair else i


def one_line(text: str, width: int = TITLE_MAX_CHARS) -> str:
    """Collapse whitespace to single spaces and cut at ``width`` with an ellipsis."""
    window = 8 * width + 64  # bounded work: a title never needs more of a megabyte prompt
    flat = " ".join(text[:window].split())
    if len(flat) <= width and len(text) <= window:
        return flat
    return flat[: _safe(flat, max(width - 1, 0), -1)] + "…"


def hook_key(name: str) -> str:
    """A hook or tool name as compared across hosts: "post_run_command" -> "postruncommand"."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def command_concepts(command: str) -> list[str]:
    """Tool families a shell command belongs to ("test" for pytest, `npm test`, `go test`, ...)."""
    return [c for prog, args in _segments(command) for c in _program_concepts(prog, args)]


_SUBCOMMAND = re.compile(r"[a-z][\w:-]*\Z")


def family_invocations(command: str) -> list[tuple[str, str]]:
    """(family, how it was invoked) per piece of a shell line that belongs to a tool family:
    the program and up to two leading subcommand words, no paths, flags or test names
    (``go test ./internal/x -run Y`` is ("test", "go test"); ``pytest -q tests/a.py`` is
    ("test", "pytest")), so runs of one tool count together across sessions."""
    found = []
    for program, args in _segments(command):
        words: list[str] = []
        concepts = _program_concepts(program, args)
        if args[:1] == ["-m"] and len(args) > 1:  # python -m pytest: the module is the tool
            words, args = ["-m", args[1]], args[2:]
            concepts = list(dict.fromkeys([*concepts, *_program_concepts(words[1], args)]))
        for arg in args[:2] if not words else ():
            if not _SUBCOMMAND.match(arg):
                break
            words.append(arg)
        found += [(c, " ".join([program, *words])) for c in concepts]
    return found


def is_error_line(line: str) -> bool:
    """True for a line that reports a failure (an exception, ``error:``, FAILED, ...)."""
    return bool(_ERROR_RE.search(line)) and not _NOT_AN_ERROR.search(line)


def _scan_errors(text: str) -> list[str]:
    if len(text) > SCAN_CHARS:
        text = text[: SCAN_CHARS // 5] + "\n" + text[-(SCAN_CHARS * 4 // 5) :]
    lines = (line for line in text.splitlines() if _ERROR_RE.search(line))
    return list(_unique(one_line(ln, 300) for ln in lines if not _NOT_AN_ERROR.search(ln)))


def _exit_code(out: Mapping[str, Any], text: str) -> int | None:
    """The exit code in a tool output (its fields, or text like "Exit code 1"), None if unknown."""
    for scope in (out, _mapping(out.get("metadata"))):  # Codex nests it under metadata
        for value in (scope.get(key) for key in _EXIT_KEYS):
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    match = _EXIT_RE.search(text[:SCAN_CHARS])
    return int(match.group(1)) if match else None


def _command(inp: Mapping[str, Any], raw: Any) -> str:
    value = (
        raw
        if isinstance(raw, (str, list)) and not inp
        else (
            inp.get("command")
            or inp.get("cmd")
            or inp.get("command_line")
            or inp.get("commandLine")
        )
    )
    if isinstance(value, list):  # Codex: ["bash", "-lc", "pytest -q"]
        words = [str(v) for v in value]
        shell = len(words) == 3 and words[0].rpartition("/")[2] in ("bash", "sh", "zsh")
        return words[2] if shell and words[1] in ("-c", "-lc") else shlex.join(words)
    return value.strip() if isinstance(value, str) else ""


def _segments(command: str) -> list[tuple[str, list[str]]]:
    """(program, args) per piece of a shell line, with env vars, sudo, `uv run`, `-m` peeled off."""
    found = []
    for piece in re.split(r"&&|\|\||[;|\n]", command[:2000]):
        try:
            words = shlex.split(piece)
        except ValueError:  # unbalanced quotes: a heredoc or a half-typed line
            words = piece.split()
        while words and ("=" in words[0] or words[0] in _WRAPPERS):
            words = words[1:]
        if words:
            found.append((words[0].rpartition("/")[2].lower(), words[1:]))
    return found


def _program_concepts(program: str, args: list[str]) -> list[str]:
    found = [concept for concept, progs in _CONCEPT_PROGRAMS.items() if program in progs.split()]
    runs_tests = any(re.match(r"(test|unittest|pytest)\b", a) for a in args[:3])
    return ["test", *found] if runs_tests and program in _TEST_RUNNERS.split() else found


def _diff(edit: Mapping[str, Any], limit: int) -> str:
    old = clip(_first(edit, "old_string", "oldString"), limit // 3).splitlines()
    new = clip(_first(edit, "new_string", "newString"), limit // 3).splitlines()
    return "\n".join([*("- " + line for line in old), *("+ " + line for line in new)])


def project_relative(path: str, project: str) -> str:
    """``path`` relative to the project's folder when it lies inside it (project: a path or a
    name), else as given."""
    return _display(path, project)


def _display(path: str, project: str) -> str:
    """An absolute ``path`` made relative to the project folder (project: a path or a name)."""
    name = project.rstrip("/").rpartition("/")[2]
    return (path.partition(f"/{name}/")[2] or path) if name and path.startswith("/") else path


def _text(value: Any, depth: int = 0) -> str:
    """Readable text of any JSON value: known output fields first, JSON as the fallback."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, Mapping) and depth < 5:
        found = [
            ("stderr: " if key == "stderr" else "") + _text(value.get(key), depth + 1)
            for key in _TEXT_KEYS
            if value.get(key) not in (None, "", [], {})
        ]
        return "\n".join(found) if found else _dump(value)
    if isinstance(value, (list, tuple)) and depth < 5:
        return "\n".join(t for t in (_text(v, depth + 1) for v in value) if t)
    return _dump(value)


def _dump(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str, skipkeys=True)
    except (ValueError, RecursionError):  # circular or absurdly deep structures
        return f"<{type(value).__name__}>"


def _mapping(value: Any) -> Mapping[str, Any]:
    """A Mapping as is; a JSON object string (Cursor, Copilot tool arguments) parsed; else empty."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, str) and value.lstrip().startswith("{") and len(value) < 1_000_000:
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _first(data: Mapping[str, Any], *keys: str) -> str:
    """The first non-empty string (or number) among ``keys``."""
    for value in (data.get(key) for key in keys):
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value):
            return str(value)
    return ""


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for item in items if item))
