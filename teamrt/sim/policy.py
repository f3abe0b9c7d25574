"""Simulator policies: plain functions from a request to a ``Reply``.

A policy sees the whole request through ``SimRequest`` (the conversation, the
tool results of the last turn, the agent and role it serves) and decides the
next reply from it, so a team scripted with policies reacts to what its tools
actually return. Policies must be deterministic: the same request gets the
same reply, which is what lets a resumed run continue exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from teamrt.models.catalog import lookup, resolve
from teamrt.models.reply import Reply
from teamrt.models.tokens import message_blocks, system_blocks
from teamrt.models.types import Block
from teamrt.sim.corpus import Page
from teamrt.sim.signing import unseal


@dataclass(frozen=True)
class ToolOutcome:
    """One tool call of the previous assistant turn with its result."""

    name: str
    input: dict[str, Any]
    output: str
    is_error: bool


@dataclass(frozen=True)
class SimRequest:
    params: dict[str, Any]
    agent: str = ""
    role: str = ""
    team: str = ""
    turn_so_far: tuple[Block, ...] = ()
    """What this response holds already: the blocks before the searches the server has just run, and
    their results (empty on the first call for a request)."""

    @property
    def model(self) -> str:
        return str(self.params["model"])

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.params["messages"])

    @cached_property
    def system(self) -> str:
        """The system prompt, then the text of each ``system`` message mid-conversation (the model reads
        them as system text)."""
        parts = [b.get("text", "") for b in system_blocks(self.params.get("system"))]
        for message in self.params["messages"]:
            if message.get("role") == "system":
                parts.extend(b.get("text", "") for b in message_blocks(message))
        return "\n".join(parts)

    @cached_property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.params.get("tools") or []]

    @property
    def thinking_enabled(self) -> bool:
        """Whether the model thinks first: manual or adaptive thinking, asked for or the model's default."""
        thinking = self.params.get("thinking")
        if isinstance(thinking, dict) and "type" in thinking:
            return thinking["type"] in ("enabled", "adaptive")
        info = lookup(resolve(self.model))
        return info is not None and info.thinking_default in ("enabled", "adaptive")

    @property
    def turns(self) -> int:
        """How many assistant turns the conversation already has."""
        return sum(1 for m in self.params["messages"] if m.get("role") == "assistant")

    @cached_property
    def last_user_text(self) -> str:
        """The text blocks of the last user message (tool results left out)."""
        last = self.params["messages"][-1]
        return "\n".join(b.get("text", "") for b in message_blocks(last) if b.get("type") == "text")

    @cached_property
    def tool_outcomes(self) -> list[ToolOutcome]:
        """The calls the previous assistant turn made, with the results the last user turn gave."""
        messages = self.params["messages"]
        if len(messages) < 2 or messages[-2].get("role") != "assistant":
            return []
        calls = {b["id"]: b for b in message_blocks(messages[-2]) if b.get("type") == "tool_use"}
        outcomes = []
        for block in message_blocks(messages[-1]):
            call = calls.get(block.get("tool_use_id", "")) if block.get("type") == "tool_result" else None
            if call is not None:
                outcomes.append(
                    ToolOutcome(call["name"], call["input"], result_text(block), bool(block.get("is_error")))
                )
        return outcomes

    def calls(self, tool: str) -> int:
        """How often the conversation's assistant turns called ``tool`` (a fork's count its parent's)."""
        return sum(
            1
            for m in self.params["messages"]
            if m.get("role") == "assistant"
            for b in message_blocks(m)
            if b.get("type") == "tool_use" and b.get("name") == tool
        )

    @cached_property
    def current_turn(self) -> list[Block]:
        """The blocks of the turn the model is writing: a paused turn sent back (trailing assistant
        messages), then what this response holds already."""
        blocks: list[Block] = []
        for message in reversed(self.params["messages"]):
            if message.get("role") != "assistant":
                break
            blocks[:0] = message_blocks(message)
        return [*blocks, *self.turn_so_far]

    @cached_property
    def search_results(self) -> list[Page]:
        """The pages the current turn's web searches found, in order."""
        return [
            Page(fields["url"], fields["title"], fields["text"], fields.get("page_age"))
            for block in self.current_turn
            if block.get("type") == "web_search_tool_result" and isinstance(block.get("content"), list)
            for result in block["content"]
            if (fields := unseal(result.get("encrypted_content"))) is not None
        ]

    @property
    def searches(self) -> int:
        """How many web searches the current turn has made (failed ones too)."""
        return sum(1 for b in self.current_turn if b.get("type") == "server_tool_use")

    def all_text(self) -> str:
        """Every text and tool-result text in the conversation, for policies that search it."""
        parts = []
        for message in self.params["messages"]:
            for block in message_blocks(message):
                if block.get("type") == "text":
                    parts.append(block.get("text", ""))
                elif block.get("type") == "tool_result":
                    parts.append(result_text(block))
        return "\n".join(parts)


def result_text(block: Block) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


Policy = Callable[[SimRequest], Reply]


def echo(request: SimRequest) -> Reply:
    """The default policy: says what it was asked, and ends its turn."""
    asked = request.last_user_text.strip().splitlines()
    first = asked[0][:200] if asked else "(tool results only)"
    return Reply().say(f"[sim] {request.agent or 'agent'} received: {first}")


def default_thought(request: SimRequest) -> str:
    """The thinking the simulator writes first for a thinking model whose policy wrote none: one short
    sentence about what the request holds, the same for the same request."""
    outcomes = request.tool_outcomes
    if outcomes:
        names = ", ".join(sorted({o.name for o in outcomes}))
        failed = sum(o.is_error for o in outcomes)
        errors = f", {failed} with an error" if failed else ""
        return f"{len(outcomes)} call(s) of {names} came back{errors}; I decide the next step from them."
    asked = request.last_user_text.strip().splitlines()
    if asked and not asked[0].lstrip().startswith("<"):
        return f"I was asked: {asked[0][:120]}. I answer from what the conversation holds."
    if asked:  # mail: its header is not repeated, or a policy reading the whole text would take it as new
        return "Mail came in; I read it and decide the next step."
    return "I go on with the task from where the conversation stands."
