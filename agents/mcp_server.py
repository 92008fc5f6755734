"""Engram's MCP server: the memory tools, resources and prompts any MCP client gets.

Every tool is a thin door onto the REST API, so MCP and REST validate, scope and audit alike:
a tool sends one REST request through a backend and returns the answer with the ``mode`` that
answered it.

- ``gateway``: the running gateway, over HTTP (``engram mcp`` over stdio, the default), or the
  gateway's own app in-process (``/mcp`` over streamable HTTP, ``api/mcp_http.py``);
- ``local``: no gateway answered, so ``engram mcp`` opened the store itself (the embedded
  default's SQLite, or whatever ENGRAM_DATABASE_URL names) and serves the same REST routes
  in-process. Save and recall work; the vector index is left to the gateway (two processes must
  not share Chroma's files), so search there is keyword and graph.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol
from urllib.parse import quote, urlencode

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from pydantic import Field

from engram.agents.contract import project_for
from engram.settings import Settings
from engram.wire import Unreachable

if TYPE_CHECKING:
    from flask import Flask

INSTRUCTIONS = """\
Engram is this project's long-term memory across agent sessions: what was done, decided, \
broken and fixed before. Call `get_context` at the start of a task, `search` (or `recall` for \
exact words) before re-investigating something, and `save_memory` for a lesson, decision or \
fact the next session should know. `project` defaults to the repository you run in."""

INVALID_PARAMS = -32602
"""JSON-RPC's error code for bad parameters (a prompt called without what it needs)."""
MAX_INLINE_EXPORT_CHARS = 200_000
"""An export larger than this is not returned inline (it would flood the agent's context)."""
RETRY_GATEWAY_SECONDS = 30.0
"""After falling back to the local store, how long before the gateway is tried again."""


class BackendError(Exception):
    """The REST API refused the request; the message is its error message."""


class AppBackend:
    """REST requests into a Flask app in this process (the gateway's own, or the fallback's)."""

    def __init__(self, app: Any, secret: str, mode: str) -> None:
        self.client = app.test_client()
        self.headers = {"Authorization": f"Bearer {secret}"}
        self.mode = mode

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
        response = self.client.open(path, method=method, json=body, headers=self.headers)
        return response.status_code, response.get_json(silent=True), self.mode


class ProxyBackend:
    """REST requests to the gateway at ENGRAM_URL; the secret goes only to loopback unless
    ENGRAM_SECRET was set."""

    mode = "gateway"

    def __init__(self, settings: Settings) -> None:
        from engram.client import Client
        from engram.secret import client_secret

        self.client = Client(
            settings.gateway_url,
            client_secret(settings),
            explicit_secret=bool(settings.secret),
            timeout=30.0,
        )

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
        status, answer = self.client.request(method, path, body)  # raises Unreachable
        return status, answer, self.mode


class LocalGateway(Protocol):
    """Opens a gateway on this machine's store, in this process, without a worker (the
    composition root, ``engram.cli.server.local_gateway``, provides it)."""

    def __call__(self, settings: Settings) -> Any: ...


