"""What git shows of a run, against what its store recorded: claims come from facts.

A merge the store records ``merged`` counts only while its commit is on the
integration branch (git's ancestry, not the row); a branch that lost recorded
merges is put back at the newest recorded commit whose objects are still there
(``plan_repair``), else the loss is named. A worktree agent's workspace made
again after a loss is compared with what the agent wrote (``lost_work``), so
that what is gone is said, to the agent and in the run's events. Everything
here only reads the repository and the store's records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from teamrt.store import AgentRecord, MergeRecord, ToolCallRecord
from teamrt.worktree.git import GitError, GitRepo

WRITES = frozenset({"Write", "Edit", "MultiEdit", "write", "edit", "multi_edit"})
"""The file tools whose calls change a file, by every name a run may have journaled them under."""
COMMANDS = frozenset({"Bash", "bash"})
RAN = frozenset({"done", "running", "interrupted"})
"""The journal's states of a call that ran, or may have (a crash or a stop cut it short)."""


def recorded_merges(merges: Sequence[MergeRecord]) -> list[MergeRecord]:
    """The merges the store records as made, with their commit."""
    return [m for m in merges if m.status == "merged" and m.merged_commit]


def on_branch(repo: GitRepo | None, branch: str | None, merges: Sequence[MergeRecord]) -> list[MergeRecord]:
    """Those of ``merges`` recorded merged whose commit the integration ``branch`` contains now. Without
    a repository to ask (a run outside git, the project gone), the records are all there is."""
    merged = recorded_merges(merges)
    if repo is None or branch is None:
        return merged
    tip = repo.tip(branch)
    if tip is None:
        return []
    return [m for m in merged if m.merged_commit == tip or repo.is_ancestor(str(m.merged_commit), tip)]


def repo_of(workdir: str | None) -> GitRepo | None:
    """The repository a run's project lies in, or None (none, or gone)."""
    if not workdir or not Path(workdir).is_dir():
        return None
    try:
        return GitRepo.find(Path(workdir))
    except GitError:
        return None


@dataclass(frozen=True)
class Repair:
    """What to do with an integration branch that lacks recorded merges."""

    tip: str | None
    """Where the branch is now (None: gone)."""
    restore_at: str | None
    """The recorded commit to put it back at (its objects are there, every merge it holds recorded)."""
    restored: tuple[MergeRecord, ...]
    """The missing merges that putting it back brings back."""
    lost: tuple[MergeRecord, ...]
    """The merges it lacks that cannot be brought back (their commits' objects are gone)."""


def plan_repair(repo: GitRepo, branch: str, merges: Sequence[MergeRecord]) -> Repair | None:
    """How to mend ``branch`` when it lacks merges the store records made (None: it lacks none).

    It is put back at the newest recorded merge commit whose objects are still there and which holds
    the branch's present tip (nothing on the branch is dropped), holding as many of the recorded merges
    as any candidate does; the merges it still lacks are lost."""
    merged = recorded_merges(merges)
    tip = repo.tip(branch)
    missing = [m for m in merged if tip is None or not _holds(repo, tip, str(m.merged_commit))]
    if not missing:
        return None
    best: tuple[int, str] | None = None
    for merge in sorted(merged, key=lambda m: m.updated_at, reverse=True):
        commit = str(merge.merged_commit)
        if not repo.has_object(commit) or (tip is not None and not _holds(repo, commit, tip)):
            continue
        held = sum(_holds(repo, commit, str(m.merged_commit)) for m in merged)
        if best is None or held > best[0]:
            best = (held, commit)
    at = best[1] if best is not None else None
    restored = tuple(m for m in missing if at is not None and _holds(repo, at, str(m.merged_commit)))
    lost = tuple(m for m in missing if m not in restored)
    return Repair(tip, at if restored else None, restored, lost)


