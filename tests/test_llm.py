"""The LLM call: litellm's own mock responses and a scripted provider registered with litellm."""

from __future__ import annotations

import pytest

from mdmem.config import LLMConfig
from mdmem.llm import LLMError, LLMReply, complete
from mdmem.tokens import import_litellm

MESSAGES = [{"role": "user", "content": "Summarize: the build failed, then we fixed it."}]


def rate_limit() -> Exception:
    litellm = import_litellm()
    return litellm.RateLimitError(message="429 slow down", llm_provider="scripted", model="m")


def test_reply_text_tokens_and_cost() -> None:
    reply = complete(MESSAGES, LLMConfig(model="gpt-4o-mini"), mock_response="Fixed the build.")
    assert isinstance(reply, LLMReply)
    assert reply.text == "Fixed the build."
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0
    assert reply.cost is not None and reply.cost > 0  # gpt-4o-mini has a known price


def test_transient_error_is_retried_with_backoff(scripted) -> None:
    script = scripted(rate_limit(), rate_limit(), "ok at last")
    sleeps: list[float] = []
    reply = complete(MESSAGES, LLMConfig(model="scripted/m"), sleep=sleeps.append, backoff=0.25)
    assert reply.text == "ok at last"
    assert sleeps == [0.25, 0.5]  # exponential
    assert len(script) == 3
    assert script.kwargs[0]["optional_params"].get("temperature") == 0


def test_retries_exhausted_is_a_clear_error(scripted) -> None:
    scripted(rate_limit(), rate_limit(), rate_limit())
    sleeps: list[float] = []
    with pytest.raises(LLMError, match=r"scripted/m: gave up after 3 attempts.*slow down"):
        complete(MESSAGES, LLMConfig(model="scripted/m", max_retries=2), sleep=sleeps.append)
    assert len(sleeps) == 2


def test_authentication_error_names_the_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    litellm = import_litellm()
    monkeypatch.setenv("MDMEM_TEST_KEY", "sk-wrong")
    error = litellm.AuthenticationError(
        message="Incorrect API key provided", llm_provider="openai", model="gpt-4o-mini"
    )
    sleeps: list[float] = []
    config = LLMConfig(model="gpt-4o-mini", api_key_env="MDMEM_TEST_KEY")
    with pytest.raises(LLMError) as info:
        complete(MESSAGES, config, mock_response=error, sleep=sleeps.append)
    message = str(info.value)
    assert "gpt-4o-mini" in message and "MDMEM_TEST_KEY" in message
    assert "AuthenticationError" in message
    assert sleeps == []  # never retried


def test_bad_request_is_not_retried(scripted) -> None:
    litellm = import_litellm()
    bad = litellm.BadRequestError(message="model not supported", llm_provider="x", model="m")
    script = scripted(bad, "never reached")
    with pytest.raises(LLMError, match=r"scripted/m: BadRequestError.*\[llm\] model"):
        complete(MESSAGES, LLMConfig(model="scripted/m"), sleep=lambda s: None)
    assert len(script) == 1


def test_missing_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MDMEM_NO_SUCH_KEY", raising=False)
    config = LLMConfig(model="gpt-4o-mini", api_key_env="MDMEM_NO_SUCH_KEY")
    with pytest.raises(LLMError, match="MDMEM_NO_SUCH_KEY is not set"):
        complete(MESSAGES, config, mock_response="unused")


def test_provider_key_missing_fails_before_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    sleeps: list[float] = []
    config = LLMConfig(model="anthropic/claude-3-5-haiku-latest")
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY"):
        complete(MESSAGES, config, sleep=sleeps.append)
    assert sleeps == []


def test_no_model_configured() -> None:
    with pytest.raises(LLMError, match=r"\[llm\] model"):
        complete(MESSAGES, LLMConfig())


def test_importing_the_engines_does_not_import_litellm() -> None:
    import subprocess
    import sys

    code = "import sys, mdmem.compact, mdmem.extract, mdmem.llm; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