class FallbackBackend:
    """The gateway when it answers, else the store opened in this process (``local``).

    Only for a gateway on this machine (a loopback ENGRAM_URL) whose store is here: for a
    remote gateway a local store would be a different one, and what an agent saved there would
    never reach the team. Only when the connection was refused: a request that timed out may
    have been carried out, and repeating it locally would do it twice."""

    def __init__(self, settings: Settings, open_local: LocalGateway) -> None:
        from engram.client import is_loopback_url

        self.settings = settings
        self.open_local = open_local
        self.may_fall_back = is_loopback_url(settings.gateway_url)
        self.proxy = ProxyBackend(settings)
        self.local: AppBackend | None = None
        self.gateway: Any = None
        self.down_since: float | None = None
        self.lock = threading.Lock()

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
        if self.down_since is None or time.monotonic() - self.down_since > RETRY_GATEWAY_SECONDS:
            try:
                answer = self.proxy.request(method, path, body)
                self.down_since = None
                return answer
            except Unreachable as exc:
                if not exc.refused or not self.may_fall_back or not self._store_exists():
                    raise
                self.down_since = time.monotonic()
        return self._local().request(method, path, body)

    def _store_exists(self) -> bool:
        """A store to fall back on: any configured database, or the embedded default's SQLite
        file (never a new, empty one that nothing would ever read)."""
        url = self.settings.database_url
        if not url.startswith("sqlite:///"):
            return True
        return os.path.exists(url[len("sqlite:///") :])

    def _local(self) -> AppBackend:
        with self.lock:
            if self.local is None:
                self.gateway = self.open_local(self.settings)
                self.local = AppBackend(self.gateway.app, self.gateway.secret, "local")
            return self.local

    def close(self) -> None:
        if self.gateway is not None:
            self.gateway.close()


Backend = AppBackend | ProxyBackend | FallbackBackend

# --- argument types, each described for the agent that fills it in ---------------------------

Project = Annotated[
    str | None,
    Field(
        description="Project name. Omit it: it defaults to the repository this server runs in.",
        max_length=200,
    ),
]
Query = Annotated[
    str, Field(description="What to look for, in words.", min_length=1, max_length=4000)
]
Limit = Annotated[int, Field(description="How many results at most.", ge=1, le=100)]
Cursor = Annotated[
    str | None, Field(description="nextCursor from the previous page, to continue a list.")
]


Registrar = Callable[..., Callable[[Callable[..., Any]], Any]]
"""``tool(name, core=False)``: registers the decorated function as a tool when the configured set
(ENGRAM_MCP_TOOLS) includes it."""
Caller = Callable[..., tuple[Any, str]]
"""``call(method, path, body=None, *, missing_ok=False, error=ToolError)``: the REST answer and
the mode ("gateway" or "local") that gave it; a refusal raises ``error``."""
ProjectOf = Callable[..., str]
"""``project_of(project, error=ToolError)``: the project a tool acts on."""


def build_server(
    backend: Backend,
    *,
    settings: Settings | None = None,
    tools: str = "core",
    local_client: bool = True,
) -> MCPServer:
    """The MCP server over ``backend``. ``tools`` is ENGRAM_MCP_TOOLS: core or all.
    ``local_client``: the client runs where this server runs (stdio), so a tool called without
    ``project`` means the repository this server was started in. Over HTTP the server's folder
    means nothing to the client: only ENGRAM_PROJECT is a default, else ``project`` is needed."""
    server = MCPServer("engram", instructions=INSTRUCTIONS, log_level="WARNING")
    configured = settings.project if settings else ""
    default_project = configured or (project_for(os.getcwd()) if local_client else "")

    def call(
        method: str,
        path: str,
        body: Any = None,
        *,
        missing_ok: bool = False,
        error: Callable[[str], Exception] = ToolError,
    ) -> tuple[Any, str]:
        """The REST answer and the mode that gave it; a refusal raises ``error`` with the API's
        message (a 404 becomes None with ``missing_ok``)."""
        try:
            status, answer, mode = backend.request(method, path, body)
        except Unreachable as exc:
            raise error(_unreachable_text(exc)) from None
        if status == 404 and missing_ok:
            return None, mode
        if status >= 400:
            raise error(_error_text(status, answer))
        return answer, mode

    def project_of(project: str | None, error: Callable[[str], Exception] = ToolError) -> str:
        if project and project.strip():
            return project.strip()
        if not default_project:
            raise error(
                "project is required: name the project (over HTTP there is no "
                "working directory to take it from)"
            )
        return default_project

    def tool(name: str, *, core: bool = False) -> Callable[[Callable[..., Any]], Any]:
        """Register the function as a tool when the configured set includes it."""

        def register(fn: Callable[..., Any]) -> Any:
            if core or tools == "all":
                server.tool(name=name, description=(fn.__doc__ or "").strip())(fn)
            return fn

        return register

    for group in (_core_tools, _session_tools, _memory_tools, _admin_tools):
        group(tool, call, project_of)  # in this order: the order clients list them
    _resources_and_prompts(server, call, project_of)
    return server


