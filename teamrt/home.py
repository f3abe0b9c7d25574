"""teamrt's home: ``$TEAMRT_HOME``, else ``.teamrt`` at the top of the git repository holding the
current directory (the current directory itself outside git), mode 0700.

Runs are kept out of git: the repository's ``.git/info/exclude`` gets
``.teamrt/*`` with ``.teamrt/agents/`` and ``.teamrt/team.toml`` let back in,
so a team's agent files and team file can be committed.
"""

from __future__ import annotations

import os
import secrets
import string
from datetime import UTC, datetime
from pathlib import Path

from teamrt.errors import UserError
from teamrt.mailbox import check_name, is_name
from teamrt.terminal import clean_line

HOME_ENV = "TEAMRT_HOME"
DEFAULT_HOME = ".teamrt"
EXCLUDE_LINES = (".teamrt/*", "!.teamrt/agents/", "!.teamrt/team.toml")
OLD_EXCLUDE_LINE = ".teamrt/"  # what teamrt wrote before: it kept agent files out of git too
DIR_MODE = 0o700
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


class UnknownRun(UserError, LookupError):
    """A run name with no run directory under the home."""

    def __init__(self, run: str, runs: Path, why: str | None = None) -> None:
        self.run = run
        self.runs = runs
        super().__init__(f"no run named {run!r} in {runs}" + (f" ({why})" if why else ""))


class RunNotStarted(UnknownRun):
    """A submitted run (``teamrt submit``) no worker has started: it has no store yet."""

    def __init__(self, run: str, runs: Path, said: str) -> None:
        self.run = run
        self.runs = runs
        UserError.__init__(self, said)


def project_root(start: Path | None = None) -> Path:
    """The top of the git repository (or worktree) holding ``start`` (default: the current
    directory), or ``start`` itself outside git: where a run works and its home is."""
    start = (Path.cwd() if start is None else start).resolve()
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return start


def home_path(project: Path | None = None) -> Path:
    """Where the home of all runs is, without creating it (``project``: where the default home is looked
    for, instead of the current directory)."""
    configured = os.environ.get(HOME_ENV)
    return Path(configured).expanduser().resolve() if configured else project_root(project) / DEFAULT_HOME


def teamrt_home(project: Path | None = None) -> Path:
    """The home of all runs, created 0700; the default one is excluded from git."""
    configured = os.environ.get(HOME_ENV)
    home = home_path(project)
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(home, DIR_MODE)
    if not configured:
        _exclude_from_git(home.parent)
    return home


def new_run_id() -> str:
    """A fresh run name, sortable by start time: ``20261122-133512-k3f9`` (UTC)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(4))
    return f"{stamp}-{suffix}"


def run_dir(run_id: str, project: Path | None = None) -> Path:
    """``<home>/runs/<run>``, created 0700; raises InvalidName for a name that is not a run name."""
    check_name(run_id, "run")
    runs = _private_dir(teamrt_home(project) / "runs")
    return _private_dir(runs / run_id)


def runs_path(project: Path | None = None) -> Path:
    """``<home>/runs``, without creating it."""
    return home_path(project) / "runs"


def existing_run_dir(run_id: str, project: Path | None = None) -> Path:
    """``<home>/runs/<run>`` of a run that exists; raises UnknownRun. Creates nothing.

    With runs in a server database (``TEAMRT_DB``), a run of another host whose
    directory is not reachable here is found in the database: the path is
    returned though it does not exist, and whatever needs the directory (a
    resume, the mailbox) says so.
    """
    runs = runs_path(project)
    if not is_name(run_id):
        raise UnknownRun(run_id, runs)
    if not (runs / run_id).is_dir() and not _in_server_database(run_id, runs):
        raise UnknownRun(run_id, runs)
    return runs / run_id


def sweep_leftovers(project: Path, runs: Path) -> list[str]:
    """Before a run in ``project`` reads any configuration: what the agents of an earlier run (kept in
    ``runs``) killed before its last scan left among the protected paths, moved to that run's quarantine
    (``teamrt.sandbox.quarantine.sweep_leftovers``); a warning line each."""
    from teamrt.sandbox.quarantine import sweep_leftovers as sweep
    from teamrt.sandbox.quarantine import sweep_notices

    return sweep_notices(sweep(project, runs))


def _in_server_database(run_id: str, runs: Path) -> bool:
    from teamrt.store.engine import server_url

    url = server_url()
    if url is None:
        return False
    from sqlalchemy.exc import SQLAlchemyError

    from teamrt.store import StoreError, open_reader
    from teamrt.store.engine import describe
    from teamrt.store.errors import database_reason

    try:
        open_reader(runs / run_id, run_id).close()
    except StoreError:
        from teamrt.store.queue_tables import not_started

        said = not_started(url, run_id)
        if said is not None:
            raise RunNotStarted(run_id, runs, clean_line(said)) from None
        return False
    except SQLAlchemyError as e:
        reason = database_reason(e)
        raise UnknownRun(run_id, runs, f"{describe(url)} cannot be read: {reason}") from None
    return True


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=DIR_MODE, exist_ok=True)
    os.chmod(path, DIR_MODE)
    return path


def _exclude_from_git(top: Path) -> None:
    """Keep runs out of the repository whose top is ``top``: ``EXCLUDE_LINES`` in its exclude file.

    A ``.git`` that is a file (a worktree or a submodule) is left alone.
    """
    git = top / ".git"
    if not git.is_dir():
        return
    exclude = git / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    lines = [line for line in text.splitlines() if line.strip() != OLD_EXCLUDE_LINE]
    missing = [line for line in EXCLUDE_LINES if line not in (kept.strip() for kept in lines)]
    if not missing and len(lines) == len(text.splitlines()):
        return
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("\n".join([*lines, *missing]) + "\n", encoding="utf-8")
