"""A kept conversation whose system prompt or tools changed since its thinking blocks were written.

A model that binds replayed thinking (``ModelInfo.binds_thinking``) refuses a block whose prefix changed,
and the system prompt and tools come first in every prefix. A resumed or continued agent gets them built
anew from the project: its memory files, its settings and the commands it may run can have changed since
(an "allow always" during the run changes the commands paragraph of every Bash agent's prompt). So each
agent's prefix digest is kept as an ``agent.prefix`` event, and an agent whose digest differs from the one
its history was written under goes on without that history's thinking blocks, which the API would refuse
("bound to a different conversation"); the event log says so.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from teamrt.models.tokens import canonical, system_blocks
from teamrt.models.types import Block, Message
from teamrt.store import Store

PREFIX: Final = "agent.prefix"
_THINKING = frozenset({"thinking", "redacted_thinking"})


def digest(system: Any, tools: list[Block]) -> str:
    """What a thinking block's prefix starts with: the system prompt's and the tools' bytes (cache markers
    aside), hashed."""
    hashed = hashlib.sha256()
    for tag, blocks in ((b"S", system_blocks(system)), (b"T", tools)):
        for block in blocks:
            data = canonical(block)
            hashed.update(tag + len(data).to_bytes(8, "big") + data)
    return hashed.hexdigest()


def recorded(store: Store, agent: str) -> str | None:
    """The digest ``agent``'s history was last written under, or None (a new agent, or a run kept before
    teamrt recorded it)."""
    found = [e for e in store.reader.events(kinds=(PREFIX,)) if e.agent == agent]
    value = found[-1].data.get("digest") if found else None
    return value if isinstance(value, str) else None


def has_thinking(messages: list[Message]) -> bool:
    return any(
        isinstance(m["content"], list) and any(b.get("type") in _THINKING for b in m["content"])
        for m in messages
        if m["role"] == "assistant"
    )


def without_thinking(messages: list[Message]) -> list[Message]:
    """``messages`` with every thinking block taken out; an assistant message left empty is dropped (the
    user turns around it are one turn to the API)."""
    result: list[Message] = []
    for message in messages:
        content = message["content"]
        if message["role"] != "assistant" or isinstance(content, str):
            result.append(message)
            continue
        kept = [b for b in content if b.get("type") not in _THINKING]
        if kept:
            result.append(message if len(kept) == len(content) else {**message, "content": kept})
    return result