def _core_tools(tool: Registrar, call: Caller, project_of: ProjectOf) -> None:
    """The six tools every client lists: save, the two searches, context, details, status."""

    @tool("save_memory", core=True)
    def save_memory(
        content: Annotated[
            str,
            Field(
                description="The fact, decision or lesson, written to be "
                "understood without this conversation.",
                min_length=1,
                max_length=20_000,
            ),
        ],
        project: Project = None,
        scope: Annotated[
            str,
            Field(
                description='"project" (default) or "global" for what holds in every project.',
                max_length=64,
            ),
        ] = "project",
        concepts: Annotated[list[str] | None, Field(description="Keywords it is about.")] = None,
    ) -> dict[str, Any]:
        """Save something the next sessions should know: a decision and why, a lesson from a
        failure, a convention, a fact about the codebase. Saved memories are searched first and
        injected at session start. Returns the memory with its id."""
        body = {
            "content": content,
            "project": project_of(project),
            "scope": scope,
            "concepts": concepts or [],
        }
        answer, mode = call("POST", "/v1/memories", body)
        return {"mode": mode, "memory": answer}

    @tool("recall", core=True)
    def recall(query: Query, project: Project = None, limit: Limit = 10) -> dict[str, Any]:
        """Keyword search (BM25) over this project's past sessions, observations and memories.
        Use it for exact names: a function, file, error message or command. Returns ranked hits
        with id, kind, sessionId, score and text; get_observations gives a hit's details."""
        return _search(call, query, project_of(project), limit, "keyword")

    @tool("search", core=True)
    def search(query: Query, project: Project = None, limit: Limit = 10) -> dict[str, Any]:
        """Smart search: keyword, meaning (embeddings) and the knowledge graph together. Use it
        before re-investigating a problem ("why did the export job OOM?", "how do we paginate?").
        Returns ranked hits with id, kind, sessionId, score and text."""
        return _search(call, query, project_of(project), limit, "hybrid")

    @tool("get_context", core=True)
    def get_context(
        project: Project = None,
        query: Annotated[
            str | None,
            Field(description="The task at hand, to pick relevant memories.", max_length=4000),
        ] = None,
        budget_tokens: Annotated[
            int | None,
            Field(
                description="Size of the block in tokens; the gateway's ENGRAM_CONTEXT_BUDGET_TOKENS "
                "when omitted.",
                ge=100,
                le=20_000,
            ),
        ] = None,
    ) -> dict[str, Any]:
        """The memory block a new session starts with: the project profile, memories relevant to
        the task, the last session's summary and its open items, within a token budget. Call it
        at the start of a task."""
        body: dict[str, Any] = {"project": project_of(project)}
        if budget_tokens is not None:
            body["budgetTokens"] = budget_tokens
        if query:
            body["query"] = query
        answer, mode = call("POST", "/v1/context", body)
        return {
            "mode": mode,
            "context": answer.get("context"),
            "tokens": answer.get("tokens"),
            "budgetTokens": answer.get("budgetTokens"),
            "items": answer.get("items"),
            "omitted": answer.get("omitted"),
        }

    @tool("get_observations", core=True)
    def get_observations(
        ids: Annotated[
            list[str],
            Field(
                description="Observation ids (obs_...) from search, recall or a timeline.",
                min_length=1,
                max_length=20,
            ),
        ],
    ) -> dict[str, Any]:
        """The full record of observations by id: the tool call's input and output, the prompt,
        files read and changed, commands, errors. Use it after search or recall."""
        found: list[Any] = []
        missing: list[str] = []
        mode = ""
        for ident in ids:
            answer, mode = call("GET", f"/v1/observations/{quote(ident, safe='')}", missing_ok=True)
            if answer is None:
                missing.append(ident)
            else:
                found.append(answer)
        return {"mode": mode, "observations": found, "notFound": missing}

    @tool("status", core=True)
    def status() -> dict[str, Any]:
        """Whether Engram is healthy and what to do when it is not: store, queue, workers,
        captures waiting, dead letters, index sizes, problems with their fixes."""
        answer, mode = call("GET", "/v1/status")
        return {"mode": mode, "status": answer}


