"""The embedder interface, its one error type and the factory that picks one from the settings."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    pass

T = TypeVar("T")


class EmbedderError(RuntimeError):
    """An embedder cannot produce vectors; the message says why and, when it can, what to do."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of length ``dim``, batching internally.

    ``name`` identifies the model (and so the vector space): a change of name or ``dim`` means a
    new vector collection.

    An asymmetric model (one that embeds search queries differently from documents, e.g. with an
    instruction prefix) also has ``embed_query(texts)``; ``embed`` is then for documents. Call
    :func:`embed_queries` rather than either directly for query texts: it falls back to ``embed``.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """Vectors of search queries: ``embedder.embed_query`` when the model has one, else
    ``embedder.embed`` (a symmetric model embeds queries like documents)."""
    embed_query = getattr(embedder, "embed_query", None)
    if callable(embed_query):
        result: list[list[float]] = embed_query(texts)
        return result
    return embedder.embed(texts)


def is_asymmetric(embedder: object) -> bool:
    """True when ``embedder`` embeds queries differently from documents (has ``embed_query``)."""
    return callable(getattr(embedder, "embed_query", None))


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of ``items`` of at most ``size`` elements."""
    if size <= 0:
        raise ValueError(f"batch size must be positive, got {size}")
    for start in range(0, len(items), size):
        yield items[start : start + size]


def l2_normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length (a zero vector stays zero)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0 or not math.isfinite(norm):
        return [0.0 for _ in vector]
    return [x / norm for x in vector]
