"""What a branch would bring that grants power, found before the merge queue merges it or ``teamrt apply``
applies it.

A worktree agent's commits are its own to make: ``git update-index --cacheinfo`` puts a file in a commit
that never existed on disk (so nothing watching the disk sees it), and ``--skip-worktree`` hides it from
``git status``. Read through teamrt's own host git (``git``: nothing of the repository's runs), a range
of commits is refused, path by path, when it:

- changes a protected path (``protected_in_tree``: a ``.git`` or ``.claude`` component, ``.mcp.json``,
  ``CLAUDE.md``/``CLAUDE.local.md``/``AGENTS.md``; and here a ``.teamrt`` component at any depth and the
  run's own team file), compared as a case-insensitive file system would (``.Claude`` is ``.claude``
  on macOS), in what lands *or in any commit of the range*: a file added and removed again stays in
  the history, where a checkout of that commit would load it;
- adds or changes a symlink whose target leaves the tree (absolute, or ``..`` past the top), resolved
  against the link's directory through the symlinks of the same tree, or points at a protected path;
- has entries marked skip-worktree or assume-unchanged in the agent's index (the files on disk need
  not be what is committed).

Every line names the path (sanitized with ``terminal.clean_line``: paths are the agent's).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from teamrt.sandbox.protect import MEMORY_FILES, protected_in_tree
from teamrt.terminal import clean_line
from teamrt.worktree.git import GitError, GitRepo

SYMLINK = "120000"
MAX_HOPS = 40
"""Symlinks followed while resolving one target, as the kernel's limit."""
_IGNORABLE = dict.fromkeys(
    [0x200C, 0x200D, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
"""Code points HFS+ ignores in names (git's own ``.git`` check drops them too)."""
_STATUS = {"A": "added", "M": "changed", "D": "deleted", "T": "changed in type"}


@dataclass(frozen=True)
class Finding:
    path: str
    reason: str

    def line(self) -> str:
        """``path: reason`` on one line, with nothing of the agent's that a terminal would act on."""
        return clean_line(f"{self.path}: {self.reason}")


def refusal(findings: Iterable[Finding]) -> str:
    """The merge queue's verdict on a refused branch, for the agent and the store."""
    lines = "\n".join(f"- {f.line()}" for f in findings)
    return (
        "teamrt refused to merge this branch: it changes what grants power to the next run or hides a"
        f" change, and no agent may do either:\n{lines}\n"
        "Take these out of your branch's history (a commit that removes a file does not: the history"
        " keeps it; `git reset --soft` to where your work began and commit again), clear index flags"
        " with `git update-index --no-skip-worktree --no-assume-unchanged PATH`, then finish again."
    )


def _fold(name: str) -> str:
    """``name`` as a case-insensitive file system (HFS+, APFS, NTFS) would take it."""
    return name.translate(_IGNORABLE).casefold().rstrip(". ")


_FOLDED_MEMORY = frozenset(_fold(m) for m in MEMORY_FILES)


def protected_reason(path: str, team_file: str | None = None) -> str | None:
    """Why a path a branch changes grants power (or cannot be checked out at all), or None."""
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "not a path git may check out ('.', '..' or an empty component)"
    folded = [_fold(part) for part in parts]
    if ".git" in folded:
        return "a .git directory: git's configuration and hooks"
    if ".claude" in folded:
        return "a .claude directory: settings, hooks and agents the next session loads"
    if folded[-1] == ".mcp.json":
        return ".mcp.json: MCP servers the next session starts"
    if folded[-1] in _FOLDED_MEMORY:
        return "a memory file: prompt text every agent of the next session reads"
    if ".teamrt" in folded:
        return "in .teamrt: team files and agent definitions"
    if team_file is not None and _fold(path) == _fold(team_file):
        return "the run's own team file"
    if protected_in_tree(path):
        return "a protected path"
    return None


@dataclass(frozen=True)
class _Entry:
    commit: str | None
    """None: the end state (what lands); else the commit of the history that changed it."""
    path: str
    mode: str
    sha: str
    status: str


def check_range(
    repo: GitRepo,
    old: str,
    new: str,
    *,
    team_file: str | None = None,
    index_env: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Why the commits of ``new`` that ``old`` lacks may not land, a Finding per path (empty: they may).
    ``index_env`` points git at the agent's worktree, whose index is checked for flagged entries."""
    base = _merge_base(repo, old, new)
    end = _diff(repo, base, new) if base is not None else []
    commits = repo.run("rev-list", new, "--not", old, "--").split()
    history = _history(repo, commits)
    landing = {e.path for e in end}
    found: dict[str, Finding] = {}
    trees: dict[str, dict[str, str]] = {}
    for entry in (*end, *history):
        if entry.path in found:
            continue
        reason = _reason(repo, entry, entry.commit or new, team_file, trees)
        if reason is not None and entry.commit is not None:
            gone = "" if entry.path in landing else ": not in what lands, but in its history"
            reason += f" (in commit {entry.commit[:12]}{gone})"
        if reason is not None:
            found[entry.path] = Finding(entry.path, reason)
    findings = sorted(found.values(), key=lambda f: f.path)
    if index_env is not None:
        findings += index_flags(repo, index_env)
    return findings


def _reason(
    repo: GitRepo, entry: _Entry, commit: str, team_file: str | None, trees: dict[str, dict[str, str]]
) -> str | None:
    """Why ``entry`` (of ``commit``'s tree) may not land, or None; ``trees`` caches symlinks by commit."""
    said = protected_reason(entry.path, team_file)
    if said is not None:
        return f"{_STATUS.get(entry.status[:1], 'changed')}; {said}"
    if entry.mode != SYMLINK or entry.status.startswith("D"):
        return None
    if commit not in trees:
        trees[commit] = _symlinks(repo, commit)
    return symlink_reason(entry.path, trees[commit].get(entry.path, ""), trees[commit], team_file)


def symlink_reason(
    link: str, target: str, links: Mapping[str, str], team_file: str | None = None
) -> str | None:
    """Why a symlink at ``link`` (in a tree whose symlinks are ``links``) to ``target`` may not land:
    it leaves the tree, loops, or points at a protected path. None when it stays inside."""
    shown = clean_line(target)
    if not target:
        return "a symlink with an empty target"
    if target.startswith("/"):
        return f"a symlink out of the tree, to the absolute path {shown}"
    where = resolve(str(PurePosixPath(link).parent), target, links)
    if where is None:
        return f"a symlink out of the tree, to {shown}"
    if where == "":
        return None
    if where.startswith("//loop"):
        return f"a symlink that loops ({shown})"
    said = protected_reason(where, team_file)
    return None if said is None else f"a symlink to a protected path, {where} ({said})"


def resolve(directory: str, target: str, links: Mapping[str, str]) -> str | None:
    """``target`` resolved from ``directory`` (both relative to the top, '.' for the top) through the
    tree's own ``links``; None when it leaves the tree, ``//loop`` past ``MAX_HOPS`` symlinks."""
    current = [p for p in directory.split("/") if p not in ("", ".")]
    pending = target.split("/")
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return None
            current.pop()
            continue
        current.append(part)
        through = links.get("/".join(current))
        if through is not None:
            hops += 1
            if hops > MAX_HOPS:
                return "//loop"
            if through.startswith("/"):
                return None
            current.pop()
            pending = through.split("/") + pending
    return "/".join(current)


def index_flags(repo: GitRepo, index_env: Mapping[str, str]) -> list[Finding]:
    """Entries of a worktree's index marked skip-worktree (``S``) or assume-unchanged (lower case)."""
    try:
        out = repo.run("ls-files", "-v", "-z", cwd=repo.git_dir, env=index_env, strip=False)
    except GitError as e:
        return [Finding("(index)", f"the worktree's index could not be read: {e}")]
    found = []
    for entry in out.split("\0"):
        tag, _, path = entry.partition(" ")
        if not path:
            continue
        if tag.upper() == "S":
            found.append(Finding(path, "marked skip-worktree in the worktree's index: the file on disk"
                                       " need not be what is committed"))  # fmt: skip
        elif tag.islower():
            found.append(Finding(path, "marked assume-unchanged in the worktree's index: git status does"
                                       " not show its changes"))  # fmt: skip
    return found


def _merge_base(repo: GitRepo, old: str, new: str) -> str | None:
    try:
        return repo.run("merge-base", old, new) or None
    except GitError:
        return None  # unrelated histories: every commit of ``new`` is in the range, checked one by one


def _diff(repo: GitRepo, base: str, new: str) -> list[_Entry]:
    out = repo.run("diff-tree", "-r", "-z", "--no-renames", "--raw", base, new, "--", strip=False)
    return list(_entries(out, None))


def _history(repo: GitRepo, commits: list[str]) -> list[_Entry]:
    """What each commit changed: against its parent, a merge against all of its parents at once
    (what it took from neither side), a root commit against nothing."""
    if not commits:
        return []
    with tempfile.TemporaryFile() as stdin:
        stdin.write("".join(f"{c}\n" for c in commits).encode())
        stdin.seek(0)
        out = repo.run("diff-tree", "--stdin", "-r", "-z", "--no-renames", "-c", "--raw", "--root",
                       stdin=stdin, strip=False)  # fmt: skip
    return list(_entries(out, commits[0]))


def _entries(out: str, first: str | None) -> Iterable[_Entry]:
    """``diff-tree -z --raw`` output (with ``--stdin``, a commit's id before its entries)."""
    fields = iter(out.split("\0"))
    commit = first
    for field in fields:
        if not field:
            continue
        if not field.startswith(":"):
            if first is not None:
                commit = field.strip()
            continue
        parents = len(field) - len(field.lstrip(":"))
        meta = field.lstrip(":").split(" ")
        path = next(fields, "")
        mode, sha, status = meta[parents], meta[2 * parents + 1], meta[-1]
        yield _Entry(commit, path, mode, sha, status)


def _symlinks(repo: GitRepo, commit: str) -> dict[str, str]:
    """Every symlink of ``commit``'s tree, by path, with its target (read in one ``cat-file --batch``)."""
    out = repo.run("ls-tree", "-r", "-z", "--full-tree", commit, strip=False)
    links: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3 and fields[0] == SYMLINK:
            links[path] = fields[2]
    if not links:
        return links
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stdout:
        stdin.write("".join(f"{sha}\n" for sha in links.values()).encode())
        stdin.seek(0)
        repo.run("cat-file", "--batch", stdin=stdin, stdout=stdout)
        stdout.seek(0)
        data = stdout.read()
    targets: list[str] = []
    while data:  # "<sha> blob <size>\n<content>\n", in the order asked
        header, _, data = data.partition(b"\n")
        size = int(header.split()[-1])
        targets.append(data[:size].decode("utf-8", "surrogateescape"))
        data = data[size + 1 :]
    return dict(zip(links, targets, strict=True))
