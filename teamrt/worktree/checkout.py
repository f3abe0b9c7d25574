"""A worktree agent's checkout: a detached git worktree with a private object store.

Layout: ``runs/<run>/worktrees/<agent>`` is the checkout, ``runs/<run>/objects/<agent>``
the objects its commits write, ``.git/worktrees/<name>`` its git metadata.

The agent's sandbox may write only its checkout and the git metadata that
checkout needs. The repository's object store and its refs are shared with
the user, so they stay read-only: git in the sandbox writes new objects to
the private store (``GIT_OBJECT_DIRECTORY``, with the repository's store as
an alternate for reading), and the checkout is detached, so a commit moves
only its own HEAD. The agent commits as it likes; ``teamrt`` sets the branch
``teamrt/<run>-<agent>`` when it lands the work, after bringing its objects
into the repository with ``pack-objects | index-pack`` (which checks every
object's hash).

Commands teamrt runs *in* a checkout (listing its changes, committing what is
left, merging the integration branch in) run in the agent's sandbox too: the
agent writes the checkout's git metadata, so it could point
git at a configuration of its own (a ``filter`` driver, say) that git would
run. Outside the sandbox teamrt only reads a checkout (its HEAD; its changes for the TUI's
diff and for ``teamrt gc``), with ``GIT_DIR`` and ``GIT_COMMON_DIR`` set so that nothing the
agent wrote chooses the repository.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.protect import protected_paths
from teamrt.tools.shell.bash import run_in_group
from teamrt.worktree.git import GitError, GitRepo, status_paths

GIT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Checkout:
    agent: str
    path: Path
    admin: Path
    """``.git/worktrees/<name>``: its HEAD, index and logs."""
    objects: Path
    branch: str
    base: str
    """The commit it was cut from."""
    subdir: str = ""
    """Where the run's project lies in the repository ('' at its root): the agent's workspace."""

    @property
    def workspace(self) -> Path:
        return self.path / self.subdir if self.subdir else self.path

    @property
    def writable(self) -> tuple[Path, ...]:
        return (self.admin, self.objects)

    def env(self, repo: GitRepo) -> dict[str, str]:
        """What git needs, in the sandbox and out: the private store, and the agent as author."""
        who, email = f"{self.agent} (teamrt)", f"{self.agent}@teamrt.invalid"
        return {
            "GIT_OBJECT_DIRECTORY": str(self.objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo.objects),
            "GIT_AUTHOR_NAME": who,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": who,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "gc.auto",
            "GIT_CONFIG_VALUE_0": "0",
        }


def create(repo: GitRepo, run_dir: Path, agent: str, branch: str, base: str, subdir: str) -> Checkout:
    path = run_dir / "worktrees" / agent
    objects = run_dir / "objects" / agent
    (objects / "pack").mkdir(parents=True, exist_ok=True)
    (objects / "info").mkdir(exist_ok=True)
    path.parent.mkdir(exist_ok=True)
    if path.exists():  # left by a crash while it was being created
        repo.remove_worktree(path)
    admin = repo.add_worktree(path, base)
    return Checkout(agent, path, admin, objects, branch, base, subdir)


def head(repo: GitRepo, checkout: Checkout) -> str:
    env = {**checkout.env(repo), "GIT_DIR": str(checkout.admin), "GIT_COMMON_DIR": str(repo.git_dir)}
    return repo.run("rev-parse", "--verify", "HEAD^{commit}", cwd=repo.git_dir, env=env)


async def changed_paths(repo: GitRepo, checkout: Checkout, sandbox: Sandbox, run_dir: Path) -> set[str]:
    """Files the agent changed since its base, committed or not, relative to the repository's root."""
    script = (
        "git status --porcelain=v1 -z --untracked-files=all 2>/dev/null; printf '\\0\\0\\0';"
        ' git diff --name-only -z "$TEAMRT_BASE" HEAD 2>/dev/null'
    )
    env = {"TEAMRT_BASE": checkout.base}
    out = await _in_sandbox(repo, checkout, script, sandbox, run_dir, env, check=False)
    status, _, committed = out.partition("\0\0\0")
    return set(status_paths(status)) | {p for p in committed.split("\0") if p.strip()}


