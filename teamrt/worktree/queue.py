"""The gated merge queue: finished worktree branches onto the run's integration branch, one at a time.

Before anything is merged, a branch that would bring what grants power is refused
(``branchcheck``): a protected path (``.claude``, ``.mcp.json``, memory files,
``.teamrt``, the run's team file) changed in any of its commits, an entry hidden
by skip-worktree or assume-unchanged in the agent's index, a symlink leaving the
tree. The verdict names each path; the agent can fix its branch and finish again.

Each entry is merged (``--no-ff``) in the queue's own detached worktree
(``runs/<run>/integration``) on top of the integration branch's tip; the
team's gate commands run there, sandboxed like ``bash``; only when every gate
passes does the branch move, by a compare-and-swap ``update-ref`` from the tip
the merge started on. A conflict or a red gate leaves the branch where it was
and comes back as a verdict with git's or the gate's output.

The branch moves inside a write transaction of the run's store (``_fenced_move``):
the store's fence checks the run's lease first and holds it (a takeover waits for
that transaction), so the queue of an owner taken over from (two owners overlapping
after a pause) never moves the branch; its ``RunTakenOver`` ends its run. A lost
compare-and-swap (the branch moved between the merge and its update) is no gate's
failure and no attempt of the agent's: the merge is made again on the new tip, up to
``MOVED_RETRIES`` times, each a ``merge.retried`` event; then ``IntegrationMoved``.

A gate is judged by its exit status and the test report teamrt asks for, never by
what it prints (``gates``). A gate with a report that fails on the tip already (a
team fixing failing tests in parallel: no one fix alone turns the suite green)
does not block a merge that runs no fewer tests and fails none the tip did not
fail; the tip's run is made once per tip, and a merge's own run is the next tip's.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sqlalchemy import Connection

from teamrt import faults
from teamrt.errors import TeamrtError
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.sandbox.protect import protected_paths
from teamrt.store import Store
from teamrt.tools.shell.bash import run_in_group
from teamrt.worktree.branchcheck import check_range, refusal
from teamrt.worktree.gates import ReportError, Run, judge, prepare, read_report, runner_of
from teamrt.worktree.git import TEAMRT_IDENTITY, GitError, GitRepo
from teamrt.worktree.message import Work, as_work, merge_message

OUTPUT_CHARS = 8_000
"""Of a gate's or git's output, what a verdict keeps (its end, where failures are reported)."""


MOVED_RETRIES = 3
"""How often a merge is made again on a new tip after the integration branch moved under it."""
RETRIED: Final = "merge.retried"
"""The event of a merge made again because the integration branch moved under it."""


class GatesRefused(TeamrtError):
    """The gates may not run: no bubblewrap, and the run did not opt in to unconfined commands."""


class IntegrationMoved(TeamrtError):
    """The integration branch moved under every try of a merge: something outside the queue updates it.
    Not the agent's failure; its text is one line."""

    def __init__(self, agent: str, branch: str, tries: int) -> None:
        self.agent = agent
        self.branch = branch
        super().__init__(
            f"the integration branch {branch} moved under each of {tries} merges of {agent}'s work"
            " (something outside this run updates it); nothing of it was merged"
        )


@dataclass(frozen=True)
class Verdict:
    status: str
    """``merged``, ``conflict`` or ``red`` (``moved``: only within the queue, which tries again)."""
    output: str = ""
    commit: str | None = None
    """The integration branch's new tip, when merged."""
    files: tuple[str, ...] = ()
    """The conflicting files."""
    refused: tuple[str, ...] = ()
    """Why the branch was refused before any merge, a line per path (``branchcheck``), sanitized."""


