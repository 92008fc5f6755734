"""A local HTTP server that speaks the two LLM protocols Engram's providers use, so the official
``openai`` and ``anthropic`` packages run for real against it:

- ``POST /v1/chat/completions`` (OpenAI and the compatible servers), answered as a chat
  completion with ``usage``;
- ``POST /v1/messages`` (Anthropic), answered as a message with ``usage``.

Each request is recorded (path, headers, JSON body, arrival time). What it is answered with is
scripted: ``script`` is a list of steps taken one per request (then ``default``); a step is a
reply text, or an ``Answer`` (status, headers, raw body, delay), or ``DROP`` (the connection is
closed without an answer).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DROP = "__drop__"


@dataclass
class Answer:
    status: int = 200
    body: Any = None  # a dict is sent as JSON; bytes as they are
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def openai_completion(
    text: str | None,
    model: str = "fake-model",
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    reasoning: str | None = None,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def anthropic_message(
    text: str | None,
    model: str = "fake-claude",
    input_tokens: int = 100,
    output_tokens: int = 20,
    thinking: str | None = None,
    stop_reason: str = "end_turn",
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "sig"})
    if text is not None:
        content.append({"type": "text", "text": text})
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    if path.endswith("/messages"):
        kind = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}
        return {
            "type": "error",
            "error": {"type": kind.get(status, "api_error"), "message": message},
        }
    return {"error": {"message": message, "type": "server_error", "code": None}}


Step = str | Answer | Callable[[dict[str, Any]], "str | Answer"]


class FakeLLMServer:
    def __init__(self, default: Step = '{"ok": true}', usage: tuple[int, int] = (100, 20)) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[Step] = []
        self.default = default
        self.usage = usage
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the http.server API
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                request = {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                    "at": time.monotonic(),
                }
                server.requests.append(request)
                step = server.script.pop(0) if server.script else server.default
                if callable(step):
                    step = step(request)
                if step == DROP:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                answer = (
                    step
                    if isinstance(step, Answer)
                    else Answer(body=server.reply(self.path, body, step))
                )
                if answer.delay:
                    time.sleep(answer.delay)
                payload = answer.body
                if payload is None:
                    payload = error_body(self.path, answer.status, f"fake {answer.status}")
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.openai_url = self.root + "/v1"
        self.anthropic_url = self.root
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reply(self, path: str, body: Any, text: str) -> dict[str, Any]:
        model = (body or {}).get("model", "fake-model")
        given, taken = self.usage
        if path.endswith("/messages"):
            return anthropic_message(text, model, given, taken)
        return openai_completion(text, model, given, taken)

    def paths(self) -> list[str]:
        return [request["path"] for request in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
