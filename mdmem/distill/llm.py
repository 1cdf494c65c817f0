"""The one place chat completions are called: litellm, temperature 0, retries, clear errors.

Every LLM feature (compaction, extraction, dedupe decisions) goes through :func:`complete`, so
provider quirks, retries and error messages live here once. litellm is imported lazily (through
:func:`mdmem.tokens.import_litellm`): importing mdmem never pays for it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mdmem.config import LLMConfig
from mdmem.errors import MdmemError
from mdmem.redact import DEFAULT, Redactor
from mdmem.tokens import import_litellm

Message = Mapping[str, Any]

TRANSIENT = (
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
)
"""litellm exceptions worth another try after a pause."""
FATAL = ("AuthenticationError", "PermissionDeniedError", "BadRequestError", "NotFoundError")
"""litellm exceptions that the same request will hit again: configuration problems."""
BACKOFF_SECONDS = 0.5
"""First pause after a transient error; doubled after each further one."""


class LLMError(MdmemError):
    """A model call failed for good (configuration, authentication, or retries exhausted), or
    its reply could not be used. The message names the model and what to change."""


@dataclass(frozen=True)
class LLMReply:
    """A model's answer and what it cost."""

    text: str
    model: str
    cost: float | None = None
    """USD, from litellm's ``completion_cost``; None when the model's price is unknown."""
    prompt_tokens: int = 0
    completion_tokens: int = 0


def complete(
    messages: Sequence[Message],
    config: LLMConfig,
    *,
    json: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    backoff: float = BACKOFF_SECONDS,
    redactor: Redactor = DEFAULT,
    **kwargs: Any,
) -> LLMReply:
    """One chat completion at temperature 0.

    Every message's text is masked by ``redactor`` first (the built-in rules unless the
    workspace passes its own): no secret in memory or a conversation is sent to a provider.

    ``json=True`` asks for a JSON object where the provider supports it (litellm drops the
    parameter elsewhere; callers validate the reply either way). Transient errors are retried
    ``config.max_retries`` times with exponential backoff (``sleep`` is injectable for tests);
    anything else raises :class:`LLMError`. Extra keyword arguments go to
    ``litellm.completion`` (e.g. ``mock_response=`` in tests).
    """
    if not config.model:
        raise LLMError("no model configured: set [llm] model in mdmem.toml (or use --offline)")
    litellm = import_litellm()
    litellm.suppress_debug_info = True  # our errors say what to do; no "Give Feedback" banner
    args = _call_args([_masked(m, redactor) for m in messages], config, json, kwargs)
    if "api_key" not in args and "api_base" not in args and "mock_response" not in args:
        _check_key(config.model, litellm)
    transient = _exceptions(litellm, TRANSIENT)
    fatal = _exceptions(litellm, FATAL)
    attempts = max(0, config.max_retries) + 1
    for attempt in range(attempts):
        try:
            response = litellm.completion(**args)
        except transient as exc:
            if attempt + 1 >= attempts:
                raise LLMError(
                    f"{config.model}: gave up after {attempts} attempts: {_short(exc)}"
                ) from exc
            sleep(backoff * 2**attempt)
        except fatal as exc:
            raise LLMError(_explain(exc, config, litellm)) from exc
        except Exception as exc:  # litellm raises many kinds; the caller needs one
            raise LLMError(f"{config.model}: {type(exc).__name__}: {_short(exc)}") from exc
        else:
            return _reply(response, config.model, litellm)
    raise AssertionError("unreachable")


def _call_args(
    messages: Sequence[Message], config: LLMConfig, json: bool, extra: dict[str, Any]
) -> dict[str, Any]:
    args: dict[str, Any] = {
        "model": config.model,
        "messages": [dict(m) for m in messages],
        "temperature": 0,
        "timeout": config.timeout_seconds,
        "drop_params": True,  # providers without temperature / response_format still work
        "max_retries": 0,  # retries are ours, with backoff; not the provider SDK's as well
    }
    if config.api_base:
        args["api_base"] = config.api_base
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise LLMError(
                f"{config.model}: the API key variable {config.api_key_env} is not set "
                f"(named by [llm] api_key_env in mdmem.toml): export {config.api_key_env}=..."
            )
        args["api_key"] = key
    if json:
        args["response_format"] = {"type": "json_object"}
    args.update(extra)
    return args


def _masked(message: Message, redactor: Redactor) -> Message:
    """A message with its text masked: a string content, or the text parts of a list."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": redactor(content)}
    if isinstance(content, list):
        parts = [
            {**p, "text": redactor(p["text"])}
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            else p
            for p in content
        ]
        return {**message, "content": parts}
    return message


def _exceptions(litellm: Any, names: Sequence[str]) -> tuple[type[BaseException], ...]:
    return tuple(getattr(litellm, n) for n in names if isinstance(getattr(litellm, n, None), type))


def _explain(exc: BaseException, config: LLMConfig, litellm: Any) -> str:
    """A configuration error as one sentence saying what to change."""
    kind = type(exc).__name__
    what = f"{config.model}: {kind}: {_short(exc)}"
    if kind in ("AuthenticationError", "PermissionDeniedError"):
        if config.api_key_env:
            return f"{what}. Check the key in ${config.api_key_env} ([llm] api_key_env)."
        return f"{what}. Set {_key_hint(config.model, litellm)} or [llm] api_key_env."
    if kind == "NotFoundError":
        return f"{what}. Check [llm] model (and api_base) in mdmem.toml."
    return f"{what}. Check [llm] model, api_base and api_key_env in mdmem.toml."


def _check_key(model: str, litellm: Any) -> None:
    """Fail before the call when the provider's API key variable is unset: some providers
    report a missing key as a server error, which would be retried for nothing."""
    missing = _missing_keys(model, litellm)
    if missing:
        names = " or ".join(missing)
        raise LLMError(
            f"{model}: no API key: set {names}, or name the variable holding the key in "
            "[llm] api_key_env in mdmem.toml"
        )


def _missing_keys(model: str, litellm: Any) -> list[str]:
    """Unset key variables litellm expects for the model (not api bases: those default)."""
    try:
        missing = litellm.validate_environment(model=model).get("missing_keys") or []
    except Exception:
        return []
    return [str(k) for k in missing if "KEY" in str(k) or "TOKEN" in str(k)]


def _key_hint(model: str, litellm: Any) -> str:
    """The environment variable litellm reads for this model's provider, if it knows one."""
    missing = _missing_keys(model, litellm)
    return " or ".join(missing) if missing else "the provider's API key variable"


def _reply(response: Any, model: str, litellm: Any) -> LLMReply:
    try:
        text = response.choices[0].message.content or ""
    except (AttributeError, IndexError) as exc:
        raise LLMError(f"{model}: the reply has no message: {str(response)[:200]!r}") from exc
    usage = getattr(response, "usage", None)
    return LLMReply(
        text=text,
        model=str(getattr(response, "model", None) or model),
        cost=_cost(response, litellm),
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
    )


def _cost(response: Any, litellm: Any) -> float | None:
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # unknown model or provider: no price, not an error
        return None
    return float(cost) if cost else None


def _short(exc: BaseException, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", str(exc)).strip() or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
