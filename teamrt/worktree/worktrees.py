"""The worktree agents of one run: their checkouts, the overlap warning, and landing their work.

A worktree agent is cut from its parent's checkout (its committed HEAD) or,
for the children of an agent without one, from the run's starting HEAD.
When it finishes, what it left uncommitted is committed, its branch is set,
and the merge queue integrates it behind the gates. A conflict or a red gate
becomes a message for the agent (after a conflict its checkout has the
integration branch merged in, with the conflicts marked), and the agent
goes on; after ``MAX_ATTEMPTS`` its parent hears that it failed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from teamrt.sandbox.bwrap import default_sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.store import Store
from teamrt.tools.names import EDITING
from teamrt.worktree import checkout as co
from teamrt.worktree.checkout import Checkout
from teamrt.worktree.git import GitRepo
from teamrt.worktree.message import Work, as_work, commit_message
from teamrt.worktree.overlap import Overlaps
from teamrt.worktree.queue import MergeQueue

MAX_ATTEMPTS = 3
FILE_TOOLS = frozenset({*EDITING, "Bash"})
"""The tools after which an agent's changed files are compared with the others' (by the names the model
sees; the loop reports a call to an older name by the tool it dispatches to: MultiEdit's as Edit's)."""


@dataclass(frozen=True)
class Landing:
    status: str
    """``merged``, ``empty`` (nothing changed), ``conflict`` or ``red``."""
    message: str
    """For the agent when it must try again; else for its parent."""


@dataclass(frozen=True)
class Restored:
    """An agent's checkout after a crash, and whether it had to be made again."""

    checkout: Checkout
    remade_at: str | None = None
    """The commit it was made again at, when it was lost (None: kept)."""
    remade_from: str | None = None
    """The branch it was made again from (None: its base, the branch never set)."""


class Worktrees:
    def __init__(
        self,
        *,
        repo: GitRepo,
        store: Store,
        run_dir: Path,
        run_id: str,
        base: str,
        project: Path,
        integration: str,
        gates: tuple[str, ...],
        gate_timeout: float,
        policy: SandboxPolicy | None = None,
        team_file: Path | None = None,
    ) -> None:
        """``policy``: what the run allows its commands, the gates' included (default: the safe defaults);
        ``team_file``: the run's team file, which no branch may change when it lies in the repository."""
        self.repo = repo
        self.run_dir = run_dir
        self.run_id = run_id
        self.base = base
        subdir = project.resolve().relative_to(repo.root)
        self.subdir = "" if subdir == Path() else str(subdir)
        self.integration = integration
        self.sandbox = default_sandbox()
        self.queue = MergeQueue(
            repo=repo, store=store, run_dir=run_dir, branch=integration, base=base, gates=gates,
            gate_timeout=gate_timeout, sandbox=self.sandbox, policy=policy,
            team_file=in_tree(repo, team_file),
        )  # fmt: skip
        self.overlaps = Overlaps()
        self.checkouts: dict[str, Checkout] = {}
        self._conflicted: dict[str, list[str]] = {}
        self._git = asyncio.Lock()  # one change to the repository's worktrees, refs or objects at a time

    def branch_for(self, agent: str) -> str:
        """``teamrt/<run>-<agent>``, not ``teamrt/<run>/<agent>``: git keeps refs as paths, so no branch
        can sit below ``teamrt/<run>``, the integration branch."""
        return f"teamrt/{self.run_id}-{agent}"

    async def create(self, agent: str, parent: str | None) -> Checkout:
        """``agent``'s checkout, cut from ``parent``'s HEAD if it has one, else from the run's base."""
        async with self._git:
            base = self.base
            if parent in self.checkouts:
                base = await asyncio.to_thread(co.ship, self.repo, self.checkouts[parent])
            checkout = await asyncio.to_thread(
                co.create, self.repo, self.run_dir, agent, self.branch_for(agent), base, self.subdir
            )
        self.checkouts[agent] = checkout
        return checkout

    def clear_stale_locks(self) -> list[Path]:
        """Remove the lock files git processes of a crashed run left in this run's worktrees and on its
        branches (its processes are dead by now); the files removed."""
        admins = self.repo.git_dir / "worktrees"
        run_worktrees = [self.run_dir / "integration", *(self.run_dir / "worktrees").glob("*")]
        locks = [
            lock
            for path in run_worktrees
            if (admin := _admin_of(admins, path))
            for lock in admin.glob("*.lock")
        ]
        locks += (self.repo.git_dir / "refs" / "heads" / "teamrt").glob(f"{self.run_id}*.lock")
        for lock in locks:
            lock.unlink(missing_ok=True)
        return locks

    async def restore(self, agent: str, base: str | None) -> Restored:
        """``agent``'s checkout after a crash: kept when git still knows it and its HEAD reads, else made
        again from its branch, or from its base if it never landed (uncommitted work of a lost worktree
        is gone: ``Restored.remade_at`` says where it was made again, for the loss to be told)."""
        path = self.run_dir / "worktrees" / agent
        admin = _admin_of(self.repo.git_dir / "worktrees", path)
        branch = self.branch_for(agent)
        async with self._git:
            if admin is not None and _head_reads(admin):
                objects = self.run_dir / "objects" / agent
                checkout = Checkout(agent, path, admin, objects, branch, base or self.base, self.subdir)
                self.checkouts[agent] = checkout
                return Restored(checkout)
            tip = await asyncio.to_thread(self.repo.tip, branch)
            start = tip or base or self.base
            await asyncio.to_thread(self.repo.remove_worktree, path)
            made = await asyncio.to_thread(
                co.create, self.repo, self.run_dir, agent, branch, start, self.subdir
            )
            checkout = dataclasses.replace(made, base=base or self.base)  # cut from its branch, based on base
        self.checkouts[agent] = checkout
        return Restored(checkout, remade_at=start, remade_from=branch if tip else None)

    async def changed(self, agent: str) -> dict[str, list[str]]:
        """The files ``agent`` now shares with other live worktree agents, newly, by agent."""
        paths = await co.changed_paths(self.repo, self.checkouts[agent], self.sandbox, self.run_dir)
        return self.overlaps.update(agent, paths)

    async def land(self, agent: str, work: Work | str, attempt: int) -> Landing:
        """Commit what ``agent`` left, set its branch, and put it through the merge queue; ``work`` (or the
        agent's summary alone) makes the commit's and the merge's messages."""
        checkout = self.checkouts[agent]
        left = co.marked(checkout, self._conflicted.get(agent, []))
        if left:
            return Landing(
                "conflict",
                f"Conflict markers are still in {', '.join(left)}. Resolve them, then finish again"
                f" (attempt {attempt} of {MAX_ATTEMPTS}).",
            )
        head = await self._commit(checkout, work)
        if head == checkout.base:
            return Landing("empty", "no changes to merge")
        index = {"GIT_DIR": str(checkout.admin), "GIT_COMMON_DIR": str(self.repo.git_dir)}
        verdict = await self.queue.land(agent, checkout.branch, head, work, index_env=index)
        if verdict.status == "merged":
            assert verdict.commit is not None
            return Landing("merged", f"merged onto {self.integration} at {verdict.commit[:12]}")
        again = (
            "Finish again when it is fixed; teamrt commits and queues it"
            f" (attempt {attempt} of {MAX_ATTEMPTS})."
        )
        if verdict.refused:
            return Landing(
                "red",
                f"Your branch {checkout.branch} was not merged onto {self.integration}. {again}"
                f"\n\n{verdict.output}",
            )
        if verdict.status == "red":
            return Landing(
                "red",
                f"Your branch {checkout.branch} was not merged onto {self.integration}: a gate failed."
                f" Fix it in your worktree. {again}\n\n{verdict.output}",
            )
        tip = await self.queue.tip()
        merged_in = await co.merge_in(self.repo, checkout, tip, self.sandbox, self.run_dir)
        files = await co.conflicted(self.repo, checkout, self.sandbox, self.run_dir)
        self._conflicted[agent] = files
        how = (
            f"teamrt merged {self.integration} into your worktree; resolve the conflict markers in"
            f" {', '.join(files)}, keeping what both sides meant."
            if files
            else f"teamrt merged {self.integration} into your worktree cleanly; check the result."
        )
        return Landing(
            "conflict",
            f"Your branch {checkout.branch} conflicts with {self.integration} in"
            f" {', '.join(verdict.files) or 'some files'}. {how} {again}"
            f"\n\n{verdict.output}\n{merged_in}".rstrip(),
        )

    async def keep(self, agent: str, work: Work | str) -> str:
        """Commit and branch what an agent that will not be merged leaves; where it is kept."""
        checkout = self.checkouts[agent]
        self.overlaps.forget(agent)
        await self._commit(checkout, work)
        return f"its work is kept on branch {checkout.branch} (worktree {checkout.path})"

    async def remove(self, agent: str) -> None:
        """Remove a landed agent's checkout (its branch stays until ``teamrt gc``)."""
        self.overlaps.forget(agent)
        checkout = self.checkouts.pop(agent)
        async with self._git:
            await asyncio.to_thread(co.remove, self.repo, checkout)

    async def close(self) -> None:
        await self.queue.close()

    async def _commit(self, checkout: Checkout, work: Work | str) -> str:
        message = commit_message(as_work(checkout.agent, work))
        await co.commit_all(self.repo, checkout, message, self.sandbox, self.run_dir)
        async with self._git:
            return await asyncio.to_thread(co.ship, self.repo, checkout)


