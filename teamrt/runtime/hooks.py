"""The hooks of a run at work: what the agent loop and the supervisor call at each event.

``load_hooks`` reads a project's hooks once per run (``teamrt.claudecode.hooks``)
and keeps those that may run: the user's own, and the repository's only while
the person trusts them as they are (``teamrt.claudecode.trust``). Each agent
gets an ``AgentHooks`` (in ``AgentEnv.hooks``); the loop calls:

- ``starting`` as an agent's run begins: ``SessionStart`` at its first run
  (source ``startup``, or ``resume`` for one a resume restarts), then
  ``UserPromptSubmit`` on the lead's task. A block ends the lead stopped
  before its first model call; a child's directive comes from the lead, not
  from a person, so it fires no ``UserPromptSubmit`` (as in Claude Code);
  A child (fork, worktree agent, teammate) fires ``SubagentStart`` first, at
  each start of its run: its ``additionalContext`` opens the child's context;
- ``pre_tool`` and ``decide`` before a call (``PreToolUse``: a block refuses
  it; ``allow`` spares an ask of the mode, never a rule's deny or ask;
  ``ask`` asks about a call the rules and mode would allow; ``updatedInput``
  is what the tool runs with), ``post_tool`` after it (``PostToolUse`` when
  it succeeded, ``PostToolUseFailure`` when it failed);
- ``stop_blocked`` where the agent would end done (``Stop`` for the lead,
  ``SubagentStop`` for the others), ``idle_blocked`` where a teammate would
  idle (``TeammateIdle``): a block makes the agent go on, with the hook's
  words as its next user turn, at most ``MAX_CONTINUATIONS`` times in a row;
- ``context`` as it builds a user turn: the text hooks added
  (``additionalContext``, feedback), in that turn.

The supervisor calls ``task_completing`` before a task is marked done
(``TaskCompleted``: a block leaves it open and tells the agent why). The
events of compaction, permission asks and the run's end are in
``teamrt.runtime.hook_events``; ``async`` hooks run beside the agent
(``teamrt.runtime.hook_async``). ``continue: false`` in any hook's answer
stops the agent.

Each run of a hook is journaled as a ``hook`` event (its event, command,
scope, exit code, time and outcome); an error, a timeout or a hook that could
not run is also a progress line.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from teamrt.claudecode import statusline
from teamrt.claudecode.hook_answers import Answer, combine, interpret
from teamrt.claudecode.hooks import HookSet, parse_hooks, run_hook
from teamrt.claudecode.plugins import load_plugins
from teamrt.claudecode.settings import read_settings_files
from teamrt.claudecode.trust import TrustError, hooks_digest, is_trusted
from teamrt.models.types import Block
from teamrt.runtime.hook_async import HOOK_EVENT as HOOK_EVENT  # re-exported: the journal's kind
from teamrt.runtime.hook_async import MAX_RUNNING, Background, in_background, journal
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.sandbox.quarantine import describe
from teamrt.store import Store
from teamrt.tools.base import Tool, ToolContext, ToolResult
from teamrt.tools.permissions import Decision, Mode, Permissions, Verdict

MAX_CONTINUATIONS = 5
"""How many times in a row Stop, SubagentStop and TeammateIdle hooks may keep an agent going."""


@dataclass(frozen=True)
class RunHooks:
    """The hooks a run runs."""

    hooks: HookSet = field(default_factory=HookSet)

    def for_agent(self, store: Store, *, name: str, kind: str, agent: str) -> AgentHooks | None:
        """The hooks of the agent ``name``, of ``kind``, whose definition is ``agent`` (None when the run
        has none)."""
        if not self.hooks.hooks:
            return None
        agent_type = "fork" if kind == "fork" else agent
        return AgentHooks(self.hooks, store, name=name, kind=kind, agent_type=agent_type)


def load_hooks(project: Path, on_notice: Callable[[str], None] | None = None) -> RunHooks:
    """``project``'s hooks that may run, read once per run; ``on_notice`` is told, a line each, what was
    wrong in them and whether the repository's are left out. A settings file that cannot be read has no
    hooks here; the run's settings warnings name it (``teamrt.claudecode.settings``)."""
    files = read_settings_files(project)
    parsed = parse_hooks(files)
    notices = [f"teamrt: warning: {problem}" for problem in parsed.problems]
    digest = hooks_digest(files)
    trusted = False
    if digest is not None:
        try:
            trusted = is_trusted(project, digest)
        except TrustError as e:
            notices.append(f"teamrt: warning: {e}")
        where = " and ".join(
            str(f.path) for f in files if f.scope in ("project", "local") and f.data.get("hooks")
        )
        if not trusted and where:  # a repository's plugins not trusted: teamrt.claudecode.plugins says so
            notices.append(
                f"teamrt: warning: the hooks in {where} do not run: this project's hooks are not trusted as"
                f" they are now; read them, then run `teamrt trust` in {project} to let them run"
            )
        lines = statusline.choose(project, files).untrusted if not trusted else ()
        if lines:  # the TUI says it too, but only to whoever watches there
            notices.append(
                f"teamrt: warning: the statusLine in {' and '.join(map(str, lines))} is not shown in the TUI:"
                f" this project's hooks are not trusted as they are now; read it, then run `teamrt trust` in"
                f" {project} to let it run"
            )
    runnable = parsed if trusted else parsed.scoped("user")
    plugins = load_plugins(project, files)  # its warnings are said with the memory's (runtime.teamrun)
    off = any(f.scope == "user" and f.data.get("disableAllHooks") is True for f in files)
    if plugins.hook_files and not off:
        from_plugins = parse_hooks(plugins.hook_files)  # only the plugins that may run them (their trust)
        notices += [f"teamrt: warning: {problem}" for problem in from_plugins.problems]
        runnable = replace(runnable, hooks=(*runnable.hooks, *from_plugins.hooks))
    if runnable.hooks and not default_sandbox().confined:
        notices.append(
            "teamrt: note: hooks run in the sandbox of Bash; without bubblewrap they run only where the"
            " run lets commands run unconfined, and a PreToolUse hook that cannot run refuses the call"
        )
    if on_notice is not None:
        for line in notices:
            on_notice(line)
    return RunHooks(runnable)


