"""`engram mcp` over stdio with the MCP SDK's own client: against a running gateway, and with the
gateway stopped (the local fallback), plus the generated tool reference in docs/mcp.md."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support import ENGRAM, REPO, Cluster, wait_for

pytestmark = pytest.mark.slow

CORE = ["save_memory", "recall", "search", "get_context", "get_observations", "status"]


@asynccontextmanager
async def session(env: dict[str, str], *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=ENGRAM, args=["mcp", *args], env=env, cwd=str(REPO))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        yield client


async def call(client: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


async def error_of(client: ClientSession, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    text: str = result.content[0].text
    assert "Traceback" not in text
    return text


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.stop_all()


def test_tools_resources_and_prompts_through_the_gateway(cluster: Cluster) -> None:
    cluster.serve()
    body = {
        "sessionId": "mcp-s1",
        "project": "shop",
        "host": "claude-code",
        "hookType": "PostToolUse",
        "toolName": "Bash",
        "eventId": "mcp-e1",
        "toolInput": {"command": "pytest tests/test_export.py"},
        "toolOutput": {"stdout": "MemoryError in export() at read_all"},
    }
    status, accepted = cluster.request("POST", "/v1/observe", body)
    assert status == 201
    status, read = cluster.request(
        "POST",
        "/v1/observe",
        {
            **body,
            "eventId": "mcp-e2",
            "toolName": "Read",
            "toolOutput": "def export(): ...",
            "toolInput": {"file_path": "/home/dev/shop/app/export.py"},
        },
    )
    assert status == 201
    wait_for(
        lambda: (
            len(cluster.request("GET", "/v1/sessions/mcp-s1/observations")[1].get("items", [])) == 2
        )
    )

    async def scenario() -> None:
        async with session(cluster.env) as client:
            assert [t.name for t in (await client.list_tools()).tools] == CORE
            saved = await call(
                client,
                "save_memory",
                project="shop",
                content="The nightly export OOMs: stream rows with fetchmany",
            )
            assert saved["mode"] == "gateway" and saved["memory"]["id"].startswith("mem_")
            found = await call(client, "recall", query="nightly export", project="shop")
            assert found["mode"] == "gateway" and found["searchMode"] == "keyword"
            assert saved["memory"]["id"] in [h["id"] for h in found["hits"]]
            smart = await call(client, "search", query="export memory error", project="shop")
            assert smart["searchMode"] == "hybrid"
            assert accepted["observationId"] in [h["id"] for h in smart["hits"]]
            got = await call(
                client, "get_observations", ids=[accepted["observationId"], "obs_missing"]
            )
            assert got["observations"][0]["toolInput"] == body["toolInput"]
            assert got["notFound"] == ["obs_missing"]
            context = await call(client, "get_context", project="shop", query="export")
            assert "fetchmany" in context["context"]
            assert (await call(client, "status"))["status"]["store"]["ok"] is True
            # invalid input and refusals come back as clear MCP errors
            assert "at least 1 character" in await error_of(client, "recall", query="")
            assert "content" in await error_of(client, "save_memory", content="")
            assert "list_sessions" not in [t.name for t in (await client.list_tools()).tools]

            resources = {r.uri for r in (await client.list_resources()).resources}
            assert "engram://status" in {str(u) for u in resources}
            templates = {
                t.uri_template for t in (await client.list_resource_templates()).resource_templates
            }
            assert "engram://projects/{project}/memories/latest" in templates
            latest = await client.read_resource("engram://projects/shop/memories/latest")
            assert "fetchmany" in latest.contents[0].text
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert prompts == {"recall_context", "session_handoff"}
            prompt = await client.get_prompt(
                "recall_context", {"task": "fix the export", "project": "shop"}
            )
            assert "fetchmany" in prompt.messages[0].content.text
            recent = json.loads(
                (await client.read_resource("engram://projects/shop/observations/recent"))
                .contents[0]
                .text
            )
            assert [o["id"] for o in recent] == [
                read["observationId"],
                accepted["observationId"],
            ]  # newest first

        async with session(cluster.env, "--tools", "all") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert set(CORE) < set(names) and len(names) == 18
            history = await call(client, "file_history", path="app/export.py", project="shop")
            assert [o["id"] for o in history["items"]] == [read["observationId"]]
            assert (
                await call(client, "file_history", path="tests/test_export.py", project="shop")
            )["items"] == []  # only named in a command
            profile = await call(client, "project_profile", project="shop")
            assert profile["profile"]["observations"] == 2
            sessions = await call(client, "list_sessions", project="shop")
            assert [s["id"] for s in sessions["items"]] == ["mcp-s1"]
            timeline = await call(client, "session_timeline", session_id="mcp-s1")
            assert [o["id"] for o in timeline["items"]] == [
                accepted["observationId"],
                read["observationId"],
            ]
            memory = (await call(client, "list_memories", project="shop"))["items"][0]
            updated = await call(
                client,
                "update_memory",
                memory_id=memory["id"],
                content="The nightly export OOMs: use a server-side cursor",
            )
            assert updated["memory"]["version"] == 2
            forgotten = await call(client, "forget", item_id=memory["id"], reason="test")
            assert forgotten["forgotten"] == memory["id"]
            assert "no memory" in await error_of(client, "forget", item_id=memory["id"])
            audit = await call(client, "audit_log")
            assert "memory.forget" in [e["action"] for e in audit["items"]]
            exported = await call(client, "export")
            assert exported["counts"]["observations"] == 2

    anyio.run(scenario)


def test_get_context_uses_the_gateways_budget_unless_given(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, ENGRAM_CONTEXT_BUDGET_TOKENS="350")
    try:
        cluster.serve()

        async def scenario() -> None:
            async with session(cluster.env) as client:
                default = await call(client, "get_context", project="shop")
                assert default["mode"] == "gateway" and default["budgetTokens"] == 350
                given = await call(client, "get_context", project="shop", budget_tokens=5000)
                assert given["budgetTokens"] == 5000

        anyio.run(scenario)
    finally:
        cluster.stop_all()


def test_with_the_gateway_stopped_save_and_recall_work_locally(cluster: Cluster) -> None:
    env = {**cluster.env, "ENGRAM_URL": f"http://127.0.0.1:{cluster.port}"}
    cluster.serve().stop()  # the store exists; its gateway is down

    async def offline() -> str:
        async with session(env) as client:
            saved = await call(
                client, "save_memory", project="shop", content="Deploys freeze on Fridays after 3pm"
            )
            assert saved["mode"] == "local"
            found = await call(client, "recall", query="deploy freeze", project="shop")
            assert found["mode"] == "local"
            assert [h["id"] for h in found["hits"]] == [saved["memory"]["id"]]
            return str(saved["memory"]["id"])

    memory_id = anyio.run(offline)
    cluster.serve()  # the gateway sees what was saved while it was down

    status, item = cluster.request("GET", f"/v1/memories/{memory_id}")
    assert status == 200 and item["content"] == "Deploys freeze on Fridays after 3pm"

    async def online() -> None:
        async with session(env) as client:
            found = await call(client, "recall", query="deploy freeze", project="shop")
            assert found["mode"] == "gateway" and found["hits"][0]["id"] == memory_id

    anyio.run(online)


def test_a_remote_gateway_that_does_not_answer_is_an_error_not_a_local_store(
    cluster: Cluster,
) -> None:
    """A local store is another store than a team's gateway: what an agent saved there would
    never reach the team. Nor is a store created that nothing would read."""
    env = {
        **cluster.env,
        "ENGRAM_URL": "http://engram-gateway.invalid:8737",
        "ENGRAM_SECRET": "team-secret",
    }

    async def scenario() -> None:
        async with session(env) as client:
            text = await error_of(client, "save_memory", content="x", project="shop")
            assert "not reachable" in text

    anyio.run(scenario)
    assert not (cluster.tmp / "data" / "engram.db").exists()


def test_the_project_defaults_to_the_repository_the_server_runs_in(cluster: Cluster) -> None:
    cluster.serve()
    env = {k: v for k, v in cluster.env.items() if k != "ENGRAM_PROJECT"}

    async def scenario() -> None:
        async with session(env) as client:
            saved = await call(client, "save_memory", content="Use make check before pushing")
            assert saved["memory"]["project"] == REPO.name

    anyio.run(scenario)


def test_docs_tool_reference_is_generated_from_the_code() -> None:
    """docs/mcp.md's tool reference is the text `reference_markdown()` generates; regenerate it
    with `python -m engram.agents.mcp_server --reference` when a tool changes."""
    from engram.agents.mcp_server import REFERENCE_END, REFERENCE_START, reference_markdown

    text = (REPO / "docs" / "mcp.md").read_text()
    assert REFERENCE_START in text and REFERENCE_END in text, (
        "docs/mcp.md lacks the generated tool reference markers"
    )
    current = text.split(REFERENCE_START, 1)[1].split(REFERENCE_END, 1)[0]
    assert current.strip() == reference_markdown().strip(), (
        "docs/mcp.md's tool reference is stale: run `python -m engram.agents.mcp_server --reference`"
    )
