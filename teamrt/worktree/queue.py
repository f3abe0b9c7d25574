"""The gated merge queue: finished worktree branches onto the run's integration branch, one at a time.

Each entry is merged (``--no-ff``) in the queue's own detached worktree
(``runs/<run>/integration``) on top of the integration branch's tip; the
team's gate commands run there, sandboxed like ``bash``; only when every gate
passes does the branch move, by a compare-and-swap ``update-ref`` from the tip
the merge started on. A conflict or a red gate leaves the branch where it was
and comes back as a verdict with git's or the gate's output.

A gate that fails on the tip already (a team fixing failing tests in
parallel: no one fix alone turns the suite green) does not block a merge that
fails no test the tip did not fail: the failing tests are read from the gate's
output (``failures``), and the tip's are measured once per tip. A gate whose
output names no failing test must pass outright.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from .. import faults
from ..store import Store
from ..tools.base import ToolContext
from ..tools.bash import run_in_group
from ..tools.policy import SandboxPolicy
from ..tools.protect import protected_paths
from ..tools.sandbox import Sandbox
from .failures import failing_tests
from .git import TEAMRT_IDENTITY, GitError, GitRepo

OUTPUT_CHARS = 8_000
"""Of a gate's or git's output, what a verdict keeps (its end, where failures are reported)."""


class GatesRefused(Exception):
    """The gates may not run: no bubblewrap, and the run did not opt in to unconfined commands."""


@dataclass(frozen=True)
class Verdict:
    status: str
    """``merged``, ``conflict`` or ``red``."""
    output: str = ""
    commit: str | None = None
    """The integration branch's new tip, when merged."""
    files: tuple[str, ...] = ()
    """The conflicting files."""


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
    ) -> None:
        """``policy``: what the run allows its commands, gates included (default: the safe defaults)."""
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
        self._lock = asyncio.Lock()
        self._failing_at: dict[tuple[str, str], frozenset[str]] = {}
        """(tip, gate) -> the tests the gate fails at that tip."""

    async def land(self, agent: str, branch: str, head: str, title: str) -> Verdict:
        """Queue ``branch`` at ``head`` and wait for its turn and its verdict (recorded in the store)."""
        await self.store.queue_merge(agent, branch, head)
        async with self._lock:
            await self.store.set_merge_status(agent, "merging")
            try:
                verdict = await self._try(head, f"Merge {agent}: {title}")
            except GitError as e:  # teamrt's own git step failed: the agent hears it like a red gate
                verdict = Verdict("red", f"teamrt could not merge: {e}")
            except GatesRefused as e:
                verdict = Verdict("red", f"teamrt could not run the gates: {e}")
            await self.store.set_merge_status(
                agent, verdict.status, output=verdict.output or None, merged_commit=verdict.commit
            )
        return verdict

    async def tip(self) -> str:
        """The integration branch's tip, created at the run's base the first time."""
        return await asyncio.to_thread(self._tip)

    def _tip(self) -> str:
        tip = self.repo.tip(self.branch)
        if tip is None:
            self.repo.set_branch(self.branch, self.base, old="0" * 40)
            tip = self.base
        return tip

    async def _try(self, head: str, message: str) -> Verdict:
        tip = await asyncio.to_thread(self._prepare)
        if await asyncio.to_thread(self.repo.is_ancestor, head, tip):
            return Verdict("merged", "already on the integration branch", tip)
        merged, output = await asyncio.to_thread(self._merge, head, message)
        if not merged:
            files = await asyncio.to_thread(self._abort)
            return Verdict("conflict", _tail(output), files=tuple(files))
        new = await asyncio.to_thread(self.repo.run, "rev-parse", "HEAD", cwd=self.path)
        faults.point("merge.merged", new)
        reports = []
        for gate in self.gates:
            code, out, killed = await self._gate(gate)
            reports.append(f"$ {gate}\n{out.rstrip()}")
            if code == 0:
                continue
            why = killed if code is None else f"exit code {code}"
            failing = failing_tests(out) if code is not None else frozenset()
            before = await self._failing_on(tip, gate, new) if failing else frozenset()
            if not failing or not failing <= before:
                broken = sorted(failing - before)
                note = f"; failing now but not before the merge: {', '.join(broken)}" if before else ""
                return Verdict("red", _tail(f"{reports[-1]}\n[{why}{note}]"))
            fixed = sorted(before - failing)
            reports[-1] += (
                f"\n[{why}, but every failing test failed before this merge too;"
                f" fixed by it: {', '.join(fixed) or 'none'}]"
            )
        faults.point("merge.before_ref", new)
        await asyncio.to_thread(self.repo.set_branch, self.branch, new, tip)
        faults.point("merge.after_ref", new)
        return Verdict("merged", _tail("\n".join(reports)), new)

    async def _gate(self, gate: str) -> tuple[int | None, str, str]:
        """Run ``gate`` in the queue's worktree, sandboxed like ``bash``: (exit code or None when killed,
        output, why it was killed). Raises ``GatesRefused`` when it may not run (no bwrap, no opt-in)."""
        refusal = self.sandbox.refusal(self.policy)
        if refusal is not None:
            raise GatesRefused(refusal)
        protected = protected_paths((self.path,), home=self.run_dir.parent.parent, git_dir=self.repo.git_dir)
        ctx = ToolContext(self.path, self.run_dir, protected=protected, policy=self.policy)
        done = await run_in_group(self.sandbox.command(gate, ctx), self.path, self.gate_timeout)
        return done.code, done.output, done.killed

    async def _failing_on(self, tip: str, gate: str, merged: str) -> frozenset[str]:
        """The tests ``gate`` fails at ``tip`` (run there once, then remembered); the queue's
        worktree is back at ``merged`` afterwards."""
        if (tip, gate) not in self._failing_at:
            await asyncio.to_thread(self._checkout, tip)
            code, out, _ = await self._gate(gate)
            self._failing_at[tip, gate] = failing_tests(out) if code not in (0, None) else frozenset()
            await asyncio.to_thread(self._checkout, merged)
        return self._failing_at[tip, gate]

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
            out = self.repo.run("merge", "--no-ff", "--no-edit", "-m", message, head,
                                cwd=self.path, env=TEAMRT_IDENTITY)  # fmt: skip
        except GitError as e:
            return False, e.output
        return True, out

    def _abort(self) -> list[str]:
        files = self.repo.run("diff", "--name-only", "--diff-filter=U", cwd=self.path).splitlines()
        self.repo.ok("merge", "--abort", cwd=self.path)
        return sorted(set(files))

    async def close(self) -> None:
        """Remove the queue's worktree (the branch stays)."""
        if self.path.exists():
            await asyncio.to_thread(self.repo.remove_worktree, self.path)


def _tail(text: str) -> str:
    text = text.strip()
    if len(text) <= OUTPUT_CHARS:
        return text
    return f"[... {len(text) - OUTPUT_CHARS:,} characters cut ...]\n{text[-OUTPUT_CHARS:]}"
