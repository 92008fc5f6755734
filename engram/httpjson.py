"""POST JSON to a model endpoint (embeddings, rerank) with the standard library: the one place
that says what a refused or unreachable endpoint means."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class EndpointError(RuntimeError):
    """The endpoint refused the request, could not be reached, or did not answer JSON."""


def post_json(url: str, body: Any, api_key: str, timeout: float, what: str, hint: str = "") -> Any:
    """The decoded JSON answer of ``POST url`` with ``body``. The key, when set, goes only in
    ``Authorization: Bearer``; errors name ``what`` ("embedding endpoint") and the URL, never
    the key, and end with ``hint`` when the endpoint cannot be reached."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read(500).decode("utf-8", "replace").strip()
        raise EndpointError(
            f"{what} {url} answered HTTP {exc.code}" + (f": {detail}" if detail else "")
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(
            f"{what} {url} is unreachable: {reason}" + (f" ({hint})" if hint else "")
        ) from None
    try:
        return json.loads(raw)
    except ValueError:
        raise EndpointError(
            f"malformed answer from {what} {url}: not JSON: {raw[:200]!r}"
        ) from None
