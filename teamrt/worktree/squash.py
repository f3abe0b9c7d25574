"""``teamrt apply --squash``: a run's integration branch onto the user's branch as one commit of theirs.

The run's history (each agent's commits, teamrt's merges) stays on ``teamrt/<run>``; the user's branch
gets one commit with the run's changes and a message drafted from the run (``runs.applymsg``), as a
person squash-merges a pull request. It is ``apply``'s plan carried out another way, after the same
checks (``apply.plan_apply``: a clean tree; ``check_allowed``: protected paths named), with the same
safe git: no hook, filter or merge driver of the repository runs, and the commit is not signed. A
conflict is undone (``git reset --merge``: the tree was clean) and nothing is changed.
"""

from __future__ import annotations

from pathlib import Path

from teamrt.worktree.apply import NOT_RUN, ApplyError, Plan
from teamrt.worktree.git import GitError

SQUASH_MSG = "SQUASH_MSG"
"""What ``git merge --squash`` leaves in ``.git`` for a commit to come; removed when it is undone."""


def squash(plan: Plan, message: str, *, strip_comments: bool = False) -> str:
    """Commit the changes ``plan.tip`` brings onto ``plan.head`` as one commit on ``plan.branch`` with
    ``message`` (``strip_comments``: its ``#`` lines dropped, as git does with an edited message); what
    happened, in one line. A conflict is undone (ApplyError, nothing changed)."""
    repo = plan.repo
    if plan.how == "up-to-date":
        return f"{plan.branch} already has {plan.integration} ({plan.tip[:12]}); nothing to do"
    count = repo.run("rev-list", "--count", f"{plan.head}..{plan.tip}")
    try:
        repo.run("merge", "--squash", "--quiet", plan.tip)
    except GitError as e:
        files = repo.run("diff", "--name-only", "--diff-filter=U", "--ignore-submodules=dirty").split()
        _undo(plan)
        where = f" in {', '.join(files)}" if files else f": {e}"
        raise ApplyError(
            f"squashing {plan.integration} onto {plan.branch} conflicts{where}; nothing was changed."
            f" Merge it yourself with: git merge --squash {plan.integration}"
        ) from None
    if repo.ok("diff", "--cached", "--quiet", "--ignore-submodules=dirty"):
        _undo(plan)
        return f"{plan.branch} already has the changes of {plan.integration}; nothing to commit"
    cleanup = "--cleanup=strip" if strip_comments else "--cleanup=whitespace"
    try:
        repo.run("commit", "--quiet", "--no-verify", cleanup, "-m", message)
    except GitError as e:
        _undo(plan)
        raise ApplyError(f"the squashed commit could not be made; nothing was changed: {e}") from None
    new = repo.head() or ""
    return (
        f"squashed {plan.integration} ({count} commit(s)) onto {plan.branch} as {new[:12]}, one commit"
        f" (unsigned) {NOT_RUN}"
    )


def _undo(plan: Plan) -> None:
    """Put the index and tree back at ``plan.head`` (they were clean) and forget the squash."""
    plan.repo.run("reset", "--quiet", "--merge", plan.head)
    left = plan.repo.run("rev-parse", "--path-format=absolute", "--git-path", SQUASH_MSG)
    Path(left).unlink(missing_ok=True)
