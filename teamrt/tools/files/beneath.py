"""Files opened beneath a root directory, one name at a time, never by a path the kernel resolves.

Python has no binding for ``openat2(RESOLVE_BENEATH)``, so ``resolve`` walks a
path itself: each name is opened with ``O_PATH | O_NOFOLLOW`` relative to the
descriptor of the directory before it, so a directory that a sandboxed shell
swaps for a symlink between two steps is seen as that symlink, never followed
by the kernel. A symlink met on the way is read, its target made absolute
against the directory holding it (a real directory, so ``..`` in the target is
exact), and the whole path walked again from whichever root holds it; a target
in no root ends the walk with ``Escape``.

The caller then works through the descriptors the walk returns (``open_file``,
``make_parents``, ``replace``): nothing is looked up again by a
path from outside the tree.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from teamrt.errors import TeamrtError

MAX_HOPS = 40
"""Symlinks followed in one walk before it counts as a loop (Linux's own limit)."""
MAX_DEPTH = 100
"""A walk down a tree (``LS``) enters no directory deeper than this below its top (each level holds a
descriptor)."""
TEMPORARY_SUFFIX = ".teamrt-tmp"
"""Of the file ``replace`` writes before renaming it over the real one."""

_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Escape(TeamrtError):
    """The path leads out of every root; ``path`` is where it leads."""

    def __init__(self, path: Path) -> None:
        super().__init__(str(path))
        self.path = path


class Changed(OSError):
    """A file changed between the walk and its use (swapped by another process)."""

    def __init__(self) -> None:
        super().__init__(errno.EAGAIN, "changed while in use; try again")


@dataclass
class Spot:
    """Where a path leads: the deepest directory on the way that exists, held open. Close it after use."""

    root: Path
    """The root the walk ended in."""
    dir_fd: int
    """An ``O_PATH`` descriptor of that directory: the path's own when it is a directory."""
    path: Path
    """The canonical path: the root, real directories, then ``tail``."""
    tail: tuple[str, ...]
    """Names below ``dir_fd``: directories that do not exist yet, then the last name; () when ``path`` is
    the directory ``dir_fd`` itself."""
    stat: os.stat_result | None
    """Of ``path``, when it exists."""

    def close(self) -> None:
        os.close(self.dir_fd)

    def __enter__(self) -> Spot:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def root_of(path: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost of ``roots`` holding ``path`` (both absolute and normalized), or None."""
    holding = [root for root in roots if path.is_relative_to(root)]
    return max(holding, key=lambda root: len(root.parts), default=None)


def resolve(path: Path, roots: Sequence[Path]) -> Spot:
    """Walk the absolute, normalized ``path`` from the root that holds it, following symlinks by hand.

    Raises Escape when the path (or a symlink on it) leads out of every root,
    OSError for a symlink loop (ELOOP), a file where a directory should be
    (ENOTDIR) or a name the kernel refuses (ENAMETOOLONG, EACCES).
    """
    for _ in range(MAX_HOPS + 1):
        root = root_of(path, roots)
        if root is None:
            raise Escape(path)
        found = _descend(root, path.relative_to(root).parts)
        if isinstance(found, Spot):
            return found
        path = found
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))


def _descend(root: Path, names: tuple[str, ...]) -> Spot | Path:
    """The Spot of ``root / names``, or where a symlink on the way leads (absolute, normalized)."""
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    at = root
    try:
        for i, name in enumerate(names):
            try:
                child = os.open(name, _PATH, dir_fd=fd)
            except FileNotFoundError:
                return Spot(root, fd, at.joinpath(*names[i:]), names[i:], None)
            st = os.fstat(child)
            if stat.S_ISDIR(st.st_mode):
                os.close(fd)
                fd, at = child, at / name
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink("", dir_fd=child)
                finally:
                    os.close(child)
                os.close(fd)
                return Path(os.path.normpath(os.path.join(at, target, *names[i + 1 :])))
            os.close(child)
            if i < len(names) - 1:
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
            return Spot(root, fd, at / name, (name,), st)
        return Spot(root, fd, at, (), os.fstat(fd))
    except BaseException:
        _close_quietly(fd)
        raise


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def open_file(spot: Spot) -> int:
    """A read-only descriptor of the existing file ``spot`` names, checked to be the very file walked to.

    Raises Changed when the name now holds another file or a symlink.
    """
    assert spot.stat is not None and len(spot.tail) == 1
    try:
        fd = os.open(spot.tail[0], _READ, dir_fd=spot.dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Changed() from e
        raise
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (spot.stat.st_dev, spot.stat.st_ino):
        os.close(fd)
        raise Changed()
    return fd


def make_parents(spot: Spot) -> int:
    """Create the missing directories of ``spot.tail`` (all but its last name); a new ``O_PATH`` descriptor
    of the directory that holds the last name. A symlink put in the way meanwhile raises Changed."""
    fd = os.dup(spot.dir_fd)
    try:
        for name in spot.tail[:-1]:
            try:
                os.mkdir(name, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(name, _PATH, dir_fd=fd)
            os.close(fd)
            fd = child
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise Changed()
        return fd
    except BaseException:
        _close_quietly(fd)
        raise


def replace(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write ``name`` in the directory ``dir_fd`` all or nothing: a new sibling temporary file (never
    through a symlink), fsynced, given ``mode`` and renamed over it, so a crash leaves the old text or the
    new, never a truncated file. Only the permission bits of ``mode`` are kept."""
    stem = name.encode()[:64].decode("utf-8", "ignore")
    temporary = f".{stem}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}"
    fd = os.open(temporary, _CREATE, 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            os.fchmod(fd, mode & 0o777)  # never set-user-ID: teamrt may run as root
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def remove_temporaries(root: Path) -> list[Path]:
    """Remove the temporary files a write cut short by a crash left under ``root`` (``.git`` and
    other hidden directories are not entered); the files removed."""
    removed = []
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.startswith(".") and name.endswith(TEMPORARY_SUFFIX):
                path = Path(top) / name
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed
