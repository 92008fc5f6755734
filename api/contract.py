"""The REST contract, once: every route with what its body and query hold. The gateway checks
each request's body against it before the route runs (every field missing, of the wrong type,
or out of its enum, length or range is named in one 422), and `GET /v1/openapi.json` is
generated from it, so the document and what is enforced cannot drift. Routes add what a schema
cannot say (one-of rules, ids that must exist); tests/test_contract.py checks that every route
of the app is here and that nothing here is a route the app lacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engram.graph import NODE_TYPES
from engram.wire import EVENT_KINDS, MAX_ID_CHARS

ANY = "any"


@dataclass(frozen=True)
class Field:
    name: str
    type: str | tuple[str, ...]  # JSON Schema type name(s), or ANY
    required: bool = False
    description: str = ""
    max_length: int | None = None
    min_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    enum: tuple[str, ...] | None = None
    items: str | None = None  # the type of an array's items


@dataclass(frozen=True)
class Route:
    method: str
    rule: str  # as Flask writes it: /v1/memories/<memory_id>
    summary: str
    body: tuple[Field, ...] | None = None  # None: the route reads no body
    query: tuple[Field, ...] = ()
    public: bool = False
    capture: bool = False  # a capture route: its refusals also say "status": "rejected"


def _id(name: str, required: bool = False, description: str = "") -> Field:
    return Field(name, "string", required, description, max_length=MAX_ID_CHARS, min_length=1)


def _text(name: str, most: int | None, required: bool = False) -> Field:
    """A string that may not be empty."""
    return Field(name, "string", required, max_length=most, min_length=1)


PROJECT = Field("project", "string", description='a project, or "*" for every project')
AGENT = _id("agentId", description="narrows to this agent's items and items without an agent")
LIMIT = Field("limit", "integer", minimum=1, maximum=100, description="page size")
CURSOR = Field("cursor", "string", description="nextCursor of the previous page")
SCOPE_QUERY = (PROJECT, AGENT)
PAGE = (LIMIT, CURSOR)
TIMESTAMP = Field(
    "timestamp", ("string", "number"), description="ISO 8601, or epoch seconds or milliseconds"
)

ROUTES: tuple[Route, ...] = (
    Route("GET", "/v1/livez", "Liveness: the process answers", public=True),
    Route("GET", "/v1/health", "Health: the store answers", public=True),
    Route("GET", "/v1/status", "Capture, queue, worker and index health, with fixes"),
    Route("GET", "/v1/openapi.json", "This document"),
    Route(
        "POST",
        "/v1/observe",
        "Capture one event into the inbox",
        capture=True,
        body=(
            _id("eventId", description="the host's own id; derived when absent"),
            _id("sessionId", True),
            _text("project", 200, True),
            _text("host", 64, True),
            _text("hookType", 64, True),
            Field(
                "eventKind",
                "string",
                enum=tuple(sorted(EVENT_KINDS)),
                description="what happened (engram.wire.EVENT_KINDS); inferred from the "
                "other fields when absent",
            ),
            _text("toolName", 200),
            Field("toolInput", ANY),
            Field("toolOutput", ANY),
            Field("prompt", "string"),
            TIMESTAMP,
            AGENT,
        ),
    ),
    Route(
        "GET",
        "/v1/capture",
        "The capture inbox: counts and entries by state",
        query=(Field("state", "string"), *PAGE),
    ),
    Route(
        "POST",
        "/v1/capture/retry",
        "Send dead letters again",
        body=(_id("eventId"), Field("all", "boolean")),
    ),
    Route(
        "POST",
        "/v1/sessions",
        "Start a session and get its context block",
        body=(
            _id("sessionId", True),
            _text("project", 200, True),
            Field("cwd", "string", max_length=4096),
            Field("host", "string", max_length=64),
            AGENT,
            Field("budgetTokens", "integer", minimum=1, maximum=100_000),
            Field("query", "string"),
            TIMESTAMP,
        ),
    ),
    Route(
        "POST",
        "/v1/sessions/<session_id>/end",
        "End a session (its summary follows)",
        body=(
            Field("project", "string", max_length=200),
            Field("host", "string", max_length=64),
            Field("cwd", "string", max_length=4096),
            AGENT,
            TIMESTAMP,
        ),
    ),
    Route(
        "GET",
        "/v1/sessions",
        "Sessions, newest first",
        query=(*SCOPE_QUERY, Field("status", "string"), *PAGE),
    ),
    Route("GET", "/v1/sessions/<session_id>", "One session", query=SCOPE_QUERY),
    Route(
        "GET",
        "/v1/sessions/<session_id>/observations",
        "A session's timeline",
        query=(*SCOPE_QUERY, *PAGE),
    ),
    Route("GET", "/v1/observations/<observation_id>", "One observation", query=SCOPE_QUERY),
    Route(
        "DELETE", "/v1/observations/<observation_id>", "Forget an observation", query=SCOPE_QUERY
    ),
    Route(
        "POST",
        "/v1/search",
        "Hybrid search",
        body=(
            _text("query", 4000, True),
            PROJECT,
            AGENT,
            Field("mode", "string", enum=("hybrid", "keyword", "bm25", "semantic", "vector")),
            LIMIT,
            Field(
                "perSession",
                "integer",
                minimum=1,
                maximum=100,
                description="at most this many hits of one session (default 3)",
            ),
            Field("kinds", "array", items="string"),
            Field(
                "since",
                ("string", "number"),
                description="only items from this time on: ISO 8601, or epoch seconds or ms",
            ),
            Field("until", ("string", "number"), description="only items from before this time"),
        ),
    ),
    Route(
        "POST",
        "/v1/context",
        "The context block for a project",
        body=(
            PROJECT,
            AGENT,
            Field("query", "string"),
            _id("sessionId"),
            Field("budgetTokens", "integer", minimum=1, maximum=100_000),
            Field(
                "forPrompt",
                "boolean",
                description="a prompt hook asks: only what clears the relevance bar, from other "
                "sessions, each item once per session; needs query and sessionId",
            ),
        ),
    ),
    Route(
        "GET",
        "/v1/graph/facts",
        "Facts between named things, with when each held",
        query=(
            *SCOPE_QUERY,
            Field("entity", "string", max_length=300),
            Field("history", "string", enum=("true", "false")),
            LIMIT,
        ),
    ),
    Route(
        "POST",
        "/v1/graph/query",
        "Entities, their neighbours and the documents about them",
        body=(
            PROJECT,
            AGENT,
            _text("entity", 300),
            _text("query", 4000),
            Field("type", "string", enum=NODE_TYPES),
            Field("depth", "integer", minimum=1, maximum=2),
            LIMIT,
        ),
    ),
    Route(
        "POST",
        "/v1/memories",
        "Save a memory",
        body=(
            _text("content", 20_000, True),
            Field("project", "string", max_length=200),
            Field("scope", "string", max_length=64),
            Field("concepts", "array", items="string"),
            AGENT,
        ),
    ),
    Route(
        "GET",
        "/v1/memories",
        "Memories, newest first, or matching a query",
        query=(
            *SCOPE_QUERY,
            Field("query", "string"),
            Field("scope", "string"),
            Field("evicted", "string", enum=("true", "false")),
            *PAGE,
        ),
    ),
    Route(
        "POST",
        "/v1/memories/forget",
        "Forget several memories (audited; the viewer's bulk forget)",
        body=(
            Field("ids", "array", True, items="string", description="1-500 memory ids"),
            Field("reason", "string", max_length=500),
        ),
        query=SCOPE_QUERY,
    ),
    Route("GET", "/v1/memories/<memory_id>", "One memory with its versions", query=SCOPE_QUERY),
    Route(
        "PATCH",
        "/v1/memories/<memory_id>",
        "A new version of a memory",
        body=(_text("content", 20_000, True),),
        query=SCOPE_QUERY,
    ),
    Route(
        "POST",
        "/v1/memories/<memory_id>/restore",
        "Restore an evicted (decayed) memory",
        query=SCOPE_QUERY,
    ),
    Route(
        "DELETE",
        "/v1/memories/<memory_id>",
        "Forget a memory",
        query=(*SCOPE_QUERY, Field("reason", "string")),
    ),
    Route("GET", "/v1/projects/profile", "A project's profile", query=SCOPE_QUERY),
    Route("GET", "/v1/observations", "Recent observations", query=(*SCOPE_QUERY, *PAGE)),
    Route(
        "GET",
        "/v1/files/history",
        "Observations that read or changed a file",
        query=(*SCOPE_QUERY, Field("path", "string", True, max_length=4096), *PAGE),
    ),
    Route(
        "POST",
        "/v1/sync/files",
        "One memory file's facts (engram watch)",
        body=(
            Field("user", "string", True),
            Field("project", "string", True),
            Field("scope", "string"),
            Field("tool", "string", enum=("claude-code", "codex", "gemini", "cursor", "copilot")),
            Field("root", "string"),
            Field("relpath", "string"),
            Field("path", "string"),
            Field("contentHash", "string"),
            Field("facts", "array", items="object"),
            Field("force", "boolean"),
        ),
    ),
    Route("GET", "/v1/export", "The whole store as one document"),
    Route(
        "POST",
        "/v1/import",
        "Load an export document",
        body=(
            Field("strategy", "string", enum=("merge", "replace", "skip")),
            Field("data", "object", description="the export document"),
        ),
    ),
    Route(
        "POST",
        "/v1/viewer/links",
        "A one-time viewer sign-in link (bearer secret only; engram open)",
    ),
    Route("POST", "/v1/viewer/logout", "End the viewer session of this browser"),
    Route(
        "GET",
        "/v1/events",
        "Server-Sent Events: observations, sessions, memories, capture problems, counts",
        query=(Field("lastEventId", "string", description="resume after this id"),),
    ),
    Route(
        "GET",
        "/v1/audit",
        "The audit trail",
        query=(Field("targetId", "string"), Field("action", "string"), *PAGE),
    ),
)
BY_RULE = {(r.method, r.rule): r for r in ROUTES}

_PY = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _is(value: Any, kind: str) -> bool:
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _PY[kind])


def problems(route: Route, body: dict[str, Any]) -> dict[str, str]:
    """Every field of ``body`` that breaks what the contract declares (presence, type, enum,
    item type, length, range), all at once. What types cannot say is the route's to check."""
    found: dict[str, str] = {}
    for field in route.body or ():
        value = body.get(field.name)
        if value is None:
            if field.required:
                found[field.name] = "required"
            continue
        if field.type == ANY:
            continue
        kinds = (field.type,) if isinstance(field.type, str) else field.type
        if not any(_is(value, k) for k in kinds):
            found[field.name] = f"must be {' or '.join(_NAMES[k] for k in kinds)}"
        elif field.enum is not None and value not in field.enum:
            found[field.name] = "one of " + ", ".join(field.enum)
        elif field.items is not None and not all(_is(v, field.items) for v in value):
            found[field.name] = f"a list of {_NAMES[field.items]}s"
        elif isinstance(value, str) and not _within(len(value), field.min_length, field.max_length):
            found[field.name] = _length(field)
        elif isinstance(value, int) and not _within(value, field.minimum, field.maximum):
            found[field.name] = f"from {field.minimum} to {field.maximum}"
    return found


