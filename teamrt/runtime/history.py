"""An agent's conversation rebuilt from its persisted turns (a restart; later, a resume)."""

from __future__ import annotations

from typing import Any

from teamrt.models.catalog import ModelInfo
from teamrt.models.types import Block, Message
from teamrt.runtime.context import rebound
from teamrt.store import TurnRecord


def rebuild(turns: list[TurnRecord], info: ModelInfo | None = None) -> list[Message]:
    """The messages as the agent last had them: a ``compaction`` turn replaces all before it.

    On a model that binds replayed thinking blocks to their prefix (``info.binds_thinking``), a
    compaction's thinking blocks whose prefix it changed are stripped. teamrt now keeps them stripped;
    runs kept before it did not, and would be refused on resume."""
    binds_thinking = bool(info and info.binds_thinking)
    messages: list[Message] = []
    for turn in turns:
        if turn.role == "compaction":
            compacted = [dict(m) for m in turn.content]
            messages = rebound(messages, compacted) if binds_thinking else compacted
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
