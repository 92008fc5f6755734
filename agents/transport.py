"""How the hook CLI and its spool talk to the gateway: one JSON request with a hard deadline.

HTTP/1.1 over a plain socket (``Connection: close``), TLS-wrapped for ``https://`` (``ssl`` is
imported only then): ``http.client`` and ``urllib`` import ``ssl`` and ``email`` and cost the hook
~25 ms before it sends a byte, and their timeouts bound each socket operation, not the request.
Here resolving, connecting, the TLS handshake, sending and every read share one deadline.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

from engram.client import is_loopback_url
from engram.wire import Unreachable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_RESPONSE_BYTES = 8 * 1024 * 1024


class GatewayLink:
    """The gateway at ``url``; the secret goes only to loopback unless it was set explicitly."""

    def __init__(self, url: str, secret: str | None, *, explicit_secret: bool) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"gateway URL must be http(s)://host[:port], got {url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        send = secret and (explicit_secret or is_loopback_url(self.url))
        self.secret = secret if send else None

    def send(self, method: str, path: str, body: Any, deadline: float) -> tuple[int, Any]:
        """(status, decoded JSON or None). Raises Unreachable when no HTTP answer came before
        ``deadline`` (a ``time.monotonic()`` value)."""
        data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {
            "Host": f"{self.host}:{self.port}",
            "Accept": "application/json",
            "Connection": "close",
            "Content-Length": str(len(data)),
        }
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.secret:
            headers["Authorization"] = f"Bearer {self.secret}"
        if deadline - time.monotonic() <= 0:
            raise Unreachable("no time left", refused=True)
        head = (
            f"{method} {self.prefix + path} HTTP/1.1\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            + "\r\n"
        )
        status, raw = self._exchange(head.encode("latin-1") + data, deadline)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, None

    def _exchange(self, request: bytes, deadline: float) -> tuple[int, bytes]:
        """Send ``request`` and read the whole answer, every step bounded by ``deadline``."""
        chunks: list[bytes] = []
        try:
            with self._connect(deadline) as sock:
                sock.sendall(request)
                size = 0
                while True:
                    sock.settimeout(_left(deadline))
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise Unreachable("response too large")
        except OSError as exc:  # refused, reset, timed out, TLS failure (all OSError)
            raise Unreachable(f"{self.url}: {exc}") from None
        return _parse_response(b"".join(chunks), self.url)

    def _connect(self, deadline: float) -> socket.socket:
        """A connected socket (TLS for https). An IP literal (the usual 127.0.0.1) needs no
        resolver; a name is resolved in a thread so a slow DNS answer cannot pass the deadline."""
        family: int
        address: Any = (self.host, self.port)
        if ":" in self.host:
            family = socket.AF_INET6
        elif self.host.replace(".", "").isdigit():
            family = socket.AF_INET
        else:
            family, address = _resolve(self.host, self.port, deadline)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(_left(deadline))
            sock.connect(address)
            if self.scheme == "https":
                import ssl  # only for a remote gateway: ~5 ms to load

                sock.settimeout(_left(deadline))
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except OSError:
            sock.close()
            raise
        return sock


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _resolve(host: str, port: int, deadline: float) -> tuple[int, Any]:
    import threading

    found: list[Any] = []

    def lookup() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            found.append(exc)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(_left(deadline))
    if not found:
        raise TimeoutError(f"resolving {host} took too long")
    if isinstance(found[0], OSError):
        raise found[0]
    family, _, _, _, address = found[0]
    return family, address


def _parse_response(raw: bytes, url: str) -> tuple[int, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2) if lines else []
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise Unreachable(f"{url}: not an HTTP answer")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields[name.strip().lower()] = value.strip()
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _dechunk(body, url)
    elif b"content-length" in fields:
        length = int(fields[b"content-length"])
        if len(body) < length:
            raise Unreachable(f"{url}: answer cut short")
        body = body[:length]
    return int(parts[1]), body


def _dechunk(body: bytes, url: str) -> bytes:
    out: list[bytes] = []
    rest = body
    while True:
        size_line, sep, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            raise Unreachable(f"{url}: bad chunked answer") from None
        if not sep or size == 0:
            return b"".join(out)
        out.append(rest[:size])
        rest = rest[size + 2 :]
