"""The LLM call: litellm's own mock responses and a scripted provider registered with litellm."""

from __future__ import annotations

import pytest

from mdmem.config import LLMConfig
from mdmem.distill.llm import LLMError, LLMReply, complete
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

    code = "import sys, mdmem.distill.compact, mdmem.distill.extract, mdmem.distill.llm; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _FakeOpenAI:
    """A local OpenAI-compatible server (like Ollama or vLLM) on 127.0.0.1: the real HTTP path
    through litellm and the OpenAI client, no network beyond this machine's loopback."""

    def __init__(self, *statuses: int) -> None:
        import http.server
        import json
        import threading

        self.statuses = list(statuses)
        self.requests: list[tuple[dict, str]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((body, self.headers.get("Authorization", "")))
                status = outer.statuses.pop(0) if outer.statuses else 200
                reply = {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "local answer"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
                }
                if status != 200:
                    reply = {"error": {"message": f"status {status}", "type": "server_error"}}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_local_openai_compatible_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_TEST_KEY", "sk-local")
    server = _FakeOpenAI(503)  # the first answer is a transient error
    try:
        config = LLMConfig(
            model="openai/local-model", api_base=server.base, api_key_env="MDMEM_TEST_KEY"
        )
        sleeps: list[float] = []
        reply = complete(MESSAGES, config, sleep=sleeps.append, backoff=0.01)
        assert reply.text == "local answer" and reply.prompt_tokens == 12
        assert len(server.requests) == 2 and sleeps == [0.01]
        body, auth = server.requests[-1]
        assert auth == "Bearer sk-local"
        assert body["temperature"] == 0 and body["model"] == "local-model"
    finally:
        server.close()


def test_a_local_server_refusing_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_TEST_KEY", "sk-wrong")
    server = _FakeOpenAI(401)
    try:
        config = LLMConfig(
            model="openai/local-model", api_base=server.base, api_key_env="MDMEM_TEST_KEY"
        )
        with pytest.raises(LLMError, match=r"openai/local-model.*MDMEM_TEST_KEY"):
            complete(MESSAGES, config, sleep=lambda _: None)
        assert len(server.requests) == 1  # not retried
    finally:
        server.close()
