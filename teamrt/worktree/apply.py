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

Before it acts, ``apply`` lists what in the run's commits grants power
(``branchcheck``: protected paths changed in what lands or in any commit,
symlinks leaving the tree, skip-worktree or assume-unchanged entries in the
run's worktrees left behind), a line per path, and refuses unless the user
named every such path with ``--allow-protected``; then it shows those paths'
changes (sanitized: they are an agent's) before applying.

``gc`` never throws work away unasked: an agent's worktree or branch holding
commits that reached neither the integration branch nor the user's HEAD, or
uncommitted changes, is kept (and said so) unless ``--force``. It looks into a
worktree the way the TUI does (``git_env_of``): by git's own records, with
teamrt's safe git, never by what the agent wrote.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from teamrt.errors import UserError
from teamrt.store import AgentRecord, RunRecord
from teamrt.terminal import clean
from teamrt.worktree.branchcheck import Finding, check_range, index_flags
from teamrt.worktree.git import GitError, GitRepo, status_paths

NOT_RUN = "(git hooks and repository-defined filters/drivers were not run; run your checks yourself)"


class ApplyError(UserError):
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
    findings: tuple[Finding, ...] = ()
    """What in the run's commits grants power or hides a change, a Finding per path."""

    def blocked(self, allowed: Collection[str]) -> list[Finding]:
        """The findings the user did not allow (by path, with ``--allow-protected``)."""
        return [f for f in self.findings if f.path not in allowed]


def plan_apply(run: RunRecord, run_dir: Path | None = None) -> Plan:
    """What ``apply`` would do for ``run`` (a run that is not live; its worktrees in ``run_dir``
    are checked for hidden index entries); raises ApplyError."""
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
    findings = _findings(repo, run, head, tip, run_dir) if how != "up-to-date" else []
    return Plan(run.id, repo, integration, tip, branch, head, how, tuple(findings))


def _findings(repo: GitRepo, run: RunRecord, head: str, tip: str, run_dir: Path | None) -> list[Finding]:
    """``branchcheck`` on the commits ``tip`` brings onto ``head``, and the index of each of the run's
    worktrees still there."""
    from teamrt.worktree.worktrees import (  # the sandbox's modules: only when there is work to check
        git_env_of,
        in_tree,
    )

    team = run.settings.get("team")
    team_path = team.get("path") if isinstance(team, dict) else None
    team_file = in_tree(repo, Path(team_path)) if isinstance(team_path, str) else None
    found = check_range(repo, head, tip, team_file=team_file)
    for path in sorted((run_dir / "worktrees").glob("*")) if run_dir is not None else []:
        env = git_env_of(repo, path)
        if env is not None:
            flagged = index_flags(repo, {k: v for k, v in env.items() if k != "GIT_WORK_TREE"})
            found += [Finding(f.path, f"{f.reason} (worktree {path.name})") for f in flagged]
    return found


def listing(plan: Plan) -> list[str]:
    """What ``apply`` says before it acts: each protected path, out-of-tree symlink and hidden index
    entry in the run's commits, a line each (sanitized); nothing when there is none."""
    if not plan.findings:
        return []
    head = (
        f"run {plan.run}'s commits change what grants power or hide a change ({len(plan.findings)}"
        " path(s)); read them before you take them:"
    )
    return [head, *(f"  {f.line()}" for f in plan.findings)]


def check_allowed(plan: Plan, allowed: Collection[str]) -> None:
    """Refuse (ApplyError, nothing changed) unless every finding's path is in ``allowed``, and every
    allowed path is one the plan found."""
    found = {f.path for f in plan.findings}
    unknown = sorted(set(allowed) - found)
    if unknown:
        raise ApplyError(
            f"--allow-protected {clean(unknown[0])}: run {plan.run} changes no such protected path;"
            " nothing was changed"
        )
    blocked = plan.blocked(allowed)
    if blocked:
        raise ApplyError(
            f"refusing to apply run {plan.run}: {len(blocked)} path(s) listed above may not land unasked;"
            " nothing was changed. Read their changes (git log -p "
            f"{plan.head[:12]}..{plan.integration}) and, for each path you mean to take, run again with"
            " --allow-protected PATH"
        )


def allowed_changes(plan: Plan, allowed: Collection[str]) -> str:
    """The changes the run's commits make to the ``allowed`` paths, commit by commit (a merge's own
    changes included), sanitized; git's diff and text-conversion programs are not run."""
    if not allowed:
        return ""
    out = plan.repo.run(
        "log", "-p", "--cc", "--no-ext-diff", "--no-textconv", "--no-color", "--format=commit %H%n%s",
        f"{plan.head}..{plan.tip}", "--", *sorted(allowed), env={"GIT_LITERAL_PATHSPECS": "1"},
    )  # fmt: skip
    return clean(out)


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


SHOWN_FILES = 3  # of a kept worktree's uncommitted files, in gc's line


def collect(
    run: RunRecord, run_dir: Path, agents: Iterable[AgentRecord], *, force: bool, dry_run: bool = False
) -> list[str]:
    """Remove a finished run's worktrees and its ``agents``' branches, and its integration branch when
    applied; what was done (``dry_run``: what would be, doing nothing), a line each.

    Unless ``force``, an agent's worktree or branch whose work is not merged (``unmerged_work``) is
    kept, and so is an integration branch not applied."""
    repo = GitRepo.find(Path(run.workdir))
    if repo is None:
        return [f"{run.id}: {run.workdir} is no longer in a git repository; left alone"]
    removed, deleted, kept = (
        ("would remove", "would delete", "would keep") if dry_run else ("removed", "deleted", "kept")
    )
    branches = {a.name: a.branch for a in agents if a.branch}
    integration = run.settings.get("integration_branch")
    tip = repo.tip(integration) if integration else None
    merged = [c for c in (tip, repo.head(), run.base_head) if c]
    done, keep = [], set()
    for path in sorted((run_dir / "worktrees").glob("*")):
        agent, branch = path.name, branches.get(path.name)
        why = None if force else unmerged_work(repo, run_dir, path, branch, merged)
        if why is not None:
            keep.add(agent)
            on = f" (branch {branch})" if branch else ""
            done.append(f"{run.id}: {kept} worktree {path}{on}: {why}; teamrt gc --force removes it")
            continue
        if not dry_run:
            repo.remove_worktree(path)
        done.append(f"{run.id}: {removed} worktree {path}")
    if (run_dir / "integration").exists():  # the merge queue's own checkout: no one's work
        if not dry_run:
            repo.remove_worktree(run_dir / "integration")
        done.append(f"{run.id}: {removed} worktree {run_dir / 'integration'}")
    if not dry_run:
        for objects in sorted((run_dir / "objects").glob("*")):
            if objects.name not in keep:  # a kept worktree's commits may live only there
                shutil.rmtree(objects, ignore_errors=True)
        if not keep:
            shutil.rmtree(run_dir / "objects", ignore_errors=True)
        repo.run("worktree", "prune")
    for agent, branch in branches.items():
        if agent in keep or not repo.tip(branch):
            continue
        count = 0 if force else _unmerged_count(repo, [branch], merged)
        if count:
            done.append(
                f"{run.id}: {kept} branch {branch}: {count} unmerged commit(s); teamrt gc --force deletes it"
            )
            continue
        if not dry_run:
            repo.delete_branch(branch)
        done.append(f"{run.id}: {deleted} branch {branch}")
    if integration and tip:
        head = repo.head()
        if force or tip == run.base_head or (head is not None and repo.is_ancestor(tip, head)):
            if not dry_run:
                repo.delete_branch(integration)
            done.append(f"{run.id}: {deleted} branch {integration}")
        else:
            how = f"teamrt apply {run.id}, or gc --force to delete"
            done.append(f"{run.id}: {kept} {integration}: not applied ({how})")
    return done


def unmerged_work(
    repo: GitRepo, run_dir: Path, path: Path, branch: str | None, merged: list[str]
) -> str | None:
    """What in the worktree at ``path`` (of the agent whose branch is ``branch``) is not merged: commits
    on its HEAD or branch that none of the ``merged`` commits has, uncommitted changes (untracked files
    included, ignored ones not). None when there is none: removing it loses nothing."""
    from teamrt.worktree.worktrees import git_env_of  # the sandbox's modules: only for gc

    env = git_env_of(repo, path)
    if env is None:
        return "git no longer knows this worktree, so its files cannot be checked"
    objects = run_dir / "objects" / path.name  # the agent's commits not yet brought into the repository
    env = {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects), "GIT_OPTIONAL_LOCKS": "0"}
    root = Path(env["GIT_WORK_TREE"])
    try:
        head = repo.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=root, env=env)
        count = _unmerged_count(repo, [head, *([branch] if branch and repo.tip(branch) else [])], merged, env)
        changed = status_paths(
            repo.run("status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=dirty",
                     cwd=root, env=env, strip=False)
        )  # fmt: skip
    except GitError as e:
        return f"it could not be checked ({e})"
    said = [f"{count} unmerged commit(s)"] if count else []
    if changed:
        shown = ", ".join(changed[:SHOWN_FILES]) + (" ..." if len(changed) > SHOWN_FILES else "")
        said.append(f"uncommitted changes in {len(changed)} file(s) ({shown})")
    return " and ".join(said) or None


def _unmerged_count(
    repo: GitRepo, tips: list[str], merged: list[str], env: dict[str, str] | None = None
) -> int:
    """How many commits reachable from ``tips`` none of ``merged`` reaches."""
    out = repo.run("rev-list", "--count", *tips, "--not", *merged, "--", env=env)
    return int(out or 0)
