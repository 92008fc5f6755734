"""The two provider families, behind one call: ``complete(model, system, prompt, ...)`` -> ``Reply``.

- ``openai``: OpenAI and every server that speaks its chat-completions protocol (Ollama, vLLM,
  LM Studio, llama.cpp's server, LocalAI), through the official ``openai`` package with a base
  URL and a key. JSON output is asked for with ``response_format={"type": "json_object"}``; a
  server that rejects the field (400 naming it) is asked again without it, once per process.
- ``anthropic``: ``POST /v1/messages`` through the official ``anthropic`` package (it sends
  ``anthropic-version``). There is no JSON mode there: the prompt asks for one object and the
  caller's parser reads it.

Both clients retry on their own (``max_retries``): connection errors, 408/409/429/5xx and
Anthropic's 529, honouring ``Retry-After`` up to two minutes. What they give up on arrives here
as a ``ProviderError`` that says whether trying again later can help and how long the server
asked to wait; the chain (``engram.llm.chain``) turns that into its circuit breaker.

A reply holds only what the model answered as text: reasoning (``reasoning_content`` of the
OpenAI-compatible reasoning servers, Anthropic's thinking blocks) is dropped, and a reply that
is reasoning only, empty, refused or cut at the token limit before any text is a
``ReplyError``. Error messages are scrubbed of secrets and never hold the key.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from engram.privacy import scrub_text
from engram.settings import LLM_PROVIDERS

PROVIDERS = LLM_PROVIDERS

INSTALL_EXTRA = "pip install 'engram-memory[llm]'"


@dataclass(frozen=True)
class Reply:
    """What a provider answered, with the usage it reported."""

    text: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int


class ProviderError(RuntimeError):
    """A call failed after the client's own retries.

    ``transient``: the same call may succeed later (timeouts, 429, 5xx, overloaded);
    ``retry_after``: seconds the server asked for, when it said; ``status``: the HTTP status,
    0 when no answer came."""

    def __init__(
        self, message: str, *, transient: bool, status: int = 0, retry_after: float | None = None
    ) -> None:
        super().__init__(scrub_text(message))
        self.transient, self.status, self.retry_after = transient, status, retry_after


class ReplyError(ValueError):
    """The provider answered, but with nothing usable (empty, reasoning only, refused, cut off,
    malformed). The usage it reported still counts: ``reply`` holds it."""

    def __init__(self, message: str, reply: Reply) -> None:
        super().__init__(scrub_text(message))
        self.reply = reply


class Provider(Protocol):
    name: str

    def complete(
        self, model: str, system: str, prompt: str, max_tokens: int, json_output: bool
    ) -> Reply: ...


def available(name: str) -> bool:
    """The provider's client package is installed."""
    return importlib.util.find_spec(name) is not None


def _retry_after(headers: Any) -> float | None:
    try:
        raw = headers.get("retry-after-ms")
        if raw is not None:
            return max(0.0, float(raw) / 1000)
        raw = headers.get("retry-after")
        return None if raw is None else max(0.0, float(raw))
    except (AttributeError, TypeError, ValueError):  # absent, or an HTTP date
        return None


def _status_error(name: str, status: int, message: str, headers: Any) -> ProviderError:
    transient = status in (408, 409, 429) or status >= 500
    hint = ""
    if status in (401, 403):
        hint = f" (check ENGRAM_LLM_{name.upper()}_API_KEY)"
    elif status == 404:
        hint = f" (check ENGRAM_LLM_{name.upper()}_MODEL and _BASE_URL)"
    return ProviderError(
        f"{name}: HTTP {status}: {message[:300]}{hint}",
        transient=transient,
        status=status,
        retry_after=_retry_after(headers),
    )


