"""A workspace's protected entries: the baseline taken of them, and the scan that compares them with it,
moves out what was created or changed and puts back what the baseline had.

Every file operation goes through directory descriptors with ``O_NOFOLLOW``:
another agent's shell may swap a directory for a symlink while a scan runs, and
the scan runs outside the sandbox. The run's ``Guard`` (``teamrt.sandbox.quarantine``)
decides when to take a baseline and when to scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import itertools
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from teamrt.sandbox.protect import protected_in_tree

QUARANTINE_DIR = "quarantine"
COPIES_DIR = "protected"
"""``runs/<run>/protected/<workspace>/``: the baseline's copy of each protected file, to put it back."""
MAX_DEPTH = 128
"""Directories nested deeper than this below a workspace are not scanned."""
MAX_COPY_BYTES = 16 * 1024 * 1024
"""A protected file larger than this gets no copy: a change to it is quarantined but not put back."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024
_SERIAL = itertools.count()
"""Told apart quarantined names made in the same nanosecond."""


# == entries ==============================================================================================


@dataclass(frozen=True)
class Entry:
    """One protected path as found: what a scan compares."""

    kind: str
    """``dir``, ``file``, ``link`` or ``other`` (a FIFO, a socket, a device)."""
    mode: int
    size: int
    stamp: tuple[int, int, int, int]
    """(device, inode, mtime, ctime) in ns: equal, the content is the one hashed (no process can set a
    ctime); all 0 for one put back, which is hashed at every scan."""
    digest: str = ""
    """A file's SHA-256, when it was read."""
    target: str = ""
    """A symlink's target."""

    def same(self, other: Entry) -> bool:
        """Whether ``other`` is this entry unchanged: kind, mode, target and content."""
        if (self.kind, self.mode, self.target) != (other.kind, other.mode, other.target):
            return False
        if self.kind != "file":
            return True
        return self.stamp == other.stamp or (self.size == other.size and self.digest == other.digest)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "mode": self.mode, "size": self.size, "stamp": list(self.stamp),
                "digest": self.digest, "target": self.target}  # fmt: skip

    @staticmethod
    def from_json(data: dict[str, Any]) -> Entry:
        stamp = tuple(int(x) for x in data["stamp"])
        return Entry(str(data["kind"]), int(data["mode"]), int(data["size"]),
                     (stamp[0], stamp[1], stamp[2], stamp[3]), str(data.get("digest", "")),
                     str(data.get("target", "")))  # fmt: skip


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "link"
    return "other"


def _entry(st: os.stat_result, *, digest: str = "", target: str = "") -> Entry:
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
    return Entry(_kind(st.st_mode), st.st_mode, st.st_size, stamp, digest, target)


@dataclass(frozen=True)
class Moved:
    """One protected path a scan acted on."""

    path: str
    """Relative to its workspace."""
    how: str
    """``created`` (not there at the baseline), ``changed`` (replaced or changed in place) or ``removed``."""
    kept: Path | None
    """Where what was found went (None for one removed: nothing was found)."""
    restored: bool
    """Whether the baseline's version was put back (only for ``changed`` and ``removed``)."""
    workspace: Path = Path()
    found: str = ""
    """The kind of what was found and moved (``file``, ``dir``, ``link``, ``other``); "" for one removed."""

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "how": self.how, "kept": None if self.kept is None else str(self.kept),
                "restored": self.restored, "found": self.found}  # fmt: skip

    def said(self) -> str:
        """``.mcp.json (created, a link; moved to /…/quarantine/…)``."""
        parts = [f"{self.how}, {_A[self.found]}" if self.found else self.how]
        if self.kept is not None:
            parts.append(f"moved to {self.kept}")
        elif self.how != "removed":
            parts.append("not moved: it was gone, or could not be moved")
        if self.how != "created":
            parts.append("put back as the run found it" if self.restored else "could not be put back")
        return f"{self.path} ({'; '.join(parts)})"


_A = {"file": "a file", "dir": "a directory", "link": "a symlink", "other": "a special file"}

# == walking a workspace by descriptors ===================================================================