def in_tree(repo: GitRepo, path: Path | None) -> str | None:
    """``path`` (a team file) relative to the repository's top, as git names it; None when it is not a
    file in the repository's working tree (a team of ``--agent`` names the project itself)."""
    if path is None or path.is_dir():
        return None
    try:
        return path.resolve().relative_to(repo.root).as_posix()
    except ValueError:
        return None


def git_env_of(repo: GitRepo, workspace: Path) -> dict[str, str] | None:
    """What points git at a worktree agent's checkout (which holds ``workspace``) by git's own records,
    for onlookers such as the TUI: never by what the agent wrote (its checkout's ``.git`` file, the
    ``commondir`` in its metadata), which could name a configuration of its own, filters included.
    None when git no longer knows the checkout."""
    root = next((p for p in (workspace, *workspace.parents) if p.parent.name == "worktrees"), None)
    admin = _admin_of(repo.git_dir / "worktrees", root) if root is not None else None
    if root is None or admin is None:
        return None
    return {"GIT_DIR": str(admin), "GIT_COMMON_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(root)}


def _head_reads(admin: Path) -> bool:
    """Whether a checkout's HEAD, in its admin directory, names a commit (a broken one is made again)."""
    try:
        head = (admin / "HEAD").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return head.startswith("ref: ") or (len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head))


def _admin_of(admins: Path, path: Path) -> Path | None:
    """The admin directory in ``.git/worktrees`` whose ``gitdir`` (git's own record, which the agent
    cannot write) names the checkout at ``path``, when the checkout is still there."""
    if not (path / ".git").is_file() or not admins.is_dir():
        return None
    for admin in admins.iterdir():
        try:
            if (admin / "gitdir").read_text(encoding="utf-8").strip() == str(path / ".git"):
                return admin
        except OSError:
            continue
    return None
