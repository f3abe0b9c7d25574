"""The diff of a run's work, as a reviewer reads it: ``teamrt diff`` and the TUI's diff tab.

What is compared (``subject``): an agent's work against the commit its checkout was cut from (the
``worktree.created`` event's ``base``): while git still knows its worktree, the worktree as it is now
(commits, uncommitted edits and new files alike); once it is gone (merged, or collected), its branch
``teamrt/<run>-<agent>``. Without an agent, the run's integration branch against the commit the run
started from (``base_head``): all the run merged.

The text is an agent's: the files, their names, even the repository's configuration may be its work.
git is run as every host command is (``GitRepo.run``: no hooks, the repository's own filter and diff
drivers replaced by nothing), and on top of that without colour, external diff programs or text
conversion, with paths quoted and the usual ``a/`` ``b/`` prefixes whatever the configuration says, so
the bytes are the diff itself. A live worktree's new files are shown through a throwaway copy of its
index (``git add --intent-to-add`` there): the agent's own index is never written.

What reaches a terminal is made inert: ``clean`` per line where it is drawn (TUI, colour), ``inert``
for plain output, which keeps every other byte as it is so that ``teamrt diff RUN | git apply`` works.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal, cast

from teamrt.runs.query import LIVE_AGENT, RunsError, reading
from teamrt.store import NotFound, StoreError, StoreReader
from teamrt.terminal import clean

if TYPE_CHECKING:
    from teamrt.worktree.git import GitRepo

Mode = Literal["patch", "stat", "name-only"]

WORKTREE_CREATED = "worktree.created"
READ_CHUNK = 1 << 16

# Each of these, on the command line, outranks whatever configuration the repository has.
DIFF_CONFIG = (
    "core.quotepath=on",  # a name with control characters or non-ASCII bytes is shown quoted, escaped
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.submodule=short",  # log would run git inside a submodule, with the submodule's configuration
)
DIFF_OPTIONS = (
    "--no-color",  # the only colour is the one teamrt adds after cleaning each line
    "--no-ext-diff",  # diff.external, GIT_EXTERNAL_DIFF and a diff driver's command are not run
    "--no-textconv",  # nor a driver's textconv: the bytes compared are the bytes committed
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--submodule=short",
    "--ignore-submodules=dirty",
)


@dataclass(frozen=True)
class Subject:
    """What ``teamrt diff`` compares: ``base`` against ``tip`` (a commit), or against the live worktree
    ``env`` points git at when ``tip`` is None."""

    run_id: str
    agent: str | None
    repo: GitRepo
    base: str
    tip: str | None
    label: str
    """``branch teamrt/r1-coder-1``, ``integration branch teamrt/r1``, ``worktree of coder-1``."""
    env: dict[str, str] | None = None
    """GIT_DIR, GIT_WORK_TREE ... of the agent's live worktree (None: two commits are compared)."""
    live: bool = False
    """The agent still works: what its worktree shows may change."""

    @property
    def against(self) -> str:
        """``the commit coder-1 was cut from``: what ``base`` is, in words."""
        if self.agent is None:
            return "the commit the run started from"
        return f"the commit {self.agent} was cut from"


def subject(run_dir: Path, run_id: str, agent: str | None = None) -> Subject:
    """What to compare for ``agent`` of the run (None: its integration branch); RunsError, in one line,
    when there is nothing to compare (no such agent, an agent without a branch, a branch gone)."""
    with reading(run_dir, run_id) as store, store.snapshot() as reader:
        return _subject(reader, run_dir, run_id, agent)


def _subject(reader: StoreReader, run_dir: Path, run_id: str, agent: str | None) -> Subject:
    from teamrt.worktree.git import (
        GitRepo,
    )  # GitPython: only once a diff is asked for (the TUI starts without)

    run = reader.run()
    integration = run.settings.get("integration_branch")
    if not run.base_head or not isinstance(integration, str):
        raise RunsError(f"run {run_id} did not run in a git repository; it has no diff")
    repo = GitRepo.find(Path(run.workdir))
    if repo is None:
        raise RunsError(f"{run.workdir}, where run {run_id} ran, is no longer in a git repository")
    if agent is None:
        tip = repo.tip(integration)
        if tip is None:
            merged = any(m.status == "merged" for m in reader.merges())
            why = (
                "was deleted (teamrt gc deletes it once applied)"
                if merged
                else "does not exist: nothing was merged yet"
            )
            raise RunsError(f"the integration branch {integration} of run {run_id} {why}")
        return Subject(run_id, None, repo, run.base_head, tip, f"integration branch {integration}")
    try:
        record = reader.agent(agent)
    except NotFound:
        names = ", ".join(sorted(a.name for a in reader.agents())) or "none yet"
        raise RunsError(f"no agent named {agent!r} in run {run_id!r} (its agents: {names})") from None
    if record.kind != "worktree" or not record.branch:
        where = "the project" if record.parent is None else "its parent's workspace"
        raise RunsError(
            f"agent {agent} of run {run_id} is a {record.kind} agent: it works in {where} and has no"
            f" branch of its own (teamrt diff {run_id} shows all the run merged)"
        )
    base = _base(reader, agent) or run.base_head
    env = _worktree_env(repo, run_dir, agent)
    if env is not None:
        live = record.status in LIVE_AGENT
        return Subject(run_id, agent, repo, base, None, f"worktree of {agent}", env=env, live=live)
    tip = repo.tip(record.branch)
    if tip is None:
        raise RunsError(
            f"the branch {record.branch} of agent {agent} no longer exists (teamrt gc deletes the branches"
            f" of finished runs); teamrt diff {run_id} shows all the run merged"
        )
    return Subject(run_id, agent, repo, base, tip, f"branch {record.branch}")


