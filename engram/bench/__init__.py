"""Retrieval benchmark harness: ``engram bench DATASET``.

Measures how well retrievers find the evidence of a question in public long-term-memory
benchmarks (LongMemEval, LoCoMo) and a small coding-agent set, side by side:

- ``datasets``  loaders, normalised to documents and queries with gold unit ids
- ``retrievers`` the pluggable retriever interface and its registry (grep, bm25, vector, hybrid)
- ``fused``     graph and hybrid+graph: the server's graph stream and fusion
- ``vectors`` the on-disk embedding cache, brute-force cosine ranking and weighted RRF
- ``metrics``   recall_any@k, recall_all@k, nDCG@10, MRR, latency percentiles
- ``runner``    indexes, queries and aggregates; ``report`` renders tables and JSON
- ``options``   the ``engram bench`` arguments (argparse only, so ``engram --help`` stays fast)

This package imports nothing heavy at import time; the store is only opened by the bm25
retriever. Benchmark data is read from the data dir at run time, never copied into the repo.
"""

from engram.bench import fused as _fused  # noqa: F401 - registers graph and hybrid+graph
