"""``teamrt apply``: a finished run's integration branch onto the user's branch; ``teamrt gc``: cleanup.

``apply`` is the one place a run's work reaches the user's branch, and only
when the user asks: a fast-forward when the branch has not moved since the
run started, else a merge commit the user confirms. It refuses a dirty tree
(tracked changes) rather than mix the run's work with the user's. A merge
commit is the user's (their identity), but made with teamrt's safe git like
every command on the host (see ``git``): the repository's hooks, filters and
merge drivers may be an agent's work, so none of them run and the commit is
not signed. The line ``apply`` returns says so: the checks a hook would have
made are the user's to run.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..store import RunRecord
from .git import GitError, GitRepo

NOT_RUN = "(git hooks and repository-defined filters/drivers were not run; run your checks yourself)"


class ApplyError(Exception):
    """Why a run cannot be applied; one line for the user, nothing changed."""


@dataclass(frozen=True)
class Plan:
    run: str
    repo: GitRepo
    integration: str
    tip: str
    branch: str
    head: str
    how: str
    """``up-to-date``, ``fast-forward`` or ``merge``."""


def plan_apply(run: RunRecord) -> Plan:
    """What ``apply`` would do for ``run`` (a run that is not live); raises ApplyError."""
    integration = run.settings.get("integration_branch")
    repo = GitRepo.find(Path(run.workdir))
    if not integration or not run.base_head:
        raise ApplyError(f"run {run.id} did not run in a git repository; it has nothing to apply")
    if repo is None:
        raise ApplyError(f"{run.workdir} is no longer in a git repository")
    tip = repo.tip(integration)
    if tip is None:
        raise ApplyError(f"the integration branch {integration} of run {run.id} is gone")
    if tip == run.base_head:
        raise ApplyError(f"run {run.id} merged nothing onto {integration}; there is nothing to apply")
    branch = repo.current_branch()
    head = repo.head()
    if branch is None or head is None:
        raise ApplyError("HEAD is not on a branch with commits; check out the branch to apply onto")
    dirty = repo.changed_tracked()
    if dirty:
        shown = ", ".join(dirty[:5]) + (f" and {len(dirty) - 5} more" if len(dirty) > 5 else "")
        raise ApplyError(
            f"your working tree has uncommitted changes ({shown}); commit or stash them, then apply again"
        )
    if repo.is_ancestor(tip, head):
        how = "up-to-date"
    elif repo.is_ancestor(head, tip):
        how = "fast-forward"
    else:
        how = "merge"
    return Plan(run.id, repo, integration, tip, branch, head, how)


def apply(plan: Plan) -> str:
    """Carry out ``plan``; what happened, in one line. A conflicting merge is undone (ApplyError)."""
    repo = plan.repo
    if plan.how == "up-to-date":
        return f"{plan.branch} already has {plan.integration} ({plan.tip[:12]}); nothing to do"
    count = repo.run("rev-list", "--count", f"{plan.head}..{plan.tip}")
    if plan.how == "fast-forward":
        repo.run("merge", "--ff-only", "--quiet", plan.tip)
        done = f"fast-forwarded {plan.branch} to {plan.integration} ({plan.tip[:12]}, {count} commit(s))"
        return f"{done} {NOT_RUN}"
    try:
        repo.run(
            "merge", "--no-ff", "--quiet", "-m", f"Merge {plan.integration} (teamrt run {plan.run})", plan.tip
        )
    except GitError as e:
        files = repo.run("diff", "--name-only", "--diff-filter=U", "--ignore-submodules=dirty").split()
        repo.ok("merge", "--abort")
        where = f" in {', '.join(files)}" if files else f": {e}"
        raise ApplyError(
            f"merging {plan.integration} into {plan.branch} conflicts{where}; nothing was changed."
            f" Merge it yourself with: git merge {plan.integration}"
        ) from None
    new = repo.head() or ""
    return (
        f"merged {plan.integration} into {plan.branch} as {new[:12]} ({count} commit(s), unsigned) {NOT_RUN}"
    )


def collect(run: RunRecord, run_dir: Path, branches: list[str], *, force: bool) -> list[str]:
    """Remove a finished run's worktrees and agent ``branches``, and its integration branch when
    applied (or ``force``); what was done, a line each."""
    repo = GitRepo.find(Path(run.workdir))
    if repo is None:
        return [f"{run.id}: {run.workdir} is no longer in a git repository; left alone"]
    done = []
    trees = [*sorted((run_dir / "worktrees").glob("*")), run_dir / "integration"]
    for path in (p for p in trees if p.exists()):
        repo.remove_worktree(path)
        done.append(f"{run.id}: removed worktree {path}")
    shutil.rmtree(run_dir / "objects", ignore_errors=True)
    repo.run("worktree", "prune")
    for branch in branches:
        if repo.tip(branch):
            repo.delete_branch(branch)
            done.append(f"{run.id}: deleted branch {branch}")
    integration = run.settings.get("integration_branch")
    tip = repo.tip(integration) if integration else None
    if integration and tip:
        head = repo.head()
        if force or tip == run.base_head or (head is not None and repo.is_ancestor(tip, head)):
            repo.delete_branch(integration)
            done.append(f"{run.id}: deleted branch {integration}")
        else:
            done.append(
                f"{run.id}: kept {integration}: not applied (teamrt apply {run.id}, or gc --force to delete)"
            )
    return done
