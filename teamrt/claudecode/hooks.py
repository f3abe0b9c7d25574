"""Claude Code's hooks: read from the settings files, matched to an event, run confined, their answer read.

A hook is a shell command that runs at an event of an agent's work::

    "hooks": {"PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command",
              "command": "./scripts/guard.sh", "timeout": 30}]}]}

It gets the event as JSON on stdin, never in its command line or its
environment, so nothing a model writes reaches its shell. Exit 0 is success
(stdout may be JSON with a decision, or, for ``UserPromptSubmit`` and
``SessionStart``, text to add to the context); exit 2 blocks, its stderr told
to the model; any other end is a non-blocking error. ``parse_hooks`` reads the
settings; ``run_hook`` runs one; ``interpret`` says what its run means;
``combine`` joins the answers of the hooks of one event.

Departures from Claude Code: a hook runs in the sandbox of the ``Bash`` tool
(``teamrt.sandbox.bwrap``), in the agent's workspace, with that workspace as
``CLAUDE_PROJECT_DIR``; only ``command`` hooks run (``prompt``, ``agent``,
``http`` and ``mcp_tool`` ones are left out with a warning).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from teamrt.procs import kill_group
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.tools import names

EVENTS = (
    "PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop", "SessionStart", "TeammateIdle",
    "TaskCompleted", "Notification",
)  # fmt: skip
"""The events teamrt runs hooks at; a settings file naming another gets a warning."""
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "SessionStart"})
"""Events whose hooks' plain stdout (exit 0, not JSON) goes into the agent's context, as in Claude Code."""
DECISIONS = ("allow", "deny", "ask")
DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
KEPT_BYTES = 256 * 1024
"""Of each of a hook's stdout and stderr, what is kept; the rest is read and dropped."""
TEXT_CHARS = 10_000
"""The most of one hook's text (its stderr, a reason, a context) that the model reads."""
DRAIN_SECONDS = 1.0
"""After a hook's group is gone, how long to wait for its pipes to close (a process that left the group may
hold them open)."""
PROJECT_DIR_ENV = "CLAUDE_PROJECT_DIR"
_CHUNK = 65_536
_PLAIN_MATCHER = re.compile(r"[A-Za-z0-9_|]+")
_SILENT_FIELDS = frozenset({"type", "command", "timeout", "statusMessage"})
_TYPES = ("prompt", "agent", "http", "mcp_tool")


