"""Protected paths that a process created or changed, moved out of the user's tree, and what it changed
put back.

The sandbox mounts the protected paths that exist read-only. One that does not
exist yet (a project with no ``.claude``, no ``.mcp.json``) cannot be mounted
without creating it in the user's tree, so a command can create it, and a
nested ``CLAUDE.md`` or ``sub/.claude`` is not mounted at all. Whatever is made
there would be read as the person's word by the next session: a planted
``.claude/settings.local.json`` allows commands, a planted ``.mcp.json`` starts
a server. So a run keeps a ``Guard``:

- a **baseline** of each workspace's protected entries (``protect.protected_in_tree``
  and the memory imports and team file the run loaded), taken as the run starts
  or resumes, when no agent process runs: each entry's kind, mode, identity
  and content hash (a symlink's target), and a copy of each file; kept in
  ``runs/<run>/protected.json`` (written atomically), so a run killed before
  its last scan leaves it behind;
- a **scan** after every process that ran in the workspace ends (a ``Bash``
  command, a hook, an MCP tool call or server), under one lock per workspace:
  the protected entries are compared with the baseline by identity and
  content, not by existence (a dangling symlink beat that), and whatever was
  created, changed or replaced is moved to ``runs/<run>/quarantine/``
  (nothing is deleted); what the baseline had is put back from its copy;
- a **final scan** when the run ends, all its processes stopped, after which
  the baseline is removed; a run that never got there is swept by the next
  run in the project before anything is read as configuration
  (``sweep_leftovers``).

How entries are compared, moved out and put back, always through directory
descriptors, is in ``teamrt.sandbox.baseline``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Final, TypeVar

from teamrt.procs import is_running, process_start_time
from teamrt.sandbox.baseline import (
    COPIES_DIR,
    QUARANTINE_DIR,
    Entry,
    Moved,
    Rules,
    Watched,
    scan,
    take_baseline,
)
from teamrt.sandbox.confinement import Confinement

BASELINE_FILE = "protected.json"
QUARANTINED: Final = "protected.quarantined"
"""The event of a scan that moved something: ``{"workspace", "cause", "moved": [{"path", "how", "kept",
"restored"}]}``."""
HIDDEN_IN_HOME = ("runs", "demo")
"""teamrt's own working places in a home that lies in a workspace: written by teamrt while runs go on,
hidden from agents, never read as configuration; not scanned."""
WHY = (
    "no agent, hook or MCP server may create or change .claude, .mcp.json, .teamrt, CLAUDE.md, AGENTS.md,"
    " the files they import or the team file, in any permission mode"
)


# == the old check: what did not exist before a command ===================================================


def absent(ctx: Confinement) -> list[Path]:
    """The protected paths in ``ctx``'s workspace that do not exist now (used only where no run keeps a
    ``Guard``: a tool called outside a supervisor)."""
    workspace = Path(os.path.realpath(ctx.workspace))
    return [p for p in ctx.protected if p.is_relative_to(workspace) and not os.path.lexists(p)]


def quarantine(paths: list[Path], ctx: Confinement) -> list[tuple[Path, Path]]:
    """Move those of ``paths`` that exist now into ``<run_dir>/quarantine/``; (path, where it went) each."""
    moved = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        keep = ctx.run_dir / QUARANTINE_DIR / f"{time.time_ns()}-{path.name}"
        keep.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.move(path, keep)
        moved.append((path, keep))
    return moved


def describe(moved: list[Moved], after: str) -> str:
    """What the model (or the run's log) reads of a scan that moved something: the paths, where they went
    and how to get one back."""
    shown = ", ".join(m.said() for m in moved)
    return (
        f"[refused: {after} created or changed protected paths: {shown}; {WHY}. A person who made such a"
        " change during the run finds it at the path named and may move it back once the run has ended]"
    )


# == a run's guard ========================================================================================

T = TypeVar("T")
OnMoved = Callable[[list[Moved], str, str | None], Awaitable[None]]
"""Told of each scan that moved something: (moved, cause, agent); records the event."""


class Guard:
    """A run's baselines and scans, one lock per workspace. ``on_moved`` records what a scan moved (the
    supervisor: a ``protected.quarantined`` event in the store)."""

    def __init__(self, run_dir: Path, project: Path, on_moved: OnMoved | None = None) -> None:
        self.run_dir = run_dir
        self.project = Path(os.path.realpath(project))
        self.on_moved = on_moved
        self._watched: dict[Path, Watched] = {}

    @property
    def baseline_file(self) -> Path:
        return self.run_dir / BASELINE_FILE

    def watches(self, workspace: Path) -> bool:
        return Path(os.path.realpath(workspace)) in self._watched

    async def watch(self, workspace: Path, extras: Iterable[Path] = ()) -> None:
        """Take ``workspace``'s baseline (again, when watched already: a resumed run's), with ``extras``
        (absolute paths: memory imports, the team file) protected too, and keep it in the run's directory."""
        real = Path(os.path.realpath(workspace))
        watched = self._watched.get(real)
        if watched is None:
            key = f"w{len(self._watched)}"
            watched = Watched(real, key, Rules())
            self._watched[real] = watched
        async with watched.lock:
            rules = _rules(real, extras, self.run_dir)
            copies = self.run_dir / COPIES_DIR / watched.key
            watched.entries, gits = await asyncio.to_thread(take_baseline, real, rules, copies)
            watched.rules = replace(rules, skipped=rules.skipped | gits)
            await asyncio.to_thread(_write_json, self.baseline_file, self._snapshot())

    async def check(self, workspace: Path, *, cause: str, agent: str | None = None) -> list[Moved]:
        """Scan ``workspace`` (after a process that ran there ended): what was moved or put back, recorded
        through ``on_moved``. A workspace not watched is not scanned."""
        watched = self._watched.get(Path(os.path.realpath(workspace)))
        if watched is None:
            return []
        async with watched.lock:
            moved = await asyncio.to_thread(scan, watched, self.run_dir)
        if moved and self.on_moved is not None:
            await self.on_moved(moved, cause, agent)
        return moved

    async def accept(self, workspace: Path, paths: Iterable[str], change: Callable[[], T]) -> T:
        """Make a person's own ``change`` to the protected ``paths`` of ``workspace`` (relative to it; "allow
        always" writing ``.claude/settings.local.json``) part of the baseline, so that no scan moves it out.
        Under the workspace's lock: a scan first (what an agent changed is moved out as ever), then
        ``change`` (blocking; run in a thread), then only the entries of ``paths`` and the directories
        above them taken again: what an agent does meanwhile elsewhere is still found. A workspace not
        watched just gets the change."""
        watched = self._watched.get(Path(os.path.realpath(workspace)))
        if watched is None:
            return await asyncio.to_thread(change)
        wanted = {p for path in paths for p in _with_parents(path)}
        async with watched.lock:
            moved = await asyncio.to_thread(scan, watched, self.run_dir)
            try:
                return await asyncio.to_thread(change)
            finally:
                copies = self.run_dir / COPIES_DIR / watched.key
                await asyncio.to_thread(_retake, watched, wanted, copies)
                await asyncio.to_thread(_write_json, self.baseline_file, self._snapshot())
                if moved and self.on_moved is not None:
                    await self.on_moved(moved, "a person's change to the settings", None)

    async def close(self) -> list[Moved]:
        """The run's final scan of every workspace (its processes all stopped), then its baseline removed."""
        moved: list[Moved] = []
        for workspace in list(self._watched):
            moved += await self.check(workspace, cause="the end of the run")
        with contextlib.suppress(FileNotFoundError):
            self.baseline_file.unlink()
        return moved

    def _snapshot(self) -> dict[str, Any]:
        """The baselines as ``protected.json`` keeps them, with this process as their owner."""
        pid = os.getpid()
        return {
            "version": 1, "project": str(self.project), "host": _host(), "pid": pid,
            "start_time": process_start_time(pid),
            "workspaces": {str(w): watched.to_json() for w, watched in list(self._watched.items())},
        }  # fmt: skip


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically: a reader finds the old file or the new one, never a part."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.time_ns()}.tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


