"""Context management: keep a conversation inside the model's window, by the API's rules.

Nothing here runs while a request fits under the policy's trigger
(``teamrt.runtime.compaction``), so the prompt prefix stays byte-for-byte the
same from call to call and the cache keeps working. Past it, on models without
compaction on demand (or when it returns no summary), the loop compacts, cheapest first:

1. clear old tool results: every ``tool_result`` except those of the newest
   ``KEEP_RESULT_TURNS`` user turns is replaced by a one-line note, and so is
   every web search of the assistant turns before them: its ``server_tool_use``
   and ``web_search_tool_result`` go together (the API refuses one without the
   other, and a result's sealed content cannot be shortened), and the text
   citing them keeps its words but not its citations;
2. summarise: the model writes a summary of the work so far, asked in a request
   that keeps the agent's cached prefix (same system, tools, ``tool_choice`` and
   thinking; the instruction is the last user text), and the history becomes
   that summary followed by the last assistant turn and the user turn answering
   it (so every ``tool_use`` keeps its ``tool_result``), or by the last
   assistant turns when the API paused them (``pause_turn``).

Thinking blocks. A model that binds thinking (the catalog's ``binds_thinking``)
refuses a replayed thinking block whose prefix (every message and block before
it) changed. After an edit, ``rebound`` strips the thinking blocks that come
after the first change and keeps every other block exact (an unchanged prefix
keeps its cache and the model's reasoning). Blocks after a ``compaction`` block
are bound from that block on (the API drops what comes before it), and the
turns kept after a block the API wrote keep their thinking: an edit before or
at the block strips nothing. With manual thinking (``type: enabled``) the API also
wants the last assistant turn that calls tools to start with a thinking block,
which a stripped turn cannot: there the summary keeps no assistant turn and
tells the model, in its own words, what the last calls returned (``recapped``).

Compaction on demand (``teamrt.runtime.compaction``, strategy ``on_demand``):
``compaction_split`` chooses the messages summarised (the agent's last request),
``swapped`` puts the returned block in their place, ``summary_of`` tells a
summary from a failed compaction.

The loop gives up after ``MAX_FAILED_COMPACTIONS`` compactions that did not
bring the request under the limit.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from teamrt.models.types import Block, Message, ModelRequest, ModelResponse

KEEP_RESULT_TURNS = 3
CLEARED_ENOUGH = 0.75
"""Clearing old results is enough only when it brings the request under this share of the trigger: each
clearing rewrites the cache from the first cleared result on, and one that frees a little is soon needed
again (the API's ``clear_at_least`` answers the same problem)."""
MAX_FAILED_COMPACTIONS = 3
CLEARED = "[tool result cleared to save context; run the tool again if you need it]"
SUMMARY_INSTRUCTION = (
    "Your context is nearly full. Write a summary of the work so far that lets you continue without"
    " the earlier messages: the task, what you found (with file paths and figures), what you changed,"
    " what is left to do, and anything you promised. Reply with the summary only; call no tool."
)
SUMMARY_AGAIN = "Not run: write the summary first, as text, and call no tool."
CONTINUE = "[Your context was compacted: the summary above is all of the work so far. Go on from it.]"
"""The user turn after a compaction that summarised the whole history: the API answers a user turn."""
RECAP_CHARS = 20_000
"""How much of each tool result a recap keeps."""
_THINKING = frozenset({"thinking", "redacted_thinking"})


def limit_for(window: int, max_tokens: int) -> int:
    """The most input tokens a request may have: the window less the reply and a 5% margin."""
    return window - max_tokens - window // 20


def clear_old_tool_results(messages: list[Message]) -> list[Message] | None:
    """A copy with old tool results and web searches cleared, or None when there is nothing old to clear."""
    user_turns = [i for i, m in enumerate(messages) if m["role"] == "user"]
    keep_from = user_turns[-KEEP_RESULT_TURNS] if len(user_turns) >= KEEP_RESULT_TURNS else 0
    cleared: list[Message] = []
    changed = False
    for i, message in enumerate(messages):
        content = message["content"]
        if i >= keep_from or isinstance(content, str):
            cleared.append(message)
            continue
        blocks = _cleared_results(content) if message["role"] == "user" else _cleared_searches(content)
        changed = changed or blocks != content
        cleared.append({**message, "content": blocks})
    return cleared if changed else None


def _cleared_results(content: list[Block]) -> list[Block]:
    return [
        {**b, "content": CLEARED} if b.get("type") == "tool_result" and b.get("content") != CLEARED else b
        for b in content
    ]


def _cleared_searches(content: list[Block]) -> list[Block]:
    """An assistant turn with each web search (its call and result together) replaced by a note, and the
    citations of its text dropped (they point into the results)."""
    queries = {
        b.get("id"): (b.get("input") or {}).get("query", "")
        for b in content
        if b.get("type") == "server_tool_use"
    }
    blocks: list[Block] = []
    for block in content:
        kind = block.get("type")
        if kind == "server_tool_use":
            continue
        if kind == "web_search_tool_result" and block.get("tool_use_id") in queries:
            query = queries[block.get("tool_use_id")]
            found = block.get("content")
            pages = (
                ", ".join(str(r.get("url")) for r in found if isinstance(r, dict))
                if isinstance(found, list)
                else ""
            )
            block = {
                "type": "text",
                "text": f"[web search {query!r} cleared to save context; it found: {pages or 'nothing'}]",
            }
        elif kind == "text" and "citations" in block:
            block = {k: v for k, v in block.items() if k != "citations"}
        blocks.append(block)
    return blocks


def summary_request(
    request: ModelRequest, max_tokens: int, *, tool_choice: dict[str, Any] | None = None
) -> ModelRequest:
    """``request`` with the summary instruction added to its last user message (a user turn of its own
    after a turn the API paused). Everything else stays as the agent sends it, so the request reads the
    agent's cached prefix; ``tool_choice`` overrides the agent's (the legacy policy's ``none``)."""
    messages = list(request.messages)
    instruction: Block = {"type": "text", "text": SUMMARY_INSTRUCTION}
    last = messages[-1]
    if last["role"] == "assistant":
        messages.append({"role": "user", "content": [instruction]})
    else:
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        messages[-1] = {**last, "content": [*blocks, instruction]}
    asked = replace(request, messages=messages, max_tokens=max_tokens)
    return asked if tool_choice is None else replace(asked, tool_choice=tool_choice)


def summary_again(ask: ModelRequest, answer: ModelResponse) -> ModelRequest:
    """The summary asked once more after a reply that called tools and wrote no text: the reply kept,
    each call answered "not run", the instruction repeated (the request extends the first, so it too
    reads the cache)."""
    results: list[Block] = [
        {"type": "tool_result", "tool_use_id": b["id"], "content": SUMMARY_AGAIN, "is_error": True}
        for b in answer.tool_uses
    ]
    again: list[Message] = [
        *ask.messages,
        {"role": "assistant", "content": answer.content},
        {"role": "user", "content": [*results, {"type": "text", "text": SUMMARY_INSTRUCTION}]},
    ]
    return replace(ask, messages=again)


def summarised(messages: list[Message], summary: str, *, recap: bool = False) -> list[Message]:
    """The history after a summary: the summary, then the last assistant turn and its answer, or the
    last assistant turns when the API paused them (they go on as they are). ``recap``: keep no assistant
    turn; the last calls and their results are told in the summary's message instead (``recapped``)."""
    text = f"[Summary of the work so far, written by you]\n\n{summary}"
    opening: Message = {"role": "user", "content": [{"type": "text", "text": text}]}
    if len(messages) >= 2 and messages[-1]["role"] == "assistant":
        first = len(messages)
        while first > 1 and messages[first - 1]["role"] == "assistant":
            first -= 1
        tail = messages[first:]
    elif len(messages) >= 3 and messages[-2]["role"] == "assistant":
        tail = messages[-2:]
    else:
        return [opening]
    if recap:
        return [{"role": "user", "content": [{"type": "text", "text": text + recapped(tail)}]}]
    return [opening, *tail]


def recapped(tail: list[Message]) -> str:
    """The kept turns told as text: what was said, each call with its input and (cut) result."""
    lines = ["\n\n[Your last turn, as it went]"]
    for message in tail:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks:
            kind = block.get("type")
            if kind == "text" and str(block.get("text", "")).strip():
                who = "You said" if message["role"] == "assistant" else "Then"
                lines.append(f"{who}: {block['text']}")
            elif kind == "tool_use":
                lines.append(
                    f"You called {block['name']} {json.dumps(block.get('input'), ensure_ascii=False)}"
                )
            elif kind == "tool_result":
                result = block.get("content")
                shown = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
                cut = shown[:RECAP_CHARS] + (" [...]" if len(shown) > RECAP_CHARS else "")
                lines.append(f"It returned{' an error' if block.get('is_error') else ''}: {cut}")
    return "\n".join(lines)


def compaction_split(messages: list[Message]) -> int:
    """How many messages from the front a compaction on demand summarises: those before the last run of
    assistant messages, which is the agent's last request exactly (it reads that request's cache, and the
    first kept message, the reply, differs in role from the last summarised one, as the API wants for its
    thinking to stay valid). All of them when there is no such request to split at."""
    first = len(messages)
    while first > 0 and messages[first - 1]["role"] == "assistant":
        first -= 1
    if first == len(messages):  # the history ends with a user turn: the reply before it is kept
        first = len(messages) - 1
        while first > 0 and messages[first]["role"] != "assistant":
            first -= 1
        while first > 0 and messages[first - 1]["role"] == "assistant":
            first -= 1
    summarised = messages[:first]
    return first if any(m["role"] == "user" for m in summarised) else len(messages)


def swapped(messages: list[Message], sent: int, block: Block) -> list[Message]:
    """The history after a compaction on demand (compaction-background's swap): the ``sent`` messages it
    summarised dropped from the front and the returned block, in an assistant message of its own, in their
    place; every later message stays after it as it is. With nothing kept, a user turn asks the model to go
    on from the summary (a request may not end with the block)."""
    kept = messages[sent:]
    if not kept:
        kept = [{"role": "user", "content": [{"type": "text", "text": CONTINUE}]}]
    return [{"role": "assistant", "content": [block]}, *kept]


def summary_of(content: list[Block]) -> Block | None:
    """The ``compaction`` block of a compaction request's answer when it holds a summary, else None (no
    block, or one with null content: the API could not write one)."""
    for block in content:
        if block.get("type") == "compaction" and isinstance(block.get("content"), str) and block["content"]:
            return block
    return None


# -- thinking blocks ------------------------------------------------------------------------------


def rebound(before: list[Message], after: list[Message]) -> list[Message]:
    """``after`` with the thinking blocks whose prefix differs from ``before``'s stripped (a model that
    binds thinking refuses them), every other block exact. An assistant message left empty is dropped
    (the user turns around it are one turn to the API)."""
    change = _first_change(before, after)
    if change is None:
        return after
    start = _newest_compaction(after)
    if start is not None and change <= start:
        # the API reads nothing before the compaction block; the turns kept after a block it wrote keep
        # their thinking (compaction-thinking-blocks: the check accepts the API's own summary in place of
        # what it summarised, the kept turns following it unchanged)
        return after
    result: list[Message] = []
    for i, message in enumerate(after):
        content = message["content"]
        if message["role"] != "assistant" or isinstance(content, str):
            result.append(message)
            continue
        kept = [b for j, b in enumerate(content) if b.get("type") not in _THINKING or (i, j) <= change]
        if len(kept) == len(content):
            result.append(message)
        elif kept:
            result.append({**message, "content": kept})
    return result


def _first_change(before: list[Message], after: list[Message]) -> tuple[int, int] | None:
    """(message, block) of the first block of ``after`` whose prefix differs from ``before``'s; None when
    ``after`` only extends ``before``."""
    for i, message in enumerate(after):
        if i >= len(before):
            return None
        old, new = before[i], message
        if old == new:
            continue
        if old.get("role") != new.get("role"):
            return (i, -1)
        a, b = _blocks(old), _blocks(new)
        for j in range(min(len(a), len(b))):
            if a[j] != b[j]:
                return (i, j)
        return (i, min(len(a), len(b)))
    return None


def _newest_compaction(messages: list[Message]) -> tuple[int, int] | None:
    for i in range(len(messages) - 1, -1, -1):
        blocks = _blocks(messages[i])
        for j in range(len(blocks) - 1, -1, -1):
            if blocks[j].get("type") == "compaction":
                return (i, j)
    return None


def _blocks(message: Message) -> list[Block]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
