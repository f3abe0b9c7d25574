"""``teamrt gc``: what finished runs leave behind, removed, keeping any work not merged.

Without ``--runs``: each finished run's worktrees and branches (``teamrt.worktree.apply.collect``: an
agent's unmerged commits or uncommitted changes, and an integration branch not applied, are kept unless
``--force``). With ``--runs --older-than AGE``: that, then each finished run that ended longer ago than
AGE goes as a whole: its run directory (its own SQLite store with it) and, with ``TEAMRT_DB``, its rows
in the shared database. A run is kept, and the line says why, while it is live (never removed), crashed
(a resume may still want it), holds work ``collect`` kept, or ran in a repository that is gone (its
agents' commits may live only in its directory); ``--force`` removes all but the live.

The directory removed is only ever ``<home>/runs/<run>`` itself: a run id that is not a run name, or an
entry that is a symbolic link or resolves outside the runs home, is left alone and said so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from teamrt import home
from teamrt.errors import UserError
from teamrt.mailbox import is_name
from teamrt.runs import query as runs
from teamrt.runs.render import age_text
from teamrt.store import AgentRecord, RunOwned, RunRecord, StoreError
from teamrt.store.engine import server_url
from teamrt.store.errors import database_reason
from teamrt.store.ownership import OwnerLock
from teamrt.terminal import clean_line
from teamrt.worktree.apply import collect
from teamrt.worktree.git import GitRepo


def handle(args: argparse.Namespace) -> int:
    if args.older_than is not None and not args.runs:
        raise UserError("--older-than picks the runs that gc --runs removes: use it with --runs")
    if args.runs and args.older_than is None:
        raise UserError(
            "gc --runs needs --older-than AGE: the finished runs that ended longer ago than AGE go"
            " (30d, 12h, 2w; 0s for every finished run)"
        )
    if args.runs:
        return _prune(args)
    return _collect(args)


def _collect(args: argparse.Namespace) -> int:
    said = 0
    for summary in runs.list_runs(home.runs_path()):
        if summary.problem is None and summary.status not in (*runs.OWNED, runs.CRASHED):
            run_dir = home.existing_run_dir(summary.id)
            with runs.reading(run_dir, summary.id) as reader:
                run, agents = reader.run(), reader.agents()
            for line in collect(run, run_dir, agents, force=args.force, dry_run=args.dry_run):
                print(clean_line(line))  # a branch's name is the agent's choice
                said += 1
    if not said:
        print("nothing to collect: no finished run has worktrees or branches left")
    elif args.dry_run:
        print("dry run: nothing was changed")
    return 0


@dataclass
class _Tally:
    """What ``gc --runs`` did, for its last line: runs removed and kept, bytes freed."""

    removed: int = 0
    kept: int = 0
    freed: int = 0


def _prune(args: argparse.Namespace) -> int:
    runs_dir = home.runs_path()
    now = time.time()
    tally = _Tally()
    for summary in reversed(runs.list_runs(runs_dir)):  # oldest first
        for line in _prune_one(summary, runs_dir, now, args, tally):
            print(clean_line(line))  # a branch's name is the agent's choice
    removed, kept = ("would remove", "would keep") if args.dry_run else ("removed", "kept")
    if not tally.removed and not tally.kept:
        print(f"nothing to remove: no finished run ended more than {age_text(args.older_than)} ago")
        return 0
    said = f"; {kept} {tally.kept} (said above)" if tally.kept else ""
    print(f"{removed} {tally.removed} run(s), {_size_text(tally.freed)}{said}")
    if args.dry_run:
        print("dry run: nothing was changed")
    return 0


def _prune_one(
    summary: runs.RunSummary, runs_dir: Path, now: float, args: argparse.Namespace, tally: _Tally
) -> list[str]:
    """What ``gc --runs`` does with one run, a line each; nothing for a run too young to go."""
    run_id = summary.id
    keep = "would keep" if args.dry_run else "kept"
    if summary.problem is not None:
        if now - summary.started < args.older_than:
            return []
        tally.kept += 1
        return [f"{run_id}: {keep}: {summary.problem}; remove it yourself once you are sure"]
    if not is_name(run_id):  # an id in a shared database that no run directory could have
        tally.kept += 1
        return [f"{run_id}: {keep}: not a run name; nothing under {runs_dir} is touched for it"]
    try:
        with runs.reading(runs_dir / run_id, run_id) as reader:
            run, agents, db_now = reader.run(), reader.agents(), reader.now()
    except StoreError as e:
        tally.kept += 1
        return [f"{run_id}: {keep}: {e}"]
    if now - ended_at(run) < args.older_than:
        return []
    why = _why_kept(run, runs.run_status(run, db_now), force=args.force)
    run_dir = _run_dir(runs_dir, run_id)
    if isinstance(run_dir, str) or why is not None:
        tally.kept += 1
        return [f"{run_id}: {keep}: {why or run_dir}"]
    if args.dry_run:
        return _remove(run, agents, run_dir, tally, force=args.force, dry_run=args.dry_run)
    lock = OwnerLock(run_dir, run_id, shared_database=server_url() is not None)
    try:
        lock.acquire()  # no resume or follow-up may start while the run goes
    except RunOwned:
        tally.kept += 1
        return [f"{run_id}: {keep}: a process took it while gc looked at it"]
    except OSError as e:
        tally.kept += 1
        return [f"{run_id}: {keep}: its lock cannot be taken ({e})"]
    try:
        with runs.reading(run_dir, run_id) as reader:  # again, under the lock: it may have changed
            run, agents = reader.run(), reader.agents()
            why = _why_kept(run, runs.run_status(run, reader.now()), force=args.force)
        if why is not None:
            tally.kept += 1
            return [f"{run_id}: {keep}: {why}"]
        return _remove(run, agents, run_dir, tally, force=args.force, dry_run=args.dry_run)
    finally:
        lock.release()


def _remove(
    run: RunRecord, agents: list[AgentRecord], run_dir: Path, tally: _Tally, *, force: bool, dry_run: bool
) -> list[str]:
    """The run's worktrees and branches collected, then (unless ``collect`` kept some of its work) its
    directory and rows removed; what was done, a line each."""
    in_git = bool(run.base_head or run.settings.get("integration_branch"))  # else no branch to collect
    lines = collect(run, run_dir, agents, force=force, dry_run=dry_run) if in_git else []
    keep, gone = ("would keep", "would remove") if dry_run else ("kept", "removed")
    if any(line.startswith(f"{run.id}: {keep} ") for line in lines):
        tally.kept += 1
        return [*lines, f"{run.id}: {keep}: run directory {run_dir}, for the work kept above"]
    size = tree_size(run_dir)
    url = server_url()
    if not dry_run and url is not None:
        from teamrt.store.prune import forget_run

        try:
            forget_run(url, run.id, run.owner_token)
        except RunOwned as e:
            tally.kept += 1
            return [*lines, f"{run.id}: kept: {e}"]
        except SQLAlchemyError as e:
            tally.kept += 1
            return [*lines, f"{run.id}: kept: its rows cannot be deleted ({database_reason(e)})"]
    if not dry_run:
        try:
            remove_tree(run_dir)
        except OSError as e:
            tally.kept += 1
            forgotten = "its rows are deleted, but " if url is not None else ""
            return [*lines, f"{run.id}: {forgotten}its run directory could not be removed ({e}); remove it"
                    " yourself"]  # fmt: skip
    tally.removed += 1
    tally.freed += size
    rows = " and its rows in the database" if url is not None else ""
    ended = f"{run.status}, ended {age_text(time.time() - ended_at(run))} ago, {_size_text(size)}"
    return [*lines, f"{run.id}: {gone} run directory {run_dir}{rows} ({ended})"]


def _why_kept(run: RunRecord, status: str, *, force: bool) -> str | None:
    """Why ``gc --runs`` keeps the run whatever its age (None: it may go)."""
    if status in runs.OWNED:
        owner = runs.owner_text(run)
        return f"it is {status}" + (f" ({owner})" if owner else "") + "; gc never removes a live run"
    if status == runs.CRASHED and not force:
        return f"it crashed; teamrt resume {run.id} goes on with it, gc --runs --force removes it"
    if not force and run.settings.get("integration_branch") and GitRepo.find(Path(run.workdir)) is None:
        return (
            f"its repository {run.workdir} is gone or moved, so its branches cannot be checked (its agents'"
            " commits may live only in its run directory); gc --runs --force removes it"
        )
    return None


def ended_at(run: RunRecord) -> float:
    """When the run last did something: its end, else its last heartbeat, else its start."""
    return run.finished_at or run.heartbeat_at or run.created_at


def _run_dir(runs_dir: Path, run_id: str) -> Path | str:
    """``<runs>/<run>`` when it is a real directory right in the runs home; else why it is left alone."""
    path = runs_dir / run_id
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return (
            f"its run directory is not on this host ({path}): the database holds runs of other hosts;"
            " run gc there"
        )
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        return f"{path} is not a directory but a link or a file; left alone"
    if Path(os.path.realpath(path)).parent != Path(os.path.realpath(runs_dir)):
        return f"{path} resolves outside {runs_dir}; left alone"
    return path


def tree_size(top: Path) -> int:
    """The bytes of the files under ``top``, links not followed."""
    total = 0
    for root, _, files in os.walk(top):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def remove_tree(top: Path) -> None:
    """Remove the directory ``top`` and all under it, never following a link; directories an agent's
    command made read-only (``chmod 500``) are made writable by their owner first."""
    os.chmod(top, stat.S_IMODE(os.lstat(top).st_mode) | 0o700)
    for root, dirs, _ in os.walk(top):  # top-down: a directory is fixed before it is entered
        for name in dirs:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode) and mode & 0o700 != 0o700:
                os.chmod(path, stat.S_IMODE(mode) | 0o700)
    shutil.rmtree(top)


def _size_text(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"