def _with_parents(path: str) -> list[str]:
    parts = PurePosixPath(path).parts
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _retake(watched: Watched, paths: set[str], copies: Path) -> None:
    """The baseline entries of ``paths`` (relative to the workspace) taken again, with their copies; every
    other entry kept as it was. Blocking; the caller holds ``watched.lock``."""
    fresh = copies.with_name(f"{copies.name}.retake")
    entries, _ = take_baseline(watched.workspace, watched.rules, fresh)
    try:
        for path in paths:
            if path in entries:
                watched.entries[path] = entries[path]
                if (fresh / path).is_file():
                    (copies / path).parent.mkdir(parents=True, exist_ok=True)
                    os.replace(fresh / path, copies / path)
            else:
                watched.entries.pop(path, None)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)


def _rules(workspace: Path, extras: Iterable[Path], run_dir: Path) -> Rules:
    """What a scan of ``workspace`` looks at: its protected paths and ``extras`` inside it; not teamrt's
    working places in a home inside it."""
    inside = []
    for path in extras:
        real = Path(os.path.realpath(path.parent)) / path.name
        if real.is_relative_to(workspace) and real != workspace:
            inside.append(real.relative_to(workspace).as_posix())
    skipped = []
    home = Path(os.path.realpath(run_dir.parent.parent))
    if home.is_relative_to(workspace) and home != workspace:
        skipped += [(home / place).relative_to(workspace).as_posix() for place in HIDDEN_IN_HOME]
    return Rules(frozenset(inside), frozenset(skipped))


