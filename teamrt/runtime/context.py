"""Context management: keep a conversation inside the model's window.

Nothing here runs while a request fits, so the prompt prefix stays byte-for-byte
the same from call to call and the cache keeps working. When the next request
would come within ``margin`` of the window, the loop compacts, cheapest first:

1. clear old tool results: every ``tool_result`` except those of the newest
   ``KEEP_RESULT_TURNS`` user turns is replaced by a one-line note, and so is
   every web search of the assistant turns before them: its ``server_tool_use``
   and ``web_search_tool_result`` go together (the API refuses one without the
   other, and a result's sealed content cannot be shortened), and the text
   citing them keeps its words but not its citations;
2. summarise: the model writes a summary of the work so far, and the history
   becomes that summary followed by the last assistant turn and the user turn
   answering it (so every ``tool_use`` keeps its ``tool_result``), or by the
   last assistant turns when the API paused them (``pause_turn``).

The loop gives up after ``MAX_FAILED_COMPACTIONS`` compactions that did not
bring the request under the limit.
"""

from __future__ import annotations

from dataclasses import replace

from teamrt.models.types import Block, Message, ModelRequest

KEEP_RESULT_TURNS = 3
MAX_FAILED_COMPACTIONS = 3
CLEARED = "[tool result cleared to save context; run the tool again if you need it]"
SUMMARY_INSTRUCTION = (
    "Your context is nearly full. Write a summary of the work so far that lets you continue without"
    " the earlier messages: the task, what you found (with file paths and figures), what you changed,"
    " what is left to do, and anything you promised. Reply with the summary only; call no tool."
)


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


def summary_request(request: ModelRequest, max_tokens: int) -> ModelRequest:
    """``request`` with the summary instruction added to its last user message (a user turn of its own
    after a turn the API paused)."""
    messages = list(request.messages)
    instruction: Block = {"type": "text", "text": SUMMARY_INSTRUCTION}
    last = messages[-1]
    if last["role"] == "assistant":
        messages.append({"role": "user", "content": [instruction]})
    else:
        content = last["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        messages[-1] = {**last, "content": [*blocks, instruction]}
    return replace(request, messages=messages, max_tokens=max_tokens, tool_choice={"type": "none"})


def summarised(messages: list[Message], summary: str) -> list[Message]:
    """The history after a summary: the summary, then the last assistant turn and its answer, or the
    last assistant turns when the API paused them (they go on as they are)."""
    opening: Message = {
        "role": "user",
        "content": [{"type": "text", "text": f"[Summary of the work so far, written by you]\n\n{summary}"}],
    }
    if len(messages) >= 2 and messages[-1]["role"] == "assistant":
        first = len(messages)
        while first > 1 and messages[first - 1]["role"] == "assistant":
            first -= 1
        return [opening, *messages[first:]]
    if len(messages) >= 3 and messages[-2]["role"] == "assistant":
        return [opening, *messages[-2:]]
    return [opening]
