"""MCP over streamable HTTP at ``/mcp``, served by the gateway itself.

The route is an ordinary Flask route, so the gateway's before-request checks (bearer secret,
Origin, JSON bodies) and its error shape apply to it as to every other path. It hands the WSGI
environ to the MCP SDK's Starlette app, wrapped as WSGI by a2wsgi.

The SDK runs stateless with JSON responses: every POST is one self-contained JSON-RPC request
and response, with no session to keep between requests and no stream held open. That is what
lets a thread-per-request WSGI server (waitress) carry it.

The SDK's session manager must have its ``run()`` context active while it handles requests. It
runs in one asyncio event loop on a daemon thread, started on the first ``/mcp`` request (the
``mcp`` import and the server's tools cost nothing until a client asks) and stopped by
``McpMount.close()``, which also runs at process exit. a2wsgi is given that same loop: each
request becomes a task on it, while the waitress thread that took the request waits for the
answer. Synchronous tool functions run on the SDK's worker threads, so requests proceed
concurrently.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from flask import Flask, Response, request

from engram.api.errors import ApiError

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication
    from mcp.server.mcpserver import MCPServer

log = logging.getLogger("engram.api.mcp")

MCP_PATH = "/mcp"
"""Where the gateway serves MCP (streamable HTTP)."""

START_TIMEOUT = 30.0
"""Seconds the first ``/mcp`` request waits for the MCP server's lifespan to start."""

STOP_TIMEOUT = 5.0
"""Seconds ``close()`` waits for the session manager, then the loop thread, to stop."""

FINISH_TIMEOUT = 5.0
"""Seconds a request's thread waits, after its response is sent, for the SDK's handler to finish
(it terminates the request's transport) before a2wsgi cancels it."""

QUIET_LOGGERS = ("mcp.server.streamable_http",)
"""SDK loggers that say "Terminating session: None" at INFO after every stateless request; kept
to warnings unless the gateway logs at DEBUG."""

ServerFactory = Callable[[], "MCPServer"]


class McpRuntime:
    """One event loop on a daemon thread with the SDK's session manager running in it, and the
    SDK's Starlette app wrapped as WSGI on that loop."""

    def __init__(self, server: MCPServer, max_body_bytes: int) -> None:
        from a2wsgi import ASGIMiddleware
        from mcp.server.transport_security import TransportSecuritySettings

        starlette_app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=max_body_bytes,
            # The SDK's own Host/Origin check would refuse the gateway's allow-listed origins and
            # any Host when the gateway binds a non-loopback address. The gateway checks Origin
            # before this route runs, and a DNS-rebound page cannot present the bearer secret.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._manager = server.session_manager
        for name in QUIET_LOGGERS:
            chatty = logging.getLogger(name)
            if chatty.level == logging.NOTSET and not chatty.isEnabledFor(logging.DEBUG):
                chatty.setLevel(logging.WARNING)
        self._stop: asyncio.Event | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="engram-mcp-loop", daemon=True
        )
        self.thread.start()
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._lifespan = asyncio.run_coroutine_threadsafe(self._run(started), self.loop)
        done, _ = concurrent.futures.wait(
            [started, self._lifespan],
            timeout=START_TIMEOUT,
            return_when=concurrent.futures.FIRST_COMPLETED,
        )
        if started not in done:
            self.close()
            if self._lifespan in done:
                self._lifespan.result()  # raises why the session manager did not start
            raise RuntimeError(f"the MCP session manager did not start in {START_TIMEOUT:.0f}s")
        self.wsgi = cast(
            "WSGIApplication",
            ASGIMiddleware(cast(Any, starlette_app), wait_time=FINISH_TIMEOUT, loop=self.loop),
        )

    async def _run(self, started: concurrent.futures.Future[None]) -> None:
        self._stop = asyncio.Event()
        async with self._manager.run():
            started.set_result(None)
            await self._stop.wait()

    def close(self) -> None:
        """Leave the session manager's context (cancelling requests still in it), then stop and
        close the loop."""
        if not self.thread.is_alive():
            return
        stop = self._stop
        if stop is None:
            self._lifespan.cancel()
        else:
            self.loop.call_soon_threadsafe(stop.set)
        try:
            self._lifespan.result(STOP_TIMEOUT)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            log.warning("the MCP session manager did not stop in %.0fs", STOP_TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(STOP_TIMEOUT)
            if not self.thread.is_alive():
                self.loop.close()


class McpMount:
    """The ``/mcp`` route's state: the server factory and, once started, the runtime."""

    def __init__(self, make_server: ServerFactory, max_body_bytes: int) -> None:
        self._make_server = make_server
        self._max_body_bytes = max_body_bytes
        self._lock = threading.Lock()
        self._runtime: McpRuntime | None = None

    def runtime(self) -> McpRuntime:
        runtime = self._runtime
        if runtime is not None:
            return runtime
        with self._lock:
            if self._runtime is None:
                try:
                    import a2wsgi  # noqa: F401
                    import mcp  # noqa: F401
                except ImportError as exc:
                    raise ApiError(
                        501,
                        f"MCP over HTTP needs the '{exc.name}' package, which is "
                        "not installed: pip install 'mcp>=2' a2wsgi",
                        code="not_implemented",
                    ) from exc
                self._runtime = McpRuntime(self._make_server(), self._max_body_bytes)
                atexit.register(self.close)
            return self._runtime

    def handle(self) -> Response:
        if request.method == "GET":
            # A GET opens the server-to-client SSE stream. Stateless, there is nothing to send on
            # it, and an open stream would hold a request thread for good: the spec's answer for
            # "no stream here" is 405.
            raise ApiError(
                405,
                "this MCP endpoint is stateless and offers no SSE stream: "
                "POST JSON-RPC requests to it",
                code="method_not_allowed",
            )
        if (request.content_length or 0) > self._max_body_bytes:
            # the SDK would refuse it too, but in plain text; the gateway's 413 is JSON
            raise ApiError(
                413,
                f"request body larger than {self._max_body_bytes} bytes (ENGRAM_MAX_BODY_BYTES)",
            )
        # Buffered: the answer is one JSON document, and the request's thread is free of a2wsgi
        # once it is read.
        return cast(
            Response, Response.from_app(self.runtime().wsgi, request.environ, buffered=True)
        )

    def close(self) -> None:
        with self._lock:
            runtime, self._runtime = self._runtime, None
        if runtime is not None:
            atexit.unregister(self.close)
            runtime.close()


def install(app: Flask, make_server: ServerFactory) -> McpMount:
    """Serve MCP at ``/mcp`` from ``app``; ``make_server`` builds the MCP server on the first
    request. The mount is also ``app.extensions["engram.mcp"]`` (``close()`` stops its loop)."""
    settings = app.extensions["engram.settings"]
    mount = McpMount(make_server, settings.max_body_bytes)
    app.extensions["engram.mcp"] = mount
    app.add_url_rule(MCP_PATH, "mcp", mount.handle, methods=["POST", "GET", "DELETE"])
    return mount