@dataclass
class AgentHooks:
    """One agent's hooks, and what they left it to do."""

    hooks: HookSet
    store: Store
    name: str
    kind: str
    """``lead``, ``fork``, ``worktree`` or ``team``."""
    agent_type: str
    """Its definition's name (``fork`` for a fork): what SubagentStop matchers match."""
    started: bool = False
    """Whether its SessionStart hooks ran (a restart after a crash of the loop does not run them again)."""
    continuations: int = 0
    """How many times in a row its Stop (SubagentStop, TeammateIdle) hooks kept it going."""
    context: list[str] = field(default_factory=list)
    """Text for its next user turn."""
    background: Background = field(default_factory=Background)
    """Its ``async`` hooks under way."""


class HookedEnv(Protocol):
    """What the hooks read of an agent's surroundings (``agent.AgentEnv`` is one)."""

    @property
    def hooks(self) -> AgentHooks | None: ...

    @property
    def tools(self) -> ToolContext: ...


class HookedSpec(Protocol):
    """What the hooks read of who an agent is (``agent.AgentSpec`` is one)."""

    @property
    def permissions(self) -> Permissions: ...

    @property
    def team(self) -> str: ...

    @property
    def persistent(self) -> bool: ...


class HookedAgent(Protocol):
    """An agent as its hooks see it (``loop.AgentLoop`` is one). A protocol, so that this module imports
    neither the loop nor the agent's spec and surroundings, which import it (for ``AgentHooks``)."""

    @property
    def env(self) -> HookedEnv: ...

    @property
    def spec(self) -> HookedSpec: ...

    @property
    def messages(self) -> list[Any]: ...

    @property
    def answer(self) -> str: ...

    def stop(self, reason: str = "stopped") -> None: ...


@dataclass(frozen=True)
class PreTool:
    """What the PreToolUse hooks said of a call."""

    refusal: str | None
    input: dict[str, Any]
    """What the tool runs with (the hooks' ``updatedInput``, else the call's)."""
    decision: str | None = None
    reason: str = ""


async def starting(loop: HookedAgent, task: str | list[Block] | None) -> str | None:
    """``SessionStart`` at the agent's first run, ``UserPromptSubmit`` on the lead's ``task``; why the
    agent must stop before its first model call, or None."""
    hooks = loop.env.hooks
    if hooks is None:
        return None
    if not hooks.started:
        hooks.started = True
        if hooks.kind != "lead":  # agent_id and agent_type are in every child's input
            answer = await fire(loop, "SubagentStart", {}, query=hooks.agent_type)
            hooks.context += contexts_of("SubagentStart", answer)
            if answer.stop is not None:
                return f"a SubagentStart hook stopped it: {answer.stop}"
        source = "startup" if task is not None else "resume"
        answer = await fire(loop, "SessionStart", {"source": source}, query=source)
        hooks.context += contexts_of("SessionStart", answer)
        if answer.stop is not None:
            return f"a SessionStart hook stopped it: {answer.stop}"
    if isinstance(task, str) and hooks.kind == "lead":
        answer = await fire(loop, "UserPromptSubmit", {"prompt": task})
        if answer.stop is not None:
            return f"a UserPromptSubmit hook stopped it: {answer.stop}"
        if answer.blocks:
            return "a UserPromptSubmit hook blocked the task: " + "\n".join(answer.blocks)
        hooks.context += contexts_of("UserPromptSubmit", answer)
    return None


