"""MCP over streamable HTTP at /mcp (api/mcp_http.py), with the MCP SDK's own client.

Against a real `engram serve`: the tools, auth and origin checks, errors, concurrent clients.
In-process: the mount itself (its event loop thread, requests in flight at once, GET, a missing
SDK) with a small server of the test's own.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from flask import Flask
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from waitress.server import create_server

from engram.api import auth, errors, mcp_http
from tests.support import Api, Cluster

CORE = ["save_memory", "recall", "search", "get_context", "get_observations", "status"]
JSONRPC_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}


@asynccontextmanager
async def mcp_session(url: str, secret: str, **headers: str) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session over streamable HTTP, sending the bearer secret."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}", **headers})
    async with (
        http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: CallToolResult) -> str:
    content = result.content[0]
    assert isinstance(content, TextContent), content
    return content.text


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


async def error_of(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.content
    text = text_of(result)
    assert "Traceback" not in text and 'File "' not in text
    return text


# --- against a real `engram serve` ----------------------------------------------------------


@pytest.fixture
def cluster(served: Cluster) -> Cluster:
    return served


@pytest.mark.slow
def test_tools_over_http_save_then_recall(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with mcp_session(cluster.url + "/mcp", cluster.secret) as session:
            info = session.initialize_result
            assert info is not None and info.server_info.name == "engram"
            assert [t.name for t in (await session.list_tools()).tools] == CORE
            saved = await call(
                session,
                "save_memory",
                project="shop",
                content="The nightly export OOMs: stream rows with fetchmany",
            )
            assert saved["mode"] == "gateway" and saved["memory"]["id"].startswith("mem_")
            found = await call(session, "recall", query="nightly export fetchmany", project="shop")
            assert found["mode"] == "gateway"
            assert saved["memory"]["id"] in [hit["id"] for hit in found["hits"]]
            status = await call(session, "status")
            assert status["mode"] == "gateway"

    anyio.run(scenario)
    # the same memory through REST: MCP and REST are one store behind one gateway
    status, listed = cluster.request("GET", "/v1/memories?project=shop")
    assert status == 200 and [m["content"] for m in listed["items"]] == [
        "The nightly export OOMs: stream rows with fetchmany"
    ]


@pytest.mark.slow
def test_tool_errors_are_error_results_with_a_clear_message(cluster: Cluster) -> None:
    async def scenario() -> None:
        async with mcp_session(cluster.url + "/mcp", cluster.secret) as session:
            # refused by the REST API behind the tool
            refused = await error_of(session, "save_memory", content="   ", project="shop")
            assert "content" in refused and "422" in refused
            # refused by the tool's own argument schema
            invalid = await error_of(session, "recall", query="", project="shop")
            assert "query" in invalid
            assert "Unknown tool" in await error_of(session, "no_such_tool")
            # over HTTP the gateway's folder is not the client's project: it must be named
            assert "project is required" in await error_of(session, "recall", query="x")
            # the session still works after errors
            assert (await call(session, "status"))["mode"] == "gateway"

    anyio.run(scenario)


@pytest.mark.slow
def test_auth_and_origin_apply_to_mcp(cluster: Cluster) -> None:
    url = cluster.url + "/mcp"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    with httpx2.Client(timeout=10) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            answer = http.post(url, json=initialize, headers={**JSONRPC_HEADERS, **headers})
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "unauthorized"
        bearer = {"Authorization": f"Bearer {cluster.secret}"}
        answer = http.post(
            url,
            json=initialize,
            headers={**JSONRPC_HEADERS, **bearer, "Origin": "https://evil.example"},
        )
        assert answer.status_code == 403
        assert answer.json()["error"]["code"] == "origin_not_allowed"
        # loopback Host and Origin headers pass the SDK's transport checks too
        port = cluster.url.rsplit(":", 1)[1]
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            answer = http.post(
                url,
                json=initialize,
                headers={**JSONRPC_HEADERS, **bearer, "Host": host, "Origin": f"http://{host}"},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["serverInfo"]["name"] == "engram"
            assert answer.headers["content-type"].startswith("application/json")
        # stateless: no server-to-client stream, and nothing to end
        answer = http.get(url, headers={**bearer, "Accept": "text/event-stream"})
        assert answer.status_code == 405
        assert http.delete(url, headers=bearer).status_code == 405


@pytest.mark.slow
def test_concurrent_clients(cluster: Cluster) -> None:
    clients = 8

    async def one(n: int, results: dict[int, Any]) -> None:
        async with mcp_session(cluster.url + "/mcp", cluster.secret) as session:
            saved = await call(
                session, "save_memory", project="conc", content=f"Client {n} remembers marker{n}zz"
            )
            found = await call(session, "recall", query=f"marker{n}zz", project="conc")
            results[n] = (saved["memory"]["id"], [hit["id"] for hit in found["hits"]])

    async def scenario() -> dict[int, Any]:
        results: dict[int, Any] = {}
        async with anyio.create_task_group() as group:
            for n in range(clients):
                group.start_soon(one, n, results)
        return results

    results = anyio.run(scenario)
    assert sorted(results) == list(range(clients))
    for memory_id, hits in results.values():
        assert hits == [memory_id]


# --- the mount in-process, with a server of the test's own ---------------------------------

SECRET = "test-secret"


class _Settings:
    max_body_bytes = 1 << 20
    host = "127.0.0.1"
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()


def small_server(in_flight: threading.Barrier) -> MCPServer:
    server = MCPServer("small")

    @server.tool()
    def together(n: int) -> str:
        """Returns once ``in_flight.parties`` calls are running at the same time."""
        try:
            in_flight.wait()
        except threading.BrokenBarrierError:
            raise ToolError("the calls did not run at the same time") from None
        return f"done {n}"

    return server


@pytest.fixture
def served_mount() -> Iterator[tuple[str, Flask, threading.Barrier]]:
    """A gateway-like Flask app (errors, auth, the mount) under waitress on a free port."""
    barrier = threading.Barrier(6, timeout=20)
    app = Flask("mcp-test")
    app.extensions["engram.settings"] = _Settings()
    errors.register(app)
    auth.install(app, _Settings(), SECRET)  # type: ignore[arg-type]
    mcp_http.install(app, lambda: small_server(barrier))
    server = create_server(app, host="127.0.0.1", port=0, threads=8)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}/mcp", app, barrier
    finally:
        server.close()
        server.task_dispatcher.shutdown()
        thread.join(10)
        app.extensions["engram.mcp"].close()


def test_requests_from_several_threads_run_at_once(
    served_mount: tuple[str, Flask, threading.Barrier],
) -> None:
    url, app, barrier = served_mount

    async def client(n: int) -> str:
        async with mcp_session(url, SECRET) as session:
            result = await session.call_tool("together", {"n": n})
            assert not result.is_error, text_of(result)
            return text_of(result)

    # each thread its own event loop and client; the tool returns only when all six calls are
    # in the server at once, so a mount that serialised requests would fail here
    with ThreadPoolExecutor(barrier.parties) as pool:
        answers = list(pool.map(lambda n: anyio.run(client, n), range(barrier.parties)))
    assert answers == [f"done {n}" for n in range(barrier.parties)]

    mount = app.extensions["engram.mcp"]
    loop_thread = mount.runtime().thread
    assert loop_thread.is_alive()
    mount.close()
    assert not loop_thread.is_alive()
    # a request after close starts a fresh runtime
    assert anyio.run(client_status, url) == ["together"]


async def client_status(url: str) -> list[str]:
    async with mcp_session(url, SECRET) as session:
        return [t.name for t in (await session.list_tools()).tools]


def test_in_process_through_the_gateway(own_api: Api) -> None:
    """The real server over the gateway's own app, through Flask's test client."""
    app = own_api.client.application
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    try:
        response = own_api.client.post(
            "/mcp", json=request, headers={**own_api.headers, **JSONRPC_HEADERS}
        )
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.get_json()["id"] == 7
        assert [t["name"] for t in response.get_json()["result"]["tools"]] == CORE
    finally:
        app.extensions["engram.mcp"].close()


def test_without_the_sdk_mcp_answers_501(own_api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "a2wsgi", None)  # `import a2wsgi` now fails
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    status, body = own_api.post("/mcp", request, headers=JSONRPC_HEADERS)
    assert status == 501
    assert "a2wsgi" in body["error"]["message"] and "pip install" in body["error"]["message"]
    # auth still comes first
    response = own_api.client.post("/mcp", json=request, headers=JSONRPC_HEADERS)
    assert response.status_code == 401
    # the rest of the gateway is unaffected
    assert own_api.get("/v1/status")[0] == 200


def test_oversized_body_gets_the_gateways_json_413(
    served_mount: tuple[str, Flask, threading.Barrier],
) -> None:
    url = served_mount[0]
    body = (
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "pad": "' + b"x" * (1 << 20) + b'"}'
    )
    with httpx2.Client(timeout=10) as http:
        answer = http.post(
            url, content=body, headers={**JSONRPC_HEADERS, "Authorization": f"Bearer {SECRET}"}
        )
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"
