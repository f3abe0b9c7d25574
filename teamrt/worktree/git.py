"""One git repository, driven through GitPython's command layer.

Every git command teamrt runs on the host runs none of the programs a
repository can name, as they may be an agent's: a worktree's files (a tracked
hooks directory, ``.gitattributes``) are an agent's work, and ``.git`` may hold
what an agent planted before it was read-only in the sandbox (``git config
filter.x.smudge ...`` with ``* filter=x`` in ``.git/info/attributes``), which
teamrt's own ``worktree add``, checkouts, merges and ``apply`` would run
outside any sandbox. Command-line configuration outranks every file, so each
command gets:

- ``PINNED``: no hooks, no fsmonitor program, no recursion into submodules
  (their own configuration goes unread), no signing or signature checks
  (``gpg.program`` may be the repository's), no gc or maintenance after a merge;
- for each driver key the repository's configuration sets (scopes ``local``
  and ``worktree``, files it includes too), read by ``git config --list`` just
  before the command: the user's own value of that key (global, system, command
  line) when there is one, so a ``git lfs install`` filter still runs, else
  ``NEUTRAL``'s. Drivers that only the user's configuration defines run as usual.

The scan is one more git process (a few ms) per command, and not cached: what
is planted between two commands is seen by the second. Where the working tree
is compared, what is uncommitted inside a submodule is not asked for
(``--ignore-submodules=dirty``): git would ask it with the submodule's own
configuration. Aliases need nothing: teamrt runs only built-in commands, which
no alias can shadow; and it never fetches, pushes, opens an editor or a pager
(its output is captured), so transport, credential, editor and pager settings
go unused. GitPython runs each command as a blocking subprocess, so async
callers go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import git

from teamrt.errors import UserError

PINNED = (
    "core.hooksPath=/dev/null",  # hooks: .git/hooks, or a (tracked) directory the repository names
    "core.fsmonitor=false",  # a program the repository may name, run on every index refresh
    "submodule.recurse=false",  # checkouts and merges stay out of submodules, whose config goes unread
    "commit.gpgSign=false",  # a merge commit would run gpg.program, which the repository may name ...
    "merge.verifySignatures=false",  # ... and so would checking the signatures of what is merged
    "gc.auto=0",  # no automatic gc or maintenance spawned after a merge
    "maintenance.auto=false",
)
SAFE = tuple(arg for setting in PINNED for arg in ("-c", setting))
NEUTRAL = {
    ("filter", "clean"): "",  # git skips an empty filter command ...
    ("filter", "smudge"): "",
    ("filter", "process"): "",
    ("filter", "required"): "false",  # ... and a filter not run fails nothing unless required
    ("merge", "driver"): "false",  # the file stays as ours and is reported as a conflict
    ("diff", "textconv"): "",  # git refuses to run an empty command; only patch output needs these
    ("diff", "command"): "",
}
"""(section, variable) of a driver key -> the value that runs nothing of the repository's."""
REPOSITORY_SCOPES = frozenset({"local", "worktree"})
TEAMRT_IDENTITY = {
    "GIT_AUTHOR_NAME": "teamrt",
    "GIT_AUTHOR_EMAIL": "teamrt@teamrt.invalid",
    "GIT_COMMITTER_NAME": "teamrt",
    "GIT_COMMITTER_EMAIL": "teamrt@teamrt.invalid",
}


FULL_DISK = {"no space left on device": errno.ENOSPC, "disk quota exceeded": errno.EDQUOT}
"""What git (and the C library under it) says when a write is refused for want of room, and its errno."""


class GitError(UserError):
    """A git command that failed; the message is one line naming it, then git's own words."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output or message
        """All git said, stdout then stderr."""

    @property
    def full_disk(self) -> int | None:
        """``ENOSPC`` or ``EDQUOT`` when git failed because the disk (or its inode table, or a quota) was
        full: no fault of the agent's work, and no retry helps until a person frees space; else None."""
        return full_disk_in(f"{self}\n{self.output}")


def full_disk_in(said: str) -> int | None:
    """``ENOSPC`` or ``EDQUOT`` when ``said`` (git's output, a gate's) tells of a write refused for want of
    room, else None."""
    said = said.lower()
    return next((code for text, code in FULL_DISK.items() if text in said), None)


