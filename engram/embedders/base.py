"""The embedder interface, its one error type and the factory that picks one from the settings."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from engram.settings import Settings

T = TypeVar("T")


class EmbedderError(RuntimeError):
    """An embedder cannot produce vectors; the message says why and, when it can, what to do."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of length ``dim``, batching internally.

    ``name`` identifies the model (and so the vector space): a change of name or ``dim`` means a
    new vector collection.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    if size <= 0:
        raise ValueError(f"batch size must be positive, got {size}")
    for start in range(0, len(items), size):
        yield items[start:start + size]


def l2_normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0 or not math.isfinite(norm):
        return [0.0 for _ in vector]
    return [x / norm for x in vector]


def embedder_from_settings(settings: Settings) -> Embedder | None:
    """The embedder ENGRAM_EMBEDDER names, or None for ``none``. Nothing heavy loads here."""
    kind = settings.embedder
    if kind == "none":
        return None
    if kind == "local":
        from engram.embedders.local import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder(batch_size=settings.embedding_batch)
    if kind == "openai":
        from engram.embedders.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=settings.embedding_url,
            model=settings.embedding_model,
            api_key=settings.embedding_api_key,
            batch_size=settings.embedding_batch,
            timeout=settings.embedding_timeout_seconds,
        )
    raise EmbedderError(f"unknown embedder {kind!r} (ENGRAM_EMBEDDER: none, local or openai)")
