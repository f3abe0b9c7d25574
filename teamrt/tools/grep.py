"""The ``grep`` tool: ripgrep in a subprocess, under a time limit, its output filtered by what may be read.

Why a subprocess: a regular expression runs in the thread that calls it, so a
pattern with catastrophic backtracking in Python's ``re`` would hold the
supervisor's event loop (or a thread no one can stop) for as long as it runs.
ripgrep's engine is linear in the text, and a process can be killed: the
event loop only waits on its pipes, and the call ends after ``GREP_SECONDS``
whatever the pattern.

What it may see: when bubblewrap is installed, ripgrep runs in a mount
namespace of its own holding only the root it searches (read-only), with
teamrt's home covered by an empty tmpfs, so a symlink that a sandboxed shell
swaps in mid-search leads nowhere. Whatever it prints is checked again anyway:
each path is walked by ``beneath`` and shown only when it is a regular file,
reached without a symlink, that the agent may read (not in teamrt's home, not
hidden by a deny rule).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import beneath, toolargs
from .base import ToolContext, ToolError, ToolResult, object_schema
from .confine import Confinement, hidden_note
from .sandbox import default_sandbox
from .textfile import line_text, open_text

GREP_FILES = 200
"""Files listed by ``grep`` in files_with_matches and count modes."""
GREP_LINES = 300
"""Lines shown by ``grep`` in content mode."""
GREP_FILE_BYTES = 5 * 1024 * 1024
"""``grep`` skips larger files."""
GREP_SECONDS = 20.0
"""Time limit of one grep, search and all."""
OUTPUT_BYTES = 8 * 1024 * 1024
"""ripgrep's output read at most; a search that prints more is stopped there."""
PATTERN_CHARS = 10_000

_MODES = ("files_with_matches", "content", "count")
_CONTEXT = ("-A", "-B", "-C")
_CONTEXT_FLAGS = {"-A": "--after-context", "-B": "--before-context", "-C": "--context"}
_ERROR_LINE = re.compile(r"^error: (.+)$", re.MULTILINE)


def ripgrep() -> str | None:
    """The ``rg`` to run: the one beside this Python (the ripgrep wheel's), else one on PATH.

    Only absolute PATH entries count, so an ``rg`` an agent wrote into its
    workspace is never taken for the real one through a relative entry.
    """
    beside = Path(sys.executable).parent / "rg"
    if beside.is_absolute() and beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("rg", path=os.pathsep.join(p for p in os.get_exec_path() if os.path.isabs(p)))