def _length(field: Field) -> str:
    if field.min_length and field.max_length:
        return f"{field.min_length} to {field.max_length} characters"
    if field.min_length:
        return "must not be empty"
    return f"at most {field.max_length} characters"


def _within(value: int, least: int | None, most: int | None) -> bool:
    return (least is None or value >= least) and (most is None or value <= most)


_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
}


def _schema(field: Field) -> dict[str, Any]:
    if field.type == ANY:
        schema: dict[str, Any] = {}
    elif isinstance(field.type, tuple):
        schema = {"oneOf": [{"type": t} for t in field.type]}
    else:
        schema = {"type": field.type}
    for key, value in (
        ("maxLength", field.max_length),
        ("minLength", field.min_length),
        ("minimum", field.minimum),
        ("maximum", field.maximum),
        ("enum", list(field.enum) if field.enum else None),
        ("description", field.description or None),
    ):
        if value is not None:
            schema[key] = value
    if field.items is not None:
        schema["items"] = {"type": field.items}
    return schema


def openapi(version: str) -> dict[str, Any]:
    """An OpenAPI 3.1 document of ROUTES."""
    error = {"$ref": "#/components/schemas/Error"}
    paths: dict[str, Any] = {}
    for route in ROUTES:
        path = route.rule.replace("<", "{").replace(">", "}")
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _path_names(route.rule)
        ] + [
            {"name": f.name, "in": "query", "required": f.required, "schema": _schema(f)}
            for f in route.query
        ]
        operation: dict[str, Any] = {
            "summary": route.summary,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": {}}}},
                "4XX": {
                    "description": "refused; never resent as is",
                    "content": {"application/json": {"schema": error}},
                },
            },
        }
        if parameters:
            operation["parameters"] = parameters
        if route.body is not None:
            operation["requestBody"] = {
                "required": any(f.required for f in route.body),
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {f.name: _schema(f) for f in route.body},
                            "required": [f.name for f in route.body if f.required],
                        }
                    }
                },
            }
        if route.public:
            operation["security"] = []
        paths.setdefault(path, {})[route.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Engram", "version": version},
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": {"type": "string"},
                                "message": {"type": "string"},
                                "details": {"type": "object"},
                            },
                        }
                    },
                }
            },
        },
    }


def _path_names(rule: str) -> list[str]:
    return [part[1:-1] for part in rule.split("/") if part.startswith("<")]