def _base(reader: StoreReader, agent: str) -> str | None:
    """The commit ``agent``'s checkout was cut from, as its ``worktree.created`` event recorded it."""
    for event in reversed(reader.events(kinds=(WORKTREE_CREATED,))):
        if event.agent == agent and isinstance(event.data.get("base"), str):
            return str(event.data["base"])
    return None


def _worktree_env(repo: GitRepo, run_dir: Path, agent: str) -> dict[str, str] | None:
    """What points git at ``agent``'s worktree by git's own records (never by what the agent wrote), its
    private objects readable; None once git no longer knows it."""
    from teamrt.worktree.worktrees import git_env_of  # the sandbox's modules: only for a worktree

    env = git_env_of(repo, run_dir / "worktrees" / agent)
    if env is None:
        return None
    objects = run_dir / "objects" / agent
    return {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects), "GIT_OPTIONAL_LOCKS": "0"}


# -- git --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffBytes:
    data: bytes
    cut: int = 0
    """Bytes left out past the limit asked for (0: all of it)."""


def diff_bytes(
    subject: Subject, mode: Mode = "patch", *, limit: int | None = None, stat_width: int = 80
) -> DiffBytes:
    """git's diff of ``subject`` (``mode``: the patch, ``--stat`` or ``--name-only``), as bytes; with
    ``limit``, at most that many (``cut`` says how many more there were). RunsError when git fails."""
    from teamrt.worktree.git import GitError

    shown = {"patch": (), "stat": (f"--stat={stat_width}",), "name-only": ("--name-only",)}[mode]
    config = tuple(arg for setting in DIFF_CONFIG for arg in ("-c", setting))
    args = (
        *config,
        "diff",
        *DIFF_OPTIONS,
        *shown,
        subject.base,
        *([subject.tip] if subject.tip else []),
        "--",
    )
    try:
        with tempfile.TemporaryFile() as file:
            out = cast(BinaryIO, file)
            if subject.env is None:
                subject.repo.run(*args, stdout=out)
            else:
                _worktree_diff(subject.repo, subject.env, args, out)
            size = out.tell()
            out.seek(0)
            data = out.read() if limit is None else out.read(limit)
    except GitError as e:
        raise RunsError(f"cannot diff the {subject.label} of run {subject.run_id}: {e}") from None
    return DiffBytes(data, size - len(data))


def _worktree_diff(repo: GitRepo, env: dict[str, str], args: tuple[str, ...], out: BinaryIO) -> None:
    """``args`` in a live worktree, its new files included: marked intent-to-add in a copy of its index
    (their content is not read), so that the agent's index is left as it was; should git write an object
    there, it goes to a throwaway store, never the repository's."""
    root = Path(env["GIT_WORK_TREE"])
    with tempfile.TemporaryDirectory(prefix="teamrt-diff-") as tmp:
        index = Path(tmp) / "index"
        try:
            shutil.copyfile(Path(env["GIT_DIR"]) / "index", index)
        except FileNotFoundError:
            pass  # a checkout whose index is not written yet: git starts from an empty one
        env = {**env, "GIT_INDEX_FILE": str(index)}
        (Path(tmp) / "objects").mkdir()
        stores = os.pathsep.join((env["GIT_ALTERNATE_OBJECT_DIRECTORIES"], str(repo.objects)))
        adding = {
            **env,
            "GIT_OBJECT_DIRECTORY": str(Path(tmp) / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": stores,
        }
        repo.run("add", "--intent-to-add", "--all", "--ignore-errors", "--", ":/", cwd=root, env=adding)
        repo.run(*args, cwd=root, env=env, stdout=out)


# -- what reaches a terminal ------------------------------------------------------------------------

_PIPE_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufff9-\ufffb"
    "\udc80-\udc9f]|\r(?!\n)"
)
"""``teamrt.terminal.clean``'s controls, but for a CR that ends a line (a CRLF file's lines) and the
bytes of text that is not UTF-8 (decoded as ``\\udcXX``): those from 0xa0 on stay, for a Latin-1 file's
diff to apply, while 0x80-0x9f (a C1 control to a terminal that reads 8-bit codes) do not."""


