"""A small HTTP client for the gateway (standard library only), used by the CLI.

The secret is only ever sent to loopback URLs unless ENGRAM_SECRET was set explicitly.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

from engram.wire import Unreachable

TYPE_CHECKING = False  # typing costs the hook CLI ~2 ms
if TYPE_CHECKING:
    from typing import Any, BinaryIO

COPY_CHUNK_BYTES = 64 * 1024

__all__ = [
    "Client",
    "GatewayError",
    "Unreachable",
    "client_for",
    "is_loopback_host",
    "is_loopback_url",
]


class GatewayError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        from engram.wire import error_message

        super().__init__(error_message(status, body))
        self.status = status
        self.body = body


def is_loopback_url(url: str) -> bool:
    """True for localhost and loopback IP literals only (``127.evil.example`` is a name)."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    if netloc.startswith("["):  # `[::1]` or `[::1]:8737`, nothing glued after the bracket
        host, bracket, rest = netloc.partition("]")
        if not bracket or (rest and not (rest[0] == ":" and rest[1:].isdigit())):
            return False
    else:
        host, _, port = netloc.partition(":")
        if port and not port.isdigit():
            return False
    return is_loopback_host(host)


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals (brackets allowed), compared exactly:
    ``127.0.0.1.evil.example`` and ``localhost.evil.example`` are names anyone can point here."""
    import ipaddress  # urllib.parse has loaded it already

    host = host.lower().removeprefix("[").removesuffix("]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Client:
    def __init__(
        self,
        base_url: str,
        secret: str | None,
        *,
        explicit_secret: bool = False,
        timeout: float = 10.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        send = secret and (explicit_secret or is_loopback_url(self.base_url))
        self._auth = {"Authorization": f"Bearer {secret}"} if send else {}

    @property
    def sends_secret(self) -> bool:
        return bool(self._auth)

    def _send(self, method: str, path: str, body: Any) -> Any:
        """The response to one request (the caller reads and closes it); a refusal raises
        urllib's ``HTTPError``, anything that kept the answer from arriving ``Unreachable``."""
        import urllib.error  # here, not at the top: the hook CLI imports is_loopback_url
        import urllib.request

        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {**self._auth, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(
            self.base_url + path, data=data, method=method, headers=headers
        )
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: BaseException) -> Unreachable:
        import urllib.error

        reason = getattr(exc, "reason", exc)
        # URLError wraps what happened before a response: refused, no route, a name that does
        # not resolve. A timeout or reset while waiting may follow a delivered request.
        never_sent = isinstance(exc, urllib.error.URLError) and not isinstance(
            reason, (TimeoutError, ConnectionResetError)
        )
        return Unreachable(f"{self.base_url}: {reason}", refused=never_sent)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        import urllib.error

        try:
            resp = self._send(method, path, body)
        except urllib.error.HTTPError as exc:
            return exc.code, _error_body(exc.read())
        with resp:
            try:
                payload = resp.read()
            except OSError as exc:  # the answer was cut off: the request may have been done
                raise self._unreachable(exc) from None
            return resp.status, json.loads(payload or b"null")

    def download(self, path: str, out: BinaryIO) -> int:
        """GET ``path`` and copy the answer's body into ``out`` as it arrives (an export of any
        size); returns the bytes written. A refusal raises ``GatewayError`` as ``call`` does, a
        connection lost part-way ``Unreachable``; an error writing ``out`` is its own."""
        import http.client
        import urllib.error

        try:
            resp = self._send("GET", path, None)
        except urllib.error.HTTPError as exc:
            raise GatewayError(exc.code, _error_body(exc.read())) from None
        written = 0
        with resp:
            while True:
                try:
                    chunk = resp.read(COPY_CHUNK_BYTES)
                except (OSError, http.client.HTTPException) as exc:
                    raise self._unreachable(exc) from None
                if not chunk:
                    return written
                out.write(chunk)
                written += len(chunk)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        status, payload = self.request(method, path, body)
        if status >= 400:
            raise GatewayError(status, payload)
        return payload


def _error_body(payload: bytes) -> Any:
    """A refusal's body: its JSON, or its text as an error message."""
    try:
        return json.loads(payload or b"null")
    except ValueError:
        return {"error": {"message": payload.decode("utf-8", "replace")}}


def client_for(args: Any, settings: Any, timeout: float = 60.0) -> Client:
    """The gateway client of a command: ``args.url`` (--url) or ENGRAM_URL, with this machine's
    secret (sent to loopback only, unless ENGRAM_SECRET was set)."""
    from engram.secret import client_secret

    url = getattr(args, "url", None) or settings.gateway_url
    return Client(
        url, client_secret(settings), explicit_secret=bool(settings.secret), timeout=timeout
    )