def git_findings(
    repo: GitRepo, branch: str | None, merges: Sequence[MergeRecord], agents: Sequence[AgentRecord]
) -> list[str]:
    """One line per way the repository is behind what the store recorded: the integration branch gone
    or lacking a recorded merge, a worktree agent's branch gone or behind the head it was queued at, a
    workspace of an agent still at work gone. Empty when git shows all the store does."""
    found: list[str] = []
    if branch is not None:
        tip = repo.tip(branch)
        merged = recorded_merges(merges)
        missing = [m for m in merged if tip is None or not _holds(repo, tip, str(m.merged_commit))]
        if missing:
            where = "is gone" if tip is None else f"(at {tip[:12]}) lacks"
            said = ", ".join(f"{m.agent}'s at {str(m.merged_commit)[:12]}" for m in missing)
            found.append(f"the integration branch {branch} {where} the recorded merges: {said}")
    for merge in merges:
        head = repo.tip(merge.branch)
        if head is None and merge.status != "merged":
            found.append(f"{merge.agent}'s branch {merge.branch} is gone (queued at {merge.head[:12]})")
        elif head is not None and not _holds(repo, head, merge.head):
            behind = f"(at {head[:12]}) is behind {merge.head[:12]}"
            found.append(f"{merge.agent}'s branch {merge.branch} {behind}")
    for agent in agents:
        working = agent.kind == "worktree" and agent.status in ("running", "idle", "pending")
        if working and agent.workspace and not Path(agent.workspace).is_dir():
            found.append(f"{agent.name}'s workspace {agent.workspace} is gone")
    return found


@dataclass(frozen=True)
class Lost:
    """What an agent's workspace held that its remade checkout does not."""

    files: tuple[str, ...]
    """Files it wrote or edited whose last change is not in the remade checkout, relative to it."""
    commands: tuple[str, ...]
    """Commands it ran since the commit the checkout was remade at (their effects on files are gone)."""


def lost_work(repo: GitRepo, workspace: Path, remade_at: str, calls: Sequence[ToolCallRecord]) -> Lost:
    """What the agent whose ``calls`` these are lost when its workspace was made again at ``remade_at``
    in ``workspace`` (where it was before, so absolute paths of its calls read the same): each file
    whose last write or edit since that commit was made is not what the file holds now, and the
    commands it ran since then."""
    since = commit_time(repo, remade_at)
    done = [c for c in calls if c.status in RAN and not c.is_error and c.created_at >= since]
    last: dict[str, ToolCallRecord] = {}
    for call in done:
        if call.name in WRITES and (name := _relative(call.input.get("file_path"), workspace)):
            last[name] = call
    files = tuple(sorted(n for n, c in last.items() if not _holds_change(workspace / n, c)))
    later = since + 1  # a command in the commit's own second most likely came before it: not counted
    ran = [c for c in done if c.name in COMMANDS and c.created_at >= later]
    commands = tuple(str(c.input.get("command", "")) for c in ran)
    return Lost(files, commands)


def commit_time(repo: GitRepo, commit: str) -> float:
    """When ``commit`` was made (its committer time, whole seconds): what an agent did before it is in
    it, if it is the agent's own; 0 when git cannot tell."""
    try:
        return float(repo.run("show", "-s", "--format=%ct", commit))
    except (GitError, ValueError):
        return 0.0


def _holds(repo: GitRepo, newer: str, older: str) -> bool:
    return newer == older or repo.is_ancestor(older, newer)


def _relative(path: Any, workspace: Path) -> str | None:
    """``path`` as a call named it, relative to the workspace (None when it lies outside or is no path)."""
    if not isinstance(path, str) or not path:
        return None
    pure = PurePosixPath(path)
    if pure.is_absolute():
        try:
            pure = pure.relative_to(workspace.as_posix())
        except ValueError:
            return None
    if ".." in pure.parts:
        return None
    return pure.as_posix()


def _holds_change(path: Path, call: ToolCallRecord) -> bool:
    """Whether the file at ``path`` holds what ``call`` (a write or an edit) left in it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    args = call.input
    if call.name in ("Write", "write"):
        return text == args.get("content")
    edits = args.get("edits") if call.name in ("MultiEdit", "multi_edit") else [args]
    if not isinstance(edits, list):
        return False
    for edit in edits:
        if not isinstance(edit, dict):
            return False
        new, old = edit.get("new_string"), edit.get("old_string")
        if not isinstance(new, str) or not isinstance(old, str):
            return False
        if (new and new not in text) or (not new and old and old in text):
            return False
    return True
