"""Adversarial inputs for the scrubber, generated per rule: each rule's needles (and, for the
context rules, the whole secret words) repeated with the fragments that start a match and then
fail it late (separators, open quotes, `-u user:`, a URL's `://user:`), so a rule that scans far
from every needle, or backtracks over a long name, shows its worst case."""

from __future__ import annotations

import time
from collections.abc import Iterator

from engram.privacy import _RULES, Rule, _apply, _lower

WORDS = (
    "password", "passphrase", "secret", "token", "api_key", "db_pwd", "authorization",
    "x-api-key", "bearer", "basic", "accountkey=", "aws_secret_access_key", "https://u", "curl",
)  # fmt: skip
FRAGMENTS = (
    "", " ", "=", ":", "'", '"', '\\"', "\\", "_", "-", ".", "1", "a", "f(", "${", "='", ': "',
    ": '", "://a:", " -u a:b ", "=\\\"a", ":a@", "\\n",
)  # fmt: skip
PREFIXES = ("", " ", "x", "-u a:b ")


def units(rule: Rule) -> Iterator[str]:
    words = set(rule[1]) | (set(WORDS) if rule[4] else set())
    for word in sorted(words):
        for case in sorted({word, word.upper(), word.lower()}):
            for fragment in FRAGMENTS:
                for prefix in PREFIXES:
                    yield prefix + case + fragment


def repeated(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def seconds(rule: Rule, text: str) -> float:
    """How long one rule takes over `text` (the cased or the lowered text, as the rule reads)."""
    hay = _lower(text) if rule[4] else text
    started = time.perf_counter()
    _apply(rule, text, hay)
    return time.perf_counter() - started


def worst_units(size: int = 8_000, keep: int = 3) -> Iterator[tuple[int, Rule, list[str]]]:
    """For each rule, the `keep` units it is slowest on at `size` characters."""
    for index, rule in enumerate(_RULES):
        timed = sorted(units(rule), key=lambda u: -seconds(rule, repeated(u, size)))
        yield index, rule, timed[:keep]
