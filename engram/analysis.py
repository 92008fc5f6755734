"""Text analysis shared by indexing and querying: code-aware terms, stop words, synonyms.

Both keyword backends see the same terms: identifiers are split (``getUserById`` also yields
``get``, ``user``, ``by``, ``id``; ``snake_case`` splits on the underscore) and a small synonym table
widens queries over code vocabulary (``db`` finds ``database``).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_IDENTIFIER = re.compile(r"\b[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+\b")

MAX_TERM_LENGTH = 64
"""Longer tokens (hashes, base64) are dropped: they never make useful keywords."""

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "just",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "about",
        "after",
        "before",
        "again",
        "any",
        "all",
        "also",
        "am",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "such",
        "only",
        "own",
        "same",
        "too",
        "very",
        "should",
        "now",
        "i'm",
        "let",
        "us",
        "please",
    ]
)
"""Dropped from queries only: a stop word in a question adds cost and no signal."""

# Groups of interchangeable code vocabulary; any member finds the others.
SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("db", "database"),
    ("auth", "authentication", "login"),
    ("config", "configuration", "settings"),
    ("repo", "repository"),
    ("err", "error", "exception"),
    ("fn", "func", "function"),
    ("deps", "dependencies", "dependency"),
    ("env", "environment"),
    ("pkg", "package"),
    ("msg", "message"),
    ("dir", "directory", "folder"),
    ("k8s", "kubernetes"),
    ("docker", "dockerfile"),
    ("py", "python"),
    ("js", "javascript"),
    ("ts", "typescript"),
    ("impl", "implementation"),
    ("args", "arguments", "params", "parameters"),
    ("perf", "performance"),
    ("docs", "documentation"),
    ("init", "initialize", "initialise"),
    ("tmp", "temp", "temporary"),
    ("delete", "remove", "rm"),
    ("crash", "panic", "segfault"),
    ("mkdir", "create directory"),
    ("pr", "pull request"),
    ("ci", "pipeline"),
    ("regex", "regexp", "regular expression"),
    ("lib", "library"),
    ("util", "utils", "utility", "helpers"),
    ("test", "spec", "pytest"),
)


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    table: dict[str, tuple[str, ...]] = {}
    for group in SYNONYM_GROUPS:
        for word in group:
            table[word] = tuple(other for other in group if other != word)
    return table


SYNONYMS = _build_synonyms()

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return str(_stemmer.stemWord(word))


# The same table keyed by stem, so "tests" and "testing" find the synonyms of "test".
_STEM_SYNONYMS = {
    stem(word): tuple(group) for group in SYNONYM_GROUPS for word in group if " " not in word
}


def split_identifier(token: str) -> list[str]:
    """``getUserById`` -> [get, User, By, Id]; ``HTTPServer`` -> [HTTP, Server]."""
    return _CAMEL.findall(token)


def expand_identifiers(text: str) -> str:
    """Append the parts of camelCase identifiers so word-based tokenizers (FTS5) can match them."""
    parts = [" ".join(split_identifier(m.group(0))) for m in _IDENTIFIER.finditer(text)]
    return f"{text}\n{' '.join(parts)}" if parts else text


def words(text: str) -> list[str]:
    """Lower-case words with identifiers split, as both index and query see them."""
    out: list[str] = []
    for match in _WORD.finditer(text):
        token = match.group(0)
        if len(token) > MAX_TERM_LENGTH:
            continue
        lowered = token.lower()
        out.append(lowered)
        if not token.islower() and not token.isupper() and not token.isdigit():
            pieces = [p.lower() for p in split_identifier(token)]
            if len(pieces) > 1:
                out.extend(pieces)
    return out


def index_terms(text: str) -> list[str]:
    """Stemmed terms of a document (stop words kept: they cost little at index time)."""
    return [stem(w) for w in words(text)]


_HEAD_ALIASES = {"di": "dy", "li": "ly", "ti": "ty"}
"""Snowball's only stems that begin unlike their word: dying, lying, tying -> die, lie, tie."""


def held_terms(text: str, terms: Collection[str]) -> set[str]:
    """The stemmed ``terms`` that ``text``'s ``index_terms`` hold (``held_positions``)."""
    return {term for _, term in held_positions(text, terms)}


def held_positions(text: str, terms: Collection[str]) -> list[tuple[int, str]]:
    """Where ``text`` holds the stemmed ``terms``: (offset of the word, its term), in order, as
    ``index_terms`` reads the text (an identifier's parts at the identifier's offset). Only the
    words that begin as one of the terms does are stemmed (a stem keeps its word's first two
    letters, ``_HEAD_ALIASES`` aside): a third of the time of stemming every word."""
    heads = {term[:2] for term in terms}
    heads |= {_HEAD_ALIASES[head] for head in heads if head in _HEAD_ALIASES}
    found: list[tuple[int, str]] = []
    for match in _WORD.finditer(text):
        token = match.group(0)
        if len(token) > MAX_TERM_LENGTH:
            continue
        lowered = token.lower()
        candidates = [lowered]
        if not token.islower() and not token.isupper() and not token.isdigit():
            pieces = [p.lower() for p in split_identifier(token)]
            if len(pieces) > 1:
                candidates.extend(pieces)
        for word in candidates:
            if word[:2] in heads and (term := stem(word)) in terms:
                found.append((match.start(), term))
    return found


def query_groups(query: str) -> list[tuple[str, ...]]:
    """The query as groups of alternatives: each group is one query word and its synonyms.

    Stop words are dropped unless the query is nothing but stop words.
    """
    tokens = [m.group(0).lower() for m in _WORD.finditer(query)]
    tokens = [t for t in tokens if len(t) <= MAX_TERM_LENGTH]
    kept = [t for t in tokens if t not in STOP_WORDS] or tokens
    groups: list[tuple[str, ...]] = []
    seen: set[frozenset[str]] = set()
    for token in kept:
        others = SYNONYMS.get(token) or _STEM_SYNONYMS.get(stem(token), ())
        group = (token, *(o for o in others if o != token))
        # "tests" and "test" (or a word and its synonym) stem alike: one group, not two, so the
        # index walks that posting list once.
        key = frozenset(stem(word) for alt in group for word in alt.split())
        if key in seen:
            continue
        seen.add(key)
        groups.append(group)
    return groups
