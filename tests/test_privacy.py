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


def test_any_value_under_a_secret_key_is_cut_but_flags_and_empties_stay() -> None:
    cut = {
        "token": 123,
        "db_password": 123456789012,
        "credentials": {"user": "bob"},
        "session_token": ["a", "b"],
        "password": ["hunter2"],
    }
    assert scrub(cut) == dict.fromkeys(cut, "[REDACTED:secret-field]")
    kept = {"password": None, "secret": True, "api_key": "", "token": [], "auth_key": {}}
    assert scrub(kept) == kept


def test_a_key_holding_a_secret_is_cut_and_keys_stay_distinct() -> None:
    other = GITHUB_PAT[:-4] + "WXYZ"
    out = scrub({GITHUB_PAT: "x", other: "y", "password": "z", 3: "w", "plain": "v"})
    keys = [k for k in out if isinstance(k, str)]
    assert not any(GITHUB_PAT in k or other in k for k in keys)
    assert len(set(out)) == 5 and out["plain"] == "v" and out[3] == "w"
    assert out["password"] == "[REDACTED:secret-field]"
    assert scrub(out) == out  # idempotent


def test_identifiers_keep_their_identity_without_the_secret() -> None:
    first = privacy.scrub_name(f"deploy-{GITHUB_PAT}")
    second = privacy.scrub_name(f"deploy-{GITHUB_PAT[:-4]}WXYZ")
    assert GITHUB_PAT not in first and first.startswith("deploy-[REDACTED:github-token]~")
    assert first != second and privacy.scrub_name(f"deploy-{GITHUB_PAT}") == first
    assert privacy.scrub_name(first) == first and privacy.scrub_name("plain-id") == "plain-id"
    body = scrub({"sessionId": f"s-{GITHUB_PAT}", "project": "p", "toolInput": {"id": GITHUB_PAT}})
    assert body["sessionId"] == privacy.scrub_name(f"s-{GITHUB_PAT}")  # type: ignore[index]
    assert GITHUB_PAT not in json.dumps(body)


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


# --- more provider shapes (gitleaks / trufflehog rule sets as the reference) ---------------------
# Each: the marker it must become, a fake secret of the right shape in a realistic line, and a
# look-alike that must survive (a prefix without the shape, a word that merely starts alike).
HEX = "0123456789abcdef" * 12
B62 = "Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7" * 8
PROVIDERS = [
    ("shopify-token", "X-Shopify-Access-Token: shpat_" + HEX[:32], "shpat_notes.md"),
    ("databricks-token", "DATABRICKS_HOST=x dapi" + HEX[:32], "dapifoo is a word"),
    ("azure-ad-client-secret", "client secret abc8Q~" + B62[:34], "Q~ is a tilde after Q"),
    ("discord-bot-token", "bot " + "MTk" + B62[:21] + "." + B62[:6] + "." + B62[:27],
     "Mr. Smith.went home"),
    ("linear-key", "LINEAR lin_api_" + B62[:40], "lin_api_docs"),
    ("vault-token", "VAULT hvs." + B62[:95], "hvs.example"),
    ("age-secret-key", "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" * 2,
     "AGE-SECRET-KEY-1 is the prefix"),
    ("newrelic-key", "key NRAK-" + "A1B2C3D4E5F6G7H8J9K0L1M2N3P", "NRAK-short"),
    ("grafana-token", "GF glsa_" + B62[:32] + "_" + HEX[:8], "glsa_ is a prefix"),
    ("grafana-token", "GF glc_" + B62[:40] + "==", "glc_x"),
    ("postman-key", "PMAK-" + HEX[:24] + "-" + HEX[:34], "PMAK-1234"),
    ("sentry-token", "SENTRY sntryu_" + HEX[:64], "sntryu_abc"),
    ("figma-token", "FIGMA figd_" + B62[:40], "figd_"),
    ("square-token", "SQ sq0atp-" + B62[:22], "sq0atp-1"),
    ("square-token", "SQ EAAA" + B62[:60], "EAAA batteries"),
    ("heroku-key", "HEROKU HRKU-" + B62[:60], "HRKU-1"),
    ("planetscale-token", "PS pscale_tkn_" + B62[:40], "pscale_tkn_x"),
    ("supabase-token", "SB sbp_" + HEX[:40], "sbp_1"),
    ("groq-key", "GROQ gsk_" + B62[:52], "gsk_short"),
    ("replicate-token", "R r8_" + B62[:37], "r8_ is a model"),
    ("notion-token", "NOTION ntn_" + B62[:45], "ntn_x"),
    ("notion-token", "NOTION secret_" + B62[:43], "secret_name = 'x'"),
    ("telegram-bot-token", "bot 123456789:AA" + B62[:33], "12:AA batteries"),
    ("mailchimp-key", "MC " + HEX[:32] + "-us12", "plain-us12"),
    ("dynatrace-token", "DT dt0c01." + "A1B2C3D4E5F6G7H8J9K0L1M2" + "." + "A1B2C3D4" * 8,
     "dt0c01.short"),
    ("pulumi-token", "PULUMI pul-" + HEX[:40], "pul-request"),
    ("terraform-token", "TF " + B62[:14] + ".atlasv1." + B62[:64], "x.atlasv1.y"),
    ("rubygems-key", "GEM rubygems_" + HEX[:48], "rubygems_org"),
    ("dockerhub-token", "DOCKER dckr_pat_" + B62[:27], "dckr_pat_"),
    ("tailscale-key", "TS tskey-auth-" + B62[:30], "tskey-auth"),
    ("1password-token", "OP ops_eyJ" + B62[:120], "ops_eyJ"),
    ("doppler-token", "DOPPLER dp.st." + B62[:43], "dp.st.x"),
    ("atlassian-token", "JIRA ATATT3" + B62[:180], "ATATT3 short"),
    ("flyio-token", "FLY fo1_" + B62[:43], "fo1_x"),
    ("cloudflare-origin-key", "CF v1.0-" + HEX[:24] + "-" + HEX[:146], "v1.0-release"),
    ("stripe-webhook-secret", "STRIPE whsec_" + B62[:40], "whsec_"),
    ("gitlab-token", "GL glrt-" + B62[:20], "glrt-x"),
    ("gitlab-token", "GL GR1348941" + B62[:20], "GR1348941"),
    ("brevo-key", "BREVO xkeysib-" + HEX[:64] + "-" + B62[:16], "xkeysib-1"),
    ("mapbox-secret-token", "MAPBOX sk.eyJ" + B62[:90], "sk.eyJ"),
    ("azure-sas-signature", "https://a.blob.core.windows.net/c/b?sv=2022&sig=" + B62[:43] + "%3D",
     "the sig= parameter"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "line", "lookalike"), PROVIDERS)
def test_provider_shapes_are_cut_and_lookalikes_survive(
    kind: str, line: str, lookalike: str
) -> None:
    out = scrub_text(line)
    assert f"[REDACTED:{kind}]" in out, out
    secret = line.split()[-1].split("sig=")[-1].split("%")[0].split(":")[-1]
    assert secret[-12:] not in out, out
    assert scrub_text(out) == out
    assert scrub_text(lookalike) == lookalike


def test_at_least_forty_provider_shapes() -> None:
    kinds = {rule[0] for rule in privacy._RULES}
    assert len(kinds) >= 40, len(kinds)
