"""The ``Grep`` tool: Claude Code's schema, run by ripgrep (``teamrt.tools.files.rg``), its output filtered by
what may be read.

ripgrep searches in parallel, so its output comes in no set order; the
report sorts it by path before anything is cut, so the same search shows the
same lines. Only the files that are shown are checked (and the ones a deny
rule hides, which are counted), so a search of a large tree costs about what
ripgrep alone does.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from teamrt.tools import toolargs
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema
from teamrt.tools.files import beneath, rg
from teamrt.tools.files.confine import FileRoots, hidden_note
from teamrt.tools.files.textfile import line_text, open_text

OP = "Grep"
GREP_FILES = 200
"""Files listed at most in files_with_matches and count modes."""
GREP_LINES = 300
"""Lines shown at most in content mode."""
GREP_FILE_BYTES = 5 * 1024 * 1024
"""Larger files are skipped."""
GREP_SECONDS = 20.0
"""Time limit of one search."""
PATTERN_CHARS = 10_000

_MODES = ("files_with_matches", "content", "count")
_CONTEXT = {"-A": "--after-context", "-B": "--before-context", "-C": "--context"}
_TYPE = re.compile(r"[A-Za-z0-9_+-]{1,64}")
_NARROW = "narrow the pattern, path or glob"


class Grep:
    name = OP
    description = (
        "Search file contents with ripgrep. The pattern is a Rust regular expression (ripgrep's syntax: like"
        " Python's, without look-around or backreferences; escape literal braces as `\\{`); by default it"
        " matches within one line, with multiline true `.` also matches a line break and a match may span"
        " lines. output_mode: files_with_matches (default; the files that match), content (matching lines"
        " as path:line:text, with -A/-B/-C lines of context as path-line-text; -n false leaves out the line"
        " numbers) or count (matching lines per file). Narrow with path, glob (such as `*.py` or"
        " `*.{ts,tsx}`; without a '/' it matches file names anywhere) or type (ripgrep's file types: py, js,"
        " ts, rust, go, java ...). Hidden files are searched; files that .gitignore excludes (unless glob"
        f" names them, as with rg), binary files, files over {GREP_FILE_BYTES // 2**20} MiB, .git and"
        " teamrt's home are not. Results are sorted by"
        f" path; at most {GREP_FILES} files or {GREP_LINES} lines are shown (head_limit: fewer; offset skips"
        f" that many first, to page on). A search stops after {GREP_SECONDS:g} s."
    )
    input_schema = object_schema(
        {
            "pattern": {"type": "string", "description": "Rust regular expression (ripgrep's syntax)."},
            "path": {
                "type": "string",
                "description": "File or directory to search (default: the workspace).",
            },
            "glob": {"type": "string", "description": "Only files matching this glob pattern (rg --glob)."},
            "type": {"type": "string", "description": "Only files of this ripgrep file type (rg --type)."},
            "output_mode": {"type": "string", "enum": list(_MODES), "description": "What to show."},
            "-i": {"type": "boolean", "description": "Ignore case (default false)."},
            "-n": {"type": "boolean", "description": "Line numbers in content mode (default true)."},
            "-A": {"type": "integer", "minimum": 0, "description": "Lines after each match (content)."},
            "-B": {"type": "integer", "minimum": 0, "description": "Lines before each match (content)."},
            "-C": {"type": "integer", "minimum": 0, "description": "Lines around each match (content)."},
            "multiline": {
                "type": "boolean",
                "description": "Let a match span lines (rg -U --multiline-dotall).",
            },
            "head_limit": {
                "type": "integer",
                "minimum": 0,
                "description": "Show at most this many lines or files (0: as many as allowed).",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Skip this many lines or files first.",
            },
        },
        "pattern",
    )
    read_only = True

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = _Query.of(input)
        binary = rg.required(OP)
        conf = FileRoots.of(ctx)
        scope = await asyncio.to_thread(rg.Scope.of, conf, OP, query.path, _searchable(query.path))
        found = await rg.run(OP, scope.argv(binary, query.options()), scope.directory, GREP_SECONDS, _NARROW)
        if (failure := found.failure(OP)) is not None:
            raise ToolError(failure)
        return ToolResult(await asyncio.to_thread(_render, rg.Paths(conf, scope), query, found))


def _searchable(path: str) -> Callable[[beneath.Spot], None]:
    """The check of a single file to search: a text file of at most GREP_FILE_BYTES."""

    def check(spot: beneath.Spot) -> None:
        assert spot.stat is not None
        if spot.stat.st_size > GREP_FILE_BYTES:
            raise ToolError(f"{OP}: {path} is over {GREP_FILE_BYTES // 2**20} MiB, too large to search")
        open_text(OP, spot, path, "searched").close()

    return check


@dataclass(frozen=True)
class _Query:
    """What the model asked for, checked."""

    pattern: str
    path: str
    mode: str
    ignore_case: bool
    glob: str | None
    type: str | None
    context: dict[str, int]
    numbers: bool
    multiline: bool
    limit: int
    offset: int

    @classmethod
    def of(cls, input: dict[str, Any]) -> _Query:
        pattern = toolargs.text(input, OP, "pattern")
        if "\0" in pattern or len(pattern) > PATTERN_CHARS:
            raise ToolError(f"{OP}: pattern must be at most {PATTERN_CHARS} characters, without NUL")
        mode = toolargs.text(input, OP, "output_mode", "files_with_matches")
        if mode not in _MODES:
            raise ToolError(f"{OP}: output_mode must be one of {', '.join(_MODES)}")
        glob = toolargs.text(input, OP, "glob") if "glob" in input else None
        if glob is not None and (not glob or "\0" in glob or len(glob) > PATTERN_CHARS):
            raise ToolError(f"{OP}: glob must be a non-empty pattern of at most {PATTERN_CHARS} characters")
        kind = toolargs.text(input, OP, "type") if "type" in input else None
        if kind is not None and not _TYPE.fullmatch(kind):
            raise ToolError(f"{OP}: type must be the name of one of ripgrep's file types, such as py or js")
        cap = GREP_LINES if mode == "content" else GREP_FILES
        return cls(
            pattern=pattern,
            path=toolargs.path(input, OP, "path"),
            mode=mode,
            ignore_case=toolargs.flag(input, OP, "-i"),
            glob=glob,
            type=kind,
            context={k: toolargs.whole(input, OP, k, 0, least=0) for k in _CONTEXT if k in input},
            numbers=toolargs.flag(input, OP, "-n") if "-n" in input else True,
            multiline=toolargs.flag(input, OP, "multiline"),
            limit=min(cap, toolargs.whole(input, OP, "head_limit", cap, least=0) or cap),
            offset=toolargs.whole(input, OP, "offset", 0, least=0),
        )

    def options(self) -> list[str]:
        """ripgrep's options for this search."""
        options = [f"--max-filesize={GREP_FILE_BYTES}", f"--regexp={self.pattern}"]
        if self.ignore_case:
            options.append("--ignore-case")
        if self.multiline:
            options += ["--multiline", "--multiline-dotall"]
        if self.mode == "content":
            options += ["--json", *(f"{_CONTEXT[k]}={n}" for k, n in self.context.items())]
        else:
            options += [
                "--null",
                "--with-filename",
                "--count" if self.mode == "count" else "--files-with-matches",
            ]
        if self.type is not None:
            options.append(f"--type={self.type}")
        if self.glob is not None:
            options.append(f"--glob={self.glob}")
        return options


