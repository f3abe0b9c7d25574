"""The hook events of compaction, permission asks and a run's end, beside the agent loop's own
(``teamrt.runtime.hooks``), by Claude Code's hooks reference:

- ``pre_compact`` before the loop compacts an agent's history (``PreCompact``, trigger ``auto``: teamrt
  compacts only on its own, as Claude Code's auto-compact does; ``custom_instructions`` null). Exit 2 or
  ``decision: "block"`` blocks it: a compaction made ahead of the limit is skipped and the agent goes on
  uncompacted; one the API's "too long" answer forced cannot be, so the agent fails with the hook's reason,
  as Claude Code lets the underlying error surface. ``post_compact`` after it: ``PostCompact`` (``trigger``,
  ``compact_summary``; no decision), then ``SessionStart`` with source ``compact``, whose context (plain
  stdout or ``additionalContext``) is the agent's next user turn, which is how Claude Code set-ups
  re-inject what a summary loses.
- ``permission_request`` where a call would be asked about (``PermissionRequest``, no ``tool_use_id``):
  ``decision.behavior: "allow"`` answers the ask (``updatedInput`` is what the tool runs with, checked
  again against the deny and ask rules: a rule's deny still refuses, a rule's ask still asks the person);
  ``"deny"`` refuses it with ``message``, and ``interrupt: true`` stops the agent. Exit 2 without a
  ``decision`` changes nothing, its stderr dropped, as in Claude Code.
- ``session_end`` as a run ends (``SessionEnd``): ``reason`` ``prompt_input_exit`` when the person stopped
  it, else ``other`` (what a ``claude -p`` run that ends gives); teamrt's status and why under ``teamrt``.
  Claude Code's budget: 1.5 s for a hook without its own ``timeout``, a hook's own at most 60 s. It
  decides nothing.
- ``notification`` for the notifier (``Notification``): it informs and decides nothing.
- ``close_background`` at the run's end: the ``async`` hooks still running are killed.

Each run is journaled as a ``hook`` event, like every hook's.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from teamrt.claudecode.hook_answers import interpret
from teamrt.claudecode.hooks import Hook, HookSet, run_hook
from teamrt.runtime.hook_async import HOOK_EVENT, brief
from teamrt.runtime.hooks import AgentHooks, HookedAgent, contexts_of, fire
from teamrt.store import Store
from teamrt.tools.base import Tool, ToolContext
from teamrt.tools.permissions import Mode, Verdict

SESSION_END_BUDGET: Final = 1.5
"""Claude Code's time for a SessionEnd hook that sets no ``timeout`` of its own."""
SESSION_END_MAX: Final = 60.0
"""The most a SessionEnd hook's own ``timeout`` gives it (Claude Code's cap on the raised budget)."""
SUMMARY_OPENING: Final = "[Summary of the work so far, written by you]\n\n"
"""How teamrt's own summary opens the history after it (``context.summarised``)."""


async def pre_compact(loop: HookedAgent) -> str | None:
    """``PreCompact`` before the loop compacts: why a hook blocked the compaction, or None."""
    hooks = loop.env.hooks
    if hooks is None:
        return None
    extra = {"trigger": "auto", "custom_instructions": None}
    answer = await fire(loop, "PreCompact", extra, query="auto")  # continue and systemMessage: dropped
    return "\n".join(answer.blocks) if answer.blocks else None


async def post_compact(loop: HookedAgent) -> None:
    """``PostCompact`` after the loop compacted, then ``SessionStart`` (source ``compact``)."""
    hooks = loop.env.hooks
    if hooks is None:
        return
    extra = {"trigger": "auto", "compact_summary": summary_in(loop.messages)}
    await fire(loop, "PostCompact", extra, query="auto")  # it has no decision control
    answer = await fire(loop, "SessionStart", {"source": "compact"}, query="compact")
    hooks.context += contexts_of("SessionStart", answer)
    if answer.stop is not None:
        loop.stop(f"a SessionStart hook stopped it: {answer.stop}")


def summary_in(messages: list[Any]) -> str:
    """The summary a compaction left at the head of ``messages``: teamrt's own, or the API's ``compaction``
    block; "" when only old tool results were cleared."""
    for message in messages[:2]:
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "compaction" and isinstance(block.get("content"), str):
                return str(block["content"])
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str) and text.startswith(SUMMARY_OPENING):
                return text.removeprefix(SUMMARY_OPENING).split("\n\n[Your last turn, as it went]")[0]
    return ""


@dataclass(frozen=True)
class Permission:
    """What the ``PermissionRequest`` hooks said of an ask."""

    input: dict[str, Any]
    """What the tool runs with (an allowing hook's ``updatedInput``, else the call's)."""
    refusal: str | None = None
    """Why the call is refused (a hook's deny, or a deny rule on the updated input)."""
    allowed: bool = False
    """A hook answered the ask: the person is not asked."""