def _session_tools(tool: Registrar, call: Caller, project_of: ProjectOf) -> None:
    """Sessions, files and projects (ENGRAM_MCP_TOOLS=all)."""

    @tool("list_sessions")
    def list_sessions(
        project: Project = None, limit: Limit = 20, cursor: Cursor = None
    ) -> dict[str, Any]:
        """Past sessions of the project, newest first, with their summaries. Returns items and
        nextCursor."""
        answer, mode = call(
            "GET", "/v1/sessions?" + _query(project=project_of(project), limit=limit, cursor=cursor)
        )
        return {"mode": mode, **answer}

    @tool("session_timeline")
    def session_timeline(
        session_id: Annotated[
            str, Field(description="The session's id.", min_length=1, max_length=200)
        ],
        limit: Limit = 50,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """What happened in one session, in order: prompts, tool calls, edits, errors."""
        path = f"/v1/sessions/{quote(session_id, safe='')}/observations?"
        answer, mode = call("GET", path + _query(limit=limit, cursor=cursor))
        return {"mode": mode, **answer}

    @tool("file_history")
    def file_history(
        path: Annotated[
            str,
            Field(
                description="A file path, absolute or relative to the repository (app/login.py).",
                min_length=1,
                max_length=4096,
            ),
        ],
        project: Project = None,
        limit: Limit = 20,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Every recorded read and change of a file, newest first: who touched it, why, what
        broke. Use it before changing a file with a history."""
        answer, mode = call(
            "GET",
            "/v1/files/history?"
            + _query(path=path, project=project_of(project), limit=limit, cursor=cursor),
        )
        return {"mode": mode, **answer}

    @tool("project_profile")
    def project_profile(project: Project = None) -> dict[str, Any]:
        """What the project is about: sessions and observations recorded, the most touched
        files, the usual commands, its main concepts."""
        answer, mode = call("GET", "/v1/projects/profile?" + _query(project=project_of(project)))
        return {"mode": mode, "profile": answer}


def _memory_tools(tool: Registrar, call: Caller, project_of: ProjectOf) -> None:
    """Memories and the knowledge graph (ENGRAM_MCP_TOOLS=all)."""

    @tool("list_memories")
    def list_memories(
        project: Project = None,
        query: Annotated[
            str | None, Field(description="Only memories matching these words.", max_length=4000)
        ] = None,
        limit: Limit = 20,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """Saved memories of the project (current versions), newest first or matching a
        query."""
        answer, mode = call(
            "GET",
            "/v1/memories?"
            + _query(project=project_of(project), query=query, limit=limit, cursor=cursor),
        )
        return {"mode": mode, **answer}

    @tool("update_memory")
    def update_memory(
        memory_id: Annotated[
            str, Field(description="The memory's id (mem_...).", min_length=1, max_length=200)
        ],
        content: Annotated[
            str, Field(description="The corrected content.", min_length=1, max_length=20_000)
        ],
    ) -> dict[str, Any]:
        """Correct a saved memory. The old version is kept as history and never returned by
        search again."""
        answer, mode = call(
            "PATCH", f"/v1/memories/{quote(memory_id, safe='')}", {"content": content}
        )
        return {"mode": mode, "memory": answer}

    @tool("forget")
    def forget(
        item_id: Annotated[
            str,
            Field(
                description="A memory id (mem_...) or observation id (obs_...).",
                min_length=1,
                max_length=200,
            ),
        ],
        reason: Annotated[
            str | None, Field(description="Why, for the audit trail.", max_length=500)
        ] = None,
    ) -> dict[str, Any]:
        """Forget a memory or an observation that is wrong or must not be kept. Audited; a
        forgotten observation is never captured again from a replay."""
        if item_id.startswith("obs_"):
            answer, mode = call("DELETE", f"/v1/observations/{quote(item_id, safe='')}")
        else:
            path = f"/v1/memories/{quote(item_id, safe='')}"
            answer, mode = call("DELETE", path + ("?" + _query(reason=reason) if reason else ""))
        return {"mode": mode, **answer}

    @tool("graph_query")
    def graph_query(
        entity: Annotated[
            str,
            Field(
                description="A file, symbol, package, command, error type or concept.",
                min_length=1,
                max_length=300,
            ),
        ],
        project: Project = None,
        depth: Annotated[
            int, Field(description="1: direct neighbours, 2: theirs too.", ge=1, le=2)
        ] = 1,
    ) -> dict[str, Any]:
        """What the knowledge graph knows about an entity: related files, symbols, errors and
        the observations about them."""
        answer, mode = call(
            "POST",
            "/v1/graph/query",
            {"project": project_of(project), "entity": entity, "depth": depth},
        )
        return {"mode": mode, **answer}


def _admin_tools(tool: Registrar, call: Caller, project_of: ProjectOf) -> None:
    """Capture health, dead letters, the audit log and export (ENGRAM_MCP_TOOLS=all)."""

    @tool("capture_status")
    def capture_status(
        state: Annotated[
            Literal["pending", "processing", "retrying", "dead"] | None,
            Field(description="Only entries in this state; dead = dead letters."),
        ] = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Captured events still being processed, and dead letters (events that failed every
        attempt) with their last error."""
        answer, mode = call("GET", "/v1/capture?" + _query(state=state, limit=limit))
        return {"mode": mode, **answer}

    @tool("retry_dead_letters")
    def retry_dead_letters(
        event_id: Annotated[
            str | None,
            Field(description="One dead letter's eventId; omit to retry them all.", max_length=200),
        ] = None,
    ) -> dict[str, Any]:
        """Process dead letters again (after the cause was fixed)."""
        body = {"eventId": event_id} if event_id else {"all": True}
        answer, mode = call("POST", "/v1/capture/retry", body)
        return {"mode": mode, **answer}

    @tool("audit_log")
    def audit_log(limit: Limit = 20, cursor: Cursor = None) -> dict[str, Any]:
        """Who changed what in the memory store: saves, updates, forgets, imports, retries."""
        answer, mode = call("GET", "/v1/audit?" + _query(limit=limit, cursor=cursor))
        return {"mode": mode, **answer}

    @tool("export")
    def export() -> dict[str, Any]:
        """The whole store as one JSON document (sessions, observations, memories), when it is
        small enough to return; otherwise its size and how to export it to a file."""
        answer, mode = call("GET", "/v1/export")
        counts = {k: len(answer.get(k, [])) for k in ("sessions", "observations", "memories")}
        text = json.dumps(answer, ensure_ascii=False)
        if len(text) > MAX_INLINE_EXPORT_CHARS:
            return {
                "mode": mode,
                "counts": counts,
                "chars": len(text),
                "document": None,
                "note": "too large to return here: run `engram export -o FILE`",
            }
        return {"mode": mode, "counts": counts, "document": answer}


def _resources_and_prompts(
    server: MCPServer, call: Callable[..., tuple[Any, str]], project_of: Callable[..., str]
) -> None:
    def read(method: str, path: str, body: Any = None) -> Any:
        return call(method, path, body, error=ResourceError)[0]

    def prompt_error(message: str) -> Exception:
        return MCPError(INVALID_PARAMS, message)

    @server.resource(
        "engram://status",
        name="status",
        mime_type="application/json",
        description="Engram's status report: what is wrong and how to fix it.",
    )
    def status_resource() -> str:
        return json.dumps(read("GET", "/v1/status"))

    @server.resource(
        "engram://projects/{project}/profile",
        name="project-profile",
        mime_type="application/json",
        description="What a project is about: counts, top files, commands, concepts.",
    )
    def profile_resource(project: str) -> str:
        return json.dumps(read("GET", "/v1/projects/profile?" + _query(project=project)))

    @server.resource(
        "engram://projects/{project}/observations/recent",
        name="recent-observations",
        mime_type="application/json",
        description="The project's 20 most recent observations, newest first.",
    )
    def recent_resource(project: str) -> str:
        return json.dumps(
            read("GET", "/v1/observations?" + _query(project=project, limit=20))["items"]
        )

    @server.resource(
        "engram://projects/{project}/memories/latest",
        name="latest-memories",
        mime_type="application/json",
        description="The project's 20 newest saved memories.",
    )
    def memories_resource(project: str) -> str:
        return json.dumps(read("GET", "/v1/memories?" + _query(project=project, limit=20))["items"])

    @server.prompt(
        name="recall_context", description="Start a task with what Engram remembers about it."
    )
    def recall_context(task: str, project: str | None = None) -> str:
        answer = call(
            "POST",
            "/v1/context",
            {"project": project_of(project, prompt_error), "query": task},
            error=prompt_error,
        )[0]
        return (
            f"Before working on this task, read what earlier sessions left:\n\n"
            f"{answer.get('context') or '(nothing recorded yet)'}\n\nThe task: {task}"
        )

    @server.prompt(
        name="session_handoff", description="Write a handoff note for the next session and save it."
    )
    def session_handoff(project: str | None = None) -> str:
        name = project_of(project, prompt_error)
        answer = call("POST", "/v1/context", {"project": name}, error=prompt_error)[0]
        return (
            f"This session is ending. Using what you did and what Engram already has "
            f"(below), write a short handoff for the next session in project {name}: what "
            "was done, what was decided and why, what is left, what to watch out for. Then "
            "call the save_memory tool with it.\n\n"
            f"{answer.get('context') or '(nothing recorded yet)'}"
        )


def _search(
    call: Callable[..., tuple[Any, str]], query: str, project: str, limit: int, mode: str
) -> dict[str, Any]:
    answer, answered = call(
        "POST", "/v1/search", {"query": query, "project": project, "limit": limit, "mode": mode}
    )
    return {
        "mode": answered,
        "searchMode": answer.get("mode", mode),
        "degraded": answer.get("degraded"),
        "hits": answer.get("items", []),
    }


def _query(**params: Any) -> str:
    return urlencode({k: v for k, v in params.items() if v is not None and v != ""})


def _unreachable_text(exc: Unreachable) -> str:
    if not exc.refused:
        return (
            f"the gateway did not answer in time ({exc}); the request may have been carried "
            "out: check before repeating it (e.g. recall what you saved)"
        )
    return f"Engram is not reachable: {exc}. Start it with `engram serve`."


def _error_text(status: int, answer: Any) -> str:
    from engram.wire import error_parts

    code, message, fields = error_parts(answer)
    if not code and not message:
        return f"Engram answered HTTP {status}"
    detail = "; ".join(f"{k}: {v}" for k, v in fields.items())
    return f"{message or 'error'} (HTTP {status}){': ' + detail if detail else ''}"


def for_gateway(app: Flask, secret: str) -> Callable[[], MCPServer]:
    """The factory the gateway mounts at /mcp: Engram's MCP server answering through ``app``
    itself (built on the first request)."""

    def make() -> MCPServer:
        settings = app.extensions["engram.settings"]
        return build_server(
            AppBackend(app, secret, mode="gateway"),
            settings=settings,
            tools=settings.mcp_tools,
            local_client=False,
        )

    return make


def serve_stdio(settings: Settings, open_local: LocalGateway) -> int:
    """`engram mcp`: the MCP server over stdio, proxying to the gateway with a local fallback
    that ``open_local`` opens."""
    backend = FallbackBackend(settings, open_local)
    try:
        build_server(backend, settings=settings, tools=settings.mcp_tools).run("stdio")
    finally:
        backend.close()
    return 0


# --- the tool reference in docs/mcp.md, generated from the tools themselves --------------------

REFERENCE_START = (
    "<!-- tool reference: generated by `python -m engram.agents.mcp_server --reference` -->"
)
REFERENCE_END = "<!-- end of the generated tool reference -->"


class _NoBackend:
    mode = "none"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any, str]:
        raise Unreachable("no backend: the reference only lists tools", refused=True)


def reference_markdown() -> str:
    """Every tool (ENGRAM_MCP_TOOLS=all) with its description and parameters, as Markdown."""
    import anyio

    server = build_server(_NoBackend(), tools="all")  # type: ignore[arg-type]
    listed = anyio.run(server.list_tools)
    core = {"save_memory", "recall", "search", "get_context", "get_observations", "status"}
    lines = [
        "## Tool reference",
        "",
        "Listed with `ENGRAM_MCP_TOOLS=core` (the default): "
        + ", ".join(f"`{t.name}`" for t in listed if t.name in core)
        + ". `all` lists every tool below.",
        "",
    ]
    for listed_tool in listed:
        lines += [
            f"### `{listed_tool.name}`" + ("" if listed_tool.name in core else " (all)"),
            "",
            " ".join((listed_tool.description or "").split()),
            "",
        ]
        schema = listed_tool.input_schema or {}
        properties = schema.get("properties", {})
        if not properties:
            lines += ["No parameters.", ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| parameter | type | required | description |", "|---|---|---|---|"]
        for name, spec in properties.items():
            lines.append(
                f"| `{name}` | {_type_of(spec)} | {'yes' if name in required else 'no'}"
                f" | {_describe(spec)} |"
            )
        lines.append("")
    return "\n".join(lines)


def _type_of(spec: dict[str, Any]) -> str:
    options = spec.get("anyOf") or [spec]
    names = []
    for option in options:
        if option.get("type") == "null":
            continue
        if option.get("enum"):
            names.append(" \\| ".join(f"`{v}`" for v in option["enum"]))
        elif option.get("type") == "array":
            names.append(f"list of {option.get('items', {}).get('type', 'any')}")
        else:
            names.append(str(option.get("type", "any")))
    return " or ".join(names) or "any"


def _describe(spec: dict[str, Any]) -> str:
    parts = [spec.get("description", "")]
    limits = [
        f"{label} {spec[key]}"
        for key, label in (
            ("minLength", "min length"),
            ("maxLength", "max length"),
            ("minimum", "min"),
            ("maximum", "max"),
            ("minItems", "min items"),
            ("maxItems", "max items"),
        )
        if key in spec
    ]
    if "default" in spec and spec["default"] is not None:
        limits.append(f"default `{json.dumps(spec['default'])}`")
    if limits:
        parts.append(f"({', '.join(limits)})")
    return " ".join(p for p in parts if p).replace("|", "\\|")


def write_reference(path: str) -> None:
    """Put the generated reference into ``path`` between its markers (appended if absent)."""
    from pathlib import Path

    doc = Path(path)
    text = doc.read_text(encoding="utf-8")
    block = f"{REFERENCE_START}\n\n{reference_markdown().strip()}\n\n{REFERENCE_END}"
    if REFERENCE_START in text and REFERENCE_END in text:
        head, rest = text.split(REFERENCE_START, 1)
        text = head + block + rest.split(REFERENCE_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    doc.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--reference"]:
        target = sys.argv[2] if len(sys.argv) > 2 else "docs/mcp.md"
        write_reference(target)
        print(f"wrote the tool reference into {target}")
    else:
        print(
            "usage: python -m engram.agents.mcp_server --reference [docs/mcp.md]", file=sys.stderr
        )
        sys.exit(2)