@dataclass(frozen=True)
class Rules:
    """Which paths of one workspace a scan looks at."""

    extras: frozenset[str] = frozenset()
    """Further protected paths (memory imports, the team file), relative to the workspace."""
    skipped: frozenset[str] = frozenset()
    """Paths not looked at, nor below: teamrt's working places in a home inside the workspace, and each
    ``.git`` that existed at the baseline (read-only to commands at the top; git changes it)."""

    def protected(self, path: str) -> bool:
        return path in self.extras or protected_in_tree(path)

    def to_json(self) -> dict[str, Any]:
        return {"extras": sorted(self.extras), "skipped": sorted(self.skipped)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Rules:
        extras, skipped = data.get("extras", []), data.get("skipped", [])
        return Rules(frozenset(map(str, extras)), frozenset(map(str, skipped)))


def _walk(top: int, rules: Rules, *, into_git: bool = True) -> Iterator[tuple[int, str, os.stat_result]]:
    """(parent descriptor, path, lstat) of every protected entry below the directory ``top`` (depth first,
    never following a symlink, not into a ``.git`` unless ``into_git``); the descriptor is open only until
    the next entry. Only protected entries are stat'ed: a scan of a large tree costs a listing of each
    directory."""
    stack: list[tuple[int, str, Iterator[os.DirEntry[str]]]] = []
    try:
        first = os.dup(top)
        stack.append((first, "", iter(_listing(first))))
        while stack:
            fd, below, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                os.close(stack.pop()[0])
                continue
            path = f"{below}/{entry.name}" if below else entry.name
            if path in rules.skipped:
                continue
            if rules.protected(path):
                try:
                    st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing
                yield fd, path, st
                is_dir = stat.S_ISDIR(st.st_mode)
            else:
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
            if is_dir and len(stack) < MAX_DEPTH and (into_git or entry.name != ".git"):
                child = _open_dir(fd, entry.name)
                if child is not None:
                    stack.append((child, path, iter(_listing(child))))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _listing(fd: int) -> list[os.DirEntry[str]]:
    """The entries of the directory ``fd`` by name; none when it cannot be listed (gone meanwhile)."""
    try:
        with os.scandir(fd) as listed:
            return sorted(listed, key=lambda e: e.name)
    except OSError:
        return []


def _open_dir(parent: int, name: str) -> int | None:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError:
        return None  # gone, or swapped for a symlink or a file since its lstat


def _read_file(parent: int, name: str, copy_to: Path | None = None) -> str | None:
    """The SHA-256 of the regular file ``name`` in ``parent`` (None when it is no longer one); its content
    also copied to ``copy_to`` when given."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError:
        return None
    digest = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        sink = None
        if copy_to is not None:
            copy_to.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            sink = open(copy_to, "wb")  # noqa: SIM115 -- closed below
        try:
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                if sink is not None:
                    sink.write(chunk)
        finally:
            if sink is not None:
                sink.close()
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest.hexdigest()


def _lookup(top: int, path: str) -> tuple[int, str] | None:
    """A descriptor of ``path``'s parent directory (walked from ``top`` without following a link; the
    caller closes it) and its last component; None when the way is gone or is no longer all directories."""
    parts = PurePosixPath(path).parts
    fd = os.dup(top)
    for part in parts[:-1]:
        child = _open_dir(fd, part)
        os.close(fd)
        if child is None:
            return None
        fd = child
    return fd, parts[-1]


# == one workspace ========================================================================================


@dataclass
class Watched:
    """The baseline of one workspace."""

    workspace: Path
    key: str
    """Its directory under ``runs/<run>/protected/`` (the copies)."""
    rules: Rules
    entries: dict[str, Entry] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "rules": self.rules.to_json(),
                "entries": {p: e.to_json() for p, e in sorted(self.entries.items())}}  # fmt: skip


def take_baseline(workspace: Path, rules: Rules, copies: Path) -> tuple[dict[str, Entry], frozenset[str]]:
    """The protected entries of ``workspace`` now, each file hashed and copied under ``copies`` (one larger
    than ``MAX_COPY_BYTES`` gets no copy); and the ``.git`` found, whose insides are git's (read-only at
    the top, written by git): a scan skips them, and moves out a ``.git`` made later."""
    entries: dict[str, Entry] = {}
    gits: set[str] = set()
    shutil.rmtree(copies, ignore_errors=True)
    top = os.open(workspace, _DIR_FLAGS)
    try:
        for parent, path, st in _walk(top, rules, into_git=False):
            name = PurePosixPath(path).name
            if name == ".git":
                gits.add(path)
            elif stat.S_ISREG(st.st_mode):
                copy = copies / path if st.st_size <= MAX_COPY_BYTES else None
                digest = _read_file(parent, name, copy)
                if digest is not None:  # else not a file now: the next scan sees what it is
                    entries[path] = _entry(st, digest=digest)
            elif stat.S_ISLNK(st.st_mode):
                with contextlib.suppress(OSError):  # else gone since: the next scan sees what is there
                    entries[path] = _entry(st, target=os.readlink(name, dir_fd=parent))
            else:
                entries[path] = _entry(st)
    finally:
        os.close(top)
    return entries, frozenset(gits)


def _found_now(top: int, watched: Watched) -> dict[str, Entry]:
    """The protected entries of the workspace now; a file hashed only when its stamp differs from its
    baseline's."""
    found: dict[str, Entry] = {}
    for parent, path, st in _walk(top, watched.rules):
        name = PurePosixPath(path).name
        entry = _entry(st)
        before = watched.entries.get(path)
        if entry.kind == "link":
            with contextlib.suppress(OSError):
                entry = replace(entry, target=os.readlink(name, dir_fd=parent))
        elif entry.kind == "file" and before is not None and before.stamp != entry.stamp:
            entry = replace(entry, digest=_read_file(parent, name) or "?")
        found[path] = entry
    return found


