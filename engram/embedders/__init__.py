"""Text embedders behind one small interface (:class:`Embedder`), chosen by ENGRAM_EMBEDDER."""

from engram.embedders.base import Embedder, EmbedderError, embedder_from_settings, l2_normalise

__all__ = ["Embedder", "EmbedderError", "embedder_from_settings", "l2_normalise"]
