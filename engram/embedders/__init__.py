"""Text embedders behind one small interface (:class:`Embedder`), chosen by ENGRAM_EMBEDDER."""

from engram.embedders.base import Embedder, EmbedderError, embed_queries, l2_normalise
from engram.embedders.factory import embedder_from_settings, local_embedder

__all__ = [
    "Embedder",
    "EmbedderError",
    "embed_queries",
    "embedder_from_settings",
    "l2_normalise",
    "local_embedder",
]