def context(loop: HookedAgent) -> list[Block]:
    """The text hooks added for the agent's next user turn, taken. Kept for a later turn while the
    history ends with a user turn (a resumed agent's), so that user and assistant turns alternate."""
    hooks = loop.env.hooks
    if hooks is None or not hooks.context or (loop.messages and loop.messages[-1]["role"] == "user"):
        return []
    blocks: list[Block] = [{"type": "text", "text": text} for text in hooks.context]
    hooks.context.clear()
    return blocks


async def pre_tool(loop: HookedAgent, call: Block, name: str, args: dict[str, Any]) -> PreTool:
    """The ``PreToolUse`` hooks of ``call`` to the tool ``name`` with ``args``. One that cannot run (no
    sandbox) refuses it: a guard teamrt cannot run must not let the call through."""
    hooks = loop.env.hooks
    if hooks is None:
        return PreTool(None, args)
    answer = await fire(loop, "PreToolUse", about_call(call, name, args), query=name, call=call)
    hooks.context += contexts_of("PreToolUse", answer)
    if answer.stop is not None:
        loop.stop(f"a PreToolUse hook stopped it: {answer.stop}")
        return PreTool(f"not run: a PreToolUse hook stopped the agent: {answer.stop}", args)
    if answer.blocks:
        return PreTool("blocked by a PreToolUse hook: " + "\n".join(answer.blocks), args)
    if answer.not_run:
        return PreTool(f"refused: a PreToolUse hook could not run ({answer.not_run[0]})", args)
    return PreTool(None, answer.updated_input or args, answer.decision, answer.reason)


def decide(loop: HookedAgent, name: str, tool: Tool, pre: PreTool) -> Decision:
    """The permission decision on a call, with what its PreToolUse hooks said: ``ask`` asks about a call
    that would be allowed; ``allow`` allows one only the mode would ask about (a rule's deny or ask
    stands, and so does a deny of the mode: plan, dontAsk)."""
    permissions, workspace = loop.spec.permissions, loop.env.tools.workspace
    decision = permissions.decide(name, pre.input, read_only=tool.read_only, workspace=workspace)
    why = f": {pre.reason}" if pre.reason else ""
    if pre.decision == "ask" and decision.verdict is Verdict.ALLOW:
        return Decision(Verdict.ASK, f"a PreToolUse hook asks for approval{why}")
    if pre.decision == "allow" and decision.verdict is Verdict.ASK:
        rules_only = copy.copy(permissions)
        rules_only.mode = Mode.BYPASS  # what the rules alone say: an ask now is a rule's
        said = rules_only.decide(name, pre.input, read_only=tool.read_only, workspace=workspace)
        if said.verdict is Verdict.ALLOW:
            return Decision(Verdict.ALLOW, f"allowed by a PreToolUse hook{why}")
    return decision


async def post_tool(
    loop: HookedAgent, call: Block, name: str, args: dict[str, Any], result: ToolResult
) -> None:
    """The ``PostToolUse`` hooks of a call that succeeded, the ``PostToolUseFailure`` hooks of one that ran
    and failed (as in Claude Code: a call refused before it ran fires neither): what they say goes to the
    agent with the call's result."""
    hooks = loop.env.hooks
    if hooks is None:
        return
    if result.is_error:
        error = result.content if isinstance(result.content, str) else _text_of(result.content)
        extra = {**about_call(call, name, args), "error": error, "is_interrupt": False}
        event = "PostToolUseFailure"
    else:
        response: dict[str, Any] = {"content": result.content, "success": True}
        if isinstance(args.get("file_path"), str):
            response["filePath"] = args["file_path"]
        extra = {**about_call(call, name, args), "tool_response": response}
        event = "PostToolUse"
    answer = await fire(loop, event, extra, query=name, call=call)
    hooks.context += [f"{event} hook feedback on {name} ({call['id']}):\n{b}" for b in answer.blocks]
    hooks.context += contexts_of(event, answer)
    if answer.stop is not None:
        loop.stop(f"a {event} hook stopped it: {answer.stop}")


def _text_of(content: list[Block]) -> str:
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


async def stop_blocked(loop: HookedAgent) -> bool:
    """``Stop`` (the lead) or ``SubagentStop`` (any other agent) where the agent would end done: whether
    a hook keeps it going (its words are then its next user turn)."""
    hooks = loop.env.hooks
    if hooks is None:
        return False
    event = "Stop" if hooks.kind == "lead" else "SubagentStop"
    extra = {"stop_hook_active": hooks.continuations > 0, "last_assistant_message": loop.answer}
    answer = await fire(loop, event, extra, query=None if event == "Stop" else hooks.agent_type)
    return await _goes_on(loop, event, answer)


