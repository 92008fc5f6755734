"""Settings: one parse, clear errors, and every setting documented."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from engram import context, search
from engram.settings import SETTINGS, Settings, SettingsError, load_settings

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_defaults(tmp_path: Path) -> None:
    s = load_settings(
        environ={"ENGRAM_CONFIG_DIR": str(tmp_path), "ENGRAM_DATA_DIR": str(tmp_path)}
    )
    assert s.host == "127.0.0.1" and s.port == 8737 and s.embedded
    assert s.database_url == f"sqlite:///{tmp_path / 'engram.db'}"
    assert s.gateway_url == "http://127.0.0.1:8737"


def test_precedence_default_file_env_override(tmp_path: Path) -> None:
    (tmp_path / "engram.env").write_text(
        "# comment\nexport ENGRAM_PORT=9001\nENGRAM_HOST='0.0.0.0'\nENGRAM_INBOX_MAX=\"7\"\n"
    )
    s = load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path), "ENGRAM_INBOX_MAX": "9"})
    assert (s.port, s.host, s.inbox_max) == (9001, "0.0.0.0", 9)
    assert s.gateway_url == "http://127.0.0.1:9001"
    s = load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path)}, overrides={"port": 1234})
    assert s.port == 1234


@pytest.mark.parametrize(
    "name,value",
    [
        ("ENGRAM_PORT", "eighty"),
        ("ENGRAM_PORT", "70000"),
        ("ENGRAM_INBOX_MAX", "0"),
        ("ENGRAM_RETRY_BASE_SECONDS", "-1"),
        ("ENGRAM_WORKER_CONCURRENCY", "two"),
        ("ENGRAM_SEARCH_WEIGHTS", "bm25=1,vector=inf"),
        ("ENGRAM_SEARCH_WEIGHTS", "bm25=-1"),
        ("ENGRAM_SEARCH_WEIGHTS", "keyword=1"),
        ("ENGRAM_SEARCH_WEIGHTS", "bm25"),
        ("ENGRAM_RRF_K", "-5"),
        ("ENGRAM_SESSION_SUPPORT", "lots"),
        ("ENGRAM_SESSION_SUPPORT", "search=-0.1"),
        ("ENGRAM_SESSION_SUPPORT", "search=inf"),
        ("ENGRAM_SESSION_SUPPORT", "hook=0.3"),
        ("ENGRAM_LOCAL_MODEL", "bge"),
    ],
)
def test_bad_values_name_the_variable(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path), name: value})


def test_bad_env_file_line_is_reported(tmp_path: Path) -> None:
    (tmp_path / "engram.env").write_text("ENGRAM_PORT 9000\n")
    with pytest.raises(SettingsError, match="engram.env:1"):
        load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path)})


def test_allowed_origins_is_a_list(tmp_path: Path) -> None:
    s = load_settings(
        environ={
            "ENGRAM_CONFIG_DIR": str(tmp_path),
            "ENGRAM_ALLOWED_ORIGINS": "https://a.example, https://b.example",
        }
    )
    assert s.allowed_origins == ("https://a.example", "https://b.example")


def test_every_setting_is_declared_once_and_typed() -> None:
    names = [spec.env for spec in SETTINGS]
    assert len(names) == len(set(names))
    fields = set(Settings.__annotations__)
    assert {spec.attr for spec in SETTINGS} == fields
    assert all(spec.help and spec.env.startswith("ENGRAM_") for spec in SETTINGS)


def test_every_setting_is_documented() -> None:
    """docs/configuration.md has a table row for every setting, with its default."""
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r"^\| `(ENGRAM_[A-Z_]+)` \| ([^|]+) \|", DOCS.read_text(), re.MULTILINE
        )
    }
    missing = [spec.env for spec in SETTINGS if spec.env not in rows]
    assert not missing, f"undocumented settings: {missing}"
    for spec in SETTINGS:
        default = ",".join(spec.default) if isinstance(spec.default, tuple) else spec.default
        shown = rows[spec.env].strip()
        assert shown == ("(empty)" if default == "" else f"`{default}`"), spec.env
    unknown = set(rows) - {spec.env for spec in SETTINGS}
    assert not unknown, f"documented but not a setting: {unknown}"


def test_fusion_settings_parse(tmp_path: Path) -> None:
    s = load_settings(
        environ={
            "ENGRAM_CONFIG_DIR": str(tmp_path),
            "ENGRAM_RRF_K": "60",
            "ENGRAM_SEARCH_WEIGHTS": " bm25=2, graph=0 ",
        }
    )
    assert s.rrf_k == 60 and s.search_weights == (("bm25", 2.0), ("graph", 0.0))
    default = load_settings(environ={"ENGRAM_CONFIG_DIR": str(tmp_path)})
    assert default.rrf_k == 5
    assert dict(default.search_weights) == {"bm25": 1.0, "vector": 1.3, "graph": 0.15}
    assert default.fusion == "score"
    assert load_settings(environ={"ENGRAM_FUSION": "RRF"}).fusion == "rrf"
    # session support: ranked search off unless reranked, the context builder on; one number
    # sets all, a caller not named is off
    assert dict(default.session_support) == {"search": 0.0, "reranked": 0.3, "context": 0.3}
    both = load_settings(environ={"ENGRAM_SESSION_SUPPORT": "0.2"})
    assert dict(both.session_support) == {"search": 0.2, "reranked": 0.2, "context": 0.2}
    one = load_settings(environ={"ENGRAM_SESSION_SUPPORT": " context=0.5 "})
    assert dict(one.session_support) == {"search": 0.0, "reranked": 0.0, "context": 0.5}
    with pytest.raises(SettingsError, match="ENGRAM_FUSION"):
        load_settings(environ={"ENGRAM_FUSION": "borda"})


def test_fusion_options_are_what_every_search_caller_passes(tmp_path: Path) -> None:
    s = load_settings(
        environ={
            "ENGRAM_CONFIG_DIR": str(tmp_path),
            "ENGRAM_SEARCH_WEIGHTS": "bm25=2,vector=0.5",
            "ENGRAM_RRF_K": "7",
            "ENGRAM_FUSION": "rrf",
            "ENGRAM_SESSION_SUPPORT": "search=0.1,context=0.4",
            "ENGRAM_NEIGHBOUR_SUPPORT": "search=0.2,reranked=0.5",
            "ENGRAM_SEARCH_FEEDBACK": "0.6",
        }
    )
    expected = {"weights": {"bm25": 2.0, "vector": 0.5}, "rrf_k": 7, "fusion": "rrf"}
    assert s.fusion_options("search") == {
        **expected,
        "session_support": 0.1,
        "neighbour_support": 0.2,
        "feedback": 0.6,
    }
    assert s.fusion_options("context") == {
        **expected,
        "session_support": 0.4,
        "neighbour_support": 0.0,  # not named: off
        "feedback": 0.6,
    }
    assert s.fusion_options("reranked")["session_support"] == 0.0  # not named: off
    assert s.fusion_options("reranked")["neighbour_support"] == 0.5
    # the keywords are the ones the search and the context builder take
    for function in (search.search, context.build, context.for_prompt):
        assert set(s.fusion_options("search")) <= set(inspect.signature(function).parameters)


def test_platform_dirs_match_platformdirs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The written-out default dirs are the ones platformdirs gives (existing installs keep
    their data); the hook CLI cannot afford to import platformdirs."""
    import platformdirs

    from engram.settings import _platform_dir

    for xdg in ({}, {"XDG_DATA_HOME": "/tmp/xdg-data", "XDG_CONFIG_HOME": "/tmp/xdg-config"}):
        for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
            monkeypatch.delenv(name, raising=False)
        for name, value in xdg.items():
            monkeypatch.setenv(name, value)
        assert _platform_dir("data") == Path(platformdirs.user_data_dir("engram", appauthor=False))
        assert _platform_dir("config") == Path(
            platformdirs.user_config_dir("engram", appauthor=False)
        )


def test_settings_are_read_only(settings: Settings) -> None:
    with pytest.raises(AttributeError):
        settings.port = 1  # type: ignore[misc]
    assert "secret=" not in repr(settings)


def test_api_keys_never_show_in_the_settings_repr() -> None:
    keyed = load_settings(
        environ={"ENGRAM_EMBEDDING_API_KEY": "sk-embed-77", "ENGRAM_RERANKER_API_KEY": "sk-rr-88"}
    )
    assert keyed.embedding_api_key == "sk-embed-77" and keyed.reranker_api_key == "sk-rr-88"
    shown = repr(keyed)
    assert "sk-embed-77" not in shown and "sk-rr-88" not in shown and "api_key" not in shown


def test_the_env_file_example_lists_every_setting() -> None:
    """infra/engram.env.example promises every ENGRAM_* setting with its default."""
    example = (Path(__file__).resolve().parents[1] / "infra" / "engram.env.example").read_text()
    listed = set(re.findall(r"^# (ENGRAM_[A-Z0-9_]+)=", example, flags=re.M))
    assert {spec.env for spec in SETTINGS} <= listed, (
        f"missing from infra/engram.env.example: {sorted({s.env for s in SETTINGS} - listed)}"
    )
