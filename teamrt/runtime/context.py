"""Context management: keep a conversation inside the model's window.

Nothing here runs while a request fits, so the prompt prefix stays byte-for-byte
the same from call to call and the cache keeps working. When the next request
would come within ``margin`` of the window, the loop compacts, cheapest first:

1. clear old tool results: every ``tool_result`` except those of the newest
   ``KEEP_RESULT_TURNS`` user turns is replaced by a one-line note;
2. summarise: the model writes a summary of the work so far, and the history
   becomes that summary followed by the last assistant turn and the user turn
   answering it (so every ``tool_use`` keeps its ``tool_result``).

The loop gives up after ``MAX_FAILED_COMPACTIONS`` compactions that did not
bring the request under the limit.
"""

from __future__ import annotations

from dataclasses import replace

from ..models.types import Block, Message, ModelRequest

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
    """A copy with old tool results cleared, or None when there is nothing old to clear."""
    user_turns = [i for i, m in enumerate(messages) if m["role"] == "user"]
    keep_from = user_turns[-KEEP_RESULT_TURNS] if len(user_turns) >= KEEP_RESULT_TURNS else 0
    cleared: list[Message] = []
    changed = False
    for i, message in enumerate(messages):
        content = message["content"]
        if i >= keep_from or message["role"] != "user" or isinstance(content, str):
            cleared.append(message)
            continue
        blocks: list[Block] = []
        for block in content:
            if block.get("type") == "tool_result" and block.get("content") != CLEARED:
                block = {**block, "content": CLEARED}
                changed = True
            blocks.append(block)
        cleared.append({**message, "content": blocks})
    return cleared if changed else None


def summary_request(request: ModelRequest, max_tokens: int) -> ModelRequest:
    """``request`` with the summary instruction added to its last (user) message."""
    messages = list(request.messages)
    last = messages[-1]
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    messages[-1] = {**last, "content": [*blocks, {"type": "text", "text": SUMMARY_INSTRUCTION}]}
    return replace(request, messages=messages, max_tokens=max_tokens, tool_choice={"type": "none"})


def summarised(messages: list[Message], summary: str) -> list[Message]:
    """The history after a summary: the summary, then the last assistant turn and its answer."""
    opening: Message = {
        "role": "user",
        "content": [{"type": "text", "text": f"[Summary of the work so far, written by you]\n\n{summary}"}],
    }
    if len(messages) >= 3 and messages[-2]["role"] == "assistant":
        return [opening, *messages[-2:]]
    return [opening]