def inert(data: bytes) -> bytes:
    """``data`` with every control a terminal would act on written as U+FFFD (an escape sequence's ESC,
    so the rest shows as text; a BEL; a lone CR; bidi overrides; C1), every other byte as it was."""
    text = data.decode("utf-8", "surrogateescape")
    return _PIPE_UNSAFE.sub("\ufffd", text).encode("utf-8", "surrogateescape")


LineKind = Literal["file", "meta", "path", "hunk", "add", "del", "context", "note"]

LINE_STYLE: dict[str, str] = {
    "file": "bold",
    "meta": "bold",
    "path": "bold",
    "hunk": "cyan",
    "add": "green",
    "del": "red",
    "note": "dim",
}
"""How each kind of line is drawn (Rich style names; ``teamrt diff`` maps them to SGR), git's colours."""


def line_kinds(lines: list[str]) -> Iterator[tuple[LineKind, str]]:
    """Each line of a patch with its kind: inside a hunk its first character says (``---`` there is a
    line removed, not a file's header); outside, the headers git writes."""
    in_hunk = False
    for line in lines:
        if line.startswith("diff --git "):
            in_hunk = False
            yield "file", line
        elif line.startswith("@@"):
            in_hunk = True
            yield "hunk", line
        elif in_hunk and line[:1] in ("+", "-", " ", "\\", ""):
            yield {"+": "add", "-": "del", "\\": "note"}.get(line[:1], "context"), line  # type: ignore[misc]
        elif line.startswith(("--- ", "+++ ")):
            in_hunk = False
            yield "path", line
        else:
            in_hunk = False
            yield "meta", line


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a patch."""

    path: str
    """As git names it (quoted by git when odd), the new name of a renamed file."""
    lines: tuple[str, ...]
    added: int
    removed: int


def split_files(text: str) -> list[FileDiff]:
    """A patch's text cut at each ``diff --git`` line, a FileDiff a file."""
    files: list[FileDiff] = []
    chunk: list[str] = []
    for line in [*text.split("\n"), "diff --git "]:
        if line.startswith("diff --git ") and chunk:
            kinds = list(line_kinds(chunk))
            added = sum(k == "add" for k, _ in kinds)
            removed = sum(k == "del" for k, _ in kinds)
            files.append(FileDiff(_path_of(chunk), tuple(chunk), added, removed))
            chunk = []
        chunk.append(line)
    if files and files[-1].lines[-1:] == ("",):  # the patch's last newline
        last = files[-1]
        files[-1] = FileDiff(last.path, last.lines[:-1], last.added, last.removed)
    return files


def _path_of(chunk: list[str]) -> str:
    """The file a chunk is about: its ``+++``'s (else ``---``'s, for a file deleted; else a rename's or
    the ``diff --git`` line's second name, for a change of mode or a binary file)."""
    for prefix, strip in (("+++ ", "b/"), ("--- ", "a/"), ("rename to ", ""), ("copy to ", "")):
        for line in chunk:
            name = line.removeprefix(prefix)
            if name != line and name != "/dev/null":
                return _unprefixed(name, strip)
            if line.startswith("@@"):
                break
    head = chunk[0].removeprefix("diff --git ")
    name = head[head.rfind(" b/") + 1 :] if " b/" in head else head
    return _unprefixed(name, "b/")


def _unprefixed(name: str, prefix: str) -> str:
    if name.startswith('"') and name[1:].startswith(prefix):
        return '"' + name[1 + len(prefix) :]
    return name.removeprefix(prefix)


def terminal_width() -> int:
    """The terminal's columns (80 when there is none), for ``--stat``'s graph."""
    return shutil.get_terminal_size((80, 24)).columns if os.isatty(1) else 80


# -- the TUI's diff tab -----------------------------------------------------------------------------

REVIEW_LIMIT = 1 << 20
"""The most of a diff the TUI shows (1 MiB): past it, it says how much it left out."""


@dataclass(frozen=True)
class Review:
    """A diff as the TUI shows it: its files, its text cleaned; or why there is none (``problem``)."""

    label: str = ""
    against: str = ""
    live: bool = False
    files: tuple[FileDiff, ...] = ()
    cut: int = 0
    """Bytes of the diff past ``REVIEW_LIMIT``, not shown."""
    problem: str | None = None


def review(run_dir: Path, run_id: str, agent: str | None, limit: int = REVIEW_LIMIT) -> Review:
    """``agent``'s diff (None: the run's), read for the TUI: at most ``limit`` bytes of it, whole lines,
    each made inert (``clean``); a diff that cannot be had is a Review with its ``problem``."""
    try:
        found = subject(run_dir, run_id, agent)
        got = diff_bytes(found, limit=limit)
    except (RunsError, StoreError, OSError) as e:
        return Review(problem=str(e))
    data = got.data
    if got.cut:  # a line cut in two is left out whole
        kept = data.rfind(b"\n") + 1
        data, cut = data[:kept], got.cut + len(data) - kept
    else:
        cut = 0
    text = clean(data.decode("utf-8", "replace"))
    return Review(found.label, found.against, found.live, tuple(split_files(text)), cut)