def scan(watched: Watched, run_dir: Path) -> list[Moved]:
    """Compare the workspace of ``watched`` with its baseline: move what was created or changed to
    ``run_dir``'s quarantine, put back what the baseline had (shallowest first). Blocking; the caller holds
    ``watched.lock``."""
    workspace = watched.workspace
    try:
        top = os.open(workspace, _DIR_FLAGS)
    except OSError:
        return []  # the workspace is gone (a worktree removed): nothing there is read any more
    moved: list[Moved] = []
    try:
        found = _found_now(top, watched)
        cleared: list[str] = []  # paths moved out whole: what was below them went with them
        for path in sorted({*found, *watched.entries}, key=lambda p: (p.count("/"), p)):
            before = watched.entries.get(path)
            now = None if _below_any(path, cleared) else found.get(path)
            if before is None and now is None:
                continue  # moved out with a directory above it
            if before is not None and now is not None and before.same(now):
                continue
            kept, kind = None, ""
            if now is not None:
                kept, kind = _move_out(top, path, run_dir), now.kind
                cleared.append(path)
            if before is None:
                moved.append(Moved(path, "created", kept, False, workspace, kind))
                continue
            restored = _put_back(top, path, before, watched, run_dir)
            how = "changed" if now is not None else "removed"
            moved.append(Moved(path, how, kept, restored, workspace, kind))
    finally:
        os.close(top)
    return moved


def _below_any(path: str, tops: list[str]) -> bool:
    return any(path.startswith(f"{top}/") for top in tops)


def _move_out(top: int, path: str, run_dir: Path) -> Path | None:
    """Move ``path`` (walked from ``top``) into ``run_dir``'s quarantine: renamed there, or copied and
    removed when the quarantine is on another file system; where it went (None: it had gone already)."""
    quarantine_dir = run_dir / QUARANTINE_DIR
    quarantine_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    keep = quarantine_dir / f"{time.time_ns()}{next(_SERIAL) % 1000:03d}-{path.replace('/', '%')}"
    found = _lookup(top, path)
    if found is None:
        return None
    parent, name = found
    try:
        qfd = os.open(quarantine_dir, _DIR_FLAGS)
        try:
            os.rename(name, keep.name, src_dir_fd=parent, dst_dir_fd=qfd)
        except OSError as e:
            if e.errno != errno.EXDEV:  # gone already, or it cannot be moved: said as not moved
                return None
            _copy_out(parent, name, keep, 0)  # the quarantine is on another file system
            _remove(parent, name)
        finally:
            os.close(qfd)
    except OSError:
        return None
    finally:
        os.close(parent)
    return keep


def _copy_out(parent: int, name: str, dest: Path, depth: int) -> None:
    """Copy ``name`` in ``parent`` to ``dest`` (a directory whole, to ``MAX_DEPTH``), following no link."""
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=parent), dest)
    elif stat.S_ISREG(st.st_mode):
        _read_file(parent, name, dest)
    elif stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
        dest.mkdir(mode=0o700)
        child = _open_dir(parent, name)
        if child is not None:
            try:
                for entry in sorted(os.listdir(child)):
                    _copy_out(child, entry, dest / entry, depth + 1)
            finally:
                os.close(child)
    else:
        dest.write_text(f"(a {_kind(st.st_mode)} entry, mode {st.st_mode:o}, not copied)\n")


def _remove(parent: int, name: str) -> None:
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent)
    else:
        os.unlink(name, dir_fd=parent)


def _put_back(top: int, path: str, before: Entry, watched: Watched, run_dir: Path) -> bool:
    """Make ``path`` what the baseline had (from its copy for a file); whether that worked."""
    found = _lookup(top, path)
    if found is None:
        return False
    parent, name = found
    try:
        if before.kind == "dir":
            os.mkdir(name, 0o700, dir_fd=parent)
            made = os.open(name, _DIR_FLAGS, dir_fd=parent)
            try:
                os.fchmod(made, stat.S_IMODE(before.mode))  # as it was, whatever the umask
            finally:
                os.close(made)
        elif before.kind == "link":
            os.symlink(before.target, name, dir_fd=parent)
        elif before.kind == "file":
            if not _write_copy(parent, name, run_dir / COPIES_DIR / watched.key / path, before):
                return False
        else:
            return False
        # no stamp from now on: a process still running may write it within the same clock tick as this,
        # which no timestamp tells apart; it is hashed at every scan instead
        watched.entries[path] = replace(before, stamp=(0, 0, 0, 0))
        return True
    except OSError:
        return False
    finally:
        os.close(parent)


def _write_copy(parent: int, name: str, copy: Path, before: Entry) -> bool:
    """Write the baseline's ``copy`` as ``name`` in ``parent`` (through a temporary renamed over it)."""
    try:
        data = copy.read_bytes()
    except OSError:
        return False
    if hashlib.sha256(data).hexdigest() != before.digest:
        return False
    temporary = f".{name}.teamrt-restore-{time.time_ns()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 stat.S_IMODE(before.mode), dir_fd=parent)  # fmt: skip
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, stat.S_IMODE(before.mode))
    finally:
        os.close(fd)
    os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    return True