def _host() -> str:
    from teamrt.store.ownership import BadHost, host_identity

    try:
        return host_identity()
    except BadHost:
        return socket.gethostname()


# == what a run killed before its final scan left ==========================================================


def sweep_leftovers(project: Path, runs: Path) -> list[Moved]:
    """Scan the workspaces of every run of ``project`` under ``runs`` whose baseline is still there though
    its owner is gone (killed before its final scan): what its agents left is moved to that run's
    quarantine, what they changed put back, and the baseline removed. A run whose owner lives (on this
    host) or that another host owns is left alone. Called before a run reads any configuration."""
    real = str(Path(os.path.realpath(project)))
    moved: list[Moved] = []
    try:
        baselines = sorted(runs.glob(f"*/{BASELINE_FILE}"))
    except OSError:
        return []
    for baseline in baselines:
        try:
            data = json.loads(baseline.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # half-written by a run being killed: the rename never happened, so this is not it
        if not isinstance(data, dict) or data.get("project") != real or not _orphaned(data):
            continue
        moved += _sweep(baseline, data)
    return moved


def _orphaned(data: dict[str, Any]) -> bool:
    pid, start = data.get("pid"), data.get("start_time")
    if data.get("host") != _host():
        return False
    return not (isinstance(pid, int) and isinstance(start, int) and is_running(pid, start))


def _sweep(baseline: Path, data: dict[str, Any]) -> list[Moved]:
    run_dir = baseline.parent
    moved: list[Moved] = []
    for workspace, saved in dict(data.get("workspaces") or {}).items():
        try:
            watched = Watched(
                Path(workspace), str(saved["key"]), Rules.from_json(saved.get("rules") or {}),
                {p: Entry.from_json(e) for p, e in dict(saved.get("entries") or {}).items()},
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, IndexError):
            continue
        moved += scan(watched, run_dir)
    baseline.unlink(missing_ok=True)
    return moved


def sweep_notices(moved: list[Moved]) -> list[str]:
    """A line each, for the person, on what ``sweep_leftovers`` moved."""
    return [
        f"teamrt: warning: a run killed before its last check left protected paths changed in"
        f" {m.workspace}: {m.said()}"
        for m in moved
    ]