async def idle_blocked(loop: HookedAgent) -> bool:
    """``TeammateIdle`` where a teammate would idle: whether a hook keeps it working."""
    hooks = loop.env.hooks
    if hooks is None or not loop.spec.persistent:
        return False
    answer = await fire(loop, "TeammateIdle", {"teammate_name": hooks.name, "team_name": loop.spec.team})
    if answer.stop is not None:
        loop.stop(f"a TeammateIdle hook stopped it: {answer.stop}")
        return False
    return await _goes_on(loop, "TeammateIdle", answer)


async def task_completing(loop: HookedAgent, task_id: int, subject: str, description: str) -> str | None:
    """``TaskCompleted`` before the agent's task is marked done: why it must not be, or None."""
    hooks = loop.env.hooks
    if hooks is None:
        return None
    extra = {"task_id": str(task_id), "task_subject": subject, "task_description": description,
             "teammate_name": hooks.name, "team_name": loop.spec.team}  # fmt: skip
    answer = await fire(loop, "TaskCompleted", extra)
    hooks.context += contexts_of("TaskCompleted", answer)
    if answer.stop is not None:
        loop.stop(f"a TaskCompleted hook stopped it: {answer.stop}")
    if answer.blocks:
        return "\n".join(answer.blocks)
    return None


async def _goes_on(loop: HookedAgent, event: str, answer: Answer) -> bool:
    hooks = loop.env.hooks
    assert hooks is not None
    if not answer.blocks or answer.stop is not None:
        hooks.continuations = 0
        return False
    if hooks.continuations >= MAX_CONTINUATIONS:
        hooks.continuations = 0
        note = f"{event} hooks kept it going {MAX_CONTINUATIONS} times in a row; it stops anyway"
        await hooks.store.append_event(HOOK_EVENT, {"event": event, "outcome": "ignored", "note": note},
                                       agent=hooks.name)  # fmt: skip
        return False
    hooks.continuations += 1
    hooks.context.append(f"{event} hook feedback:\n" + "\n".join(answer.blocks))
    return True


def about_call(call: Block, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_name": name, "tool_input": args, "tool_use_id": call["id"]}


def contexts_of(event: str, answer: Answer) -> list[str]:
    return [f"{event} hook additional context:\n{text}" for text in answer.contexts]


async def fire(
    loop: HookedAgent,
    event: str,
    extra: dict[str, Any],
    *,
    query: str | None = None,
    call: Block | None = None,
) -> Answer:
    """Run the hooks of ``event`` that match ``query`` at once, journal each run, and combine them; start
    its ``async`` hooks beside the agent (they decide nothing)."""
    hooks = loop.env.hooks
    assert hooks is not None
    matching = hooks.hooks.matching(event, query)
    if not matching:
        return Answer()
    ctx = loop.env.tools
    payload: dict[str, Any] = {
        "session_id": hooks.store.run_id,
        "transcript_path": "",
        "cwd": str(ctx.workspace),
        "permission_mode": str(loop.spec.permissions.mode),
        "hook_event_name": event,
    }
    if hooks.kind != "lead":
        payload |= {"agent_id": hooks.name, "agent_type": hooks.agent_type}
    payload |= extra
    for hook in (h for h in matching if h.background):
        if not hooks.background.start(in_background(loop, hook, event, payload, call, protected_after)):
            note = f"{MAX_RUNNING} async hooks of this agent are running already; this one is left out"
            tool = str(extra.get("tool_name", ""))
            await journal(hooks, event, hook, call, tool=tool, outcome="not run", note=note, background=True)
    waited = [h for h in matching if not h.background]
    if not waited:
        return Answer()
    try:
        ran = await asyncio.gather(*(run_hook(hook, payload, ctx.confinement) for hook in waited))
    finally:  # what the hooks made among the protected paths is moved out, even when the agent was stopped
        await asyncio.shield(protected_after(loop, event))
    saids = [interpret(r, event) for r in ran]
    for r, said in zip(ran, saids, strict=True):
        await journal(hooks, event, r.hook, call, tool=str(extra.get("tool_name", "")), ran=r, said=said)
    return combine(saids)


async def protected_after(loop: HookedAgent, event: str) -> None:
    """Scan the workspace after the ``event`` hooks ran (``teamrt.sandbox.quarantine``): what they created
    or changed among the protected paths is moved out, recorded by the guard, and told to the agent."""
    hooks, ctx = loop.env.hooks, loop.env.tools
    if ctx.guard is None or hooks is None:
        return
    moved = await ctx.guard.check(ctx.workspace, cause=f"{event} hooks", agent=hooks.name)
    if moved:
        hooks.context.append(describe(moved, f"the {event} hooks"))
