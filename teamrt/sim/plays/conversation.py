"""What a team policy reads from its request: every tool call with its result, and the mail.

A policy keeps no state of its own; everything it knows is in the conversation,
so the same request always gets the same reply, and a resumed agent goes on
exactly where it stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamrt.models.tokens import message_blocks
from teamrt.sim.policy import SimRequest, ToolOutcome, result_text
from teamrt.tools.names import canonical

_MAIL = re.compile(
    r'<mail id="(?P<id>[^"]*)" from="(?P<sender>[^"]*)" kind="(?P<kind>[^"]*)"'
    r'(?P<superseded> superseded="true")?(?: summary="(?P<summary>[^"]*)")?>\n?(?P<body>.*?)\n?</mail>',
    re.DOTALL,
)


INTERRUPTED_BY_CRASH = "interrupted by a crash"
"""How the result of a call a crash cut short begins (a resume's ``runtime.resume.INTERRUPTED``)."""
FORK_MARK = "Forked:"
"""How the supervisor's placeholder result for a fork's spawning call begins."""


@dataclass(frozen=True)
class Mail:
    id: str
    sender: str
    kind: str
    summary: str
    body: str


def history(request: SimRequest, *, own: bool = False) -> list[ToolOutcome]:
    """Every tool call of the conversation, in order, with its result ('' while it has none);
    ``own``: of a fork, only the calls made after its fork point. A call to a tool's older name
    (``bash``, in a run recorded before the rename) counts as one to the name it has now."""
    results: dict[str, tuple[str, bool]] = {}
    for message in request.messages:
        for block in message_blocks(message):
            if block.get("type") == "tool_result":
                results[block["tool_use_id"]] = (result_text(block), bool(block.get("is_error")))
    outcomes = []
    for message in request.messages[_fork_point(request) + 1 if own else 0 :]:
        if message.get("role") != "assistant":
            continue
        for block in message_blocks(message):
            if block.get("type") == "tool_use":
                output, is_error = results.get(block["id"], ("", False))
                name = canonical(block["name"]) or block["name"]
                if name in ("Bash", "Write") and output.startswith(INTERRUPTED_BY_CRASH):
                    continue  # the policies' commands and whole-file writes can be done again: asked again
                outcomes.append(ToolOutcome(name, block["input"], output, is_error))
    return outcomes


def calls(request: SimRequest, tool: str) -> list[ToolOutcome]:
    return [o for o in history(request) if o.name == tool]


def mail(request: SimRequest, *, last: bool = False) -> list[Mail]:
    """The mail the agent has read, oldest first (``last``: only what its latest user turn brought)."""
    messages = [m for m in request.messages if m.get("role") == "user"]
    found = []
    for message in messages[-1:] if last else messages:
        for block in message_blocks(message):
            if block.get("type") != "text":
                continue
            for m in _MAIL.finditer(block.get("text", "")):
                if not m["superseded"]:
                    found.append(Mail(m["id"], m["sender"], m["kind"], m["summary"] or "", m["body"]))
    return found


def first_text(request: SimRequest) -> str:
    """The text of the agent's first user turn: its task."""
    first = next(m for m in request.messages if m.get("role") == "user")
    return "\n".join(b.get("text", "") for b in message_blocks(first) if b.get("type") == "text")


def fork_directive(request: SimRequest) -> str | None:
    """A fork's directive: the text next to the placeholder results of its fork point (None: no fork)."""
    at = _fork_point(request)
    if at < 0:
        return None
    blocks = message_blocks(request.messages[at])
    return "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def _fork_point(request: SimRequest) -> int:
    """The index of the user turn that made this agent a fork, or -1."""
    for at in range(len(request.messages) - 1, -1, -1):
        message = request.messages[at]
        blocks = message_blocks(message) if message.get("role") == "user" else []
        if any(b.get("type") == "tool_result" and result_text(b).startswith(FORK_MARK) for b in blocks):
            return at
    return -1


def passed(outcome: ToolOutcome) -> bool:
    return not outcome.is_error and bool(outcome.output)


def gist(output: str) -> str:
    """A tool result's first line that says something, for an answer to quote."""
    line = next((x.strip() for x in output.splitlines() if x.strip()), "(no output)")
    return line if len(line) <= 300 else line[:297] + "..."
