"""Claude Code's ``Setup`` hooks, run by ``teamrt init`` as Claude Code runs them on ``claude --init``
(and ``--init-only``: trigger ``init``) and ``claude --maintenance`` (trigger ``maintenance``).

A Setup hook prepares a checkout (installs dependencies, makes a local config) once, not at every
session; its matcher is the trigger (``init``, ``maintenance``, ``*``). Claude Code gives it
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name: "Setup"`` and ``trigger`` on stdin.
``teamrt init`` has no session: ``session_id`` and ``transcript_path`` are empty, ``cwd`` is the
project. What a Setup hook answers for a session (``additionalContext``, ``CLAUDE_ENV_FILE``) has no
session to reach here: it is said to be unused, never dropped silently.

They run as every hook runs (``teamrt.claudecode.hooks.run_hook``): in the sandbox of ``Bash`` (the team
file's ``[sandbox]``: ``npm install`` needs ``network = true``), in the project, in a process group killed
when it ends or at its ``timeout``, all matching hooks at once, as Claude Code runs them. The user's own
run; the repository's (``.claude/settings.json``, ``settings.local.json``) only while the person trusts
the project's hooks (``teamrt trust``), as in a run; an enabled plugin's as its trust allows
(``teamrt.claudecode.plugins``). There is no run to journal into: ``run_setup`` gives one line per hook
with its outcome, and a block (exit 2, ``decision: "block"``, ``continue: false``) with its reason on one
line, which ``teamrt init`` turns into a failing exit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from teamrt.claudecode.hook_answers import interpret
from teamrt.claudecode.hooks import Hook, HookSet, Ran, parse_hooks, run_hook
from teamrt.claudecode.trust import REPOSITORY_SCOPES, TrustError, hooks_digest, is_trusted
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.terminal import clean_line

EVENT = "Setup"
TRIGGERS = ("init", "maintenance")
SHOWN_CHARS = 300
"""The most of a hook's command or reason on its line."""


@dataclass(frozen=True)
class SetupRun:
    """What the Setup hooks of one trigger did."""

    lines: tuple[str, ...]
    """For the person, one each: what was left out, then each hook's outcome (safe for a terminal)."""
    blocked: str | None = None
    """The first block's reason on one line (``teamrt init`` fails with it); None when none blocked."""
    ran: int = 0


def setup_hooks(project: Path, trigger: str) -> tuple[list[Hook], list[str]]:
    """The Setup hooks of ``project`` that match ``trigger`` and may run, and what was left out, a line
    each (a repository's untrusted hooks: one line saying ``teamrt trust``)."""
    from teamrt.claudecode.plugins import load_plugins
    from teamrt.claudecode.settings_read import read_settings_files

    files = read_settings_files(project)
    parsed = parse_hooks(files, setup=True)
    notes = _setup_problems(parsed)  # the other events' problems are for a run to say
    repository = parsed.scoped(*REPOSITORY_SCOPES).matching(EVENT, trigger)
    runnable = parsed.scoped("user")
    if repository:
        try:
            digest = hooks_digest(files)
            trusted = digest is not None and is_trusted(project, digest)
        except TrustError as e:
            notes.append(str(e))
            trusted = False
        if trusted:
            runnable = parsed
        else:
            notes.append(
                f"the repository's {len(repository)} Setup hook{'s' if len(repository) > 1 else ''} did not"
                f" run: this project's hooks are not trusted as they are now; read them, then run"
                f" `teamrt trust` in {project} to let them run"
            )
    off = any(f.scope == "user" and f.data.get("disableAllHooks") is True for f in files)
    plugins = load_plugins(project, files)
    if plugins.hook_files and not off:
        from_plugins = parse_hooks(plugins.hook_files, setup=True)
        notes += _setup_problems(from_plugins)
        runnable = HookSet((*runnable.hooks, *from_plugins.hooks), runnable.problems)
    return runnable.matching(EVENT, trigger), notes


def _setup_problems(parsed: HookSet) -> list[str]:
    return [problem for problem in parsed.problems if f": hooks.{EVENT}" in problem]


def outside_run(project: Path, run_dir: Path, policy: SandboxPolicy | None) -> Confinement:
    """Where a hook runs when no agent's does: in ``project`` under ``policy`` (the team's), its protected
    paths read-only; ``run_dir`` (under teamrt's runs, never made) is the run directory it is told."""
    from teamrt.sandbox.protect import protected_paths

    protected = protected_paths((project,), home=run_dir.parent.parent)
    return Confinement(project, run_dir, protected=protected, policy=policy or SandboxPolicy())


def run_setup(project: Path, trigger: str, ctx: Confinement, *, sandbox: Sandbox | None = None) -> SetupRun:
    """Run ``project``'s Setup hooks of ``trigger`` (``init`` or ``maintenance``), all at once, confined as
    ``ctx`` says; what each did."""
    if trigger not in TRIGGERS:
        raise ValueError(f"Setup trigger {trigger!r} is not one of {TRIGGERS}")
    hooks, notes = setup_hooks(project, trigger)
    lines = [clean_line(f"teamrt: warning: {note}") for note in notes]
    if not hooks:
        return SetupRun(tuple(lines))
    payload = {
        "session_id": "", "transcript_path": "", "cwd": str(project), "hook_event_name": EVENT,
        "trigger": trigger,
    }  # fmt: skip

    async def go() -> list[tuple[Hook, str, str | None]]:
        ran = await asyncio.gather(*(run_hook(hook, payload, ctx, sandbox=sandbox) for hook in hooks))
        return [(r.hook, *_outcome(r)) for r in ran]

    blocked: str | None = None
    for hook, said, block in asyncio.run(go()):
        lines.append(clean_line(f"teamrt: Setup hook ({hook.scope}) {_cut(hook.command.strip())}: {said}"))
        if block is not None and blocked is None:
            blocked = clean_line(_cut(block))
    return SetupRun(tuple(lines), blocked, len(hooks))


def _outcome(ran: Ran) -> tuple[str, str | None]:
    """A hook's outcome for its line, and its block's reason (None: it blocked nothing)."""
    said = interpret(ran, EVENT)
    took = f" in {ran.ms / 1000:.1f} s"
    if said.outcome == "blocked":
        return f"blocked{took}: {said.note or said.block}", said.block or "a Setup hook blocked"
    if said.stop is not None:
        return f"said to stop{took}: {said.stop}", said.stop
    if said.outcome in ("timeout", "not run"):
        return said.note, None
    if said.outcome == "error":
        return f"failed{took} ({said.note}); init goes on, as Claude Code goes on", None
    done = f"ok{took}"
    if said.note:  # its systemMessage, for the person
        done += f"; it says: {said.note}"
    if said.context:
        done += "; its additionalContext is not used: teamrt init starts no session for it to reach"
    return done, None


def _cut(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 3] + "..."
