"""ripgrep for ``Grep`` and ``Glob``: found, confined, run under a time limit, what it prints checked again.

Why a subprocess: a regular expression runs in the thread that calls it, so a
pattern with catastrophic backtracking in Python's ``re`` would hold the
supervisor's event loop (or a thread no one can stop) for as long as it runs.
ripgrep's engine is linear in the text, and a process can be killed: the
event loop only waits on its pipes, and the call ends after its time limit
whatever the pattern. ripgrep also walks the tree in parallel and honours
``.gitignore`` (``.ignore`` and ``.rgignore`` too), which a Python walk would
have to do again by hand.

What it may see: when bubblewrap is installed, ripgrep runs in a mount
namespace of its own holding only the root it searches (read-only), with
teamrt's home covered by an empty tmpfs, so a symlink that a sandboxed shell
swaps in mid-search leads nowhere. It never enters ``.git`` nor the home: both
are excluded by globs given after the model's own, and such globs outrank
every ignore file, so a ``.gitignore`` saying ``!.git`` changes nothing.

Whatever it prints is checked again anyway (``Paths``): each file is shown only
when it is a regular file, reached from its root without a symlink, that the
agent may read (not in teamrt's home, not hidden by a deny rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import stat
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from teamrt.sandbox import seccomp
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.tools.base import ToolError
from teamrt.tools.files import beneath
from teamrt.tools.files.confine import FileRoots, shown

OUTPUT_BYTES = 8 * 1024 * 1024
"""ripgrep's output read at most; a search that prints more is stopped there."""
REAP_SECONDS = 5.0
"""How long a killed search waits for its output pipe to close (only a process that escaped the kill keeps
it open)."""

_ERROR_LINE = re.compile(r"^error: (.+)$", re.MULTILINE)
_GLOB_ERROR = re.compile(r"^rg: error parsing glob '.*?': (.+)$", re.MULTILINE)


def binary() -> str | None:
    """The ``rg`` to run: the one beside this Python (the ripgrep wheel's), else one on PATH.

    Only absolute PATH entries count, so an ``rg`` an agent wrote into its
    workspace is never taken for the real one through a relative entry.
    """
    beside = Path(sys.executable).parent / "rg"
    if beside.is_absolute() and beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg", path=os.pathsep.join(p for p in os.get_exec_path() if os.path.isabs(p)))


def required(op: str) -> str:
    """``binary()``, or a ToolError saying it is missing."""
    rg = binary()
    if rg is None:
        raise ToolError(f"{op}: ripgrep (rg) is not installed; reinstall teamrt, which depends on it")
    return rg


