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

A ``Spawn`` rule's specifier names a sum a spawn's forecast cost is compared
with, a role, or both: ``Spawn(cost>$2)``, ``Spawn(cost>=$0.50)``,
``Spawn(reviewer, cost>$1)``, ``Spawn(reviewer)`` (``spawn_limit``). The sum is
dollars written as plain digits (at most nine before the point and six after),
so no exponent, sign, infinity or NaN can reach the comparison.
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


_COST = re.compile(r"cost\s*(?P<op>>=|>)\s*\$(?P<usd>\d{1,9}(?:\.\d{1,6})?)")
_COST_LIKE = re.compile(r"cost\b.*", re.DOTALL)
_ROLE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
"""A role as the team file names roles (``teamrt.team``); ``fork`` for the forks of an agent."""


@dataclass(frozen=True)
class SpawnLimit:
    """What a ``Spawn`` rule matches: the spawns of ``role`` (None: of any role) whose forecast cost is
    above ``usd`` (``inclusive``: at or above it; None: whatever it costs)."""

    role: str | None
    usd: float | None
    inclusive: bool = False

    def passes(self, usd: float) -> bool:
        """Whether a forecast of ``usd`` dollars passes the rule's sum (always, for a rule without one)."""
        if self.usd is None:
            return True
        return usd >= self.usd if self.inclusive else usd > self.usd


@cache
def spawn_limit(specifier: str) -> SpawnLimit:
    """A ``Spawn`` rule's specifier read: ``cost>$2``, ``cost>=$0.5``, ``reviewer``, ``reviewer, cost>$1``.

    Raises ValueError, saying what is wrong, for anything else."""
    role: str | None = None
    cost: re.Match[str] | None = None
    for part in (p.strip() for p in specifier.split(",")):
        if _COST_LIKE.fullmatch(part):
            match = _COST.fullmatch(part)
            if match is None:
                raise ValueError(
                    f"{part!r} is not a cost limit: write cost>$2 or cost>=$0.50 (dollars as plain digits,"
                    " at most 9 before the point and 6 after; > or >= only)"
                )
            if cost is not None:
                raise ValueError("a Spawn rule takes one cost limit")
            cost = match
        elif _ROLE.fullmatch(part):
            if role is not None:
                raise ValueError("a Spawn rule names one role; write one rule per role")
            role = part
        else:
            raise ValueError(
                f"{part!r} is neither a role name nor a cost limit: write Spawn(cost>$2),"
                " Spawn(reviewer, cost>$1) or Spawn(reviewer)"
            )
    if cost is None:
        return SpawnLimit(role, None)
    return SpawnLimit(role, float(cost["usd"]), inclusive=cost["op"] == ">=")


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
