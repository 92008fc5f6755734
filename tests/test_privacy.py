"""Tests for engram.privacy: secrets are scrubbed, look-alikes are left alone.

Every fake secret is assembled by concatenation so that it has the right prefix and length but
never appears literally in this file (repository secret scanners stay quiet).

The module is loaded by file path, so the tests work whether or not ``engram/__init__.py`` exists
and whether or not the package is installed.
"""

from __future__ import annotations

import ast
import base64
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests.adversarial import repeated, seconds, units

MODULE_PATH = Path(__file__).resolve().parents[1] / "engram" / "privacy.py"


def _load_privacy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("engram_privacy_under_test", MODULE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


privacy = _load_privacy()
scrub, scrub_text, contains_secret = privacy.scrub, privacy.scrub_text, privacy.contains_secret


def _b64url(obj: object) -> str:
    raw = json.dumps(obj, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# --- fake secrets: right shape, obviously fake --------------------------------------------------
AWS_KEY_ID = "AKIA" + "FAKE" + "7EXAMPLE" + "1234"
AWS_TEMP_KEY_ID = "ASIA" + "Q" * 16
AWS_SECRET = "fAkE/" * 8
GITHUB_PAT = "ghp_" + "A1b2" * 9
GITHUB_FINE = "github_pat_" + "11FAKE0000" + "0" * 12 + "_" + "Fake" * 14 + "xyz"
GITHUB_OAUTH = "gho_" + "Z9y8" * 9
GITLAB_PAT = "glpat-" + "x1Y2z3" * 4
SLACK_BOT = "xoxb-" + "1234567890" + "-" + "1234567890123" + "-" + "AbCdEfGh" * 3
SLACK_APP = "xapp-1-" + "A0123456789" + "-" + "1234567890123" + "-" + "ab12" * 16
SLACK_HOOK_PATH = "T00000000/" + "B00000000/" + "X" * 24
STRIPE_LIVE = "sk_" + "live_" + "51Fake" + "x" * 24
STRIPE_RESTRICTED = "rk_" + "live_" + "51Fake" + "y" * 24
STRIPE_TEST = "sk_" + "test_" + "51Fake" + "z" * 24
OPENAI_PROJECT = "sk-" + "proj-" + "Fake1" * 30
OPENAI_LEGACY = "sk-" + "Ab3dEf" * 8
ANTHROPIC = "sk-" + "ant-" + "api03-" + "Fake_Key-1" * 9 + "AA"
GOOGLE_API = "AIza" + "Sy" + "F4ke" * 8 + "x"
GOOGLE_OAUTH = "GOCSPX-" + "F4ke" * 7
NPM = "npm_" + "F4ke" * 9
PYPI = "pypi-" + "AgEIcHlwaS5vcmc" + "F4ke" * 15
HUGGING_FACE = "hf_" + "aBcD" * 8 + "ef"
SENDGRID = "SG." + "F4ke" * 5 + "xy" + "." + "F4ke" * 10 + "xyz"
TWILIO = "SK" + "0123456789abcdef" * 2
AZURE_KEY = "F4ke" * 22 + "=="
DIGITALOCEAN = "dop_" + "v1_" + "0123456789abcdef" * 4
BEARER = "abc123XYZ" * 4
BASIC = base64.b64encode(b"fakeuser:fakepass").decode()
JWT = (
    _b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + _b64url({"sub": "1234567890", "name": "Fake User"})
    + "."
    + "F4keSignature" * 3
)
PEM_BODY = ["MIIE" + "F4ke" * 15, "Fake" * 16, "QUJD" * 8 + "=="]


def _pem(label: str) -> str:
    begin, end = "-----BEGIN " + label + "-----", "-----END " + label + "-----"
    return "\n".join([begin, *PEM_BODY, end])


RSA_KEY = _pem("RSA " + "PRIVATE KEY")


# (id, text, secret substring that must disappear, expected marker, text that must survive)
SECRET_CASES = [
    ("aws-access-key-id", f"aws configure set aws_access_key_id {AWS_KEY_ID}", AWS_KEY_ID,
     "[REDACTED:aws-access-key]", ["aws configure set aws_access_key_id "]),
    ("aws-temporary-key-id", f'"AccessKeyId": "{AWS_TEMP_KEY_ID}",', AWS_TEMP_KEY_ID,
     "[REDACTED:aws-access-key]", ['"AccessKeyId": "', '",']),
    ("aws-secret-access-key", f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1",
     AWS_SECRET, "[REDACTED:aws-secret-key]", ["aws_secret_access_key = ", "region = eu-west-1"]),
    ("github-pat", f"export GITHUB_TOKEN={GITHUB_PAT}\necho done", GITHUB_PAT,
     "[REDACTED:github-token]", ["export GITHUB_TOKEN=", "echo done"]),
    ("github-fine-grained", f"git remote set-url origin https://{GITHUB_FINE}@github.com/o/r.git",
     GITHUB_FINE, "[REDACTED:github-token]",
     ["git remote set-url origin https://", "@github.com/o/r.git"]),
    ("github-oauth", f'{{"access_token": "{GITHUB_OAUTH}", "scope": "repo"}}', GITHUB_OAUTH,
     "[REDACTED:github-token]", ['{"access_token": "', '"scope": "repo"']),
    ("gitlab-pat", f"curl --header 'PRIVATE-TOKEN: {GITLAB_PAT}' https://gitlab.example.com/api",
     GITLAB_PAT, "[REDACTED:gitlab-token]", ["curl --header 'PRIVATE-TOKEN: ", "gitlab.example.com"]),
    ("slack-bot-token", f"Posting with {SLACK_BOT} to #general", SLACK_BOT,
     "[REDACTED:slack-token]", ["Posting with ", " to #general"]),
    ("slack-app-token", f"SLACK_APP_TOKEN: {SLACK_APP}", SLACK_APP, "[REDACTED:slack-token]",
     ["SLACK_APP_TOKEN: "]),
    ("slack-webhook", f"curl -X POST https://hooks.slack.com/services/{SLACK_HOOK_PATH} -d @m.json",
     SLACK_HOOK_PATH, "[REDACTED:slack-webhook]",
     ["curl -X POST https://hooks.slack.com/services/", " -d @m.json"]),
    ("stripe-live", f"stripe.api_key = '{STRIPE_LIVE}'", STRIPE_LIVE, "[REDACTED:stripe-key]",
     ["stripe.api_key = '"]),
    ("stripe-restricted", f"key: {STRIPE_RESTRICTED} (read only)", STRIPE_RESTRICTED,
     "[REDACTED:stripe-key]", ["key: ", " (read only)"]),
    ("stripe-test", f"Use {STRIPE_TEST} in CI.", STRIPE_TEST, "[REDACTED:stripe-key]",
     ["Use ", " in CI."]),
    ("openai-project", f"my key is {OPENAI_PROJECT}, use it", OPENAI_PROJECT,
     "[REDACTED:openai-key]", ["my key is ", ", use it"]),
    ("openai-legacy", f"openai.api_key = {OPENAI_LEGACY!r}", OPENAI_LEGACY, "[REDACTED:openai-key]",
     ["openai.api_key = '"]),
    ("anthropic", f"ANTHROPIC_API_KEY={ANTHROPIC} claude -p hi", ANTHROPIC,
     "[REDACTED:anthropic-key]", ["ANTHROPIC_API_KEY=", " claude -p hi"]),
    ("google-api-key", f"GET https://maps.googleapis.com/maps/api/geocode/json?a=x&key={GOOGLE_API}",
     GOOGLE_API, "[REDACTED:google-api-key]", ["GET https://maps.googleapis.com/", "?a=x&key="]),
    ("google-oauth-secret", f'{{"client_id": "app", "client_secret": "{GOOGLE_OAUTH}"}}',
     GOOGLE_OAUTH, "[REDACTED:google-oauth-secret]", ['"client_id": "app"', '"client_secret": "']),
    ("npm-token", f"//registry.npmjs.org/:_authToken={NPM}", NPM, "[REDACTED:npm-token]",
     ["//registry.npmjs.org/:_authToken="]),
    ("pypi-token", f"[pypi]\nusername = __token__\npassword = {PYPI}", PYPI,
     "[REDACTED:pypi-token]", ["[pypi]\nusername = __token__\npassword = "]),
    ("hugging-face", f"huggingface-cli login --token {HUGGING_FACE} --add", HUGGING_FACE,
     "[REDACTED:huggingface-token]", ["huggingface-cli login --token ", " --add"]),
    ("sendgrid", f"sg = SendGridAPIClient({SENDGRID!r})", SENDGRID, "[REDACTED:sendgrid-key]",
     ["sg = SendGridAPIClient('", "')"]),
    ("twilio", f"twilio api key {TWILIO} rotated", TWILIO, "[REDACTED:twilio-key]",
     ["twilio api key ", " rotated"]),
    ("azure-storage",
     f"DefaultEndpointsProtocol=https;AccountName=devstore;AccountKey={AZURE_KEY};"
     "EndpointSuffix=core.windows.net", AZURE_KEY, "[REDACTED:azure-storage-key]",
     ["AccountName=devstore;AccountKey=", ";EndpointSuffix=core.windows.net"]),
    ("digitalocean", f"doctl auth init -t {DIGITALOCEAN}", DIGITALOCEAN,
     "[REDACTED:digitalocean-token]", ["doctl auth init -t "]),
    ("bearer-curl", f'curl -H "Authorization: Bearer {BEARER}" https://api.example.com/v1/me',
     BEARER, "[REDACTED:bearer]",
     ['curl -H "Authorization: Bearer ', '" https://api.example.com/v1/me']),
    ("basic-auth-header", f"GET / HTTP/1.1\nAuthorization: Basic {BASIC}\nAccept: */*", BASIC,
     "[REDACTED:basic-auth]", ["GET / HTTP/1.1\nAuthorization: Basic ", "\nAccept: */*"]),
    ("curl-user", "curl -u admin:" + "Fak3Passw0rd" + " https://api.example.com", "Fak3Passw0rd",
     "[REDACTED:basic-auth]", ["curl -u admin:", " https://api.example.com"]),
    ("api-key-header", "X-Api-Key: " + "abcd1234efgh5678", "abcd1234efgh5678",
     "[REDACTED:auth-header]", ["X-Api-Key: "]),
    ("jwt", f"set-cookie: session={JWT}; Path=/; HttpOnly", JWT, "[REDACTED:jwt]",
     ["set-cookie: session=", "; Path=/; HttpOnly"]),
    ("pem-rsa", f"key.pem:\n{RSA_KEY}\n(end of file)", PEM_BODY[1], "[REDACTED:private-key]",
     ["key.pem:\n", "\n(end of file)"]),
    ("url-credentials", "DATABASE_URL=postgres://app:" + "Fak3Pass" + "@db.internal:5432/app",
     "Fak3Pass", "[REDACTED:url-credentials]", ["DATABASE_URL=postgres://app:", "@db.internal:5432/app"]),
    ("url-credentials-no-user", "redis://:" + "Fak3Pass" + "@cache:6379/0", "Fak3Pass",
     "[REDACTED:url-credentials]", ["redis://:", "@cache:6379/0"]),
    ("dotenv-api-key", "API_KEY=" + "abc123def456ghi" + "\nDEBUG=1", "abc123def456ghi",
     "[REDACTED:env-secret]", ["API_KEY=", "\nDEBUG=1"]),
    ("export-password", 'export DB_PASSWORD="' + "hunter2-fake" + '"', "hunter2-fake",
     "[REDACTED:env-secret]", ['export DB_PASSWORD="', '"']),
    ("json-client-secret", '{"client_id": "my-app", "client_secret": "' + "Fak3S3cr3t" + '"}',
     "Fak3S3cr3t", "[REDACTED:env-secret]", ['{"client_id": "my-app", "client_secret": "', '"}']),
    ("yaml-password", "database:\n  user: app\n  password: " + "hunter2fake" + "\n  host: db",
     "hunter2fake", "[REDACTED:env-secret]", ["database:\n  user: app\n  password: ", "\n  host: db"]),
    ("python-kwarg", 'client = OpenAI(api_key="' + "not-a-real-key-123" + '")',
     "not-a-real-key-123", "[REDACTED:env-secret]", ['client = OpenAI(api_key="', '")']),
    ("private-tag", "Ship it. <private>" + "my home is 12 Elm St" + "</private> Thanks!",
     "12 Elm St", "[PRIVATE]", ["Ship it. ", " Thanks!"]),
]  # fmt: skip
SECRET_IDS = [case[0] for case in SECRET_CASES]

LOOKALIKES = [
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
    "request 123e4567-e89b-12d3-a456-426614174000 failed; retry 550e8400-e29b-41d4-a716-446655440000",
    "task-sk-learning, desk-lamp and the sk-fading-circle spinner",
    ".btn { color: #ff5733; background: #FFF; border-color: #1a2b3c; }",
    "TOKEN_COUNT=42",
    'password_reset_url = "/reset"',
    "see https://example.com:8080/path?x=1 for details",
    "contact user@example.com for access",
    "ssh git@github.com:org/repo.git && git clone git@github.com:org/repo.git",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "the AKIA prefix marks long-lived AWS access keys",
    "export npm_config_cache=/tmp/npm_config_cache",
    "eyJ is how base64-encoded JSON starts",
    'api_key = os.environ["OPENAI_API_KEY"]',
    "token = get_token()",
    "## Passwords\n\nNever paste a password or an API key into chat; use a token from the vault.",
    "max_tokens = 1024\ntokens_used: 532\ntoken_count: 7\nnum_tokens=12",
    "secretary: Jane Doe\npassword_hint_shown: true",
    "Authorization: Bearer <token>\nBearer authentication is defined in RFC 6750.",
    "password: str\napi_key: Optional[str] = None",
    "conn = connect(host=h, password=password)",
    "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\nsecrets: inherit",
    "tokenizer = AutoTokenizer.from_pretrained('gpt2')\nhf_hub_download(repo_id='org/model')",
    "Enter your password: it must be at least 12 characters.",
    "if token == expected_token:",
    "PWD=/home/dev/project",
    '{"session_id": "abc-123", "transcript_path": "/tmp/t.jsonl", "cwd": "/work"}',
    "AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID\nAPI_KEY=${API_KEY}\nTOKEN=<your-token>",
]


@pytest.mark.parametrize(("text", "secret", "marker", "keep"),
                         [case[1:] for case in SECRET_CASES], ids=SECRET_IDS)  # fmt: skip
def test_secret_is_scrubbed(text: str, secret: str, marker: str, keep: list[str]) -> None:
    out = scrub_text(text)
    assert secret not in out
    assert marker in out
    for part in keep:
        assert part in out
    assert contains_secret(text)


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_is_untouched(text: str) -> None:
    assert scrub_text(text) == text
    assert not contains_secret(text)


@pytest.mark.parametrize("text", [case[1] for case in SECRET_CASES], ids=SECRET_IDS)
def test_scrub_is_idempotent(text: str) -> None:
    once = scrub_text(text)
    assert scrub_text(once) == once
    assert scrub(once) == once
    assert not contains_secret(once)


def test_all_secrets_in_one_text() -> None:
    text = "\n".join(case[1] for case in SECRET_CASES)
    out = scrub_text(text)
    for _id, _text, secret, marker, _keep in SECRET_CASES:
        assert secret not in out
        assert marker in out
    assert scrub_text(out) == out


@pytest.mark.parametrize(
    "marker", sorted({case[3] for case in SECRET_CASES} | {privacy.SECRET_FIELD_MARKER})
)
def test_markers_are_never_rematched(marker: str) -> None:
    for context in (
        "{m}",
        "API_KEY={m}",
        "password: {m}",
        '"token": "{m}"',
        "Authorization: Bearer {m}",
        "Authorization: {m}",
        "postgres://u:{m}@h/db",
        "curl -u admin:{m} https://x",
    ):
        text = context.format(m=marker)
        assert scrub_text(text) == text


@pytest.mark.parametrize(
    "label",
    ["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
     "ENCRYPTED PRIVATE KEY", "PGP PRIVATE KEY BLOCK"],
)  # fmt: skip
def test_pem_private_key_block_is_replaced_whole(label: str) -> None:
    text = f"before\n{_pem(label)}\nafter"
    assert scrub_text(text) == "before\n[REDACTED:private-key]\nafter"


def test_pem_inside_json_escaped_string() -> None:
    escaped = json.dumps({"content": RSA_KEY})  # newlines become the two characters \n
    out = scrub_text(escaped)
    assert json.loads(out) == {"content": "[REDACTED:private-key]"}


def test_truncated_pem_loses_its_body() -> None:
    text = "\n".join(RSA_KEY.splitlines()[:3])
    out = scrub_text(text)
    assert out == "[REDACTED:private-key]"


def test_private_spans_are_multiline_and_case_insensitive() -> None:
    text = "a <Private>\nline one\nline two\n</PRIVATE> b <private>x</private> c"
    assert scrub_text(text) == "a [PRIVATE] b [PRIVATE] c"


def test_nested_and_unclosed_private_tags() -> None:
    nested = "<private>a <private>b</private> c</private> d"
    assert scrub_text(nested) == "[PRIVATE] d"
    deep = "<private>" * 6 + "x" + "</private>" * 6
    assert scrub_text(deep) == "[PRIVATE]"
    unclosed = "Wrap notes in a <private> tag to keep them out of memory."
    assert scrub_text(unclosed) == unclosed


def test_a_kept_match_does_not_hide_a_later_secret_on_the_same_line() -> None:
    text = "Your password: is set below, db_password=" + "hunter2fake"
    assert scrub_text(text) == "Your password: is set below, db_password=[REDACTED:env-secret]"


def test_yaml_inside_json_text() -> None:
    text = json.dumps({"content": "db:\n  password: " + "hunter2fake" + "\n  host: db"})
    out = scrub_text(text)
    assert json.loads(out) == {"content": "db:\n  password: [REDACTED:env-secret]\n  host: db"}


def test_public_certificate_is_not_a_private_key() -> None:
    text = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert scrub_text(text) == text


def test_scrub_nested_values() -> None:
    value = {
        "user": "bob",
        "password": "hunter2",
        "config": {
            "apiKey": "abc",
            "X-Api-Key": "def",
            "headers": {"Authorization": "Bearer xyz", "Content-Type": "application/json"},
            "note": f"deploy with {GITHUB_PAT}",
        },
        "items": [{"client_secret": "s3cr3t"}, f"url postgres://u:{'pw'}@h/db", 7],
        "pair": ("plain", AWS_KEY_ID),
    }
    out = scrub(value)
    assert out == {
        "user": "bob",
        "password": "[REDACTED:secret-field]",
        "config": {
            "apiKey": "[REDACTED:secret-field]",
            "X-Api-Key": "[REDACTED:secret-field]",
            "headers": {
                "Authorization": "[REDACTED:secret-field]",
                "Content-Type": "application/json",
            },
            "note": "deploy with [REDACTED:github-token]",
        },
        "items": [
            {"client_secret": "[REDACTED:secret-field]"},
            "url postgres://u:[REDACTED:url-credentials]@h/db",
            7,
        ],
        "pair": ("plain", "[REDACTED:aws-access-key]"),
    }
    assert scrub(out) == out
    assert value["password"] == "hunter2"  # the input is not mutated


def test_scrub_keeps_non_string_values_under_secret_keys() -> None:
    value = {
        "token": 123,
        "password": None,
        "secret": True,
        "api_key": "",
        "credentials": {"user": "bob"},
        "session_token": ["a", "b"],
    }
    assert scrub(value) == value


def test_scrub_never_changes_keys() -> None:
    value = {GITHUB_PAT: "x", "password": "y", 3: "z"}
    out = scrub(value)
    assert list(out) == [GITHUB_PAT, "password", 3]
    assert out["password"] == "[REDACTED:secret-field]"


@pytest.mark.parametrize(
    "key",
    ["token_count", "max_tokens", "tokens_used", "num_tokens", "input_tokens", "secretary",
     "password_hint_shown", "tokenizer", "session_id", "transcript_path", "password_reset_url",
     "secret_name", "AWS_ACCESS_KEY_ID", "tokenCount", "maxTokens"],
)  # fmt: skip
def test_scrub_leaves_benign_keys_alone(key: str) -> None:
    assert scrub({key: "1024"}) == {key: "1024"}
    assert scrub({key: 1024}) == {key: 1024}


@pytest.mark.parametrize(
    "key",
    ["password", "passwd", "secret", "token", "api_key", "apikey", "API-KEY", "access_key",
     "private_key", "authorization", "Cookie", "session_token", "client_secret", "credentials",
     "clientSecret", "accessToken", "AWS_SECRET_ACCESS_KEY", "db_pwd", "Set-Cookie"],
)  # fmt: skip
def test_scrub_redacts_secret_keys(key: str) -> None:
    assert scrub({key: "anything"}) == {key: "[REDACTED:secret-field]"}


def test_scrub_passes_other_types_through() -> None:
    for value in (None, 3, 2.5, True, b"AKIA", {1, 2}):
        assert scrub(value) is value
    assert scrub_text("") == ""


def test_json_escaped_assignment() -> None:
    text = json.dumps({"command": 'export API_KEY="abc123def" && ./deploy.sh'})
    out = scrub_text(text)
    assert "abc123def" not in out
    assert json.loads(out) == {"command": 'export API_KEY="[REDACTED:env-secret]" && ./deploy.sh'}


def test_module_imports_only_the_standard_library() -> None:
    probe = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('privacy_probe', {str(MODULE_PATH)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True
    )
    loaded = json.loads(result.stdout)
    outside = [
        name for name in loaded
        if name.split(".")[0] not in sys.stdlib_module_names and name != "privacy_probe"
    ]  # fmt: skip
    assert outside == []
    # and, statically, no import of anything outside the standard library (nor of engram)
    tree = ast.parse(MODULE_PATH.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative imports"
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names | {"__future__"}, name


# --- time: no input makes a rule super-linear ----------------------------------------------------
# The target (each rule under 50 ms per 100 KB on its worst generated input) is measured by
# tests/benchmarks/bench_scrub.py; this test fails on the class of bug, not on a slow machine: a
# quadratic rule took 43 s on 100 KB (`curl ` repeated), ten times this bound is still linear.
LINEAR_BOUND_SECONDS = 0.5


@pytest.mark.parametrize("index", range(len(privacy._RULES)))
def test_no_rule_is_super_linear_on_its_adversarial_inputs(index: int) -> None:
    rule = privacy._RULES[index]
    worst = sorted(units(rule), key=lambda u: -seconds(rule, repeated(u, 4_000)))[:3]
    for unit in worst:
        taken = min(seconds(rule, repeated(unit, 100_000)) for _ in range(2))
        assert taken < LINEAR_BOUND_SECONDS, (rule[0], unit, taken)


@pytest.mark.parametrize(
    "text", ["curl " * 20_000, "token=f(" * 12_500, "password: " * 10_000, "pwd_" * 25_000]
)
def test_scrubbing_adversarial_text_takes_linear_time(text: str) -> None:
    started = time.perf_counter()
    scrub_text(text)
    assert time.perf_counter() - started < 4 * LINEAR_BOUND_SECONDS
