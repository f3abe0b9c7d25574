"""The context edits that clear, as the API applies them before the model reads a request.

``clear_tool_uses_20250919``: once the trigger is passed (input tokens, or the number of tool uses), the
results of the oldest tool uses are replaced by ``PLACEHOLDER``, all but the newest ``keep`` (the
uses of ``exclude_tools`` are never cleared); ``clear_tool_inputs`` (true, or a list of tool names)
clears the calls' inputs too (to ``{}``). When less than ``clear_at_least`` input tokens would be
cleared, nothing is (the documented rule: clearing breaks the cache, so it must be worth it).

``clear_thinking_20251015``: the thinking and redacted thinking blocks of every assistant turn but the
newest ``keep`` are removed (``keep: "all"`` keeps them all). A turn is a run of assistant messages, as
the API merges them.

Each returns the messages the model reads (new lists and blocks; the request's are never changed) and
the ``applied_edits`` entry (None when it cleared nothing). The placeholder's wording is ours: the
documentation says only that placeholder text tells Claude the result was removed.
"""

from __future__ import annotations

from typing import Any

from teamrt.models.tokens import bytes_tokens, canonical
from teamrt.models.types import Block

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
PLACEHOLDER = "[Tool result cleared by context management to save context.]"
DEFAULT_TRIGGER: dict[str, Any] = {"type": "input_tokens", "value": 100_000}
DEFAULT_KEEP: dict[str, Any] = {"type": "tool_uses", "value": 3}
_THINKING = ("thinking", "redacted_thinking")

Messages = list[dict[str, Any]]
"""Messages with ``content`` always a list of blocks (``context_management.view`` makes them so)."""


def clear_tool_uses(
    messages: Messages, edit: dict[str, Any], input_tokens: int
) -> tuple[Messages, dict[str, Any] | None]:
    """Apply one ``clear_tool_uses_20250919`` edit to ``messages``, which count ``input_tokens`` in all."""
    uses = [
        (i, j, block)
        for i, message in enumerate(messages)
        if message["role"] == "assistant"
        for j, block in enumerate(message["content"])
        if block.get("type") == "tool_use"
    ]
    trigger = edit.get("trigger") or DEFAULT_TRIGGER
    size = input_tokens if trigger["type"] == "input_tokens" else len(uses)
    if size <= trigger["value"]:
        return messages, None
    results = {
        block.get("tool_use_id"): (i, j)
        for i, message in enumerate(messages)
        if message["role"] == "user"
        for j, block in enumerate(message["content"])
        if block.get("type") == "tool_result"
    }
    keep = (edit.get("keep") or DEFAULT_KEEP)["value"]
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs")
    changes: dict[tuple[int, int], Block] = {}
    cleared = 0
    for i, j, use in uses[: max(len(uses) - keep, 0)]:
        if use.get("name") in excluded:
            continue
        done = False
        where = results.get(use.get("id"))
        if where is not None:
            result = messages[where[0]]["content"][where[1]]
            if result.get("content") != PLACEHOLDER:
                changes[where] = {**result, "content": PLACEHOLDER}
                done = True
        if (inputs is True or (isinstance(inputs, list) and use.get("name") in inputs)) and use.get("input"):
            changes[(i, j)] = {**use, "input": {}}
            done = True
        cleared += done
    gained = sum(_tokens(messages[i]["content"][j]) - _tokens(new) for (i, j), new in changes.items())
    least = (edit.get("clear_at_least") or {}).get("value", 0)
    if not cleared or gained < least:
        return messages, None
    return _replaced(messages, changes), {
        "type": CLEAR_TOOL_USES,
        "cleared_tool_uses": cleared,
        "cleared_input_tokens": gained,
    }


def clear_thinking(messages: Messages, keep: Any) -> tuple[Messages, dict[str, Any] | None]:
    """Apply a ``clear_thinking_20251015`` edit keeping ``keep`` (``"all"``, ``{"type": "all"}`` or
    ``{"type": "thinking_turns", "value": n}``)."""
    if keep == "all" or (isinstance(keep, dict) and keep.get("type") == "all"):
        return messages, None
    turns: list[list[int]] = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if turns and turns[-1][-1] == i - 1:
            turns[-1].append(i)
        else:
            turns.append([i])
    count = keep["value"] if isinstance(keep, dict) else 1
    older = turns[: max(len(turns) - count, 0)]
    gained = 0
    cleared = 0
    out = list(messages)
    for turn in older:
        removed = [b for i in turn for b in messages[i]["content"] if b.get("type") in _THINKING]
        if not removed:
            continue
        cleared += 1
        gained += sum(_tokens(b) for b in removed)
        for i in turn:
            out[i] = {
                **messages[i],
                "content": [b for b in messages[i]["content"] if b.get("type") not in _THINKING],
            }
    if not cleared:
        return messages, None
    kept = [m for m in out if m["content"]]
    return kept, {"type": CLEAR_THINKING, "cleared_thinking_turns": cleared, "cleared_input_tokens": gained}


def _replaced(messages: Messages, changes: dict[tuple[int, int], Block]) -> Messages:
    out = list(messages)
    for i in sorted({i for i, _ in changes}):
        content = list(messages[i]["content"])
        for (mi, j), block in changes.items():
            if mi == i:
                content[j] = block
        out[i] = {**messages[i], "content": content}
    return out


def _tokens(block: Block) -> int:
    return bytes_tokens(canonical(block))
