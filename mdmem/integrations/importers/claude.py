"""Claude.ai's data export: ``conversations.json``, a list of conversations, each with its
``chat_messages`` in order (``sender`` human or assistant; the text in ``content`` blocks, or
``text`` in older exports) and the text of attached files (``attachments[].extracted_content``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from mdmem.integrations.importers.common import (
    Conversation,
    Report,
    Turn,
    as_json,
    each_in_array,
    local_time,
    text_of,
)

SOURCE = "claude"


def conversations(stream: IO[str], name: str, report: Report) -> Iterator[Conversation]:
    return each_in_array(stream, name, report, parse)


def parse(item: dict[str, Any], where: str) -> Conversation:
    if not isinstance(item, dict) or not isinstance(item.get("chat_messages"), list):
        raise ValueError("no 'chat_messages' list")
    conv_id = str(item.get("uuid") or "")
    if not conv_id:
        raise ValueError("no conversation 'uuid'")
    turns: list[Turn] = []
    for message in item["chat_messages"]:
        if not isinstance(message, dict):
            raise ValueError("a message is not an object")
        turns += _turns(message)
    title = str(item.get("name") or "").strip()
    return Conversation(
        "claude", conv_id, title, tuple(turns), local_time(item.get("created_at")), where
    )


def _turns(message: dict[str, Any]) -> list[Turn]:
    time = local_time(message.get("created_at"))
    role = "user" if message.get("sender") == "human" else "assistant"
    out: list[Turn] = []
    for attachment in message.get("attachments") or []:
        extracted = str(attachment.get("extracted_content") or "").strip()
        if extracted:
            name = attachment.get("file_name") or "attachment"
            out.append(Turn("attachment", f"{name}\n{extracted}", time))
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks:
        text = str(message.get("text") or "")
        return out + ([Turn(role, text, time)] if text.strip() else [])
    tools: dict[str, str] = {}
    for block in blocks:
        kind = block.get("type")
        at = local_time(block.get("start_timestamp")) or time
        if kind == "text" and str(block.get("text") or "").strip():
            out.append(Turn(role, block["text"], at))
        elif kind == "thinking" and str(block.get("thinking") or "").strip():
            out.append(Turn("thinking", block["thinking"], at))
        elif kind == "tool_use":
            name = str(block.get("name") or "tool")
            tools[str(block.get("id"))] = name
            out.append(Turn("tool_call", as_json(block.get("input") or {}), at, name))
        elif kind == "tool_result":
            name = str(block.get("name") or tools.get(str(block.get("tool_use_id")), "tool"))
            result = "error" if block.get("is_error") else "tool_result"
            text = text_of(block.get("content"))
            if text.strip():
                out.append(Turn(result, text, at, name))
    return out
