"""A model's token counts without importing litellm (mdmem/tokens.py; issue 41: a hook on a
workspace whose ``[llm] model`` is set imported litellm, ~10 s, to count tokens).

Real processes, real litellm and tiktoken: the first process counts with litellm and
remembers how (in ``$MDMEM_CACHE_DIR``); a later one must give litellm's exact numbers on
every text without importing it, and must go back to litellm whenever what it remembered may
no longer hold (a damaged file, another litellm environment)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "example_workspace"
MODELS = ("gpt-4o-mini", "gpt-4", "claude-3-5-haiku-latest")
"""An o200k model, a cl100k one, and one litellm counts with cl100k only because it does not
know it as OpenAI's (what a table of our own would get wrong)."""
COUNT = """
import json, sys
from mdmem.tokens import token_counter
texts, models = json.loads(sys.argv[1]), sys.argv[2:]
counts = {m: [token_counter(m)(t) for t in texts] for m in models}
print(json.dumps({"counts": counts, "litellm": "litellm" in sys.modules}))
"""

pytestmark = pytest.mark.slow  # (each process that counts with litellm imports it: ~10 s)


def texts() -> list[str]:
    """The example workspace's files and session files, and texts at the edges: special
    tokens as plain text, scripts without spaces, a character astride litellm's 1,024-character
    chunks, Windows line ends, an empty text."""
    files = sorted(EXAMPLE.rglob("*.md"))
    assert len(files) > 5
    out = [f.read_text(encoding="utf-8") for f in files]
    out += [
        "",
        " ",
        "<|endoftext|><|im_start|>user<|im_end|><|fim_prefix|>",
        "漢字とかなの文章、한국어 문장, émoji 🎉👩‍💻 and ZWJ",
        "a" * 1023 + "🎉" + "b" * 2000,
        "line one\r\nline two\r\n\r\n- item\r\n",
        "word " * 5000,
    ]
    return out


def count(env: dict[str, str], *models: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", COUNT, json.dumps(texts()), *models],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {
        **os.environ,
        "MDMEM_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "MDMEM_SERVER_AUTO": "0",
    }
    for name in list(out):
        if name.startswith(("LITELLM_", "TIKTOKEN_", "TOKEN_COUNTER_")):
            del out[name]
    return out


def test_remembered_counts_are_litellms_without_importing_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    first = count(env, *MODELS)
    assert first["litellm"]  # (nothing remembered yet: litellm counted)
    again = count(env, *MODELS)
    assert not again["litellm"]
    assert again["counts"] == first["counts"]

    # the hook that imported litellm for it: SessionStart on a workspace with an LLM set
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLE, ws)
    with (ws / "mdmem.toml").open("a", encoding="utf-8") as toml:
        toml.write('\n[llm]\nmodel = "gpt-4o-mini"\n')
    debug = tmp_path / "modules"
    debug.mkdir()
    argv = [sys.executable, "-m", "mdmem", "-w", str(ws), "hooks", "run", "claude-code"]
    done = subprocess.run(
        [*argv, "session-start"], input="{}", capture_output=True, text=True, timeout=300,
        env={**env, "MDMEM_DEBUG_MODULES": str(debug), "CLAUDE_CONFIG_DIR": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (modules,) = debug.iterdir()
    imported = set(modules.read_text().splitlines()[1:])
    assert "mdmem.context.build" in imported and "tiktoken" in imported
    assert "litellm" not in imported


def test_anything_doubtful_goes_back_to_litellm(env: dict[str, str]) -> None:
    remembered = Path(env["MDMEM_CACHE_DIR"]) / "token-encodings.json"
    remembered.parent.mkdir()
    remembered.write_text('{"version": 1, "installed": [', encoding="utf-8")  # damaged
    assert count(env, "gpt-4o-mini")["litellm"]
    assert json.loads(remembered.read_text(encoding="utf-8"))["models"]  # (remembered again)

    # litellm read differently (a variable of its own set): its decision is asked again
    assert count({**env, "TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS": "7"}, "gpt-4o-mini")["litellm"]
