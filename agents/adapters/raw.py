"""Raw: the door for anything that can run a command with JSON on stdin and has no adapter of
its own (a script, a CI job, an agent Engram does not know yet).

The payload is already Engram's observe shape, camelCase (``sessionId``, ``project``, ``cwd``,
``hookType``, ``toolName``, ``toolInput``, ``toolOutput``, ``prompt``, ``message``, ``error``,
``timestamp``, ``eventId``, ``turnId``, ``transcriptPath``) or the same names in snake_case. The
``<event>`` argument of ``engram hook raw <event>`` is the hook type; its kind is inferred from
common spellings (``SessionStart``, ``session_start``, ``PostToolUse``, ``tool_post``...), and
"other" otherwise.

A caller's own ``eventId`` becomes the event's tool-use id, so the gateway's eventId is
``raw:<session>:<event>:<eventId>``: a resend with the same eventId is a duplicate.

Session start prints the context block as plain text; every other event prints nothing.
"""

from __future__ import annotations

from engram.agents.adapters._common import epoch_seconds, obj, opt_str
from engram.agents.contract import KINDS, BadPayload, HookEvent, text, valid_id, valid_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST = "raw"
DISPLAY = "Raw JSON (any other host)"
EVENTS = {kind: kind for kind in sorted(KINDS) if kind != "other"}
_ALIASES = {
    "start": "session_start",
    "userpromptsubmit": "prompt",
    "userprompt": "prompt",
    "pretooluse": "tool_pre",
    "beforetool": "tool_pre",
    "posttooluse": "tool_post",
    "aftertool": "tool_post",
    "posttoolusefailure": "tool_failure",
    "fileedit": "file_edit",
    "stop": "agent_response",
    "agentstop": "agent_response",
    "subagentstop": "subagent_stop",
    "precompact": "compact",
    "end": "session_end",
}
_KINDS_BY_KEY = {**{k.replace("_", ""): k for k in EVENTS}, **_ALIASES}


def kind_of(hook: str) -> str:
    """``SessionStart``, ``session-start`` and ``session_start`` are all session_start."""
    key = "".join(c for c in hook.lower() if c.isalnum())
    return _KINDS_BY_KEY.get(key, "other")


def _pick(payload: dict[str, Any], camel: str, snake: str) -> Any:
    return payload[camel] if payload.get(camel) is not None else payload.get(snake)


def normalise(hook: str, payload: Any) -> HookEvent:
    payload = obj(payload)
    project = opt_str(payload, "project")
    if project is not None and (len(project) > 200 or any(ord(c) < 32 for c in project)):
        raise BadPayload("project must be a short name without control characters")
    return HookEvent(
        HOST,
        hook,
        kind_of(hook),
        session_id=valid_id(_pick(payload, "sessionId", "session_id"), "sessionId"),
        turn_id=valid_id(_pick(payload, "turnId", "turn_id"), "turnId"),
        tool_use_id=valid_id(_pick(payload, "eventId", "event_id"), "eventId"),
        cwd=valid_path(payload.get("cwd"), "cwd"),
        project=project,
        transcript_path=valid_path(
            _pick(payload, "transcriptPath", "transcript_path"), "transcriptPath"
        ),
        tool_name=opt_str(payload, "toolName", "tool_name"),
        tool_input=_pick(payload, "toolInput", "tool_input"),
        tool_output=_pick(payload, "toolOutput", "tool_output"),
        prompt=text(payload.get("prompt")),
        message=text(payload.get("message")),
        error=text(payload.get("error")),
        timestamp=epoch_seconds(payload.get("timestamp")),
    )


def respond(event: HookEvent, context: str | None) -> str:
    if event.kind != "session_start" or not context:
        return ""
    return context