# -- the report -----------------------------------------------------------------------


def _render(paths: rg.Paths, query: _Query, found: rg.Output) -> str:
    """ripgrep's output as the model sees it: sorted by path, only what may be read, within the caps."""
    with paths:
        records = (
            _content(paths, query, found.out) if query.mode == "content" else _listed(paths, query, found.out)
        )
        lines: list[str] = []
        skipped = 0
        more = False
        for line in records:
            if skipped < query.offset:
                skipped += 1
            elif len(lines) == query.limit:
                more = True
                break
            else:
                lines.append(line)
    what = "lines" if query.mode == "content" else "files"
    notes = []
    if more or (found.cut and len(lines) == query.limit):
        end = skipped + len(lines)
        which = f"the first {end} {what}" if not skipped else f"{what} {skipped + 1} to {end}"
        notes.append(f"(only {which} are shown; {_NARROW}, or pass offset={end} for the next ones)")
    elif found.cut:
        notes.append(f"(ripgrep's output was cut at {rg.OUTPUT_BYTES // 2**20} MiB; {_NARROW})")
    if paths.hidden:
        notes.append(hidden_note(paths.hidden))
    if lines:
        head = lines
    elif skipped:
        head = [f"(offset {query.offset} skips all {skipped} {what})"]
    else:
        head = [f"no matches for {query.pattern!r}"]
    return "\n".join(head + notes)


