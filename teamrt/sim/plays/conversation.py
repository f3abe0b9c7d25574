"""What a team policy reads from its request: every tool call with its result, and the mail.

A policy keeps no state of its own; everything it knows is in the conversation,
so the same request always gets the same reply, and a resumed agent goes on
exactly where it stopped.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from teamrt.models.tokens import message_blocks
from teamrt.sim.policy import SimRequest, ToolOutcome, result_text
from teamrt.tools.names import canonical

_MAIL = re.compile(
    r'<mail id="(?P<id>[^"]*)" from="(?P<sender>[^"]*)" kind="(?P<kind>[^"]*)"'
    r'(?P<superseded> superseded="true")?(?: summary="(?P<summary>[^"]*)")?>\n?(?P<body>.*?)\n?</mail>',
    re.DOTALL,
)


ROLES_HEADING = "The roles of your team, for spawn_agent's role"
"""How the runtime's list of the roles a lead may start begins, in the lead's system prompt."""
_ROLE = re.compile(r"^- (?P<name>[\w.-]+): (?P<description>.*)$")
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


def own_text(message: dict[str, Any]) -> str:
    """The text a user turn brings of its own: a task, a follow-up, a directive; not mail."""
    texts = [str(b.get("text", "")) for b in message_blocks(message) if b.get("type") == "text"]
    return "\n".join(t for t in texts if t.strip() and not t.startswith("<mail "))


def round_starts(request: SimRequest) -> list[int]:
    """The index of the user turn that began each of the agent's rounds, oldest first: its first, then
    each user turn with text of its own after an answer (an assistant turn that called no tool), which is
    how a follow-up comes (``teamrt continue``). Mail and the results of calls never begin a round."""
    starts, answered = [0], False
    for at, message in enumerate(request.messages):
        if message.get("role") == "assistant":
            answered = not any(b.get("type") == "tool_use" for b in message_blocks(message))
        elif answered and at and own_text(message):
            starts.append(at)
            answered = False
    return starts


def round_start(request: SimRequest) -> int:
    """The index of the user turn that began the agent's current round (``round_starts``)."""
    return round_starts(request)[-1]


def this_round(request: SimRequest) -> SimRequest:
    """``request`` with only the current round's messages (``round_start``): what was asked and done
    before it cannot confuse what is done now."""
    start = round_start(request)
    if start == 0:
        return request
    return dataclasses.replace(request, params={**request.params, "messages": request.messages[start:]})


def round_task(request: SimRequest) -> str:
    """What the agent was asked in its current round: the text of the turn that began it."""
    return own_text(request.messages[round_start(request)]) if request.messages else ""


def roles(system: str) -> list[tuple[str, str]]:
    """The roles a lead's system prompt lists (the lines under ``ROLES_HEADING``), with their
    descriptions."""
    lines = system.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(ROLES_HEADING)), None)
    found: list[tuple[str, str]] = []
    for line in lines[at + 1 :] if at is not None else []:
        role = _ROLE.match(line)
        if role is None:
            break
        found.append((role["name"], role["description"]))
    return found


def round_tasks(request: SimRequest) -> list[str]:
    """What the agent was asked in each of its rounds, oldest first."""
    return [own_text(request.messages[at]) for at in round_starts(request)] if request.messages else []


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