class Grep:
    name = "grep"
    description = (
        "Search file contents with ripgrep. The pattern is a Rust regular expression (ripgrep's syntax:"
        " like Python's, without look-around or backreferences; escape literal braces as `\\{`)."
        " output_mode: files_with_matches (default; the files that match), content (matching lines as"
        " path:line:text, with -A/-B/-C lines of context as path-line-text) or count (matching lines per"
        " file). Narrow with path and with glob (such as `*.py`; without a '/' it matches file names"
        " anywhere). Hidden files are searched; files that .gitignore excludes, binary files, files over"
        f" {GREP_FILE_BYTES // 2**20} MiB, .git and teamrt's home are not. At most {GREP_FILES} files or"
        f" {GREP_LINES} lines are shown (head_limit: fewer), and a search stops after {GREP_SECONDS:g} s."
    )
    input_schema = object_schema(
        {
            "pattern": {"type": "string", "description": "Rust regular expression (ripgrep's syntax)."},
            "path": {
                "type": "string",
                "description": "File or directory to search (default: the workspace).",
            },
            "glob": {"type": "string", "description": "Only files matching this glob pattern."},
            "output_mode": {"type": "string", "enum": list(_MODES), "description": "What to show."},
            "-i": {"type": "boolean", "description": "Ignore case (default false)."},
            "-A": {"type": "integer", "minimum": 0, "description": "Lines after each match (content)."},
            "-B": {"type": "integer", "minimum": 0, "description": "Lines before each match (content)."},
            "-C": {"type": "integer", "minimum": 0, "description": "Lines around each match (content)."},
            "head_limit": {"type": "integer", "minimum": 1, "description": "Show at most this many lines."},
        },
        "pattern",
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = _Query.of(input)
        rg = ripgrep()
        if rg is None:
            raise ToolError("grep: ripgrep (rg) is not installed; reinstall teamrt, which depends on it")
        conf = Confinement.of(ctx)
        target = await asyncio.to_thread(_Target.of, conf, query.path)
        out, err, code = await _search(target.command(rg, query), target.directory)
        if code != 0 and not out and err.strip():  # ripgrep's status 1, no match, comes without a word
            raise ToolError(_failure(err))
        return ToolResult(await asyncio.to_thread(_Report(conf, target, query).render, out))


@dataclass(frozen=True)
class _Query:
    """What the model asked for, checked."""

    pattern: str
    path: str
    mode: str
    ignore_case: bool
    glob: str | None
    context: dict[str, int]
    limit: int

    @classmethod
    def of(cls, input: dict[str, Any]) -> _Query:
        pattern = toolargs.text(input, "grep", "pattern")
        if "\0" in pattern or len(pattern) > PATTERN_CHARS:
            raise ToolError(f"grep: pattern must be at most {PATTERN_CHARS} characters, without NUL")
        mode = toolargs.text(input, "grep", "output_mode", "files_with_matches")
        if mode not in _MODES:
            raise ToolError(f"grep: output_mode must be one of {', '.join(_MODES)}")
        glob = toolargs.text(input, "grep", "glob") if "glob" in input else None
        if glob is not None and (not glob or "\0" in glob or len(glob) > PATTERN_CHARS):
            raise ToolError(f"grep: glob must be a non-empty pattern of at most {PATTERN_CHARS} characters")
        cap = GREP_LINES if mode == "content" else GREP_FILES
        return cls(
            pattern=pattern,
            path=toolargs.path(input, "grep", "path"),
            mode=mode,
            ignore_case=toolargs.flag(input, "grep", "-i"),
            glob=glob,
            context={k: toolargs.whole(input, "grep", k, 0, least=0) for k in _CONTEXT if k in input},
            limit=min(cap, toolargs.whole(input, "grep", "head_limit", cap)),
        )


@dataclass(frozen=True)
class _Target:
    """Where to search: a directory (``name`` None) or one file in it, under ``root``."""

    root: Path
    directory: Path
    name: str | None
    home: Path | None
    """teamrt's home when it lies in ``root`` (and ``root`` not in it): never searched."""

    @classmethod
    def of(cls, conf: Confinement, path: str) -> _Target:
        with conf.resolve("grep", path) as spot:
            root = spot.root
            home = (
                conf.home if conf.home.is_relative_to(root) and not root.is_relative_to(conf.home) else None
            )
            if spot.stat is None:
                raise ToolError(f"grep: {path} does not exist")
            if stat.S_ISDIR(spot.stat.st_mode):
                return cls(root, spot.path, None, home)
            if spot.stat.st_size > GREP_FILE_BYTES:
                raise ToolError(f"grep: {path} is over {GREP_FILE_BYTES // 2**20} MiB, too large to search")
            open_text("grep", spot, path, "searched").close()
            return cls(root, spot.path.parent, spot.path.name, home)

    def command(self, rg: str, query: _Query) -> list[str]:
        """ripgrep's argv, to run in ``directory``: in bubblewrap when it is installed."""
        argv = [rg, "--no-config", "--no-messages", "--hidden", "--sort=path", "--color=never"]
        argv += [f"--max-filesize={GREP_FILE_BYTES}", f"--regexp={query.pattern}"]
        if query.ignore_case:
            argv.append("--ignore-case")
        if query.mode == "content":
            argv += ["--json", *(f"{_CONTEXT_FLAGS[k]}={n}" for k, n in query.context.items())]
        else:
            argv += [
                "--null",
                "--with-filename",
                "--count" if query.mode == "count" else "--files-with-matches",
            ]
        if query.glob is not None:
            argv.append(f"--glob={query.glob}")
        argv.append("--glob=!.git")  # after the model's glob: the last glob that matches wins
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
        if self.home is not None:
            options += ["--tmpfs", str(self.home)]
        return [bwrap, *options, "--chdir", str(self.directory), "--", rg, *argv[1:]]


def _literal(path: str) -> str:
    """``path`` as a glob that matches it and nothing else."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


# -- running ripgrep ------------------------------------------------------------------


async def _search(argv: list[str], cwd: Path) -> tuple[bytes, bytes, int]:
    """Run ``argv`` in ``cwd``: (its output, at most OUTPUT_BYTES of it; its errors; its exit code).

    Stopped (its process group killed) after GREP_SECONDS, with a ToolError, or
    when the call is cancelled; stopped early, without error, once OUTPUT_BYTES
    are read.
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
        raise ToolError(f"grep: could not start ripgrep: {(e.strerror or str(e)).lower()}") from e
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(proc.stderr.read())
    try:
        async with asyncio.timeout(GREP_SECONDS):
            out = await _read_upto(proc.stdout, OUTPUT_BYTES)
            _kill(proc)  # when the output was cut short; a no-op once it has ended
            return out, await errors, await proc.wait()
    except TimeoutError:
        raise ToolError(f"grep: stopped after {GREP_SECONDS:g} s; narrow the pattern, path or glob") from None
    finally:
        _kill(proc)
        errors.cancel()
        await asyncio.shield(proc.wait())


async def _read_upto(stream: asyncio.StreamReader, limit: int) -> bytes:
    """What ``stream`` gives until its end or ``limit`` bytes, whichever comes first."""
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := await stream.read(min(65_536, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _failure(err: bytes) -> str:
    """Why ripgrep (or bubblewrap) failed, from what it said, as one line."""
    text = err.decode("utf-8", "replace")
    found = _ERROR_LINE.search(text)
    if "regex parse error" in text and found:
        return f"grep: pattern is not a valid regular expression: {found.group(1)}"
    last = next((line for line in reversed(text.splitlines()) if line.strip()), "no reason given")
    return f"grep: ripgrep failed: {last.removeprefix('rg: ')}"


# -- the report -----------------------------------------------------------------------


@dataclass
class _Report:
    """ripgrep's output as the model sees it: only what may be read, within the caps."""

    conf: Confinement
    target: _Target
    query: _Query
    lines: list[str] = field(default_factory=list)
    verdicts: dict[bytes, str | None] = field(default_factory=dict)
    """Each path met, and how it is shown (None: not at all)."""
    hidden: set[bytes] = field(default_factory=set)
    """Paths a deny rule hides."""

    def render(self, out: bytes) -> str:
        cut = len(out) >= OUTPUT_BYTES
        records = self._content(out) if self.query.mode == "content" else self._listed(out)
        more = False
        for line in records:
            if len(self.lines) == self.query.limit:
                more = True
                break
            self.lines.append(line)
        notes = []
        if more or (cut and len(self.lines) == self.query.limit):
            what = "matching lines" if self.query.mode == "content" else "files"
            notes.append(
                f"(only the first {self.query.limit} {what} are shown; narrow the pattern, path or glob)"
            )
        elif cut:
            notes.append(
                f"(ripgrep's output was cut at {OUTPUT_BYTES // 2**20} MiB; narrow the pattern, path or glob)"
            )
        if self.hidden:
            notes.append(hidden_note(len(self.hidden)))
        head = self.lines or [f"no matches for {self.query.pattern!r}"]
        return "\n".join(head + notes)

    def _listed(self, out: bytes) -> Iterator[str]:
        """files_with_matches (``path\\0``) and count (``path\\0N\\n``) records, complete ones only."""
        at = 0
        while (end := out.find(b"\0", at)) >= 0:
            raw, at = out[at:end], end + 1
            count = ""
            if self.query.mode == "count":
                stop = out.find(b"\n", at)
                if stop < 0:
                    return
                count, at = f":{out[at:stop].decode('ascii', 'replace')}", stop + 1
            if (shown := self._shown(raw)) is not None:
                yield shown + count

    def _content(self, out: bytes) -> Iterator[str]:
        """Matching lines (and context lines) from ripgrep's JSON messages, ``--`` between groups."""
        context = any(self.query.context.values())
        last: tuple[bytes, int] | None = None
        for line in out.splitlines():
            try:
                message = json.loads(line)
                kind, data = message["type"], message["data"]
                if kind not in ("match", "context"):
                    continue
                raw, number, text = _bytes(data["path"]), int(data["line_number"]), _bytes(data["lines"])
            except (ValueError, KeyError, TypeError):
                continue  # the last line, when the output was cut
            if (shown := self._shown(raw)) is None:
                continue
            if context and last is not None and last != (raw, number - 1):
                yield "--"
            last = (raw, number)
            mark = ":" if kind == "match" else "-"
            yield f"{shown}{mark}{number}{mark}{line_text(text)}"

    def _shown(self, raw: bytes) -> str | None:
        """How the path ripgrep printed (relative to the directory searched) is shown, or None to hide it."""
        if raw not in self.verdicts:
            self.verdicts[raw] = self._verdict(raw)
        return self.verdicts[raw]

    def _verdict(self, raw: bytes) -> str | None:
        relative = Path(os.path.normpath(os.fsdecode(raw)))
        path = self.target.directory / relative
        if relative.is_absolute() or ".." in relative.parts or ".git" in relative.parts:
            return None
        try:
            with beneath.resolve(path, self.conf.roots) as spot:
                found, st = spot.path, spot.stat
        except (beneath.Escape, OSError):
            return None
        if found != path or st is None or not stat.S_ISREG(st.st_mode):
            return None  # gone, or reached through a symlink since ripgrep saw it
        if self.conf.in_home(path, self.target.root):
            return None
        if self.conf.rule(path) is not None:
            self.hidden.add(raw)
            return None
        return self.conf.show(path)


def _bytes(value: dict[str, str]) -> bytes:
    """A path or line from ripgrep's JSON: ``{"text": ...}``, or ``{"bytes": base64}`` when not UTF-8."""
    if "bytes" in value:
        return base64.b64decode(value["bytes"])
    return value["text"].encode("utf-8", "surrogateescape")
