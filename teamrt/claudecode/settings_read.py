"""Reading Claude Code's settings files without ever stopping a run: each present file is used, or left
out with one line saying why (``teamrt.claudecode.settings`` merges what is used).

Claude Code reads a settings file as JSON with comments and trailing commas and leaves out, with a
notice, a file it cannot parse; teamrt does the same (``loads_jsonc``), and more carefully for the rules
that restrict: a file left out for its content still has its ``deny`` and ``ask`` lists read from its
text (``LeftOut.salvaged``), and a file that cannot be read at all is said to have rules NOT in force.
A file that is not UTF-8 is read with each bad byte as U+FFFD, as Claude Code (Node) reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.claudecode.paths import settings_files
from teamrt.claudecode.reading import loads_jsonc, read_head, salvage_rules

MAX_BYTES = 1 << 20
"""A settings file larger than this is left out, its first ``MAX_BYTES`` searched for deny and ask rules
(Claude Code's are a few kilobytes)."""
NOT_IN_FORCE = "its deny and ask rules, if it has any, are NOT in force"


@dataclass(frozen=True)
class SettingsFile:
    scope: str
    """``user``, ``project`` or ``local``."""
    path: Path
    data: dict[str, Any]
    """The file's JSON object."""
    tracked: bool = True
    """Whether git tracks the file (so it came with the repository); True when git cannot tell."""
    duplicates: tuple[str, ...] = ()
    """The keys an object of it names twice (the last value counted): ``teamrt trust`` refuses such a
    repository file, whose text may show a reader another value than the one that counts."""

    @property
    def repository(self) -> bool:
        """Whether the file came with the repository, so is someone else's word: the project's
        ``.claude/settings.json``, and a ``settings.local.json`` that git tracks."""
        return self.scope == "project" or (self.scope == "local" and self.tracked)


@dataclass(frozen=True)
class LeftOut:
    """A settings file that is present but not used, and the restricting rules found in its text."""

    scope: str
    path: Path
    why: str
    """One line, ``<path>: ...``."""
    salvaged: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """``deny`` and ``ask`` rule texts found in it (``salvage_rules``)."""


@dataclass(frozen=True)
class SettingsRead:
    """The settings files of a project as read: those used, those left out, and one line per problem
    (each file left out, each key named twice, bytes that are not UTF-8)."""

    files: tuple[SettingsFile, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    warnings: tuple[str, ...] = ()


class _Unusable(Exception):
    """A file left out: ``why`` says so; ``text`` is what could be read of it (for salvage), if any."""

    def __init__(self, why: str, text: str | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.text = text


def read_settings(project: Path) -> SettingsRead:
    """The settings files present for ``project``, the lowest precedence first; never raises."""
    files: list[SettingsFile] = []
    left_out: list[LeftOut] = []
    warnings: list[str] = []
    for scope, path in settings_files(project):
        shown = str(path.relative_to(project)) if path.is_relative_to(project) else str(path)
        try:
            data = _read(path, shown, None if scope == "user" else project, warnings)
        except _Unusable as e:
            salvaged = salvage_rules(e.text) if e.text is not None else {}
            count = sum(len(rules) for rules in salvaged.values())
            if e.text is None:
                tail = NOT_IN_FORCE
            elif count:
                tail = (
                    f"the {count} deny and ask rules found in its text still apply"
                    if count > 1
                    else "the one deny or ask rule found in its text still applies"
                )
            else:
                tail = "no deny or ask rule was found in its text"
            line = f"{shown}: {e.why}: left out, as Claude Code leaves it out; {tail}"
            left_out.append(LeftOut(scope, path, line, salvaged))
            warnings.append(line)
            continue
        if data is not None:
            tracked = scope != "user" and (scope == "project" or git_tracks(project, path))
            files.append(SettingsFile(scope, path, data[0], tracked, data[1]))
    return SettingsRead(tuple(files), tuple(left_out), tuple(warnings))


def read_settings_files(project: Path) -> list[SettingsFile]:
    """The settings files used for ``project``, the lowest precedence first (``read_settings`` says what
    is left out, and why); never raises."""
    return list(read_settings(project).files)


def git_tracks(project: Path, path: Path) -> bool:
    """Whether git tracks ``path`` in ``project`` (True when git cannot say: the safe answer). git runs
    with teamrt's pinned settings: nothing the repository's configuration names (an fsmonitor) runs."""
    from teamrt.worktree.git import SAFE

    try:
        done = subprocess.run(
            ["git", *SAFE, "-C", str(project), "ls-files", "--error-unmatch", "--", str(path)],
            capture_output=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return True
    if done.returncode == 0:
        return True
    return b"not a git repository" not in done.stderr and b"did not match" not in done.stderr


def _read(
    path: Path, shown: str, within: Path | None, warnings: list[str]
) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """The JSON object in ``path`` (``shown`` so in lines) and its keys named twice; None when there is
    no file. ``within``: where
    it must resolve to.
    Raises ``_Unusable`` for a file that is present but cannot be used."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _Unusable(f"cannot be read ({e.strerror})") from None
    if within is not None:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(within)):
            raise _Unusable(f"a link to {real}, outside the project, which teamrt does not read")
    try:
        head = read_head(path, MAX_BYTES + 1)
    except OSError as e:
        raise _Unusable(f"cannot be read ({e.strerror})") from None
    if head is None:
        raise _Unusable("not a regular file")
    raw, size = head
    if max(size, len(raw)) > MAX_BYTES:
        raise _Unusable(f"larger than {MAX_BYTES // 1024} KiB", _text(raw[:MAX_BYTES]))
    text = _text(raw)
    if "\ufffd" in text and b"\xef\xbf\xbd" not in raw:
        warnings.append(
            f"{shown}: not UTF-8 text: each byte that is not was read as U+FFFD, as Claude Code reads it"
        )
    try:
        read = loads_jsonc(text)
    except RecursionError:
        raise _Unusable("JSON nested too deeply", text) from None
    except json.JSONDecodeError as e:
        raise _Unusable(f"not valid JSON (line {e.lineno} column {e.colno}: {e.msg})", text) from None
    if not isinstance(read.value, dict):
        raise _Unusable(f"holds {kind_of(read.value)}, not a JSON object", text)
    for key in read.duplicates:
        name = json.dumps(key, ensure_ascii=True)[:80]
        warnings.append(
            f"{shown}: key {name} is named twice in one object: the last value counts, as in Claude Code"
        )
    return read.value, read.duplicates


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removeprefix("\ufeff")


def kind_of(value: Any) -> str:
    """A JSON value's kind in words."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
