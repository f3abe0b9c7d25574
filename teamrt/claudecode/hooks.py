"""Claude Code's hooks: read from the settings files, matched to an event, run confined, their answer read.

A hook is a shell command that runs at an event of an agent's work::

    "hooks": {"PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command",
              "command": "./scripts/guard.sh", "timeout": 30}]}]}

It gets the event as JSON on stdin, never in its command line or its
environment, so nothing a model writes reaches its shell. Exit 0 is success
(stdout may be JSON with a decision, or, for ``UserPromptSubmit`` and
``SessionStart``, text to add to the context); exit 2 blocks, its stderr told
to the model; any other end is a non-blocking error. ``parse_hooks`` reads the
settings; ``run_hook`` runs one; ``teamrt.claudecode.hook_answers`` says what
its run means.

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from teamrt.procs import kill_group
from teamrt.sandbox import limits as pidlimit
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.tools import names

EVENTS = (
    "PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest", "UserPromptSubmit", "Stop",
    "SubagentStart", "SubagentStop", "SessionStart", "SessionEnd", "PreCompact", "PostCompact",
    "TeammateIdle", "TaskCompleted", "Notification",
)  # fmt: skip
"""The events teamrt runs hooks at; a settings file naming another gets a warning."""
NEVER_FIRED = {
    "Setup": "Setup hooks run with `teamrt init` (trigger init; `teamrt init --setup-only` runs them alone)"
    " and `teamrt init --maintenance`, as Claude Code runs them only on --init, --init-only and"
    " --maintenance; a run does not run them (as a plain `claude` start does not)",
}
"""Events Claude Code knows that a run never fires: one note each (``parse_hooks(..., setup=True)`` keeps
Setup's for ``teamrt.claudecode.setup_hooks``)."""
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"})
NOTIFICATION_TYPES = frozenset({"permission_prompt", "idle_prompt", "budget_near", "elicitation_dialog"})
"""The ``notification_type`` values teamrt sends (``teamrt.runtime.notices``)."""
UNSENT_NOTIFICATIONS = {
    "auth_success": "teamrt has no login: it reads an API key",
    "elicitation_url_dialog": "teamrt asks the person in its own ask, never with a browser",
}
"""Claude Code's notification types teamrt never sends, and why (a matcher naming one gets a note)."""
DEFAULT_TIMEOUT = 60.0
"""A hook's timeout when it sets none (Claude Code's is 600 s; teamrt keeps a hung hook from holding an agent
ten minutes)."""
MAX_TIMEOUT = 3600.0
"""The longest a hook may run: a larger ``timeout`` (seconds, as Claude Code reads it, so 30000 is 8.3 h) is
cut to this, with a warning that names the milliseconds it may have meant."""
KEPT_BYTES = 256 * 1024
"""Of each of a hook's stdout and stderr, what is kept; the rest is read and dropped."""
DRAIN_SECONDS = 1.0
"""After a hook's group is gone, how long to wait for its pipes to close (a process that left the group may
hold them open)."""
PROJECT_DIR_ENV = "CLAUDE_PROJECT_DIR"
_CHUNK = 65_536
_PLAIN_MATCHER = re.compile(r"[A-Za-z0-9_|]+")
_SILENT_FIELDS = frozenset({"type", "command", "timeout", "statusMessage", "async", "asyncRewake"})
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
    background: bool = False
    """``async`` (or ``asyncRewake``): it runs beside the agent, which does not wait for it
    (``teamrt.runtime.hook_async``)."""
    rewake: bool = False
    """``asyncRewake``: its exit 2 (stderr, else stdout) reaches the agent as well."""
    timeout_set: bool = False
    """Whether its settings gave a ``timeout`` (a SessionEnd hook without one gets Claude Code's 1.5 s)."""
    plugin_env: tuple[tuple[str, str], ...] = ()
    """A plugin's hook: ``CLAUDE_PLUGIN_ROOT`` and ``CLAUDE_PLUGIN_DATA`` for its process
    (``teamrt.claudecode.plugin_parts``)."""
    roots: tuple[Path, ...] = ()
    """A plugin's hook: its plugin's folder, shown read-only in its sandbox."""

    def matches(self, query: str | None) -> bool:
        """Whether the hook runs for ``query``: a tool's name (teamrt's or an alias), a source, an agent
        type; None (an event without a matcher) always. A matcher of plain names (``Bash|Write``) is a
        list of names; any other is a regular expression searched in the name (Claude Code's rule).

        A tool answers to every name it has (``_aliases``): ``MultiEdit`` is Edit's older name, so a
        matcher naming Edit (``Edit|Write``, ``^Edit$``, ``.*Edit``) runs for a MultiEdit call an older
        run still makes, and one naming MultiEdit runs for Edit: no guard written for either misses the
        other. Names are compared as the model sees them, in any case (``edit`` is ``Edit``)."""
        if query is None or self.matcher in ("", "*"):
            return True
        if self.pattern is None:
            wanted = {names.canonical(n.strip()) or n.strip() for n in self.matcher.split("|")}
            return (names.canonical(query) or query) in wanted
        return any(self.pattern.search(name) for name in _aliases(query))


def _aliases(name: str) -> tuple[str, ...]:
    """``name`` and Claude Code's and teamrt's other names for that tool (``Task``: ``Agent``; ``Edit``:
    ``MultiEdit``, and the other way)."""
    return names.names_of(name)


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


def parse_hooks(files: Sequence[SettingsSource], *, setup: bool = False) -> HookSet:
    """The hooks of ``files`` (lowest precedence first). Nothing here fails a run: what cannot be used
    is left out with a problem line naming the file and the place. ``disableAllHooks: true`` turns off
    the hooks of its own scope, and the user's file turns off all of them: a repository cannot turn off
    a person's own hooks. ``setup``: the ``Setup`` hooks are kept (``teamrt init``, ``teamrt trust``),
    not left out with a note as for a run."""
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
            _parse_event(file, str(event), groups, hooks, problems, setup=setup)
    return HookSet(tuple(hooks), tuple(problems))


def _parse_event(
    file: SettingsSource, event: str, groups: Any, hooks: list[Hook], problems: list[str], *, setup: bool
) -> None:
    where = f"{file.path}: hooks.{event}"
    if event in NEVER_FIRED and not (setup and event == "Setup"):
        problems.append(f"{where}: {NEVER_FIRED[event]}")
        return
    if event not in EVENTS and event not in NEVER_FIRED:
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
        if event == "Notification" and _PLAIN_MATCHER.fullmatch(matcher):
            for kind in (k.strip() for k in matcher.split("|")):
                if kind in UNSENT_NOTIFICATIONS:
                    problems.append(
                        f"{at}: teamrt never sends {kind} notifications ({UNSENT_NOTIFICATIONS[kind]})"
                    )
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
    timeout = _timeout(entry, at, problems)
    background = {name: entry.get(name, False) for name in ("async", "asyncRewake")}
    for name, value in background.items():
        if not isinstance(value, bool):
            problems.append(f"{at}: {name} must be true or false; the hook is waited for")
            background[name] = False
    for name in sorted(set(entry) - _SILENT_FIELDS):
        if name == "if":
            problems.append(
                f"{at}: 'if' is not used by teamrt: the hook runs for every call its matcher matches"
            )
        else:
            problems.append(f"{at}: unknown field {name!r} ignored")
    rewake = background["asyncRewake"] is True
    return Hook(
        event, matcher, command, timeout, file.scope, file.path, pattern,
        background=rewake or background["async"] is True, rewake=rewake, timeout_set="timeout" in entry,
        plugin_env=tuple(getattr(file, "env", {}).items()), roots=tuple(getattr(file, "roots", ())),
    )  # fmt: skip


def _timeout(entry: dict[str, Any], at: str, problems: list[str]) -> float:
    """The hook's ``timeout`` in seconds, as Claude Code reads it. One above ``MAX_TIMEOUT`` is cut to it
    (the hook runs: a value written in milliseconds, 30000, would otherwise let a hung hook hold an agent
    8.3 hours); one that is not a positive number gets the default. Either is said in one line."""
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        problems.append(f"{at}: timeout must be a number of seconds above 0; it gets {DEFAULT_TIMEOUT:g}")
        return DEFAULT_TIMEOUT
    if timeout > MAX_TIMEOUT:
        meant = f"; if milliseconds were meant, write {timeout / 1000:g}" if timeout >= 1000 else ""
        problems.append(
            f"{at}: timeout {timeout:g} is seconds, as Claude Code reads it ({timeout / 3600:.1f} h);"
            f" teamrt waits at most {MAX_TIMEOUT:g} s{meant}"
        )
        return MAX_TIMEOUT
    return float(timeout)


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
    if hook.roots:  # a plugin's hook: its folder (in ~/.claude, which the sandbox hides) shown read-only
        ctx = replace(ctx, extra_roots=(*ctx.extra_roots, *hook.roots))
    command = sandbox.command(hook.command, ctx)
    env = {**command.env, **dict(hook.plugin_env), PROJECT_DIR_ENV: str(ctx.workspace)}
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
