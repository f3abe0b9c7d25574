"""An agent's conversation rebuilt from its persisted turns (a restart; later, a resume)."""

from __future__ import annotations

from typing import Any

from teamrt.models.types import Block, Message
from teamrt.store import TurnRecord


def rebuild(turns: list[TurnRecord]) -> list[Message]:
    """The messages as the agent last had them: a ``compaction`` turn replaces all before it."""
    messages: list[Message] = []
    for turn in turns:
        if turn.role == "compaction":
            messages = [dict(m) for m in turn.content]
        elif turn.role != "assistant":
            messages.append({"role": turn.role, "content": turn.content})
        elif content := replayable(turn.content):
            messages.append({"role": turn.role, "content": content})
    return messages


def replayable(content: list[Block]) -> list[Block]:
    """A model's ``content`` as it can be sent back: without the empty or whitespace-only text blocks the
    API refuses (the same list when it has none). An assistant turn left with nothing is not sent at all;
    the user turns around it are one turn to the API."""
    if all(b.get("type") != "text" or str(b.get("text", "")).strip() for b in content):
        return content
    return [b for b in content if b.get("type") != "text" or str(b.get("text", "")).strip()]


def unanswered_calls(messages: list[Message]) -> list[Block]:
    """The tool calls of a last assistant turn whose results were never kept."""
    if not messages or messages[-1]["role"] != "assistant":
        return []
    content: list[Any] = messages[-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
