"""How fast `mdmem import` turns chat histories into session files, in messages per second.

    .venv/bin/python benchmarks/import_speed.py [--conversations 200] [--messages 50] [--repeat 3]

Synthetic exports (in .bench/import/) with ``--conversations`` conversations of ``--messages``
messages each (a sentence or a short paragraph, a tool call every tenth message, one planted
secret per conversation):

  chatgpt       one conversations.json, each message a node of the ``mapping`` tree
  claude-code   one log per conversation (a folder of .jsonl files)

Each run imports into a fresh full-mode workspace (the secret redactor on, as always), then
imports the same path again (every conversation unchanged: nothing written). The best of
``--repeat`` runs is shown; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from mdmem import Workspace
from mdmem.integrations.importers import import_path

OUT = Path(__file__).resolve().parent.parent / ".bench" / "import"
WORDS = (
    "the invoice export needs a retry when the queue is full and the worker restarts after "
    "a deploy so we keep the numbering gap free and tell the user what changed"
).split()
START = 1767261600.0


def _text(n: int, m: int) -> str:
    size = 8 + (n * 7 + m * 13) % 40
    words = [WORDS[(n + m + i) % len(WORDS)] for i in range(size)]
    if m % 5 == 4:  # a short paragraph now and then
        words[size // 2] += ".\n\nThen"
    return " ".join(words).capitalize() + "."


def chatgpt_export(folder: Path, conversations: int, messages: int) -> Path:
    items = []
    for n in range(conversations):
        mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None}}
        parent = "root"
        for m in range(messages):
            node = f"n{m}"
            role = "user" if m % 2 == 0 else "assistant"
            content: dict = {"content_type": "text", "parts": [_text(n, m)]}
            recipient = "all"
            if m % 10 == 9:
                role, recipient = "assistant", "python"
                content = {"content_type": "code", "language": "python", "text": f"print({m})"}
            if m == 2:
                content["parts"] = [f"My key is ghp_{'a' * 30}{n:06d}, keep it safe."]
            mapping[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": role},
                    "create_time": START + n * 3600 + m * 30,
                    "content": content,
                    "recipient": recipient,
                    "metadata": {},
                },
            }
            mapping[parent]["children"] = [node]
            parent = node
        items.append({
            "title": f"Conversation {n}", "create_time": START + n * 3600, "mapping": mapping,
            "current_node": parent, "conversation_id": f"conv-{n:06d}",
        })  # fmt: skip
    path = folder / "chatgpt" / "conversations.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items))
    return path


def claude_code_logs(folder: Path, conversations: int, messages: int) -> Path:
    target = folder / "claude-code"
    target.mkdir(parents=True, exist_ok=True)
    for n in range(conversations):
        session = f"00000000-0000-4000-8000-{n:012d}"
        lines = []
        parent = None
        for m in range(messages):
            uuid = f"{session}-{m}"
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START + n * 3600 + m * 30))
            if m % 10 == 9:
                message = {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{m}", "name": "Bash",
                     "input": {"command": f"pytest -q tests/test_{m}.py"}}]}  # fmt: skip
                kind = "assistant"
            elif m % 2 == 0:
                message, kind = {"role": "user", "content": _text(n, m)}, "user"
            else:
                message = {"role": "assistant", "content": [{"type": "text", "text": _text(n, m)}]}
                kind = "assistant"
            lines.append(json.dumps({
                "type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False,
                "sessionId": session, "timestamp": stamp, "message": message,
            }))  # fmt: skip
            parent = uuid
        (target / f"{session}.jsonl").write_text("\n".join(lines) + "\n")
    return target


def timed(source: Path, repeat: int) -> tuple[float, float, int]:
    """Best seconds of a first import and of a re-import, and the messages imported."""
    first, again, count = float("inf"), float("inf"), 0
    for _ in range(repeat):
        shutil.rmtree(OUT / "ws", ignore_errors=True)
        ws = Workspace.init(OUT / "ws", mode="full", agent="bench")
        start = time.perf_counter()
        report = import_path(ws, source)
        first = min(first, time.perf_counter() - start)
        count = report.messages
        start = time.perf_counter()
        import_path(ws, source)
        again = min(again, time.perf_counter() - start)
        ws.close()
    return first, again, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    sources = {
        "chatgpt": chatgpt_export(OUT, args.conversations, args.messages),
        "claude-code": claude_code_logs(OUT, args.conversations, args.messages),
    }
    table = Table(
        title=f"mdmem import: {args.conversations} conversations of {args.messages} messages"
    )
    for column in ("format", "input", "messages", "import s", "messages/s", "re-import s"):
        table.add_column(column, justify="left" if column == "format" else "right")
    for name, source in sources.items():
        size = sum(p.stat().st_size for p in ([source] if source.is_file() else source.iterdir()))
        first, again, count = timed(source, args.repeat)
        table.add_row(
            name,
            f"{size / 1e6:.1f} MB",
            f"{count:,}",
            f"{first:.2f}",
            f"{count / first:,.0f}",
            f"{again:.2f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