@dataclass(frozen=True)
class Scope:
    """Where ripgrep looks: a directory (``name`` None) or one file in it, under ``root``."""

    root: Path
    directory: Path
    name: str | None
    home: Path | None
    """teamrt's home when it lies in ``root`` (and ``root`` not in it): never searched."""

    @classmethod
    def of(
        cls, conf: FileRoots, op: str, path: str, file: Callable[[beneath.Spot], None] | None = None
    ) -> Scope:
        """The directory ``path`` names; or, when ``file`` is given (it checks the file), a file too."""
        with conf.resolve(op, path) as spot:
            if spot.stat is None:
                raise ToolError(f"{op}: {path} does not exist")
            root = spot.root
            home = (
                conf.home if conf.home.is_relative_to(root) and not root.is_relative_to(conf.home) else None
            )
            if stat.S_ISDIR(spot.stat.st_mode):
                return cls(root, spot.path, None, home)
            if file is None:
                raise ToolError(f"{op}: {path} is not a directory")
            file(spot)
            return cls(root, spot.path.parent, spot.path.name, home)

    def argv(self, rg: str, options: Sequence[str]) -> list[str]:
        """ripgrep's argv with ``options``, to run in ``directory``: in bubblewrap when it is installed."""
        argv = [rg, "--no-config", "--no-messages", "--hidden", "--no-require-git", "--color=never", *options]
        argv.append("--glob=!.git")  # after the model's globs: the last glob that matches wins
        if self.home is not None and self.home.is_relative_to(self.directory) and self.home != self.directory:
            argv.append(f"--glob=!/{_literal(str(self.home.relative_to(self.directory)))}")
        argv += ["--", f"./{self.name}" if self.name is not None else "./"]
        return self._confined(argv)

    def _confined(self, argv: list[str]) -> list[str]:
        """``argv`` run by bubblewrap, without capabilities, in a mount namespace holding only system files,
        ripgrep and ``root`` (read-only, the home in it covered); ``argv`` itself without bubblewrap."""
        bwrap = default_sandbox().bwrap
        if bwrap is None:
            return argv
        rg = os.path.realpath(argv[0])
        options = ["--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
        for lib in ("/lib", "/lib64", "/lib32"):
            options += ["--ro-bind-try", lib, lib]
        options += ["--ro-bind", rg, rg, "--ro-bind", str(self.root), str(self.root)]
        if self.home is not None and os.path.isdir(self.home):  # bwrap cannot make it in a read-only root
            options += ["--tmpfs", str(self.home)]
        options += seccomp.options()  # the same filter as commands (teamrt.sandbox.seccomp)
        return seccomp.load([bwrap, *options, "--chdir", str(self.directory), "--", rg, *argv[1:]])


def _literal(path: str) -> str:
    """``path`` as a glob that matches it and nothing else."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


# -- running ripgrep ------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """What one run of ripgrep printed, and how it ended."""

    out: bytes
    """At most OUTPUT_BYTES of what ripgrep printed."""
    err: bytes
    code: int

    @property
    def cut(self) -> bool:
        return len(self.out) >= OUTPUT_BYTES

    def failure(self, op: str) -> str | None:
        """Why ripgrep failed, as one line, or None when it did not (status 1, no match, says nothing)."""
        if self.code == 0 or self.out or not self.err.strip():
            return None
        text = self.err.decode("utf-8", "replace")
        found = _ERROR_LINE.search(text)
        if 'literal "\\n" is not allowed' in text:
            return f"{op}: pattern matches a line break, which only multiline true allows"
        if "regex parse error" in text and found:
            return f"{op}: pattern is not a valid regular expression: {found.group(1)}"
        last = next((line for line in reversed(text.splitlines()) if line.strip()), "no reason given")
        last = last.removeprefix("rg: ")
        if "exceeds size limit" in last:
            return f"{op}: pattern is too large for ripgrep's engine ({last}); simplify it"
        if last.startswith("unrecognized file type"):
            return (
                f"{op}: type {last.partition(': ')[2]!r} is not one of ripgrep's file types; use glob instead"
            )
        if (why := self.glob_error()) is not None:
            return f"{op}: glob is not valid: {why}"
        return f"{op}: ripgrep failed: {last}"

    def glob_error(self) -> str | None:
        """Why ripgrep could not read a glob it was given, when that is why it failed."""
        if not self.code or self.out:
            return None
        found = _GLOB_ERROR.search(self.err.decode("utf-8", "replace"))
        return found.group(1) if found else None


async def run(op: str, argv: list[str], cwd: Path, seconds: float, narrow: str) -> Output:
    """Run ``argv`` in ``cwd``.

    Stopped (its process group killed) after ``seconds``, with a ToolError
    telling the model to ``narrow`` its search, or when the call is cancelled;
    stopped early, without error, once OUTPUT_BYTES are read.
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env={},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        raise ToolError(f"{op}: could not start ripgrep: {(e.strerror or str(e)).lower()}") from e
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(proc.stderr.read())
    try:
        async with asyncio.timeout(seconds):
            out = await _read_upto(proc.stdout, OUTPUT_BYTES)
            _kill(proc)  # when the output was cut short; a no-op once it has ended
            await _ended(proc)  # drains the pipe: while it is paused, full, wait() never returns
            return Output(out, await errors, await proc.wait())
    except TimeoutError:
        raise ToolError(f"{op}: stopped after {seconds:g} s; {narrow}") from None
    finally:
        errors.cancel()
        await _reaped(proc)


async def _reaped(proc: asyncio.subprocess.Process) -> None:
    """Kill ``proc``'s group and wait until it has ended and its output pipe is closed, even when cancelled
    meanwhile (a killed process ends at once); a cancellation is raised again after."""
    _kill(proc)
    ending = asyncio.ensure_future(_ended(proc))
    cancelled = False
    while not ending.done():
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


async def _ended(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(REAP_SECONDS):
            await proc.stdout.read()  # what is left of the output, so that the pipe is closed
    await proc.wait()


async def _read_upto(stream: asyncio.StreamReader, limit: int) -> bytes:
    """What ``stream`` gives until its end or ``limit`` bytes, whichever comes first."""
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := await stream.read(min(1 << 20, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


# -- checking what it printed ---------------------------------------------------------


@dataclass(frozen=True)
class Found:
    shown: str
    """The path as the model sees it."""
    stat: os.stat_result


@dataclass(frozen=True)
class _Place:
    """A directory ripgrep printed paths in, held open, and how the model sees the paths in it."""

    spot: beneath.Spot
    prefix: str


@dataclass
class Paths:
    """The paths ripgrep printed (relative to ``scope.directory``), each checked as a read of it would be.

    Each directory is walked to by ``beneath`` once (the last few are kept
    open), and each file looked at through its directory's descriptor, never
    followed: a regular file that is there now, not a symlink swapped in.
    """

    conf: FileRoots
    scope: Scope
    hidden: int = 0
    """Paths a deny rule hid."""
    _seen: dict[bytes, Found | None] = field(default_factory=dict)
    _places: dict[str, _Place | None] = field(default_factory=dict)

    def check(self, raw: bytes) -> Found | None:
        """The file ``raw`` names, when the agent may see it; None when not (gone, swapped, denied)."""
        if raw not in self._seen:
            self._seen[raw] = self._check(raw)
        return self._seen[raw]

    def _check(self, raw: bytes) -> Found | None:
        relative = os.path.normpath(os.fsdecode(raw))
        names = relative.split("/")
        if relative.startswith("/") or ".." in names or ".git" in names:
            return None
        place = self._place("/".join(names[:-1]))
        if place is None:
            return None
        try:
            st = os.stat(names[-1], dir_fd=place.spot.dir_fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None  # gone, or a symlink or directory swapped in since ripgrep saw it
        if self.conf.read_denied is not None and self.conf.rule(place.spot.path / names[-1]) is not None:
            self.hidden += 1
            return None
        return Found(place.prefix + shown(names[-1]), st)

    def _place(self, relative: str) -> _Place | None:
        """The directory ``relative`` names, when it is reached from its root without a symlink and is not
        in teamrt's home (so no file in it is)."""
        if relative in self._places:
            self._places[relative] = self._places.pop(relative)  # the most recently used comes last
            return self._places[relative]
        while len(self._places) >= _PLACES:
            _close(self._places.pop(next(iter(self._places))))
        directory = self.scope.directory / relative
        try:
            spot = beneath.resolve(directory, self.conf.roots)
        except (beneath.Escape, OSError):
            place = None
        else:
            place = _Place(spot, "" if directory == self.conf.workspace else f"{self.conf.show(directory)}/")
            if spot.path != directory or spot.tail or self.conf.in_home(directory, spot.root):
                spot.close()
                place = None
        self._places[relative] = place
        return place

    def close(self) -> None:
        for place in self._places.values():
            _close(place)
        self._places.clear()

    def __enter__(self) -> Paths:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


_PLACES = 16
"""Directories ``Paths`` keeps open."""


def _close(place: _Place | None) -> None:
    if place is not None:
        place.spot.close()
