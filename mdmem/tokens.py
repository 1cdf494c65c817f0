"""Counting tokens: litellm's tokenizer for a named model (offline), else a fast estimate.

Budgets are only honest if the count matches the model's; the estimate errs on the high side
so that a budget computed with it is not exceeded by the usual tokenizers.

Importing litellm costs a short-lived process ~10 s (a Claude Code hook building the context
for a workspace whose ``[llm] model`` is set). For a model litellm counts with one of OpenAI's
tiktoken encodings, what litellm decided (the encoding, how it splits a text) is remembered in
the user's cache folder, keyed by litellm's and tiktoken's installed files and their
environment, once litellm itself agreed with the reproduction on sample texts; a later process
counts with tiktoken alone, the same numbers without the import (:func:`_remembered`).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
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
    global _installed_before
    if "litellm" not in sys.modules:  # (already paid for: litellm's own count)
        _installed_before = _installed()  # (importing litellm sets variables of its own)
        remembered = _remembered(model, _installed_before)
        if remembered is not None:
            return remembered
    count = _litellm_count(model)
    _remember(model, count, _installed_before)
    return count


def _litellm_count(model: str) -> TokenCounter:
    litellm = import_litellm()

    def count(text: str) -> int:
        return int(litellm.token_counter(model=model, text=text)) if text else 0

    return count


# ---- litellm's tiktoken counts without litellm ------------------------------------------------

REMEMBERED_FILE = "token-encodings.json"
"""In the cache folder (``$MDMEM_CACHE_DIR``, else ``mdmem`` in the user's cache folder, as for
the ONNX export): per model, how litellm counts its tokens with tiktoken."""
_VERSION = 1
_BUNDLED = "litellm_core_utils/tokenizers"
"""litellm's copy of tiktoken's encoding files (it counts offline from them)."""
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
"""tiktoken's name for an encoding's file: its cache holds it as the SHA-1 of this."""
_ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base", "r50k_base")
_installed_before: list[object] | None = None
""":func:`_installed` as this process found it before it imported litellm (None: not seen)."""
_ENV_PREFIXES = ("LITELLM_", "TIKTOKEN_", "TOKEN_COUNTER_", "CUSTOM_TIKTOKEN_", "DATA_GYM_")
_PROBES = (
    "",
    "hello",
    "Use PostgreSQL advisory locks for invoice numbering; never MAX(n)+1.",
    "ünïcode, 漢字とかな, emoji 🎉, <|endoftext|> and <|im_start|> as plain text",
    "  leading and trailing spaces\n\n\t- a list item\n```py\nx = 1\n```\n",
    "word " * 700 + "漢" * 300,
)
"""Texts each remembered count is checked on against litellm's own before it is kept (one is
longer than litellm's chunk of 1,024 characters)."""


def _cache_file() -> str:
    given = os.environ.get("MDMEM_CACHE_DIR")
    if given:
        return os.path.join(os.path.expanduser(given), REMEMBERED_FILE)
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("mdmem", appauthor=False), REMEMBERED_FILE)


def _installed() -> list[object] | None:
    """What litellm's decision rests on, as installed now: litellm's and tiktoken's package
    files (a reinstall or upgrade changes them), this Python, and the environment variables
    either reads, as the user set them (taken before litellm is imported). None when either is
    missing."""
    import importlib.util

    key: list[object] = [sys.version]
    for name in ("litellm", "tiktoken"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            return None
        st = os.stat(spec.origin)
        key.append([spec.origin, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns])
    _litellm_environment()
    key.append(sorted([k, v] for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)))
    return key


def _remembered(model: str, installed: list[object] | None) -> TokenCounter | None:
    """litellm's count for ``model`` by tiktoken alone, when litellm's decision for it is
    remembered for what is ``installed`` now; else None (litellm counts)."""
    try:
        with open(_cache_file(), encoding="utf-8") as handle:
            state = json.load(handle)
        if installed is None or state.get("version") != _VERSION:
            return None
        if state.get("installed") != installed:
            return None
        return _tiktoken_counter(model, state["models"][model])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _tiktoken_counter(model: str, how: dict[str, Any]) -> TokenCounter | None:
    """litellm's text count as it makes it for an OpenAI encoding: the text in chunks of
    ``chunk`` characters, each encoded with special tokens as plain text; a text longer than
    ``exact`` characters (litellm extrapolates from samples) is left to litellm."""
    import hashlib

    name, folder = str(how["encoding"]), str(how["folder"])
    chunk, exact = int(how["chunk"]), int(how["exact"])
    blob = os.path.join(folder, hashlib.sha1(_BLOB.format(name).encode()).hexdigest())
    if name not in _ENCODINGS or chunk < 1 or not os.path.isfile(blob):
        return None  # (tiktoken would download it)
    import tiktoken

    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = folder
    try:
        encoding = tiktoken.get_encoding(name)
    finally:
        if before is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = before
    encode = encoding.encode

    def count(text: str) -> int:
        if not text:
            return 0
        if len(text) > exact:
            return _litellm_count(model)(text)
        return sum(
            len(encode(text[i : i + chunk], disallowed_special=()))
            for i in range(0, len(text), chunk)
        )

    return count


def _remember(model: str, litellm_count: TokenCounter, installed: list[object] | None) -> None:
    """After litellm counted for ``model``: how it does, kept for later processes when it is
    with a tiktoken encoding and the reproduction gives litellm's numbers on :data:`_PROBES`.
    Never raises (an older litellm without these functions is simply not remembered)."""
    try:
        import importlib.resources

        import litellm
        from litellm.litellm_core_utils import token_counter as counting
        from litellm.utils import huggingface_tokenizer_kind

        if litellm.disable_token_counter or huggingface_tokenizer_kind(model) is not None:
            return
        how = {
            "encoding": counting.openai_tokenizer_encoding_name(model),
            "chunk": int(counting.TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS),
            "exact": int(counting.TOKEN_COUNTER_MAX_EXACT_CHARS),
            "folder": str(importlib.resources.files(litellm).joinpath(_BUNDLED)),
        }
        path = _cache_file()
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
            if state.get("version") != _VERSION or state.get("installed") != installed:
                raise ValueError
        except (OSError, ValueError):
            state = {"version": _VERSION, "installed": installed, "models": {}}
        if installed is None or state["models"].get(model) == how:
            return  # (remembered already, by another process)
        mine = _tiktoken_counter(model, how)
        if mine is None or any(mine(t) != litellm_count(t) for t in _PROBES):
            return
        state["models"][model] = how
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(state, handle)
            os.replace(tmp, path)  # (whole or not at all)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except Exception:  # (the next process imports litellm as it always did)
        return


def count_message_tokens(messages: Sequence[Mapping[str, object]], model: str | None = None) -> int:
    """Tokens of a chat transcript as the model would see it (role overhead included)."""
    if not model:
        return sum(estimate_tokens(str(m.get("content") or "")) + 4 for m in messages)
    litellm = import_litellm()
    return int(litellm.token_counter(model=model, messages=messages))


def import_litellm() -> Any:  # the litellm module: a module object has no static type
    """litellm, imported on first use with its network look-ups turned off unless the user
    chose otherwise (the model cost map would otherwise be fetched at import)."""
    _litellm_environment()
    import litellm

    litellm.telemetry = False
    return litellm


def _litellm_environment() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
