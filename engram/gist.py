"""What a document's vector represents: its gist, not its first 256 tokens.

An observation's indexed body is up to ~2,000 characters: a title, the command or file, error
lines and an excerpt of the output. Embedding all of it spends most of the model's time on
output lines (a 256-token text costs several times a 100-token one: attention grows with the
square of the length) and lets a long log dilute what the event was about. The gist keeps, in
this order and within ``OBSERVATION_CHARS``: the title (first line), the error lines, then the
other lines as they come, each cut to ``LINE_CHARS``. BM25 and the graph still index the whole
body, so a word only the output holds is found by them.

Memories, summaries and anything else are embedded as written, cut at ``OTHER_CHARS`` (past the
model's 256 tokens for English prose, so the model's own truncation decides).
"""

from __future__ import annotations

from engram.compress import is_error_line

OBSERVATION_CHARS = 360
"""Measured on the load benchmark's realistic corpus with MiniLM's tokenizer: 480 characters
gave 124 tokens at the median (243 at p95: code tokenises densely), 320 gave 105 (172), and
embedding ran ~15 vs ~22 texts/s on one core (before the embedder used onnxruntime's arena,
2026-12-06, which made every length ~1.6x faster; the ratio is what chose 360)."""
LINE_CHARS = 160
OTHER_CHARS = 1500
MAX_ERROR_LINES = 3
_OMITTED = "chars omitted]"


def gist(kind: str, body: str) -> str:
    """The text embedded for a keyword document of ``kind`` with ``body``."""
    if kind != "observation":
        return body[:OTHER_CHARS]
    lines = [ln.strip() for ln in body.splitlines()]
    lines = [ln for ln in lines if ln and _OMITTED not in ln]
    if not lines:
        return ""
    errors = [i for i, ln in enumerate(lines[1:], start=1) if is_error_line(ln)]
    chosen = [0, *errors[:MAX_ERROR_LINES]]
    chosen += [i for i in range(1, len(lines)) if i not in chosen]
    out: list[str] = []
    used = 0
    for i in chosen:
        line = lines[i][:LINE_CHARS]
        if used + len(line) + 1 > OBSERVATION_CHARS:
            room = OBSERVATION_CHARS - used - 1
            if room >= 24:  # a useful fragment, not two stray words
                out.append(line[:room])
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
