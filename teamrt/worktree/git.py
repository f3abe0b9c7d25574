"""One git repository, driven through GitPython's command layer.

Every command teamrt runs on a worktree's behalf disables hooks and the
fsmonitor (``SAFE``): a worktree's content is written by an agent, and a
``core.hooksPath`` that names a tracked directory would otherwise run that
agent's code outside its sandbox. GitPython runs each command as a blocking
subprocess, so async callers go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import git

SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "gc.auto=0")
TEAMRT_IDENTITY = {
    "GIT_AUTHOR_NAME": "teamrt",
    "GIT_AUTHOR_EMAIL": "teamrt@teamrt.invalid",
    "GIT_COMMITTER_NAME": "teamrt",
    "GIT_COMMITTER_EMAIL": "teamrt@teamrt.invalid",
}


class GitError(Exception):
    """A git command that failed; the message is one line naming it, then git's own words."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output or message
        """All git said, stdout then stderr."""


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
        safe: bool = True,
        strip: bool = True,
    ) -> str:
        """``git [SAFE] args`` in ``cwd`` (default: the main working tree); its stdout, stripped
        unless ``strip`` is false (output whose leading blanks mean something)."""
        argv = ["git", *(SAFE if safe else ()), *args]
        try:
            out = git.Git(cwd or self.root).execute(
                argv,
                with_extended_output=False,
                env=dict(env or {}),
                istream=stdin,
                output_stream=stdout,
                strip_newline_in_stdout=False,
            )
        except git.GitCommandError as e:
            said = _one_line(_text(e.stderr) or _text(e.stdout) or str(e))
            output = "\n".join(_text(x).strip() for x in (e.stdout, e.stderr) if _text(x).strip())
            raise GitError(f"git {' '.join(args[:2])} failed: {said}", output) from e
        text = "" if stdout is not None else _text(out)
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
        """Tracked files with uncommitted changes (staged or not); untracked ones do not count."""
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=no", cwd=cwd, strip=False)
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


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value or "")


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [line.removeprefix("stderr: ").strip("'") for line in lines]
    return "; ".join(lines)[:500] or "(no output)"