def _listed(paths: rg.Paths, query: _Query, out: bytes) -> Iterator[str]:
    """files_with_matches (``path\\0``) and count (``path\\0N\\n``) records, complete ones only, by path."""
    records: list[tuple[bytes, str]] = []
    at = 0
    while (end := out.find(b"\0", at)) >= 0:
        raw, at = out[at:end], end + 1
        count = ""
        if query.mode == "count":
            stop = out.find(b"\n", at)
            if stop < 0:
                break
            count, at = f":{out[at:stop].decode('ascii', 'replace')}", stop + 1
        records.append((raw, count))
    records.sort()
    for raw, count in records:
        if (file := paths.check(raw)) is not None:
            yield file.shown + count


def _content(paths: rg.Paths, query: _Query, out: bytes) -> Iterator[str]:
    """Matching lines (and context lines) from ripgrep's JSON messages, by path, ``--`` between groups."""
    context = any(query.context.values())
    last: tuple[bytes, int] | None = None
    for raw, messages in _by_file(out):
        if (file := paths.check(raw)) is None:
            continue
        for message in messages:
            try:
                data = json.loads(message)["data"]
                number, text = int(data["line_number"]), _bytes(data["lines"])
                if _bytes(data["path"]) != raw:
                    continue
            except (ValueError, KeyError, TypeError):
                continue  # the last line, when the output was cut
            mark = ":" if message.startswith(b'{"type":"match"') else "-"
            for at, one in enumerate(text.removesuffix(b"\n").split(b"\n"), number):
                if context and last is not None and last != (raw, at - 1):
                    yield "--"
                last = (raw, at)
                where = f"{mark}{at}" if query.numbers else ""
                yield f"{file.shown}{where}{mark}{line_text(one)}"


def _by_file(out: bytes) -> list[tuple[bytes, list[bytes]]]:
    """ripgrep's JSON lines as (path, its match and context messages) per file, sorted by path.

    ripgrep prints each file's messages together, between a ``begin`` and an
    ``end`` message; only the ``begin`` messages are parsed here, the others
    when they are shown.
    """
    files: list[tuple[bytes, list[bytes]]] = []
    messages: list[bytes] | None = None
    for line in out.split(b"\n"):
        if line.startswith(b'{"type":"begin"'):
            try:
                files.append((_bytes(json.loads(line)["data"]["path"]), messages := []))
            except (ValueError, KeyError, TypeError):
                messages = None
        elif messages is not None and line.startswith((b'{"type":"match"', b'{"type":"context"')):
            messages.append(line)
    files.sort(key=lambda file: file[0])
    return files


def _bytes(value: dict[str, str]) -> bytes:
    """A path or line from ripgrep's JSON: ``{"text": ...}``, or ``{"bytes": base64}`` when not UTF-8."""
    if "bytes" in value:
        return base64.b64decode(value["bytes"])
    return value["text"].encode("utf-8", "surrogateescape")