class MergeQueue:
    def __init__(
        self,
        *,
        repo: GitRepo,
        store: Store,
        run_dir: Path,
        branch: str,
        base: str,
        gates: tuple[str, ...],
        gate_timeout: float,
        sandbox: Sandbox,
        policy: SandboxPolicy | None = None,
        team_file: str | None = None,
    ) -> None:
        """``policy``: what the run allows its commands, gates included (default: the safe defaults);
        ``team_file``: the run's team file, relative to the repository's top, when it lies in it."""
        self.repo = repo
        self.store = store
        self.run_dir = run_dir
        self.branch = branch
        self.base = base
        self.gates = gates
        self.gate_timeout = gate_timeout
        self.sandbox = sandbox
        self.policy = policy or SandboxPolicy()
        self.path = run_dir / "integration"
        self.team_file = team_file
        self._lock = asyncio.Lock()
        self._runs: dict[tuple[str, str], Run] = {}
        """(commit, gate) -> the gate's run at that commit."""

    async def land(
        self, agent: str, branch: str, head: str, work: Work | str, *,
        index_env: Mapping[str, str] | None = None,
    ) -> Verdict:  # fmt: skip
        """Queue ``branch`` at ``head`` and wait for its turn and its verdict (recorded in the store).
        ``work`` (or the agent's summary alone) makes the merge's message; ``index_env`` points git at
        the agent's worktree, whose index is checked for hidden entries."""
        await self.store.queue_merge(agent, branch, head)
        async with self._lock:
            await self.store.set_merge_status(agent, "merging")
            for tries in itertools.count(1):
                verdict = await self._attempt(head, as_work(agent, work), index_env)
                if verdict.status != "moved":
                    break
                await self.store.append_event(
                    RETRIED, {"branch": self.branch, "head": head, "tip": verdict.commit, "try": tries},
                    agent=agent,
                )  # fmt: skip
                if tries > MOVED_RETRIES:
                    moved = IntegrationMoved(agent, self.branch, tries)
                    await self.store.set_merge_status(agent, "queued", output=str(moved))
                    raise moved
            await self.store.set_merge_status(
                agent, verdict.status, output=verdict.output or None, merged_commit=verdict.commit
            )
        return verdict

    async def _attempt(self, head: str, work: Work, index_env: Mapping[str, str] | None) -> Verdict:
        """One try of the merge. A refused fence (``RunTakenOver``) passes: this owner stops."""
        try:
            return await self._try(head, work, index_env)
        except GitError as e:  # teamrt's own git step failed: the agent hears it like a red gate
            return Verdict("red", f"teamrt could not merge: {e}")
        except GatesRefused as e:
            return Verdict("red", f"teamrt could not run the gates: {e}")

    async def tip(self) -> str:
        """The integration branch's tip, created at the run's base the first time."""
        return await asyncio.to_thread(self._tip)

    def _tip(self) -> str:
        tip = self.repo.tip(self.branch)
        if tip is None:
            self.repo.set_branch(self.branch, self.base, old="0" * 40)
            tip = self.base
        return tip

    async def _try(self, head: str, work: Work, index_env: Mapping[str, str] | None) -> Verdict:
        tip = await asyncio.to_thread(self._prepare)
        if await asyncio.to_thread(self.repo.is_ancestor, head, tip):
            return Verdict("merged", "already on the integration branch", tip)
        findings = await asyncio.to_thread(
            check_range, self.repo, tip, head, team_file=self.team_file, index_env=index_env
        )
        if findings:
            return Verdict("red", refusal(findings), refused=tuple(f.line() for f in findings))
        said = merge_message(work, None if self.gates else ())  # how the gates passed is said once they have
        merged, output = await asyncio.to_thread(self._merge, head, said)
        if not merged:
            files = await asyncio.to_thread(self._abort)
            return Verdict("conflict", _tail(output), files=tuple(files))
        new = await asyncio.to_thread(self.repo.run, "rev-parse", "HEAD", cwd=self.path)
        faults.point("merge.merged", new)
        reports, runs, passed = [], {}, []
        for gate in self.gates:
            runs[gate] = now = await self._gate(gate)
            reports.append(f"$ {gate}\n{now.output.rstrip()}")
            at_tip = await self._run_on(tip, gate, new) if now.report is not None else None
            judgement = judge(now, at_tip)
            if judgement.note:
                reports[-1] += f"\n{judgement.note}"
            if not judgement.passed:
                return Verdict("red", _tail(reports[-1]))
            passed.append(f"`{gate}` {judgement.note}".rstrip())
        if passed:  # the merge's message says how its gates passed: the commit the branch moves to
            new = await asyncio.to_thread(self._reword, new, merge_message(work, passed))
        faults.point("merge.before_ref", new)
        moved = await self.store.write(functools.partial(_fenced_move, self.repo, self.branch, new, tip))
        if moved is not None:  # the compare-and-swap lost: git found the branch elsewhere
            return Verdict("moved", f"the integration branch moved to {moved[:12]} during the merge", moved)
        faults.point("merge.after_ref", new)
        self._runs.update({(new, gate): run for gate, run in runs.items()})  # the next merge's tip
        return Verdict("merged", _tail("\n".join(reports)), new)

    async def _gate(self, gate: str) -> Run:
        """Run ``gate`` in the queue's worktree, sandboxed like ``bash``, writing its test report to a
        directory of its own outside the workspace (``gates``). Raises ``GatesRefused`` when it may not
        run (no bwrap, no opt-in). The directory is made in teamrt's temporary directory (the sandbox's
        ``/tmp`` is its own, so no other command sees it) and removed once the report is read."""
        refusal = self.sandbox.refusal(self.policy)
        if refusal is not None:
            raise GatesRefused(refusal)
        report_dir = Path(tempfile.mkdtemp(prefix="teamrt-gate-"))  # not in the run's directory: hidden
        try:
            command, env = await asyncio.to_thread(prepare, gate, report_dir)
            protected = protected_paths(
                (self.path,), home=self.run_dir.parent.parent, git_dir=self.repo.git_dir
            )
            confinement = Confinement(
                self.path, self.run_dir, env=env, writable=(report_dir,), protected=protected,
                policy=self.policy,
            )  # fmt: skip
            confined = self.sandbox.command(command, confinement)
            done = await run_in_group(confined, self.path, self.gate_timeout)
            report, error = None, None
            if done.code is not None:
                try:
                    report = await asyncio.to_thread(read_report, report_dir)
                except ReportError as e:
                    error = str(e)
        finally:
            await asyncio.to_thread(shutil.rmtree, report_dir, True)
        return Run(done.code, done.output, done.killed, report, error, runner_of(gate))

    async def _run_on(self, tip: str, gate: str, merged: str) -> Run:
        """``gate``'s run at ``tip`` (made there once, then remembered; a merge's own run is remembered
        for the tip it makes); the queue's worktree is back at ``merged`` afterwards."""
        if (tip, gate) not in self._runs:
            await asyncio.to_thread(self._checkout, tip)
            self._runs[tip, gate] = await self._gate(gate)
            await asyncio.to_thread(self._checkout, merged)
        return self._runs[tip, gate]

    def _checkout(self, commit: str) -> None:
        self.repo.run("checkout", "--quiet", "--force", "--detach", commit, cwd=self.path)
        self.repo.run("clean", "-fdq", cwd=self.path)

    def _prepare(self) -> str:
        """The queue's worktree, clean and detached at the integration branch's tip (returned)."""
        tip = self._tip()
        if not (self.path / ".git").exists():
            self.repo.remove_worktree(self.path)
            self.repo.add_worktree(self.path, tip)
        else:
            self._checkout(tip)
        return tip

    def _merge(self, head: str, message: str) -> tuple[bool, str]:
        try:
            out = self.repo.run("merge", "--no-ff", "--no-edit", "--cleanup=whitespace", "-m", message, head,
                                cwd=self.path, env=TEAMRT_IDENTITY)  # fmt: skip
        except GitError as e:
            return False, e.output
        return True, out

    def _reword(self, merged: str, message: str) -> str:
        """The merge ``merged`` again with ``message``: its very tree and parents (never the index, which a
        gate could have changed), and the queue's worktree detached at it; the new commit."""
        parents = self.repo.run("rev-list", "--parents", "-n", "1", merged).split()[1:]
        new = self.repo.run(
            "commit-tree", f"{merged}^{{tree}}", *(arg for p in parents for arg in ("-p", p)), "-m", message,
            cwd=self.path, env=TEAMRT_IDENTITY,
        )  # fmt: skip
        self.repo.run("update-ref", "--no-deref", "HEAD", new, merged, cwd=self.path)
        return new

    def _abort(self) -> list[str]:
        files = self.repo.run("diff", "--name-only", "--diff-filter=U", cwd=self.path).splitlines()
        self.repo.ok("merge", "--abort", cwd=self.path)
        return sorted(set(files))

    async def close(self) -> None:
        """Remove the queue's worktree (the branch stays)."""
        if self.path.exists():
            await asyncio.to_thread(self.repo.remove_worktree, self.path)


def _fenced_move(repo: GitRepo, branch: str, new: str, old: str, conn: Connection) -> str | None:
    """Move ``branch`` from ``old`` to ``new`` inside a store write transaction, after the store's fence
    checked this owner's lease (and while it holds it). None when the branch is at ``new`` (moved now, or
    by this same operation when the writer ran its group again); else the tip git found instead of
    ``old``. A failure that left the branch at ``old`` (a stale lock file, say) is git's error."""
    del conn  # the transaction is the fence's: nothing is written
    try:
        repo.set_branch(branch, new, old)
    except GitError:
        now = repo.tip(branch)
        if now == new:
            return None
        if now is None or now == old:
            raise
        return now
    return None


def _tail(text: str) -> str:
    text = text.strip()
    if len(text) <= OUTPUT_CHARS:
        return text
    return f"[... {len(text) - OUTPUT_CHARS:,} characters cut ...]\n{text[-OUTPUT_CHARS:]}"
