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

import datetime as dt
import json
from collections.abc import Iterator, Sequence
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


def reader() -> _Reader:
    """A reader of one log from its first record (:mod:`.log_resume` feeds it)."""
    return _Reader()


class _Reader:
    """Gathers a log's conversation record by record. What it knows besides the turns is
    small and can be kept (:meth:`state`), so a later import can go on where it stopped
    (:func:`resume`) without the turns before: the ids seen, the tools' names, and the lines
    where its title's candidates are, read again from the log when needed."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.seen: set[str] = set()
        self.titles: dict[str, str] = {}
        self.session_id = ""
        self.agent_id = ""
        self.tools: dict[str, str] = {}
        self.line = 0
        """The line of the record being added (when the caller says)."""
        self.title_lines: dict[str, int] = {}
        """Each title's leaf → the line of the summary record it was read from."""
        self.first_user: int | None = None
        """The line of the record that gave the first user turn of the main conversation."""
        self.first_user_text: str | None = None
        """That turn's text, when the turn is among the skipped ones (read again)."""
        self.first_time: dt.datetime | None = None
        """The time of the first turn that has one."""
        self.skipped = 0
        """Turns before ``turns`` (a resumed reader's)."""
        self.chain_before = b""
        """The digest chain's state after them (:meth:`Conversation.chain`)."""

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "summary":
            leaf = str(record.get("leafUuid"))
            self.titles[leaf] = str(record.get("summary") or "").strip()
            self.title_lines[leaf] = self.line
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
        main = (t.kind == "user" and not t.sidechain for t in turns)
        if self.first_user is None and self.first_user_text is None and any(main):
            self.first_user = self.line
        if self.first_time is None:
            self.first_time = next((t.time for t in turns if t.time is not None), None)
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
            first = self.first_user_text
            if first is None:
                main = (t.text for t in self.turns if t.kind == "user" and not t.sidechain)
                first = next(main, "")
            title = first.strip().split("\n", 1)[0][:80]
        if not self.skipped:
            return Conversation(SOURCE, key, title, tuple(self.turns), None, f"{name}:1")
        # (the skipped turns' first time, as the whole conversation's start would find it)
        return Conversation(
            SOURCE,
            key,
            title,
            tuple(self.turns),
            self.first_time,
            f"{name}:1",
            self.skipped,
            self.chain_before,
        )

    def state(self) -> dict[str, Any]:
        """What it knows besides the turns, as JSON values (no text of the log: where a
        title is, by line, never the title)."""
        return {
            "turns": self.skipped + len(self.turns),
            "seen": sorted(self.seen),
            "titles": list(self.title_lines.items()),
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "tools": self.tools,
            "first_user": self.first_user,
            "first_time": None if self.first_time is None else self.first_time.isoformat(),
        }


def resume(state: dict[str, Any], lines: Sequence[bytes]) -> _Reader:
    """A reader that goes on from ``state`` (:meth:`_Reader.state`), taken after the log's
    ``lines`` (as bytes, each with its end): the titles and the first user turn are read
    again from their lines. Raises ValueError, KeyError or TypeError on a state that does
    not fit them."""
    reader = _Reader()
    reader.skipped = int(state["turns"])
    reader.seen = {str(u) for u in state["seen"]}
    reader.session_id = str(state["session_id"])
    reader.agent_id = str(state["agent_id"])
    reader.tools = {str(k): str(v) for k, v in dict(state["tools"]).items()}
    for leaf, line in state["titles"]:
        record = _record_at(lines, int(line))
        reader.titles[str(leaf)] = str(record.get("summary") or "").strip()
        reader.title_lines[str(leaf)] = int(line)
    if state["first_user"] is not None:
        record = _record_at(lines, int(state["first_user"]))
        turns = _Reader()._turns(record, record["message"])
        main = [t.text for t in turns if t.kind == "user" and not t.sidechain]
        if not main:
            raise ValueError(f"no user turn on line {state['first_user']}")
        reader.first_user_text = main[0]
        reader.first_user = int(state["first_user"])
    if state["first_time"] is not None:
        reader.first_time = dt.datetime.fromisoformat(str(state["first_time"]))
    return reader


def _record_at(lines: Sequence[bytes], line: int) -> dict[str, Any]:
    if not 1 <= line <= len(lines):
        raise ValueError(f"no line {line}")
    text = lines[line - 1].decode("utf-8-sig" if line == 1 else "utf-8")
    record = json.loads(text)
    if not isinstance(record, dict):
        raise ValueError(f"line {line} is not an object")
    return record