def ship(repo: GitRepo, checkout: Checkout) -> str:
    """Bring the checkout's commits into the repository and point its branch at them; its HEAD."""
    sha = head(repo, checkout)
    if not repo.has_object(sha):
        with tempfile.TemporaryFile() as revs, tempfile.TemporaryFile() as pack:
            revs.write(f"{sha}\n^{checkout.base}\n".encode())
            revs.seek(0)
            repo.run("pack-objects", "--revs", "--stdout", "-q", cwd=repo.git_dir,
                     env=checkout.env(repo), stdin=revs, stdout=pack)  # fmt: skip
            pack.seek(0)
            # --strict: git's fsck refuses trees no checkout should see ('.git' spelled any way, '..')
            repo.run("index-pack", "--strict", "--stdin", cwd=repo.git_dir, stdin=pack)
    repo.set_branch(checkout.branch, sha)
    return sha


async def commit_all(
    repo: GitRepo, checkout: Checkout, message: str, sandbox: Sandbox, run_dir: Path
) -> None:
    """Commit whatever the agent left uncommitted (a merge in progress too), in its sandbox."""
    script = (
        'git add -A && if [ -f "$(git rev-parse --git-path MERGE_HEAD)" ] || ! git diff --cached --quiet;'
        ' then git commit -q --no-verify --cleanup=whitespace -m "$TEAMRT_MESSAGE"; fi'
    )
    await _in_sandbox(repo, checkout, script, sandbox, run_dir, {"TEAMRT_MESSAGE": message})


async def merge_in(repo: GitRepo, checkout: Checkout, commit: str, sandbox: Sandbox, run_dir: Path) -> str:
    """Merge ``commit`` into the checkout in its sandbox, leaving conflicts marked; git's output."""
    script = 'git merge --no-edit -m "$TEAMRT_MESSAGE" "$TEAMRT_COMMIT"'
    env = {"TEAMRT_MESSAGE": f"Merge the integration branch at {commit[:12]}", "TEAMRT_COMMIT": commit}
    return await _in_sandbox(repo, checkout, script, sandbox, run_dir, env, check=False)


async def conflicted(repo: GitRepo, checkout: Checkout, sandbox: Sandbox, run_dir: Path) -> list[str]:
    script = "git diff --name-only --diff-filter=U 2>/dev/null"
    out = await _in_sandbox(repo, checkout, script, sandbox, run_dir, {}, check=False)
    return sorted({line for line in out.splitlines() if line.strip()})


def marked(checkout: Checkout, files: list[str]) -> list[str]:
    """Those of ``files`` that still hold a conflict marker line."""
    left = []
    for name in files:
        try:
            text = (checkout.path / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in text.splitlines()):
            left.append(name)
    return left


def remove(repo: GitRepo, checkout: Checkout) -> None:
    repo.remove_worktree(checkout.path)
    shutil.rmtree(checkout.objects, ignore_errors=True)


async def _in_sandbox(
    repo: GitRepo,
    checkout: Checkout,
    script: str,
    sandbox: Sandbox,
    run_dir: Path,
    extra: dict[str, str],
    check: bool = True,
) -> str:
    """Run teamrt's ``script`` in the checkout, in the agent's sandbox; its output.

    Without bubblewrap it runs all the same (it is teamrt's own, with the
    allowlisted environment): an agent there gets no bash unless the run opted in.
    """
    protected = protected_paths((checkout.path,), home=run_dir.parent.parent, git_dir=repo.git_dir)
    confinement = Confinement(
        checkout.path, run_dir, env={**checkout.env(repo), **extra}, readable=(repo.git_dir,),
        writable=checkout.writable, protected=protected,
    )  # fmt: skip
    done = await run_in_group(sandbox.command(script, confinement), checkout.path, GIT_TIMEOUT)
    if check and done.code != 0:
        why = done.killed or done.code
        raise GitError(f"git in {checkout.agent}'s worktree failed ({why}): {done.output.strip()[:500]}")
    return done.output