class GitRepo:
    """A non-bare repository: ``root`` is its main working tree, ``git_dir`` its common ``.git``."""

    def __init__(self, repo: git.Repo) -> None:
        assert repo.working_tree_dir is not None
        self.root = Path(repo.working_tree_dir).resolve()
        self.git_dir = Path(repo.common_dir).resolve()

    @classmethod
    def find(cls, path: Path) -> GitRepo | None:
        """The repository holding ``path``, or None (not in one, or a bare one)."""
        try:
            repo = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            return None
        return None if repo.bare else cls(repo)

    @property
    def objects(self) -> Path:
        return self.git_dir / "objects"

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: BinaryIO | None = None,
        stdout: BinaryIO | None = None,
        strip: bool = True,
    ) -> str:
        """``git [SAFE] [driver overrides] args`` in ``cwd`` (default: the main working tree); its stdout,
        stripped unless ``strip`` is false (output whose leading blanks mean something)."""
        where, env = cwd or self.root, dict(env or {})
        listing = _execute(where, ("config", "--list", "--show-scope", "--null"), (), env)
        drivers = []  # --config-env, not -c: a driver's name may hold a '=', where -c would split
        for n, (key, value) in enumerate(driver_overrides(listing)):
            env[f"TEAMRT_GIT_CONFIG_{n}"] = value
            drivers.append(f"--config-env={key}=TEAMRT_GIT_CONFIG_{n}")
        text = _execute(where, args, (*SAFE, *drivers), env, stdin=stdin, stdout=stdout)
        return text.strip() if strip else text

    def ok(self, *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> bool:
        """Whether ``git args`` exits 0 (a question, such as ``merge-base --is-ancestor``)."""
        try:
            self.run(*args, cwd=cwd, env=env)
        except GitError:
            return False
        return True

    # -- questions ------------------------------------------------------------------

    def head(self) -> str | None:
        """HEAD's commit, or None on an unborn branch."""
        try:
            return self.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}") or None
        except GitError:
            return None

    def current_branch(self) -> str | None:
        """The checked-out branch, or None when HEAD is detached."""
        try:
            return self.run("symbolic-ref", "--quiet", "--short", "HEAD") or None
        except GitError:
            return None

    def tip(self, branch: str) -> str | None:
        """The commit ``branch`` points at, or None when there is no such branch."""
        try:
            return self.run("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}") or None
        except GitError:
            return None

    def changed_tracked(self, cwd: Path | None = None) -> list[str]:
        """Tracked files with uncommitted changes (staged or not); untracked ones do not count, nor what
        is uncommitted inside a submodule (asking would run git there, with that submodule's config)."""
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=dirty",
                       cwd=cwd, strip=False)  # fmt: skip
        return status_paths(out)

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)

    def has_object(self, sha: str) -> bool:
        return self.ok("cat-file", "-e", f"{sha}^{{commit}}")

    # -- changes ----------------------------------------------------------------------

    def set_branch(self, branch: str, sha: str, old: str | None = None) -> None:
        """Point ``branch`` at ``sha``; with ``old``, only if it still points there (else GitError)."""
        args = ["update-ref", "-m", "teamrt", f"refs/heads/{branch}", sha]
        if old is not None:
            args.append(old)
        self.run(*args)

    def delete_branch(self, branch: str) -> None:
        self.run("update-ref", "-d", f"refs/heads/{branch}")

    def add_worktree(self, path: Path, commit: str) -> Path:
        """A detached worktree of ``commit`` at ``path``; its admin directory (in ``.git/worktrees``)."""
        self.run("worktree", "add", "--detach", "--quiet", str(path), commit)
        return admin_dir(path)

    def remove_worktree(self, path: Path) -> None:
        """Remove the worktree at ``path`` (its files too), or its leftovers when git no longer knows it."""
        if path.exists():
            try:
                self.run("worktree", "remove", "--force", "--force", str(path))
            except GitError:
                shutil.rmtree(path, ignore_errors=True)
        self.run("worktree", "prune")


def driver_overrides(listing: str) -> list[tuple[str, str]]:
    """The driver keys whose value the repository's configuration sets, each with the value to use
    instead: the user's own (system, global or command line) when there is one, else ``NEUTRAL``'s.

    ``listing`` is ``git config --list --show-scope --null``: scope NUL key LF value NUL, in the order
    git reads them (the last value wins); a key git prints lower-cased but for its subsection.
    """
    fields = listing.split("\0")
    last: dict[str, tuple[str, str]] = {}  # key -> the scope that set it last, its neutral value
    users: dict[str, str] = {}
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key, newline, value = entry.partition("\n")
        section, _, rest = key.partition(".")
        name, _, variable = rest.rpartition(".")
        if name and (section, variable) in NEUTRAL:
            last[key] = scope, NEUTRAL[section, variable]
            if scope not in REPOSITORY_SCOPES:
                users[key] = value if newline else "true"  # a bare key is boolean true
    return [
        (key, users.get(key, neutral)) for key, (scope, neutral) in last.items() if scope in REPOSITORY_SCOPES
    ]


def status_paths(porcelain_z: str) -> list[str]:
    """The paths in ``git status --porcelain=v1 -z`` output, a rename's or copy's source included."""
    paths: list[str] = []
    entries = iter(porcelain_z.split("\0"))
    for entry in entries:
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # the source path follows as an entry of its own
                paths.append(next(entries, ""))
    return [p for p in paths if p]


def admin_dir(worktree: Path) -> Path:
    """The worktree's own git directory (``.git/worktrees/<name>``), named by its ``.git`` file."""
    text = (worktree / ".git").read_text(encoding="utf-8").strip()
    if not text.startswith("gitdir: "):
        raise GitError(f"{worktree}/.git does not name a git directory")
    return (worktree / text.removeprefix("gitdir: ")).resolve()


def _execute(
    cwd: Path,
    args: tuple[str, ...],
    options: tuple[str, ...],
    env: dict[str, str],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> str:
    """``git options args``; its stdout ('' when it went to ``stdout``), or GitError naming ``args``."""
    try:
        out = git.Git(cwd).execute(
            ["git", *options, *args],
            with_extended_output=False,
            env=env,
            istream=stdin,
            output_stream=stdout,
            strip_newline_in_stdout=False,
        )
    except git.GitCommandError as e:
        said = _one_line(_text(e.stderr) or _text(e.stdout) or str(e))
        output = "\n".join(_text(x).strip() for x in (e.stdout, e.stderr) if _text(x).strip())
        raise GitError(f"git {' '.join(args[:2])} failed: {said}", output) from e
    return "" if stdout is not None else _text(out)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value or "")


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [line.removeprefix("stderr: ").strip("'") for line in lines]
    return "; ".join(lines)[:500] or "(no output)"
