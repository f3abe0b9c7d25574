"""The run directory (DESIGN.md, Contracts): ``$TEAMRT_HOME`` or ``./.teamrt``, mode 0700.

The default home is kept out of git: ``.teamrt/`` goes into the enclosing
repository's ``.git/info/exclude`` once.
"""

from __future__ import annotations

import os
import secrets
import string
from datetime import UTC, datetime
from pathlib import Path

from .mailbox import check_name, is_name

HOME_ENV = "TEAMRT_HOME"
DEFAULT_HOME = ".teamrt"
EXCLUDE_LINE = ".teamrt/"
DIR_MODE = 0o700
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits


class UnknownRun(LookupError):
    """A run name with no run directory under the home."""

    def __init__(self, run: str, runs: Path) -> None:
        self.run = run
        self.runs = runs
        super().__init__(f"no run named {run!r} in {runs}")


def home_path() -> Path:
    """Where the home of all runs is, without creating it."""
    configured = os.environ.get(HOME_ENV)
    return (Path(configured).expanduser() if configured else Path(DEFAULT_HOME)).resolve()


def teamrt_home() -> Path:
    """The home of all runs, created 0700; the default one is excluded from git."""
    configured = os.environ.get(HOME_ENV)
    home = home_path()
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(home, DIR_MODE)
    if not configured:
        _exclude_from_git(Path.cwd().resolve())
    return home


def new_run_id() -> str:
    """A fresh run name, sortable by start time: ``20261122-133512-k3f9`` (UTC)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(4))
    return f"{stamp}-{suffix}"


def run_dir(run_id: str) -> Path:
    """``<home>/runs/<run>``, created 0700; raises InvalidName for a name that is not a run name."""
    check_name(run_id, "run")
    runs = _private_dir(teamrt_home() / "runs")
    return _private_dir(runs / run_id)


def runs_path() -> Path:
    """``<home>/runs``, without creating it."""
    return home_path() / "runs"


def existing_run_dir(run_id: str) -> Path:
    """``<home>/runs/<run>`` of a run that exists; raises UnknownRun. Creates nothing."""
    runs = runs_path()
    if not is_name(run_id) or not (runs / run_id).is_dir():
        raise UnknownRun(run_id, runs)
    return runs / run_id


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=DIR_MODE, exist_ok=True)
    os.chmod(path, DIR_MODE)
    return path


def _exclude_from_git(start: Path) -> None:
    """Add ``.teamrt/`` to the exclude file of the repository holding ``start``, if any.

    A ``.git`` that is a file (a worktree or a submodule) is left alone.
    """
    for directory in (start, *start.parents):
        git = directory / ".git"
        if git.is_dir():
            break
        if git.exists():
            return
    else:
        return
    exclude = git / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if EXCLUDE_LINE in (line.strip() for line in text.splitlines()):
        return
    exclude.parent.mkdir(exist_ok=True)
    with exclude.open("a", encoding="utf-8") as f:
        f.write(("\n" if text and not text.endswith("\n") else "") + EXCLUDE_LINE + "\n")
