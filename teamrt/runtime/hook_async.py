"""Hooks that run beside an agent: Claude Code's ``async: true`` (and ``asyncRewake: true``) command hooks.

The agent does not wait for them. What one answers reaches the agent in its next user turn, as Claude Code
delivers it on the next turn: its ``additionalContext`` and ``systemMessage``, and for ``asyncRewake`` its
exit 2's stderr (else stdout). It decides nothing (a block, a permission decision, ``continue: false`` come
too late to act on), runs confined and journaled like every hook, within its ``timeout`` (Claude Code does not
enforce one on an async hook; teamrt does, so that nothing confined outlives its bound), and at most
``MAX_RUNNING`` of one agent run at once: one more is left out, journaled ``not run``. The run's end kills
those still running, with all they started (``close``), each journaled ``killed``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Protocol

from teamrt.claudecode.hook_answers import Said, cap, interpret
from teamrt.claudecode.hooks import Hook, Ran, run_hook
from teamrt.models.types import Block
from teamrt.store import Store
from teamrt.tools.base import ToolContext

log = logging.getLogger(__name__)

HOOK_EVENT: Final = "hook"
"""The event of one run of a hook: ``{"event", "command", "scope", "code", "ms", "outcome", ...}``."""
COMMAND_CHARS = 200

MAX_RUNNING: Final = 4
"""How many async hooks of one agent may run at once."""


class AgentHooks(Protocol):
    """What journaling and delivering read of an agent's hooks (``teamrt.runtime.hooks.AgentHooks``;
    protocols here, so that this module does not import the one that imports it)."""

    @property
    def store(self) -> Store: ...
    @property
    def name(self) -> str: ...
    @property
    def context(self) -> list[str]: ...


class HookedEnv(Protocol):
    @property
    def hooks(self) -> AgentHooks | None: ...
    @property
    def tools(self) -> ToolContext: ...


class HookedAgent(Protocol):
    @property
    def env(self) -> HookedEnv: ...


class Background:
    """One agent's async hooks under way."""

    def __init__(self, limit: int = MAX_RUNNING) -> None:
        self.limit = limit
        self.tasks: set[asyncio.Task[None]] = set()

    def start(self, job: Coroutine[Any, Any, None]) -> bool:
        """Start ``job`` (one hook's run, journaled and delivered by itself); False, with ``job`` dropped,
        when ``limit`` of them run already."""
        if len(self.tasks) >= self.limit:
            job.close()
            return False
        task = asyncio.ensure_future(job)
        self.tasks.add(task)
        task.add_done_callback(self._done)
        return True

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # a lost journal entry, never the agent's
            log.warning("an async hook's run was lost: %r", task.exception())

    async def close(self) -> None:
        """Kill every async hook still running (each kills its process group as it is cancelled) and wait
        until each has journaled its end."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def in_background(
    loop: HookedAgent,
    hook: Hook,
    event: str,
    payload: dict[str, Any],
    call: Block | None,
    after: Callable[[Any, str], Awaitable[None]],
) -> None:
    """One ``async`` hook's run: journaled as it ends (or is killed at the run's end), ``after`` (the scan of
    the protected paths) run either way; its ``additionalContext`` and ``systemMessage``, and an
    ``asyncRewake`` hook's exit 2, for the agent's next user turn."""
    hooks = loop.env.hooks
    assert hooks is not None
    tool = str(payload.get("tool_name", ""))
    try:
        ran = await run_hook(hook, payload, loop.env.tools.confinement)
    except asyncio.CancelledError:
        note = "the run ended before it did; it and all it started were killed"
        killed = journal(hooks, event, hook, call, tool=tool, outcome="killed", note=note, background=True)
        await asyncio.shield(killed)
        raise
    finally:
        await asyncio.shield(after(loop, event))
    said = interpret(ran, event)
    await journal(hooks, event, hook, call, tool=tool, ran=ran, said=said, background=True)
    said_by = f"{event} hook (async: {brief(hook.command)})"
    if said.context:
        hooks.context.append(f"{said_by} additional context:\n{said.context}")
    if said.note and ran.code == 0 and said.outcome in ("ok", "blocked"):  # its systemMessage
        hooks.context.append(f"{said_by} message:\n{cap(said.note)}")
    if hook.rewake and ran.code == 2:
        hooks.context.append(f"{said_by} reports:\n{cap(ran.stderr.strip() or ran.stdout.strip())}")


async def journal(
    hooks: AgentHooks,
    event: str,
    hook: Hook,
    call: Block | None,
    *,
    tool: str = "",
    ran: Ran | None = None,
    said: Said | None = None,
    outcome: str = "",
    note: str = "",
    background: bool = False,
) -> None:
    """One ``hook`` event: ``ran`` as ``said`` means it, or a run that did not happen (``outcome``)."""
    data: dict[str, Any] = {
        "event": event, "command": brief(hook.command), "scope": hook.scope,
        "code": ran.code if ran else None, "ms": ran.ms if ran else 0,
        "outcome": said.outcome if said else outcome,
    }  # fmt: skip
    if call is not None:
        data |= {"tool": tool or call["name"], "tool_use_id": call["id"]}
    note = said.note if said else note
    if note:
        data["note"] = brief(note)
    if said is not None and said.updated_input is not None:
        data["updated_input"] = True
    if said is not None and said.grant is not None:
        data["decision"] = said.grant.behavior
    if background:
        data["async"] = True
    await hooks.store.append_event(HOOK_EVENT, data, agent=hooks.name)


def brief(text: str) -> str:
    """``text`` on one line, cut to ``COMMAND_CHARS``."""
    text = " ".join(text.split())
    return text if len(text) <= COMMAND_CHARS else text[: COMMAND_CHARS - 3] + "..."
