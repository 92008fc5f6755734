"""Scrub secrets out of text and JSON-like values before anything is stored, indexed or sent.

Imported by the hook CLI on an agent's hot path: standard library only, regexes compiled once at
import. A secret becomes ``[REDACTED:<kind>]`` and ``<private>...</private>`` becomes
``[PRIVATE]``; where a name or URL gives useful context (``API_KEY=``, ``postgres://u:``) only
the value is replaced. No rule matches a marker and rules repeat to a fixed point, so
scrubbing is idempotent.

Speed: ``re`` scans fast only for a pattern that starts with a literal, so each pattern puts its
literal first and checks the character before it with a lookbehind placed *after* it. On short
text a ``needle in text`` test skips rules that cannot match. Context rules run over an
ASCII-lowered copy of the text (``re.IGNORECASE`` is slow) and cut their spans from the original.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["contains_secret", "scrub", "scrub_name", "scrub_text"]

PRIVATE_MARKER = "[PRIVATE]"
SECRET_FIELD_MARKER = "[REDACTED:secret-field]"

# --- names that look secret (lower case) -------------------------------------------------------
_KEY_OWNERS = ("api", "access", "private", "auth", "client", "signing", "encryption")
_OWNERS = "|".join(_KEY_OWNERS)
_KEYWORD = rf"(?:passw(?:or)?d|passphrase|secret|token|(?:{_OWNERS})[_-]?key|[_-]pwd)"
# The same words, each starting with a literal: `key` looks behind for its owner (api_,
# access-, ...), `pwd` for its `_` (plain `pwd`, `PWD=` is the working directory).
_KEY_BEHIND = "|".join(rf"(?<={o}{sep}key)" for o in _KEY_OWNERS for sep in ("", "_", "-"))
_KEY_AT = f"key(?:{_KEY_BEHIND})"
_KEYWORDS = ("pass(?:w(?:or)?d|phrase)", "secret", "token", _KEY_AT, "pwd(?<=[_-]pwd)")
# Continuations that make another word: tokens, tokenizer, secrets, secretary, passwordless.
_GUARD = r"(?!s(?![a-z])|s_|iz|ary|less)"
# Names ending like this describe a secret without holding one (TOKEN_COUNT, max_tokens,
# password_hint_shown, password_reset_url, secret_name, API_KEY_ENV_VAR, ...).
_BENIGN_NAME = re.compile(
    r"(?:^|[_.-])(?:count|counts|tokens|hint|shown|len|length|size|type|url|uri|path|file|dir"
    r"|name|id|ids|limit|usage|used|number|expiry|expires|expires_at|expires_in|ttl|endpoint"
    r"|enabled|required|set|env|var|prefix|format|header|field|label|version|min|max)[\"'\\]*$"
)

# --- values that are not secrets ---------------------------------------------------------------
_NOT_A_SECRET = re.compile(  # flags; env and template references; placeholders; markers
    r"(?i)[01]|true|false|null|none|nil|undefined|yes|no|on|off|\$\w+|\$\{[^}]*\}|\$?\{\{.*\}\}"
    r"|%\w+%|<[^<>]*>|\*+|x{3,}|\.\.\.|\u2026|[|>][-+]?|\[REDACTED:[\w-]+\]|\[PRIVATE\]"
)
_CODE_REF = re.compile(r"[A-Za-z_][\w.]*\s*[(\[]")  # a call or subscript: get_token(), ENV["X"]
_IDENT = re.compile(r"[A-Za-z_][\w.]*")
_NAMED_SECRET = re.compile(_KEYWORD, re.IGNORECASE)  # `password=password`, `process.env.TOKEN`
_TYPE_HINT = re.compile(  # `password: str`, `apiKey: string;`, `token: Optional[str] = None`
    r"(?i)(?:typing\.)?(?:str|bytes|int|bool|float|any|optional|union|secretstr|secretbytes"
    r"|string|number|boolean)\b(?:\[.*\])?(?:\s*\|\s*none)?\s*(?:=.*)?;?"
)
_YAML_LEAD = re.compile(r"[ \t]*(?:-[ \t]+)?[\"']?[\w.-]*")  # line start up to the keyword
_YAML_TAIL = re.compile(r"(?:[ \t]+#.*)?,?\s*$")  # a comment, a trailing comma, spaces
_OPENER = {")": "(", "]": "[", "}": "{"}

_QUOTED = (  # a quoted value; Python string prefixes and JSON-escaped quotes allowed. Loops are
    # unrolled (`[^"\\]*(?:\\.[^"\\]*)*`): `re` is slow on a per-character alternation.
    r'[rbfu]{0,2}(?:"(?P<q1{n}>[^"\\\n]*(?:\\.[^"\\\n]*)*)"'
    r"|'(?P<q2{n}>[^'\\\n]*(?:\\.[^'\\\n]*)*)'|`(?P<q3{n}>[^`\n]*)`"
    r'|\\"(?P<q4{n}>[^\\\n]*(?:\\(?!")[^\\\n]*)*)\\")'
)
_YAML_VALUE = r"(?P<yv>[^\s\"'`\\][^\n\\\"]*(?:\\(?!n)[^\n\\\"]*)*)"  # up to \n, escaped or not
# After a keyword: the rest of the name (bounded, so scans stay linear) and a separator ahead.
_NAME_REST = rf"{_GUARD}[\w.-]{{0,64}}+\\?[\"']?(?=[ \t]*[:=?])"
_VALUE = re.compile(  # what follows a secret-looking name (on the lower-cased text)
    # `NAME = v`, `NAME := v`, `NAME => v`, optionally type-annotated (`api_key: str = v`).
    # Unquoted values stop at `&` (query strings) and `\` (an escaped newline in JSON).
    r"(?:[ \t]*(?::[ \t]*[a-z_][\w.\[\]|]*[ \t]*)?(?::=|=>|\?=|=(?![=~]))[ \t]*"
    rf"(?:{_QUOTED.replace('{n}', 'a')}|(?P<uq>[^\s\"'`,;&\\]+))"
    # `"name": "v"` anywhere; unquoted `name: v` only as a whole YAML-ish line (checked in
    # _assignment) so "enter your password: it must..." in prose survives. In JSON text such a
    # line may end at an escaped newline or at the closing quote of its string.
    rf"|[ \t]*:[ \t]*(?:{_QUOTED.replace('{n}', 'b')}|{_YAML_VALUE}))"
)


VALUE_REACH = 256
"""How far past a secret-looking name the value is read before deciding to keep it. A longer
value is read whole only when it is to be cut, so a line of many names whose values are kept
(`token=f(token=f(...`) costs linear time, not quadratic."""
LEAD_REACH = 256
"""How far before a name an unquoted `name: value` line may start (indent, `- `, a quote)."""


def _assignment(name: re.Match[str], text: str, _memo: dict[str, Any]) -> tuple[int, int] | None:
    """Span of the value assigned to a secret-looking `name`, or None to keep it."""
    if _BENIGN_NAME.search(name.group()):
        return None
    hay, at = name.string, name.end()
    reach = at + VALUE_REACH
    m = _VALUE.match(hay, at, reach)
    if m is None and len(hay) > reach:
        # A quoted value closing past the reach. Amortised linear: a quoted scan ends at its
        # own closing quote, which no other scan of that quote kind can start behind.
        m = _VALUE.match(hay, at)
    if m is None:
        return None
    group = m.lastgroup or ""  # the value's group: q1a..q4b (quoted), uq or yv (unquoted)
    start, end = m.span(group)
    value = text[start:end]
    while group == "uq" and value[-1:] in _OPENER and _OPENER[value[-1]] not in value:
        value, end = value[:-1], end - 1  # `f(password=pw)`: that `)` belongs to the code
    if group == "yv":  # a line starts after a newline, or after an escaped one (JSON text)
        floor = max(0, name.start() - LEAD_REACH)
        escaped = hay.rfind("\\n", floor, name.start())
        line = max(hay.rfind("\n", floor, name.start()) + 1, escaped + 2 if escaped >= 0 else 0)
        if line == 0 and floor > 0:
            return None  # no line start within reach: prose, not a `name: value` line
        if not _YAML_LEAD.fullmatch(text, line, name.start()):
            return None
        value = _YAML_TAIL.sub("", value)
        end = start + len(value)
    value = value.strip()
    if not value or _NOT_A_SECRET.fullmatch(value):
        return None
    if group[0] != "q" and (  # unquoted: code, not data
        _CODE_REF.match(value)
        or _TYPE_HINT.fullmatch(value)
        or (_IDENT.fullmatch(value) and _NAMED_SECRET.search(value))
    ):
        return None
    if m.end() >= reach and len(hay) > reach:  # cut short by the reach: cut the whole value
        whole = _VALUE.match(hay, at)
        if whole is not None and whole.lastgroup == group:
            start, end = whole.span(group)
            if group == "yv":
                end = start + len(_YAML_TAIL.sub("", text[start:end]))
    return start, end


_CURL_WORD = re.compile(r"curl(?<![\w-]curl)(?![\w-])")


def _on_a_curl_line(
    option: re.Match[str], _text: str, memo: dict[str, Any]
) -> tuple[int, int] | None:
    """The password of a `-u`/`--user` option on a line that starts a `curl` command before
    it. Found from the option backwards, with the text's `curl`s and newlines listed once per
    scrub: a rule that scanned forward from every `curl` to the end of its line took quadratic
    time on a line of many `curl`s (100 KB of `curl curl ...`: 43 s)."""
    hay, at = option.string, option.start()
    if "curl" not in memo:
        memo["curl"] = [m.start() for m in _CURL_WORD.finditer(hay)]
        memo["newline"] = [m.start() for m in _NEWLINE.finditer(hay)]
    curls, newlines = memo["curl"], memo["newline"]
    before = bisect.bisect_left(curls, at)
    if not before:
        return None
    line = bisect.bisect_left(newlines, at)
    if line and newlines[line - 1] > curls[before - 1]:
        return None  # the nearest `curl` is on an earlier line
    return option.span("v")


_NEWLINE = re.compile("\n")


Pick = Callable[[re.Match[str], str, dict[str, Any]], "tuple[int, int] | None"]
Rule = tuple[str, tuple[str, ...], re.Pattern[str], "str | Pick", bool]


# A row: (marker, needles, pattern, pick, on lower-cased text?); it runs only if a needle occurs.
# `pick` cuts the whole match ("all"), its group `v`, or the span a function returns (or None).
def _tok(kind: str, needles: str, pattern: str, pick: str | Pick = "all") -> Rule:
    return f"[REDACTED:{kind}]", tuple(needles.split()), re.compile(pattern), pick, False  # cased


def _ctx(kind: str, needles: str, pattern: str, pick: str | Pick = "v") -> Rule:
    return f"[REDACTED:{kind}]", tuple(needles.split()), re.compile(pattern), pick, True  # lower


def _back(chars: str, least: int, most: int) -> Pick:
    """A pick for a token whose literal sits inside it (`…Q~…`, `…:AA…`, `…-us12`): the match
    starts at the literal, and the token's head is the `least`-`most` characters of `chars`
    before it (bounded, so the look back stays constant time)."""
    allowed = frozenset(chars)

    def pick(m: re.Match[str], _text: str, _memo: dict[str, Any]) -> tuple[int, int] | None:
        hay, start = m.string, m.start()
        head = start
        while head > 0 and start - head < most and hay[head - 1] in allowed:
            head -= 1
        if start - head < least or (head > 0 and hay[head - 1] in allowed):
            return None  # too short a head, or a longer word it is part of
        return head, m.end()

    return pick


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_W = r"[\w-]"  # a token character: a token must not continue one (`desk-lamp`, `task-sk-...`)
_NO_REF = r"(?!\[redacted:|\[private\]|\$|<|\{\{)"  # already scrubbed, or a reference
_HEADER_VALUE = (  # after a header name: a scheme word or not, then the credential
    r"\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?:(?:bearer|token|bot|apikey)[ \t]+)?"
    r"(?!\[|\$|<|\{|(?:bearer|basic|token)\b)(?=[\w.~+/=:-]*\d|[\w.~+/=:-]{16})"
    r"(?P<v>[\w.~+/=:-]{6,})"
)
# fmt: off
_RULES = (
    # The whole PEM block to its END line (no other BEGIN inside); a truncated one loses its
    # base64 body lines.
    _tok("private-key", "-----BEGIN", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
         r"(?:[^-]*(?:-(?!----BEGIN|----END)[^-]*)*-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
         r"|[A-Za-z0-9+/=\\\r\n]*)"),
    # Provider tokens, known by prefix and shape. They run before the context rules so that
    # `GITHUB_TOKEN=ghp_...` reports `github-token`; the context rules then skip the marker.
    _tok("aws-access-key", "AKIA ASIA", r"A(?<![A-Za-z0-9]A)[KS]IA[A-Z0-9]{16}(?![A-Za-z0-9])"),
    _tok("github-token", "gh", r"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{36,}(?!\w)"),  # ghp_ gho_ ...
    _tok("github-token", "github_pat_", r"github_pat_(?<!\wgithub_pat_)\w{22,}"),
    _tok("gitlab-token", "glpat-", r"glpat-(?<!\wglpat-)[\w.-]{20,}"),
    _tok("slack-webhook", "hooks.slack.com/", r"hooks\.slack\.com/(?:services|workflows|triggers)/"
         r"(?P<v>[A-Za-z0-9_/+-]{20,})", "v"),
    _tok("slack-token", "xox xapp-",
         r"x(?<!\wx)(?:oxe\.xox[bp]|ox[abposre]|app)-[A-Za-z0-9-]{10,}"),
    _tok("stripe-key", "sk_", r"sk_(?<!\wsk_)(?:live|test|prod)_[A-Za-z0-9]{10,}(?!\w)"),
    _tok("stripe-key", "rk_", r"rk_(?<!\wrk_)(?:live|test|prod)_[A-Za-z0-9]{10,}(?!\w)"),
    _tok("anthropic-key", "sk-ant-", rf"sk-ant-(?<!{_W}sk-ant-)[\w-]{{20,}}"),
    _tok("openai-key", "sk-", rf"sk-(?<!{_W}sk-)(?:proj-|svcacct-|admin-)?"  # a digit too, unlike
         r"(?=[\w-]{0,200}\d)[\w-]{20,}"),                                  # `sk-fading-circle`
    _tok("google-api-key", "AIza", rf"AIza(?<!{_W}AIza)[\w-]{{35}}(?!{_W})"),
    _tok("google-oauth-secret", "GOCSPX-", rf"GOCSPX-(?<!{_W}GOCSPX-)[\w-]{{20,}}"),
    _tok("npm-token", "npm_", r"npm_(?<!\wnpm_)[A-Za-z0-9]{36}(?!\w)"),  # not npm_config_cache
    _tok("pypi-token", "pypi-AgE", rf"pypi-AgE(?<!{_W}pypi-AgE)[\w-]{{50,}}"),
    _tok("huggingface-token", "hf_", r"hf_(?<!\whf_)[A-Za-z0-9]{30,}(?!\w)"),
    _tok("sendgrid-key", "SG.", rf"SG\.(?<!\wSG\.)[\w-]{{16,32}}\.[\w-]{{16,64}}(?!{_W})"),
    _tok("twilio-key", "SK", r"SK(?<!\wSK)[0-9a-fA-F]{32}(?!\w)"),
    _tok("digitalocean-token", "_v1_", r"do(?<!\wdo)[opr]_v1_[a-f0-9]{64}(?!\w)"),
    _tok("jwt", "eyJ", rf"eyJ(?<!{_W}eyJ)[\w-]{{10,}}\.eyJ[\w-]{{10,}}\.[\w-]*"),
    # More providers, after gitleaks' and trufflehog's public rule sets: a prefix the provider
    # documents, then the shape of the rest.
    _tok("shopify-token", "shp", r"shp(?<!\wshp)(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?!\w)"),
    _tok("databricks-token", "dapi", r"dapi(?<!\wdapi)[a-f0-9]{32}(?:-\d)?(?!\w)"),
    _tok("azure-ad-client-secret", "Q~", r"Q~(?<=\dQ~)[\w~.-]{31,34}(?![\w~.-])",
         _back(_ALNUM + "_~.", 4, 4)),
    _tok("discord-bot-token", ".",
         r"[MNO](?<![\w-][MNO])[\w-]{23,25}\.[\w-]{6}\.[\w-]{27,38}(?![\w-])"),
    _tok("linear-key", "lin_api_", r"lin_api_(?<!\wlin_api_)[A-Za-z0-9]{40}(?!\w)"),
    _tok("vault-token", "hv", r"hv(?<!\whv)[sb]\.[\w-]{90,}"),
    _tok("age-secret-key", "AGE-SECRET-KEY-1",
         r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _tok("newrelic-key", "NRAK-", r"NRAK-(?<!\wNRAK-)[A-Z0-9]{27}(?!\w)"),
    _tok("grafana-token", "glsa_", r"glsa_(?<!\wglsa_)[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}(?!\w)"),
    _tok("grafana-token", "glc_", r"glc_(?<!\wglc_)[A-Za-z0-9+/]{32,400}={0,2}"),
    _tok("postman-key", "PMAK-", r"PMAK-(?<!\wPMAK-)[a-fA-F0-9]{24}-[a-fA-F0-9]{34}(?!\w)"),
    _tok("sentry-token", "sntry", r"sntry(?<!\wsntry)(?:s_eyJ[\w=+/-]{50,}|u_[a-f0-9]{64}(?!\w))"),
    _tok("figma-token", "figd_", r"figd_(?<!\wfigd_)[\w-]{40,}"),
    _tok("square-token", "sq0", r"sq0(?<!\wsq0)(?:atp|csp)-[\w-]{22,60}"),
    _tok("square-token", "EAAA", r"EAAA(?<![\w-]EAAA)[\w+=-]{60}(?![\w+=-])"),
    _tok("heroku-key", "HRKU-", r"HRKU-(?<!\wHRKU-)[\w-]{40,}"),
    _tok("planetscale-token", "pscale_", r"pscale_(?<!\wpscale_)(?:tkn|pw|oauth)_[\w.-]{32,64}"),
    _tok("supabase-token", "sbp_", r"sbp_(?<!\wsbp_)[a-f0-9]{40}(?!\w)"),
    _tok("groq-key", "gsk_", r"gsk_(?<!\wgsk_)[A-Za-z0-9]{52}(?!\w)"),
    _tok("replicate-token", "r8_", r"r8_(?<!\wr8_)[A-Za-z0-9]{37}(?!\w)"),
    _tok("notion-token", "ntn_", r"ntn_(?<!\wntn_)[A-Za-z0-9]{40,}"),
    _tok("notion-token", "secret_", r"secret_(?<!\wsecret_)[A-Za-z0-9]{43}(?!\w)"),
    _tok("telegram-bot-token", ":AA", r":AA[\w-]{33}(?![\w-])", _back("0123456789", 8, 10)),
    _tok("mailchimp-key", "-us", r"-us\d{1,2}(?!\w)", _back("0123456789abcdef", 32, 32)),
    _tok("dynatrace-token", "dt0c01.", r"dt0c01\.(?<!\wdt0c01\.)[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    _tok("pulumi-token", "pul-", r"pul-(?<!\wpul-)[a-f0-9]{40}(?!\w)"),
    _tok("terraform-token", ".atlasv1.", r"\.atlasv1\.[\w=-]{60,70}", _back(_ALNUM, 14, 14)),
    _tok("rubygems-key", "rubygems_", r"rubygems_(?<!\wrubygems_)[a-f0-9]{48}(?!\w)"),
    _tok("dockerhub-token", "dckr_pat_", r"dckr_pat_(?<!\wdckr_pat_)[\w-]{27,}"),
    _tok("tailscale-key", "tskey-",
         r"tskey-(?<![\w-]tskey-)(?:api|auth|client|webhook|scim)-[\w-]{16,}"),
    _tok("1password-token", "ops_eyJ", r"ops_eyJ(?<!\wops_eyJ)[\w+/=-]{100,}"),
    _tok("doppler-token", "dp.",
         r"dp\.(?<![\w.]dp\.)(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}(?!\w)"),
    _tok("atlassian-token", "ATATT3", r"ATATT3(?<!\wATATT3)[\w=-]{100,}"),
    _tok("flyio-token", "fo1_", r"fo1_(?<!\wfo1_)[\w-]{43}(?![\w-])"),
    _tok("flyio-token", "FlyV1 ", r"FlyV1 fm\d_[\w+/=,-]{100,}"),
    _tok("cloudflare-origin-key", "v1.0-", r"v1\.0-(?<![\w.]v1\.0-)[a-f0-9]{24}-[a-f0-9]{146}"),
    _tok("stripe-webhook-secret", "whsec_", r"whsec_(?<!\wwhsec_)[A-Za-z0-9+/=]{32,}"),
    _tok("gitlab-token", "gl", r"gl(?<!\wgl)(?:ptt|dt|rt|cbt|imt|agent|oas|soat|ffct)-[\w-]{20,}"),
    _tok("gitlab-token", "GR1348941", r"GR1348941(?<!\wGR1348941)[\w-]{20,}"),
    _tok("brevo-key", "xkeysib-", r"xkeysib-(?<!\wxkeysib-)[a-f0-9]{64}-[A-Za-z0-9]{16}(?!\w)"),
    _tok("mapbox-secret-token", "sk.eyJ", r"sk\.eyJ(?<![\w.]sk\.eyJ)[\w.-]{80,}"),
    # Context-bound credentials: keep the context, cut group `v`. Userinfo may not hold `[`/`]`
    # (RFC 3986), which also keeps a marker from being re-read as one.
    _ctx("url-credentials", "@", r"://(?<=[a-z0-9]://)[^\s:@/?#\"'<>\[\]]*:"
         rf"{_NO_REF}(?P<v>[^\s/?#\"'<>\[\]]+)@(?=[^\s@/?#\"'<>])"),
    _ctx("azure-sas-signature", "sig=", r"sig=(?<=[?&]sig=)(?P<v>[\w%+/=-]{30,})"),
    _ctx("azure-storage-key", "key=", r"key=(?:(?<=accountkey=)|(?<=sharedaccesskey=))"
         r"(?P<v>[a-z0-9+/]{20,}={0,2})"),
    _ctx("aws-secret-key", "secret",  # aws_secret_access_key, aws-secret-key, SecretAccessKey
         r"secret[_-]?(?:access[_-]?|(?<=aws[_-]secret[_-])|(?<=awssecret))key\\?[\"']?[ \t]*"
         r"(?:=|:|=>)[ \t]*\\?[\"']?(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])"),
    # Basic credentials are base64 (a multiple of 4 chars), so prose like "Basic auth" survives.
    _ctx("basic-auth", "basic", r"authorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?basic[ \t]+"
         r"(?P<v>(?:[a-z0-9+/]{4}){2,}(?:[a-z0-9+/]{2}==|[a-z0-9+/]{3}=)?)(?![a-z0-9+/=])"),
    _ctx("basic-auth", "curl", r"-(?<=[ \t]-)(?:u|-user)(?:[ \t]+|=)"
         rf"[\"']?[^\s:\"'\[]+:{_NO_REF}(?P<v>[^\s\"']+)", _on_a_curl_line),
    # A bearer token has a digit; "Bearer authentication" and "Bearer <token>" survive.
    _ctx("bearer", "bearer", r"bearer[ \t]+(?=[\w.~+/-]*\d)(?P<v>[\w.~+/-]{16,}=*)"),
    # Authorization, X-Api-Key, X-Goog-Api-Key, X-Auth-Token, Private-Token, --token=...
    *(_ctx("auth-header", h, h + _HEADER_VALUE) for h in ("authorization", "api-key", "-token")),
    # `.env` lines, assignments, JSON/YAML entries to a secret-looking name: keep the name.
    # A keyword's first three letters are literal, so they serve as its needle.
    *(_ctx("env-secret", kw[:3], kw + _NAME_REST, _assignment) for kw in _KEYWORDS),
)
# fmt: on
_PRIVATE_TAG = re.compile(r"<(/?)private\s*>")  # matched on the lower-cased text
_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


def _lower(text: str) -> str:
    low = text.lower()  # offsets must line up with `text`; a few non-ASCII letters would not
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def _private_spans(low: str) -> list[tuple[int, int]]:
    """A `</private>` closes the nearest open `<private>`; nested pairs merge into the outer one."""
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    for m in _PRIVATE_TAG.finditer(low):
        if not m.group(1):
            opened.append(m.start())
        elif opened:
            start = opened.pop()
            while spans and spans[-1][0] >= start:
                spans.pop()
            spans.append((start, m.end()))
    return spans


def _splice(text: str, spans: list[tuple[int, int]], marker: str) -> str:
    cuts = [0, *(i for span in spans for i in span), len(text)]  # the text around the spans
    return marker.join(text[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2))


def _scrub_once(text: str) -> str:
    low = _lower(text)
    if "<private" in low and (spans := _private_spans(low)):
        text = _splice(text, spans, PRIVATE_MARKER)
        low = _lower(text)
    # `needle in hay` is far cheaper than a regex call on short text, dearer than a scan on long
    gate = len(text) < 2048
    for rule in _RULES:
        hay = low if rule[4] else text
        if gate:
            for needle in rule[1]:
                if needle in hay:
                    break
            else:
                continue
        scrubbed = _apply(rule, text, hay)
        if scrubbed is not text:
            text = scrubbed
            low = _lower(text)
    return text


def _apply(rule: Rule, text: str, hay: str) -> str:
    """One rule over `text` (`hay` is `text` or its lowered copy); `text` itself if nothing."""
    marker, _needles, pattern, pick, _lower_case = rule
    spans, pos = [], 0
    memo: dict[str, Any] = {}  # what a pick learns about this text once (see _on_a_curl_line)
    while (m := pattern.search(hay, pos)) is not None:
        fixed = m.span() if pick == "all" else m.span("v") if pick == "v" else None
        span = pick(m, text, memo) if callable(pick) else fixed
        if span is None:  # kept: a later match may still start inside this one
            pos = m.start() + 1
        else:
            spans.append(span)
            pos = max(m.end(), span[1], m.start() + 1)
    return _splice(text, spans, marker) if spans else text


def scrub_text(text: str) -> str:
    """Return `text` with every recognised secret replaced by a `[REDACTED:<kind>]` marker."""
    if not isinstance(text, str) or not text:
        return text
    for _ in range(8):  # a redaction can complete another rule's match: repeat to a fixed point
        scrubbed = _scrub_once(text)
        if scrubbed == text:
            break
        text = scrubbed
    return text


def contains_secret(text: str) -> bool:
    """True when scrub_text would change `text`."""
    return scrub_text(text) != text


# Dict keys: the same secret words plus header-ish names; benign endings judged in snake_case.
_SECRET_KEY = re.compile(
    rf"{_KEYWORD}{_GUARD}|authorization|cookie(?!s)|credentials?(?![a-z])", re.I
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_MARKER = re.compile(r"\[(?:REDACTED:[\w-]+|PRIVATE)\](?:~[0-9a-f]{12})?")


@lru_cache(maxsize=1024)
def _is_secret_key(key: str) -> bool:
    key = _MARKER.sub("", key)  # a key that held a secret (`[REDACTED:github-token]~…`) names none
    return bool(_SECRET_KEY.search(key)) and not _BENIGN_NAME.search(_CAMEL.sub("_", key).lower())


IDENTIFIER_KEYS = frozenset(
    {"id", "eventId", "sessionId", "project", "agentId", "toolName", "host", "hookType"}
)
"""Keys whose values identify something: a secret in one is replaced by `scrub_name`, which
keeps distinct ids distinct (and the same id the same), so nothing is merged or split."""


def scrub_name(text: str) -> str:
    """An identifier (an id, a project, a tool name, an object key) with any secret in it cut
    out and a digest of the original appended: `deploy-ghp_…` becomes
    `deploy-[REDACTED:github-token]~3f9a0c12b4e1`. Two ids that differ only in their secret stay
    two ids, a resend of one maps to the same id, and the result scrubs to itself."""
    if not isinstance(text, str) or not text:
        return text
    scrubbed = scrub_text(text)
    if scrubbed == text:
        return text
    import hashlib  # only for an id that held a secret

    return f"{scrubbed}~{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


_scrub_key = lru_cache(maxsize=4096)(scrub_name)
"""Keys repeat from event to event (`command`, `stdout`, `file_path`): scrubbed once each."""


def _secret_value(value: object) -> bool:
    """Whether a value under a secret-looking key is a value to cut: text, a number (a PIN, a
    numeric password), or a non-empty list or object (`{"password": ["..."]}`). Flags, empty
    values and markers stay."""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return bool(value) and value != SECRET_FIELD_MARKER
    return not isinstance(value, (list, tuple, dict)) or bool(value)


def scrub(value: object) -> object:
    """Scrub dicts, lists, tuples and strings recursively; other values come back unchanged.

    - A value under a secret-looking key (`password`, `api_key`, `Authorization`, ...) becomes
      `[REDACTED:secret-field]` whole: a string, a number, a list or an object.
    - A key holding a secret is replaced as an identifier (`scrub_name`), as are the values of
      identifier keys (`eventId`, `sessionId`, `project`, ...).
    """
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str):
                if _is_secret_key(k) and _secret_value(v):
                    v = SECRET_FIELD_MARKER
                elif k in IDENTIFIER_KEYS and isinstance(v, str):
                    v = scrub_name(v)
                else:
                    v = scrub(v)
                k = _scrub_key(k)
            else:
                v = scrub(v)
            out[k] = v
        return out
    if isinstance(value, (list, tuple)):
        items = [scrub(v) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
