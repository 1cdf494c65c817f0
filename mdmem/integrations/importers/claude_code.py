"""Claude Code's session logs: ``~/.claude/projects/<project>/<session>.jsonl``, one record a
line, appended as the session goes (so a log can be imported again as it grows).

``user`` and ``assistant`` records carry a message (a string, or content blocks: text,
thinking, tool_use, tool_result); each has a ``uuid`` and the ``parentUuid`` it follows. Records
of a subagent's side conversation have ``isSidechain: true``: they are kept, marked
(``sidechain.user``, ``sidechain.tool_call`` …). A record with ``isCompactSummary: true`` is the
summary Claude Code wrote when it compacted the conversation; a line of ``type: "summary"`` is a
title. Meta records (command caveats) and bookkeeping lines (file snapshots, system notes) are
skipped, and a record seen before (same ``uuid``) is not repeated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import IO, Any

from mdmem.integrations.importers.common import (
    Conversation,
    Report,
    Turn,
    as_json,
    local_time,
    one_log,
    text_of,
)

SOURCE = "claude-code"


def conversations(stream: IO[str], name: str, report: Report) -> Iterator[Conversation]:
    """The one conversation a log holds (none if it holds no message)."""
    return one_log(stream, name, report, _Reader())


def looks_like(record: dict[str, Any]) -> bool:
    return (
        "sessionId" in record
        or (record.get("type") in ("user", "assistant", "summary") and "uuid" in record)
        or (record.get("type") == "summary" and "leafUuid" in record)
    )


class _Reader:
    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.seen: set[str] = set()
        self.titles: dict[str, str] = {}
        self.session_id = ""
        self.agent_id = ""
        self.tools: dict[str, str] = {}

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "summary":
            self.titles[str(record.get("leafUuid"))] = str(record.get("summary") or "").strip()
            return
        if kind not in ("user", "assistant") or record.get("isMeta"):
            return
        uuid = str(record.get("uuid") or "")
        if uuid and uuid in self.seen:
            return
        message = record["message"]
        if not isinstance(message, dict):
            raise ValueError("'message' is not an object")
        self.session_id = self.session_id or str(record.get("sessionId") or "")
        self.agent_id = self.agent_id or str(record.get("agentId") or "")
        turns = self._turns(record, message)
        if uuid:
            self.seen.add(uuid)
        self.turns += turns

    def _turns(self, record: dict[str, Any], message: dict[str, Any]) -> list[Turn]:
        time = local_time(record.get("timestamp"))
        side = bool(record.get("isSidechain"))
        content = message.get("content")
        if record.get("isCompactSummary"):
            text = text_of(content)
            return [Turn("summary", text, time, sidechain=side)] if text.strip() else []
        role = "assistant" if record["type"] == "assistant" else "user"
        if isinstance(content, str):
            return [Turn(role, content, time, sidechain=side)] if content.strip() else []
        if not isinstance(content, list):
            raise ValueError("'message.content' is neither text nor a list of blocks")
        out: list[Turn] = []
        for block in content:
            turn = self._block(block, role, time, side)
            if turn is not None and turn.text.strip():
                out.append(turn)
        return out

    def _block(self, block: Any, role: str, time: Any, side: bool) -> Turn | None:
        if not isinstance(block, dict):
            return Turn(role, str(block), time, sidechain=side)
        kind = block.get("type")
        if kind == "text":
            return Turn(role, str(block.get("text") or ""), time, sidechain=side)
        if kind == "thinking":
            return Turn("thinking", str(block.get("thinking") or ""), time, sidechain=side)
        if kind == "tool_use":
            name = str(block.get("name") or "tool")
            self.tools[str(block.get("id"))] = name
            return Turn("tool_call", as_json(block.get("input") or {}), time, name, side)
        if kind == "tool_result":
            name = self.tools.get(str(block.get("tool_use_id")), "tool")
            result = "error" if block.get("is_error") else "tool_result"
            return Turn(result, text_of(block.get("content")), time, name, side)
        if kind == "image":
            return Turn(role, "[image]", time, sidechain=side)
        return None

    def conversation(self, name: str) -> Conversation:
        stem = PurePosixPath(name).stem
        # a subagent's own log (agent-*.jsonl) shares its parent's sessionId
        key = stem if stem.startswith("agent-") else self.session_id or stem
        title = next((t for leaf, t in self.titles.items() if leaf in self.seen and t), "")
        title = title or next((t for t in self.titles.values() if t), "")
        if not title:
            first = next((t.text for t in self.turns if t.kind == "user" and not t.sidechain), "")
            title = first.strip().split("\n", 1)[0][:80]
        return Conversation(SOURCE, key, title, tuple(self.turns), None, f"{name}:1")
