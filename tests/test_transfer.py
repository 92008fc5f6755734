"""The export file reader behind `engram import`: it checks and sends a file in passes without
holding it whole, and says exactly what ``validate`` says of the same document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engram.transfer import ExportFile, InvalidImport, validate


def write(tmp_path: Path, document: Any, text: str | None = None) -> Path:
    path = tmp_path / "export.json"
    path.write_text(text if text is not None else json.dumps(document, indent=2))
    return path


def document(sessions: int = 3, observations: int = 7, memories: int = 2) -> dict[str, Any]:
    return {
        "format": "engram-export",
        "version": 1,
        "exportedAt": "2026-12-01T00:00:00Z",
        "memories": [
            {
                "id": f"mem_{n}",
                "content": f"fact {n}",
                "versions": [{"version": 1, "content": f"fact {n}"}],
            }
            for n in range(memories)
        ],
        "observations": [
            {
                "id": f"obs_{n}",
                "eventId": f"ev{n}",
                "sessionId": "s1",
                "project": "p",
                "toolInput": {"nested": {"item": [n, 1.5, None]}},
                "files": [["a", "b"]],
            }
            for n in range(observations)
        ],
        "sessions": [{"id": f"s{n}", "project": "p"} for n in range(sessions)],
    }


def test_parts_send_every_item_once_sessions_first_whatever_the_file_order(tmp_path) -> None:  # noqa: ANN001
    doc = document()  # memories first, sessions last in the file
    export = ExportFile(write(tmp_path, doc))
    assert export.check("merge") == 12
    parts = list(export.parts("merge", 3))
    assert [(list(p.keys() - {"format", "version", "exportedAt"}), s, n) for p, s, n in parts] == [
        (["sessions"], "merge", 3),
        (["observations"], "merge", 3),
        (["observations"], "merge", 3),
        (["observations"], "merge", 1),
        (["memories"], "merge", 2),
    ]
    assert all(p["version"] == 1 for p, _, _ in parts)
    sent = {
        k: [i for p, _, _ in parts for i in p.get(k, [])] for k in doc if isinstance(doc[k], list)
    }
    assert sent == {k: v for k, v in doc.items() if isinstance(v, list)}  # nested values intact


def test_replace_empties_with_the_first_part_only(tmp_path) -> None:  # noqa: ANN001
    export = ExportFile(write(tmp_path, document(sessions=2, observations=0, memories=1)))
    export.check("replace")
    assert [s for _, s, _ in export.parts("replace", 1)] == ["replace", "merge", "merge"]
    empty = ExportFile(write(tmp_path, {"version": 1}))
    assert empty.check("replace") == 0
    assert [(s, n) for _, s, n in empty.parts("replace", 10)] == [("replace", 0)]


@pytest.mark.parametrize(
    "doc",
    [
        {"version": 2, "sessions": []},
        {"version": 1, "sessions": [{"id": "s"}]},
        {
            "version": 1,
            "observations": [
                {"id": "o", "eventId": "e", "sessionId": "s", "project": "p"},
                "not an object",
            ],
        },
        {"version": 1, "memories": {"id": "m"}},
        {"version": 1, "memories": None},
        ["not", "an", "object"],
        "a string",
    ],
)
def test_check_finds_what_validate_finds(tmp_path, doc: Any) -> None:  # noqa: ANN001
    with pytest.raises(InvalidImport) as whole:
        validate(doc, "merge")
    with pytest.raises(InvalidImport) as streamed:
        ExportFile(write(tmp_path, doc)).check("merge")
    assert streamed.value.fields == whole.value.fields


def test_bad_strategy_and_broken_json(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(InvalidImport) as bad:
        ExportFile(write(tmp_path, document())).check("overwrite")
    assert list(bad.value.fields) == ["strategy"]
    for text in ("{nope", '{"version": 1, "sessions": [', ""):
        with pytest.raises(ValueError):
            ExportFile(write(tmp_path, None, text)).check("merge")
