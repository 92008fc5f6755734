"""The embedder a setting names: the only module that knows every backend (they import only
``base``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from engram.embedders.base import Embedder, EmbedderError

if TYPE_CHECKING:
    from engram.settings import Settings


def local_embedder(
    model: str,
    batch_size: int = 32,
    *,
    batch_tokens: int = 512,
    threads: int = 1,
    cache_dir: Path | None = None,
) -> Embedder:
    """The local (in-process, offline) embedder ENGRAM_LOCAL_MODEL names. Nothing loads here."""
    if model == "minilm":
        from engram.embedders.local import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder(
            batch_size=batch_size, batch_tokens=batch_tokens, threads=threads, cache_dir=cache_dir
        )
    if model == "e5-small":
        from engram.embedders.e5 import LocalE5Embedder

        return LocalE5Embedder(batch_size=batch_size)
    from engram.settings import LOCAL_MODELS

    raise EmbedderError(
        f"unknown local model {model!r} (ENGRAM_LOCAL_MODEL: {', '.join(LOCAL_MODELS)})"
    )


def embedder_from_settings(settings: Settings) -> Embedder | None:
    """The embedder ENGRAM_EMBEDDER names, or None for ``none``. Nothing heavy loads here."""
    kind = settings.embedder
    if kind == "none":
        return None
    if kind == "local":
        return local_embedder(
            settings.local_model,
            settings.embedding_batch,
            batch_tokens=settings.embedding_batch_tokens,
            threads=settings.embedding_threads,
            cache_dir=settings.data_dir / "models",
        )
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