async def permission_request(loop: HookedAgent, name: str, tool: Tool, args: dict[str, Any]) -> Permission:
    """The ``PermissionRequest`` hooks of a call to ``name`` with ``args`` that would be asked about."""
    hooks = loop.env.hooks
    if hooks is None:
        return Permission(args)
    answer = await fire(loop, "PermissionRequest", {"tool_name": name, "tool_input": args}, query=name)
    if answer.stop is not None:
        loop.stop(f"a PermissionRequest hook stopped it: {answer.stop}")
        return Permission(args, f"not run: a PermissionRequest hook stopped the agent: {answer.stop}")
    grant = answer.grant
    if grant is None:
        return Permission(args)
    if grant.behavior == "deny":
        why = grant.message or "no reason given"
        if grant.interrupt:
            loop.stop(f"a PermissionRequest hook denied {name} and stopped it: {why}")
        return Permission(args, f"permission denied by a PermissionRequest hook: {why}")
    new = grant.updated_input if grant.updated_input is not None else args
    rules_only = copy.copy(loop.spec.permissions)
    rules_only.mode = Mode.BYPASS  # what the rules alone say of the input the tool would run with
    said = rules_only.decide(name, new, read_only=tool.read_only, workspace=loop.env.tools.workspace)
    if said.verdict is Verdict.DENY:
        return Permission(new, f"permission denied: {said.reason}")
    if said.verdict is Verdict.ASK:  # a rule's ask: the person decides, about the input that would run
        return Permission(new)
    return Permission(new, allowed=True)


async def session_end(
    hooks: HookSet, store: Store, ctx: ToolContext | None, status: str, reason: str | None
) -> None:
    """``SessionEnd`` as the run ends with ``status`` (``reason`` why), in the lead's sandbox ``ctx``."""
    matching = hooks.matching("SessionEnd", None)
    if not matching or ctx is None:
        return
    said = "prompt_input_exit" if _stopped_by_person(status, reason) else "other"
    matching = [h for h in matching if h.matches(said)]
    payload = {
        "session_id": store.run_id, "transcript_path": "", "cwd": str(ctx.workspace),
        "hook_event_name": "SessionEnd", "reason": said,
        "teamrt": {"run_id": store.run_id, "status": status, "reason": reason},
    }  # fmt: skip
    timed = [dataclasses.replace(h, timeout=_session_end_timeout(h)) for h in matching]
    await _informing(timed, store, ctx, "SessionEnd", payload)


def _stopped_by_person(status: str, reason: str | None) -> bool:
    """Whether a run that ended ``status`` was ended by the person (``teamrt stop``: the supervisor's
    ``stopped by user``), not by a budget, a hook or a limit."""
    return status == "stopped" and reason is not None and reason.startswith("stopped by ")


def _session_end_timeout(hook: Hook) -> float:
    return min(hook.timeout, SESSION_END_MAX) if hook.timeout_set else SESSION_END_BUDGET


async def notification(hooks: HookSet, store: Store, ctx: ToolContext, payload: dict[str, Any]) -> None:
    """``Notification`` hooks (``teamrt.runtime.notify``): those whose matcher matches the payload's
    ``notification_type`` run at once, in the sandbox of ``ctx`` (the lead's). As in Claude Code they
    inform and decide nothing: what they answer is not acted on."""
    matching = hooks.matching("Notification", str(payload.get("notification_type", "")))
    await _informing(matching, store, ctx, "Notification", payload)


async def _informing(
    matching: list[Hook], store: Store, ctx: ToolContext, event: str, payload: dict[str, Any]
) -> None:
    """Run ``matching`` hooks of an event no agent waits on, all at once (``async`` changes nothing: none
    is waited for by an agent), each journaled; what they made among the protected paths moved out."""
    if not matching:
        return
    try:
        ran = await asyncio.gather(*(run_hook(hook, payload, ctx.confinement) for hook in matching))
    finally:
        if ctx.guard is not None:  # what they made among the protected paths is moved out, and recorded
            await asyncio.shield(ctx.guard.check(ctx.workspace, cause=f"{event} hooks"))
    for r in ran:
        said = interpret(r, event)
        data: dict[str, Any] = {
            "event": event, "command": brief(r.hook.command), "scope": r.hook.scope, "code": r.code,
            "ms": r.ms, "outcome": "ok" if said.outcome == "blocked" else said.outcome,
        }  # fmt: skip
        if said.note:
            data["note"] = brief(said.note)
        await store.append_event(HOOK_EVENT, data)


async def close_background(agents: Iterable[AgentHooks | None]) -> None:
    """Kill the ``async`` hooks still running of ``agents`` (the run ends), each journaled ``killed``."""
    await asyncio.gather(*(a.background.close() for a in agents if a is not None), return_exceptions=True)
