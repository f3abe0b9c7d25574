"""What a permission rule's specifier matches: the programs of a ``Bash`` command, or a file's path.

``Bash(npm test)`` matches that command exactly; ``*`` matches any text, and a
trailing `` *`` also matches nothing, so ``Bash(npm run test *)`` and the older
``Bash(npm run test:*)`` match ``npm run test`` and ``npm run test -x`` but not
``npm run tests``. ``Bash`` and ``Bash(*)`` match every command.

A ``Bash`` rule is read as one simple command (``teamrt.tools.shell.parse``)
and matched against each program the command runs (``Command``, from
``teamrt.tools.shell.programs``): as written for allow rules, by the program's
name alone for deny and ask rules (``command_patterns``). An argument that is
not plain text may be anything: a command matches *certainly* only when it
does whatever that argument turns out to be, and *possibly* when it may.

File specifiers are gitignore patterns (``*``, ``?``, ``**``; brackets are
literal): ``//abs/path`` is absolute, ``~/path`` is under the home directory,
``/path``, ``./path`` and ``dir/path`` are under the workspace, and a bare name
such as ``.env`` or ``*.pem`` matches at any depth under the workspace. A
pattern that matches a directory covers everything in it, and ``dir/**`` also
matches ``dir``, so ``Read(secrets/**)`` stops a grep of ``secrets`` too
(``path_pattern``).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from teamrt.tools.shell.command import Command
from teamrt.tools.shell.parse import ShellSyntaxError, parse


def _legacy_prefix(specifier: str) -> str:
    """``npm run test:*`` is the older spelling of ``npm run test *``."""
    return specifier[:-2] + " *" if specifier.endswith(":*") else specifier


@dataclass(frozen=True)
class _Glob:
    """Text in which each ``*`` matches any run of characters."""

    chunks: tuple[str, ...]
    """The literal text between the stars."""

    def matches(self, text: str) -> bool:
        return _regex(self.chunks).fullmatch(text) is not None

    def may_extend(self, prefix: str) -> bool:
        """Whether some text that starts with ``prefix`` matches."""
        first = self.chunks[0]
        return first.startswith(prefix) or (len(self.chunks) > 1 and prefix.startswith(first))

    def extends(self, prefix: str) -> bool:
        """Whether every text that starts with ``prefix`` matches: the glob ends in a star that can take
        all that follows some start of ``prefix``."""
        return (
            self.chunks[-1] == ""
            and len(self.chunks) > 1
            and _regex(self.chunks[:-1]).match(prefix) is not None
        )


@cache
def _regex(chunks: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(".*".join(map(re.escape, chunks)), re.DOTALL)


@dataclass(frozen=True)
class CommandPattern:
    """What a Bash rule matches: one or two globs over a command's text."""

    globs: tuple[_Glob, ...]
    path: bool
    """Whether the command is matched with its program as written (else by its name alone)."""

    def certain(self, command: Command) -> bool:
        """Whether the command matches however its arguments that are not plain text turn out."""
        text = command.text(path=self.path)
        if not any(glob.matches(text) for glob in self.globs):
            return False
        return not command.open or any(glob.extends(text + " ") for glob in self.globs)

    def possible(self, command: Command) -> bool:
        """Whether the command may match, its arguments that are not plain text being anything."""
        text = command.text(path=self.path)
        if any(glob.matches(text) for glob in self.globs):
            return True
        return command.open and any(glob.may_extend(text + " ") for glob in self.globs)


@cache
def command_patterns(specifier: str) -> tuple[CommandPattern, CommandPattern]:
    """A Bash rule's patterns: as written (for allow rules) and by program name (for deny and ask rules).

    Raises ValueError when the specifier is not one simple command."""
    try:
        script = parse(_legacy_prefix(specifier))
    except ShellSyntaxError as e:
        raise ValueError(e.reason) from None
    if len(script.commands) != 1 or script.substitution or script.functions or not script.commands[0].words:
        raise ValueError("a Bash rule matches one simple command; write one rule per command")
    words = [word.text for word in script.commands[0].words]
    name = [words[0].rsplit("/", 1)[-1], *words[1:]]
    return _pattern(words, path=True), _pattern(name, path=False)


def _pattern(words: list[str], *, path: bool) -> CommandPattern:
    text = " ".join(words)
    texts = (text[:-2], text) if text.endswith(" *") else (text,)
    return CommandPattern(tuple(_Glob(tuple(t.split("*"))) for t in texts), path)


def path_pattern(specifier: str, workspace: Path) -> re.Pattern[str]:
    """An absolute-path pattern for a gitignore-style specifier; its literal leading directories resolved."""
    root = os.path.realpath(workspace)
    if specifier.startswith("//"):
        base, rest = "/", specifier[2:]
    elif specifier == "~" or specifier.startswith("~/"):
        base, rest = str(Path.home()), specifier[2:]
    elif specifier.startswith("/") or "/" in specifier.rstrip("/"):
        base, rest = root, specifier
    else:
        base, rest = root, "**/" + specifier
    parts = [part for part in posixpath.normpath(base + "/" + rest.strip("/")).split("/") if part]
    literal = next((i for i, part in enumerate(parts) if "*" in part or "?" in part), len(parts))
    head = os.path.realpath("/" + "/".join(parts[:literal]))
    regex = "" if head == "/" else re.escape(head)
    for part in parts[literal:]:
        if part == "**":
            regex += "(?:/.+)?"
        else:
            regex += "/" + "".join(
                "[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in part
            )
    return re.compile(regex or "/", re.DOTALL)