@contextmanager
def _errors_as_provider_errors(sdk: Any, name: str) -> Iterator[None]:
    """What a client package (``openai`` or ``anthropic``: the same error classes) gave up on,
    as a ``ProviderError``."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise _status_error(name, exc.status_code, str(exc), exc.response.headers) from None
    except sdk.APITimeoutError:
        raise ProviderError(f"{name}: timed out", transient=True) from None
    except sdk.APIConnectionError as exc:
        raise ProviderError(f"{name}: cannot connect: {exc}", transient=True) from None
    except sdk.APIError as exc:  # a 200 whose body is not an answer
        raise ProviderError(f"{name}: malformed answer: {exc}", transient=True) from None


class OpenAIProvider:
    """Chat completions through the ``openai`` package (OpenAI or any compatible server)."""

    name = "openai"

    def __init__(self, base_url: str, api_key: str, timeout: float, max_retries: int) -> None:
        import openai

        self._openai = openai
        # A compatible local server takes any key; the client refuses to start without one.
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries
        )
        self.base_url = base_url
        self._json_mode = True

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIProvider({self.base_url!r})"

    def complete(
        self, model: str, system: str, prompt: str, max_tokens: int, json_output: bool
    ) -> Reply:
        messages: Any = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        extra: dict[str, Any] = {}
        if json_output and self._json_mode:
            extra["response_format"] = {"type": "json_object"}
        with _errors_as_provider_errors(self._openai, self.name):
            try:
                response = self._client.chat.completions.create(
                    model=model, messages=messages, max_tokens=max_tokens, **extra
                )
            except self._openai.BadRequestError as exc:
                if "response_format" not in extra or "response_format" not in str(exc):
                    raise
                self._json_mode = False  # this server has no JSON mode: say it in the prompt
                response = self._client.chat.completions.create(
                    model=model, messages=messages, max_tokens=max_tokens
                )
        usage = getattr(response, "usage", None)
        choices = getattr(response, "choices", None) or []
        message = choices[0].message if choices else None
        reply = Reply(
            text=((message.content if message is not None else None) or "").strip(),
            provider=self.name,
            model=getattr(response, "model", None) or model,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        )
        if not choices or message is None:
            raise ReplyError(f"{self.name}: the answer holds no choice", reply)
        if not reply.text:
            why = "refused" if getattr(message, "refusal", None) else "no text"
            if (message.model_extra or {}).get("reasoning_content"):
                why = "reasoning only"
            if choices[0].finish_reason == "length":
                why += ", cut at the token limit"
            raise ReplyError(f"{self.name}: the answer holds {why}", reply)
        return reply


class AnthropicProvider:
    """``/v1/messages`` through the ``anthropic`` package."""

    name = "anthropic"

    def __init__(self, base_url: str, api_key: str, timeout: float, max_retries: int) -> None:
        import anthropic

        self._anthropic = anthropic
        self._client = anthropic.Anthropic(
            base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries
        )
        self.base_url = base_url

    def __repr__(self) -> str:  # never shows the key
        return f"AnthropicProvider({self.base_url!r})"

    def complete(
        self, model: str, system: str, prompt: str, max_tokens: int, json_output: bool
    ) -> Reply:
        with _errors_as_provider_errors(self._anthropic, self.name):
            response = self._client.messages.create(
                model=model,
                system=system,
                max_tokens=max_tokens,
                messages=[{"role": "user", "content": prompt}],
            )
        usage = getattr(response, "usage", None)
        blocks = getattr(response, "content", None) or []
        text = "".join(
            getattr(block, "text", "") or ""
            for block in blocks
            if getattr(block, "type", "") == "text"
        )
        reply = Reply(
            text=text.strip(),
            provider=self.name,
            model=getattr(response, "model", None) or model,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0)
            + int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
            + int(getattr(usage, "cache_read_input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        )
        if not reply.text:
            kinds = sorted({str(getattr(block, "type", "?")) for block in blocks})
            why = "reasoning only" if "thinking" in kinds else "no text"
            if getattr(response, "stop_reason", "") in ("max_tokens", "refusal"):
                why += f" (stop_reason {response.stop_reason})"
            raise ReplyError(f"{self.name}: the answer holds {why}", reply)
        return reply
