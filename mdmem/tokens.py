"""Counting tokens: litellm's tokenizer for a named model (offline), else a fast estimate.

Budgets are only honest if the count matches the model's; the estimate errs on the high side
so that a budget computed with it is not exceeded by the usual tokenizers.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

TokenCounter = Callable[[str], int]


# Scripts written without spaces: about one token per character in the common tokenizers.
@lru_cache(maxsize=1)
def _dense() -> re.Pattern[str]:
    """Compiled when first needed: a class of ~30,000 characters takes ~10-15 ms to build,
    which a short-lived process counting only ASCII text never needs."""
    return re.compile(
        r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]"
    )


_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free count: ~1.3 tokens per word, one per CJK character and symbol."""
    if not text:
        return 0
    if text.isascii():  # (no dense script in it)
        dense, rest = 0, text
    else:
        dense = len(_dense().findall(text))
        rest = _dense().sub(" ", text)
    words, symbols = 0.0, 0
    for piece in _WORD.findall(rest):
        if piece[0].isalnum() or piece[0] == "_":
            # long words split into several pieces (identifiers, numbers, paths)
            words += max(1.0, len(piece) / 5)
        else:
            symbols += 1
    return dense + math.ceil(words * 1.3) + symbols


def token_counter(model: str | None = None) -> TokenCounter:
    """A counter for ``model`` (any litellm model name), or the estimate when ``model`` is empty."""
    if not model:
        return estimate_tokens
    return _litellm_counter(model)


@lru_cache(maxsize=8)
def _litellm_counter(model: str) -> TokenCounter:
    litellm = import_litellm()

    def count(text: str) -> int:
        return int(litellm.token_counter(model=model, text=text)) if text else 0

    return count


def count_message_tokens(messages: Sequence[Mapping[str, object]], model: str | None = None) -> int:
    """Tokens of a chat transcript as the model would see it (role overhead included)."""
    if not model:
        return sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)
    litellm = import_litellm()
    return int(litellm.token_counter(model=model, messages=messages))


def import_litellm() -> Any:  # the litellm module: a module object has no static type
    """litellm, imported on first use with its network look-ups turned off unless the user
    chose otherwise (the model cost map would otherwise be fetched at import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    return litellm
