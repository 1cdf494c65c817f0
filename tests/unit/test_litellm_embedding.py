"""API embedding models through litellm, driven by a custom provider registered with litellm
itself (no network)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import litellm
import pytest
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import EmbeddingResponse

from mdmem import Workspace
from mdmem.index.embed import EmbeddingError


class WordHashEmbeddings(CustomLLM):
    """A provider that embeds by hashing words into 32 dimensions, and counts its calls."""

    calls = 0

    def embedding(self, model, input, model_response, *args, **kwargs) -> EmbeddingResponse:
        type(self).calls += 1
        data = []
        for i, text in enumerate(input):
            vector = [0.0] * 32
            for word in text.lower().split():
                vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 32] += 1.0
            data.append({"object": "embedding", "index": i, "embedding": vector})
        model_response.data = data
        model_response.model = model
        return model_response


@pytest.fixture
def provider(register_provider):
    handler = WordHashEmbeddings()
    with register_provider("mdmemtest", handler):
        yield handler


def test_a_provider_is_registered_for_its_test_only(register_provider) -> None:
    lists = (litellm.custom_provider_map, litellm.provider_list, litellm._custom_providers)
    before = [list(items) for items in lists]
    with register_provider("mdmemtest", WordHashEmbeddings()):
        assert "mdmemtest" in litellm.provider_list and "mdmemtest" in litellm._custom_providers
    assert [list(items) for items in lists] == before  # the same list objects, as they were
    assert "mdmemtest" not in litellm.provider_list


def _workspace(root: Path, extra: str = "") -> Workspace:
    root.mkdir()
    (root / "mdmem.toml").write_text(
        f'[embedding]\nprovider = "litellm"\nmodel = "mdmemtest/words-32"\n{extra}'
    )
    (root / "memory.md").write_text(
        "## Facts\n- The billing service runs on Kubernetes\n- Lunch is at noon on Fridays\n"
    )
    return Workspace.open(root)


def test_vector_search_through_a_litellm_provider(tmp_path: Path, provider) -> None:
    ws = _workspace(tmp_path / "w")
    results = ws.search("billing service kubernetes", k=1, mode="vector")
    assert results[0].text == "The billing service runs on Kubernetes"
    assert results[0].scores.vector is not None
    status = ws.index.status()
    assert status.model == "litellm/mdmemtest/words-32" and status.embedded == status.chunks
    calls = provider.calls
    ws.search("lunch friday", k=1)  # only the query is embedded now: chunks are cached
    assert provider.calls == calls + 1


def test_a_missing_api_key_is_a_clear_error(tmp_path: Path, provider) -> None:
    ws = _workspace(tmp_path / "w", 'api_key_env = "MDMEM_TEST_UNSET_KEY"\n')
    with pytest.raises(EmbeddingError, match="MDMEM_TEST_UNSET_KEY"):
        ws.search("billing", mode="vector")


def test_provider_errors_are_wrapped(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "w")  # the provider is not registered: litellm refuses
    with pytest.raises(EmbeddingError, match="mdmemtest/words-32"):
        ws.search("billing", mode="vector")
