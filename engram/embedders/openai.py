"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Ollama, vLLM, LM
Studio), with the standard library only (``engram.httpjson``). An answer's embeddings may be
lists of numbers or base64 float32 (servers that answer ``encoding_format: base64``, what
OpenAI's own clients ask for, by default)."""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import threading
from collections.abc import Sequence
from typing import Any

from engram.embedders.base import EmbedderError, batches, l2_normalise
from engram.httpjson import EndpointError, post_json


def _base64_floats(text: str) -> list[float] | None:
    """A base64 ``embedding`` (little-endian float32, the protocol's ``encoding_format:
    base64``), or None when it is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) % 4:
        return None
    values = list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return values if all(math.isfinite(x) for x in values) else None


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "model"


class OpenAIEmbedder:
    """POSTs ``{"model", "input": [...]}`` to ``<base_url>/embeddings``, one request per batch.

    The API key, when set, goes only in ``Authorization: Bearer``. The dimension is learned from
    the first answer (``dim`` makes one call if nothing was embedded yet).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        batch_size: int = 32,
        timeout: float = 30.0,
    ) -> None:
        if not base_url:
            raise EmbedderError("ENGRAM_EMBEDDING_URL is empty: set the endpoint's base URL")
        if not model:
            raise EmbedderError("ENGRAM_EMBEDDING_MODEL is empty: set the model name")
        if batch_size <= 0:
            raise EmbedderError(f"embedding batch size must be positive, got {batch_size}")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self.model = model
        self.name = f"openai-{_slug(model)}"
        self._api_key = api_key
        self.batch_size = batch_size
        self.timeout = timeout
        self._dim: int | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIEmbedder(url={self.url!r}, model={self.model!r})"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for batch in batches(list(texts), self.batch_size):
            out.extend(self._request(list(batch)))
        return out

    def _request(self, texts: list[str]) -> list[list[float]]:
        try:
            payload = post_json(
                self.url,
                {"model": self.model, "input": texts},
                self._api_key,
                self.timeout,
                "embedding endpoint",
                hint="check ENGRAM_EMBEDDING_URL and that the server is running",
            )
        except EndpointError as exc:
            raise EmbedderError(str(exc)) from None
        return self._parse(payload, len(texts))

    def _parse(self, payload: Any, expected: int) -> list[list[float]]:
        def bad(why: str) -> EmbedderError:
            return EmbedderError(f"malformed answer from embedding endpoint {self.url}: {why}")

        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise bad("no 'data' list")
        if len(data) != expected:
            raise bad(f"{len(data)} embeddings for {expected} inputs")
        vectors: list[list[float] | None] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise bad(f"data[{position}] is not an object")
            index = item.get("index", position)
            vector = item.get("embedding")
            if isinstance(vector, str):  # base64 float32, as OpenAI's clients ask for by default
                vector = _base64_floats(vector)
                if vector is None:
                    raise bad(f"data[{position}].embedding is not base64 of float32 values")
            if (
                not isinstance(index, int)
                or not 0 <= index < expected
                or vectors[index] is not None
            ):
                raise bad(f"data[{position}] has a bad or repeated index {index!r}")
            if (
                not isinstance(vector, list)
                or not vector
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vector)
            ):
                raise bad(f"data[{position}].embedding is not a list of numbers")
            vectors[index] = l2_normalise([float(x) for x in vector])
        result = [v for v in vectors if v is not None]
        dims = {len(v) for v in result}
        if len(dims) != 1:
            raise bad(f"embeddings of different lengths {sorted(dims)}")
        dim = dims.pop()
        with self._lock:
            if self._dim is None:
                self._dim = dim
            elif self._dim != dim:
                raise bad(f"dimension changed from {self._dim} to {dim}")
        return result
