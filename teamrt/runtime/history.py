"""An agent's conversation rebuilt from its persisted turns (a restart; later, a resume)."""

from __future__ import annotations

from typing import Any

from ..models.types import Block, Message
from ..store import TurnRecord


def rebuild(turns: list[TurnRecord]) -> list[Message]:
    """The messages as the agent last had them: a ``compaction`` turn replaces all before it."""
    messages: list[Message] = []
    for turn in turns:
        if turn.role == "compaction":
            messages = [dict(m) for m in turn.content]
        else:
            messages.append({"role": turn.role, "content": turn.content})
    return messages


def unanswered_calls(messages: list[Message]) -> list[Block]:
    """The tool calls of a last assistant turn whose results were never kept."""
    if not messages or messages[-1]["role"] != "assistant":
        return []
    content: list[Any] = messages[-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