class SettingsSource(Protocol):
    """A settings file read (``teamrt.claudecode.settings.SettingsFile``)."""

    @property
    def scope(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def data(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Hook:
    event: str
    matcher: str
    """The tools (``SessionStart``: sources, ``SubagentStop``: agent types, ``Notification``: notification
    types) it runs for; "" or ``*``: all."""
    command: str
    timeout: float
    scope: str
    """The settings file's scope: ``user``, ``project`` or ``local``."""
    source: Path
    pattern: re.Pattern[str] | None = field(default=None, compare=False)
    """The matcher as a regular expression, when it is one."""

    def matches(self, query: str | None) -> bool:
        """Whether the hook runs for ``query``: a tool's name (teamrt's or an alias), a source, an agent
        type; None (an event without a matcher) always. A matcher of plain names (``Bash|Write``) is a
        list of names; any other is a regular expression searched in the name (Claude Code's rule)."""
        if query is None or self.matcher in ("", "*"):
            return True
        if self.pattern is None:
            wanted = {names.canonical(n.strip()) or n.strip() for n in self.matcher.split("|")}
            return query in wanted
        return any(self.pattern.search(name) for name in _aliases(query))


def _aliases(name: str) -> list[str]:
    """``name`` and Claude Code's other names for that tool (``Task``: ``Agent``)."""
    return [name, *(alias for alias, target in names.ALIASES.items() if target == name)]


@dataclass(frozen=True)
class HookSet:
    """The hooks of some settings files, in their order, and what was wrong in them (a line each)."""

    hooks: tuple[Hook, ...] = ()
    problems: tuple[str, ...] = ()

    def matching(self, event: str, query: str | None = None) -> list[Hook]:
        """The hooks of ``event`` that run for ``query``, each command once (the first found)."""
        found: dict[str, Hook] = {}
        for hook in self.hooks:
            if hook.event == event and hook.command not in found and hook.matches(query):
                found[hook.command] = hook
        return list(found.values())

    def scoped(self, *scopes: str) -> HookSet:
        """Only the hooks of the files of ``scopes``."""
        return HookSet(tuple(h for h in self.hooks if h.scope in scopes), self.problems)


def parse_hooks(files: Sequence[SettingsSource]) -> HookSet:
    """The hooks of ``files`` (lowest precedence first). Nothing here fails a run: what cannot be used
    is left out with a problem line naming the file and the place. ``disableAllHooks: true`` turns off
    the hooks of its own scope, and the user's file turns off all of them: a repository cannot turn off
    a person's own hooks."""
    hooks: list[Hook] = []
    problems: list[str] = []
    off: set[str] = set()
    for file in files:
        if file.data.get("disableAllHooks") is True:
            off.update(("user", "project", "local") if file.scope == "user" else (file.scope,))
    for file in files:
        raw = file.data.get("hooks")
        if raw is None or file.scope in off:
            continue
        if not isinstance(raw, dict):
            problems.append(f"{file.path}: hooks must be an object of events; its hooks are left out")
            continue
        for event, groups in raw.items():
            _parse_event(file, str(event), groups, hooks, problems)
    return HookSet(tuple(hooks), tuple(problems))


def _parse_event(
    file: SettingsSource, event: str, groups: Any, hooks: list[Hook], problems: list[str]
) -> None:
    where = f"{file.path}: hooks.{event}"
    if event not in EVENTS:
        problems.append(f"{where}: teamrt does not run {event} hooks (it runs {', '.join(EVENTS)})")
        return
    if not isinstance(groups, list):
        problems.append(f"{where}: must be a list of {{matcher, hooks}} objects; left out")
        return
    for i, group in enumerate(groups):
        at = f"{where}[{i}]"
        if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
            problems.append(f"{at}: must be an object with a list 'hooks'; left out")
            continue
        matcher = group.get("matcher", "")
        if not isinstance(matcher, str):
            problems.append(
                f"{at}: matcher must be a string (a tool name, A|B, or a regular expression); left out"
            )
            continue
        pattern = None
        if matcher not in ("", "*") and not _PLAIN_MATCHER.fullmatch(matcher):
            try:
                pattern = re.compile(matcher)
            except re.error as e:
                problems.append(f"{at}: matcher {matcher!r} is not a regular expression ({e}); left out")
                continue
        for j, entry in enumerate(group["hooks"]):
            hook = _parse_hook(file, event, matcher.strip(), pattern, entry, f"{at}.hooks[{j}]", problems)
            if hook is not None:
                hooks.append(hook)


def _parse_hook(
    file: SettingsSource,
    event: str,
    matcher: str,
    pattern: re.Pattern[str] | None,
    entry: Any,
    at: str,
    problems: list[str],
) -> Hook | None:
    if not isinstance(entry, dict):
        problems.append(f"{at}: must be an object with type and command; left out")
        return None
    kind = entry.get("type", "command")
    if kind != "command":
        said = f"type {kind!r} is not run by teamrt" if kind in _TYPES else f"unknown type {kind!r}"
        problems.append(f"{at}: {said} (only 'command' hooks run); left out")
        return None
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        problems.append(f"{at}: command must be a non-empty string; left out")
        return None
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT:
        problems.append(
            f"{at}: timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT:g};"
            f" it gets {DEFAULT_TIMEOUT:g}"
        )
        timeout = DEFAULT_TIMEOUT
    for name in sorted(set(entry) - _SILENT_FIELDS):
        if name in ("async", "asyncRewake"):
            problems.append(f"{at}: {name!r} is not used by teamrt: it waits for the hook")
        elif name == "if":
            problems.append(
                f"{at}: 'if' is not used by teamrt: the hook runs for every call its matcher matches"
            )
        else:
            problems.append(f"{at}: unknown field {name!r} ignored")
    return Hook(event, matcher, command, float(timeout), file.scope, file.path, pattern)


# -- running one ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """How one run of a hook went."""

    hook: Hook
    code: int | None
    """Its exit code (negative: the signal that ended it); None when it did not end on its own."""
    stdout: str
    stderr: str
    ms: int
    failure: str = ""
    """Why it has no exit code: ``timed out after 5 s ...``, ``not run: ...``."""
    timed_out: bool = False


async def run_hook(
    hook: Hook, payload: Mapping[str, Any], ctx: Confinement, *, sandbox: Sandbox | None = None
) -> Ran:
    """Run ``hook`` with ``payload`` as JSON on stdin, confined as ``ctx`` says, in its workspace, in a
    process group of its own that is killed when it ends, times out, or the caller is cancelled."""
    began = time.monotonic()
    sandbox = sandbox or default_sandbox()
    refusal = sandbox.refusal(ctx.policy)
    if refusal is not None:
        return Ran(hook, None, "", "", 0, f"not run: {refusal}")
    command = sandbox.command(hook.command, ctx)
    env = {**command.env, PROJECT_DIR_ENV: str(ctx.workspace)}
    data = json.dumps(payload, ensure_ascii=False).encode()
    cgroup = pidlimit.make(command.max_processes, command.max_memory_mb)
    try:
        argv = command.argv if cgroup is None else pidlimit.enter(command.argv, cgroup)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=ctx.workspace, env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
        except OSError as e:
            return Ran(hook, None, "", "", _ms(began), f"not run: could not start it: {e.strerror}")
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        streams = [asyncio.ensure_future(_kept(s)) for s in (proc.stdout, proc.stderr)]
        feed = asyncio.ensure_future(_feed(proc.stdin, data))
        code: int | None = None
        try:
            code = await asyncio.wait_for(proc.wait(), hook.timeout)
        except TimeoutError:
            pass
        finally:
            feed.cancel()
            await asyncio.shield(_end(proc))
            await asyncio.wait(streams, timeout=DRAIN_SECONDS)
            for stream in streams:
                stream.cancel()
        out, err = (s.result() if s.done() and not s.cancelled() else "" for s in streams)
        if code is None:
            killed = f"timed out after {hook.timeout:g} s; it and all it started were killed"
            return Ran(hook, None, out, err, _ms(began), killed, timed_out=True)
        return Ran(hook, code, out, err, _ms(began))
    finally:
        if cgroup is not None:
            await asyncio.to_thread(pidlimit.remove, cgroup)


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the event to a hook that may never read it, or close its stdin early."""
    try:
        stdin.write(data)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        stdin.close()


async def _kept(stream: asyncio.StreamReader) -> str:
    """All of ``stream``, read to its end; only its first ``KEPT_BYTES`` kept, as text."""
    kept = bytearray()
    cut = 0
    while chunk := await stream.read(_CHUNK):
        room = KEPT_BYTES - len(kept)
        kept += chunk[:room]
        cut += max(0, len(chunk) - room)
    text = kept.decode("utf-8", errors="replace")
    return f"{text}\n[... {cut:,} bytes more not kept]" if cut else text


async def _end(proc: asyncio.subprocess.Process) -> None:
    await kill_group(proc.pid, grace=0)
    await proc.wait()


# -- what a run means --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """What one hook's run says."""

    outcome: str
    """``ok``, ``blocked``, ``error`` (a non-blocking one), ``timeout`` or ``not run``."""
    block: str | None = None
    """Why the action is blocked, for the model (exit 2's stderr, a ``block`` or ``deny`` reason)."""
    decision: str | None = None
    """``PreToolUse``'s ``permissionDecision`` when it is ``allow`` or ``ask`` (``deny`` is a block)."""
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    context: str = ""
    """Text for the model's context (``additionalContext``; the plain stdout of some events)."""
    stop: str | None = None
    """``continue: false``: why the agent must stop."""
    note: str = ""
    """For the journal: the error, or what the hook told the person (``systemMessage``)."""


def interpret(ran: Ran, event: str) -> Said:
    """What ``ran`` means at ``event``, by Claude Code's rules."""
    if ran.failure:
        return Said("timeout" if ran.timed_out else "not run", note=ran.failure)
    if ran.code == 2:
        said = _cap(ran.stderr.strip()) or f"a {event} hook blocked this without saying why"
        return Said("blocked", block=said, note=_first_line(ran.stderr))
    if ran.code != 0:
        ended = f"exit code {ran.code}" if (ran.code or 0) > 0 else f"killed by signal {-(ran.code or 0)}"
        line = _first_line(ran.stderr) or _first_line(ran.stdout)
        return Said("error", note=f"{ended}: {line}" if line else ended)
    text = ran.stdout.strip()
    if not text.startswith("{"):
        return Said("ok", context=_cap(text) if event in CONTEXT_EVENTS else "")
    try:
        output = json.loads(text)
    except ValueError as e:
        return Said("error", note=f"its output starts with {{ but is not JSON ({e}); it is ignored")
    try:
        return _from_json(output, event)
    except _Invalid as e:
        return Said("error", note=f"its JSON output is ignored: {e}")


class _Invalid(ValueError):
    pass


def _from_json(output: dict[str, Any], event: str) -> Said:
    """A hook's JSON answer (Claude Code's fields); raises ``_Invalid`` for one of the wrong type."""
    go_on = _typed(output, "continue", bool, True)
    stop_reason = _typed(output, "stopReason", str, "")
    decision = _typed(output, "decision", str, "")
    reason = _typed(output, "reason", str, "")
    message = _typed(output, "systemMessage", str, "")
    _typed(output, "suppressOutput", bool, False)
    specific = _typed(output, "hookSpecificOutput", dict, {})
    named = _typed(specific, "hookEventName", str, event)
    if named != event:
        raise _Invalid(f"hookSpecificOutput.hookEventName is {named!r} in a {event} hook")
    permission = _typed(specific, "permissionDecision", str, "")
    permission_reason = _typed(specific, "permissionDecisionReason", str, "")
    updated = _typed(specific, "updatedInput", dict, None)
    context = _typed(specific, "additionalContext", str, "")
    if decision not in ("", "block", "approve"):
        raise _Invalid(f"decision must be 'block' (or the older 'approve'), not {decision!r}")
    if permission and (event != "PreToolUse" or permission not in DECISIONS):
        raise _Invalid(f"permissionDecision {permission!r} means nothing in a {event} hook")
    if decision == "approve" and event == "PreToolUse" and not permission:
        permission, permission_reason = "allow", reason
    block = None
    if permission == "deny":
        block = _cap(permission_reason or reason) or "denied by a PreToolUse hook"
    elif decision == "block" and event != "SessionStart":
        block = _cap(reason) or f"blocked by a {event} hook"
    return Said(
        "blocked" if block else "ok",
        block=block,
        decision=permission if permission in ("allow", "ask") else None,
        reason=permission_reason,
        updated_input=updated if event == "PreToolUse" and permission != "deny" else None,
        context=_cap(context),
        stop=(stop_reason or f"a {event} hook said to stop") if go_on is False else None,
        note=message,
    )


def _typed(source: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    value = source.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise _Invalid(f"{key} must be {_KINDS[kind]}")
    return value


_KINDS = {bool: "true or false", str: "a string", dict: "an object"}


def _cap(text: str) -> str:
    if len(text) <= TEXT_CHARS:
        return text
    return f"{text[:TEXT_CHARS]}\n[... {len(text) - TEXT_CHARS:,} characters more cut]"


def _first_line(text: str) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= 200 else line[:197] + "..."


@dataclass(frozen=True)
class Answer:
    """What the hooks of one event say together."""

    blocks: tuple[str, ...] = ()
    decision: str | None = None
    """``ask`` when any hook asks, else ``allow`` when any allows (a deny is among ``blocks``)."""
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    """The first hook's (in the settings' order) that gives one."""
    contexts: tuple[str, ...] = ()
    stop: str | None = None
    not_run: tuple[str, ...] = ()
    """Why hooks that matched did not run (the sandbox refused them)."""


def combine(saids: Sequence[Said]) -> Answer:
    """The answer of the hooks of one event: any block blocks, ``ask`` beats ``allow``."""
    decisions = [s.decision for s in saids if s.decision]
    decision = "ask" if "ask" in decisions else ("allow" if decisions else None)
    return Answer(
        blocks=tuple(s.block for s in saids if s.block),
        decision=decision,
        reason=next((s.reason for s in saids if s.decision == decision and s.reason), ""),
        updated_input=next((s.updated_input for s in saids if s.updated_input is not None), None),
        contexts=tuple(s.context for s in saids if s.context),
        stop=next((s.stop for s in saids if s.stop), None),
        not_run=tuple(s.note for s in saids if s.outcome == "not run"),
    )
