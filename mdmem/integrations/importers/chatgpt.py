"""ChatGPT's data export: ``conversations.json``, a list of conversations whose messages form a
tree (``mapping``: node id → message, parent, children). Editing a message or regenerating an
answer starts a branch; ``current_node`` is the leaf the person last saw, so the conversation is
the path from it back to the root: only the active branch is kept. Hidden messages (system
prompts, custom instructions, memory context) are skipped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from mdmem.integrations.importers.common import (
    Conversation,
    Report,
    Turn,
    each_in_array,
    local_time,
    text_of,
)

SOURCE = "chatgpt"
_SKIPPED_CONTENT = {
    "user_editable_context",  # custom instructions
    "model_editable_context",  # saved memories shown to the model
    "reasoning_recap",  # "Thought for 12 seconds"
}


def conversations(stream: IO[str], name: str, report: Report) -> Iterator[Conversation]:
    return each_in_array(stream, name, report, parse)


def parse(item: dict[str, Any], where: str) -> Conversation:
    if not isinstance(item, dict) or not isinstance(item.get("mapping"), dict):
        raise ValueError("no 'mapping' of messages")
    conv_id = str(item.get("conversation_id") or item.get("id") or "")
    if not conv_id:
        raise ValueError("no conversation id")
    turns: list[Turn] = []
    for node in active_branch(item["mapping"], item.get("current_node")):
        message = node.get("message")
        if isinstance(message, dict):
            turn = _turn(message)
            if turn is not None:
                turns.append(turn)
    title = str(item.get("title") or "").strip()
    return Conversation(
        SOURCE, conv_id, title, tuple(turns), local_time(item.get("create_time")), where
    )


def active_branch(mapping: dict[str, Any], leaf: object) -> list[dict[str, Any]]:
    """The nodes from the root to ``leaf`` (the latest leaf when the export names none)."""
    if not isinstance(leaf, str) or leaf not in mapping:
        leaf = _latest_leaf(mapping)
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id = leaf
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise ValueError(f"message {node_id} is its own ancestor (a cycle in 'mapping')")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ValueError(f"node {node_id} is not an object")
        path.append(node)
        node_id = node.get("parent")
    return path[::-1]


def _latest_leaf(mapping: dict[str, Any]) -> str | None:
    leaves = [
        (float((node.get("message") or {}).get("create_time") or 0), key)
        for key, node in mapping.items()
        if isinstance(node, dict) and not node.get("children")
    ]
    return max(leaves)[1] if leaves else None


def _turn(message: dict[str, Any]) -> Turn | None:
    meta = message.get("metadata") or {}
    if meta.get("is_visually_hidden_from_conversation") or meta.get("is_user_system_message"):
        return None
    author = message.get("author") or {}
    role = author.get("role")
    content = message.get("content") or {}
    kind = content.get("content_type", "text")
    if role == "system" or kind in _SKIPPED_CONTENT:
        return None
    time = local_time(message.get("create_time"))
    if kind == "thoughts":
        text = "\n\n".join(text_of(t.get("content")) for t in content.get("thoughts") or [])
        return Turn("thinking", text, time) if text.strip() else None
    if kind == "tether_quote":
        text = "\n".join(s for s in (content.get("title"), content.get("text")) if s)
    elif kind == "tether_browsing_display":
        text = text_of(content.get("result"))
    elif "parts" in content:
        text = text_of(content["parts"])
    else:
        text = text_of(content.get("text"))
    if not text.strip():
        return None
    recipient = message.get("recipient") or "all"
    if role == "user":
        return Turn("user", text, time)
    if role == "tool":
        tool = str(author.get("name") or kind)
        return Turn("error" if kind == "system_error" else "tool_result", text, time, tool)
    if recipient != "all":  # the assistant calling a tool (code, browsing, image generation)
        return Turn("tool_call", text, time, str(recipient))
    return Turn("assistant", text, time)
