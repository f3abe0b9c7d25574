"""Permission rules and modes for tool calls, in the form Claude Code's settings use.

A rule is ``Tool`` or ``Tool(specifier)``. A call is checked against the deny
rules, then the ask rules, then the allow rules; the first that matches
decides, and when none does the mode decides.

Tool names match case-insensitively. ``Read`` rules cover ``read``, ``glob``
and ``grep``; ``Edit`` rules cover ``edit`` and ``write``; ``mcp__server``
and ``mcp__server__*`` cover every tool of that server; other names match
exactly. Only ``Bash`` and the file tools take a specifier.

``Bash(npm test)`` matches that command exactly; ``*`` matches any text, and a
trailing `` *`` also matches nothing, so ``Bash(npm run test *)`` and the older
``Bash(npm run test:*)`` match ``npm run test`` and ``npm run test -x`` but not
``npm run tests``. ``Bash`` and ``Bash(*)`` match every command.

A command is read with a real shell parser (``teamrt.tools.shellprograms``)
into the programs it runs: every part of a compound command, the bodies of
substitutions, and what wrappers run (``sudo rm x`` runs ``sudo`` and ``rm``).
A rule sees each as a program and its arguments, quotes removed and separated
by single spaces (``FOO=1 rm 'a' 2>/dev/null`` is ``rm a``: assignments and
redirections are left out). A command is allowed only when every program in it
matches an allow rule, with the program as written (``Bash(rm:*)`` does not
allow ``/tmp/x/rm``, ``Bash(./deploy.sh)`` allows only that path), and none of
its words comes from a substitution. It is denied (or asked about) when any
one may match a deny (or ask) rule by the program's name alone (``\\rm``,
``/bin/rm`` and ``sudo rm`` are all ``rm``), an argument that is not plain text
(``$X``, a glob) standing for anything.

Deny and ask rules fail closed: a command the reader cannot see through
(``eval``, ``bash -c``, ``git -c``, a program named by a variable, bash it
cannot parse, ...) is denied when any ``Bash`` deny rule has a specifier, asked
about when an ask rule has one, and never allowed by a rule with a specifier.
Rules judge the command line, not the programs it names: a script or a Makefile
runs whatever it holds, and the sandbox is what confines it.

File specifiers are gitignore patterns (``*``, ``?``, ``**``; brackets are
literal): ``//abs/path`` is absolute, ``~/path`` is under the home directory,
``/path``, ``./path`` and ``dir/path`` are under the workspace, and a bare name
such as ``.env`` or ``*.pem`` matches at any depth under the workspace. A
pattern that matches a directory covers everything in it, and ``dir/**`` also
matches ``dir``, so ``Read(secrets/**)`` stops a grep of ``secrets`` too. The
call's ``file_path`` (or ``path``) is resolved against the workspace, with
``..`` and symlinks resolved, before it is matched; a read, glob or grep without
one is about the workspace. The file tools also skip, in their walks, and refuse
every file a ``Read`` deny rule covers (``read_denial``).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from .shellparse import ShellSyntaxError, parse
from .shellprograms import Command, Reading, read


class Mode(StrEnum):
    DEFAULT = "default"
    ACCEPT_EDITS = "acceptEdits"
    PLAN = "plan"
    BYPASS = "bypassPermissions"


class Verdict(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    """One line naming the rule or the mode that decided."""


class RuleError(ValueError):
    """A rule that does not parse: ``text`` is the rule as written, ``problem`` what is wrong."""

    def __init__(self, text: str, problem: str) -> None:
        super().__init__(f"bad permission rule {_quote(text)}: {problem}")
        self.text = text
        self.problem = problem


_RULE = re.compile(r"(?P<tool>[^()]*)(?:\((?P<specifier>.*)\))?", re.DOTALL)
_TOOL_NAME = re.compile(r"[A-Za-z_][\w-]*")
_COVERED = {"read": frozenset({"read", "glob", "grep"}), "edit": frozenset({"edit", "write"})}
_FILE_TOOLS = frozenset({"read", "write", "edit", "glob", "grep"})
_EDIT_TOOLS = _COVERED["edit"]


@dataclass(frozen=True)
class Rule:
    tool: str
    """The tool name in lower case (``bash``, ``edit``, ``mcp__github``)."""
    specifier: str | None
    """What is inside the parentheses, stripped; None for every use of the tool."""
    text: str
    """The rule as written."""

    @classmethod
    def parse(cls, text: str) -> Rule:
        if not text.strip():
            raise RuleError(text, "the rule is empty")
        match = _RULE.fullmatch(text.strip())
        if match is None:
            raise RuleError(text, "unbalanced parentheses; write Tool or Tool(specifier)")
        tool = match["tool"].strip()
        if not tool:
            raise RuleError(text, "no tool name before the parentheses")
        if not _TOOL_NAME.fullmatch(tool.removesuffix("__*")):
            raise RuleError(text, f"{tool!r} is not a tool name")
        tool, specifier = tool.lower(), match["specifier"]
        if specifier is None:
            return cls(tool, None, text)
        specifier = specifier.strip()
        if not specifier:
            raise RuleError(text, f"empty parentheses; write {match['tool'].strip()} to match every use")
        if tool == "bash":
            if specifier == "*":
                return cls(tool, None, text)
            try:
                _command_patterns(specifier)
            except ValueError as e:
                raise RuleError(text, str(e)) from None
        elif tool not in _FILE_TOOLS:
            raise RuleError(
                text, "only Bash and the file tools (Read, Edit, Write, Glob, Grep) take a specifier"
            )
        return cls(tool, specifier, text)

    def covers(self, tool: str) -> bool:
        """Whether the rule is about ``tool`` (a lower-case name), whatever its input."""
        if self.tool in _COVERED:
            return tool in _COVERED[self.tool]
        if self.tool.endswith("__*"):
            return tool.startswith(self.tool[:-1])
        if self.tool.startswith("mcp__") and "__" not in self.tool[5:]:
            return tool.startswith(self.tool + "__")
        return tool == self.tool


class Permissions:
    """The mode and the rules an agent's tool calls are decided by."""

    def __init__(
        self,
        mode: Mode | str = Mode.DEFAULT,
        *,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        ask: Iterable[str] = (),
    ) -> None:
        try:
            self.mode = Mode(mode)
        except ValueError:
            raise ValueError(f"unknown permission mode {mode!r}; use one of: {', '.join(Mode)}") from None
        self.allow = tuple(Rule.parse(text) for text in allow)
        self.deny = tuple(Rule.parse(text) for text in deny)
        self.ask = tuple(Rule.parse(text) for text in ask)

    def decide(self, tool: str, input: Mapping[str, Any], *, read_only: bool, workspace: Path) -> Decision:
        """Deny rules, then ask rules, then allow rules, then the mode; paths are under ``workspace``."""
        name = tool.lower()
        reading = read(_command(input)) if name == "bash" else None
        for verdict, rules in ((Verdict.DENY, self.deny), (Verdict.ASK, self.ask)):
            decision = _checked(verdict, rules, name, input, workspace, reading)
            if decision is not None:
                return decision
        allowing = _allowing(self.allow, name, input, workspace, reading)
        if allowing:
            texts = ", ".join(_quote(rule.text) for rule in allowing)
            return Decision(Verdict.ALLOW, f"allowed by rule{'s' if len(allowing) > 1 else ''} {texts}")
        return self._by_mode(tool, input, read_only, workspace)

    def read_denial(self, path: Path, workspace: Path) -> str | None:
        """The deny rule (as written) that forbids reading the canonical ``path``, or None.

        These are the ``Read`` rules (they cover read, glob and grep): the file
        tools refuse such a path and leave it out of their walks."""
        for rule in self.deny:
            if rule.covers("read") and (rule.specifier is None or _covers(rule.specifier, path, workspace)):
                return rule.text
        return None

    def _by_mode(self, tool: str, input: Mapping[str, Any], read_only: bool, workspace: Path) -> Decision:
        mode = self.mode
        if mode is Mode.BYPASS:
            return Decision(Verdict.ALLOW, f"{tool} is allowed in {mode} mode")
        if read_only:
            return Decision(Verdict.ALLOW, f"{tool} is read-only ({mode} mode)")
        if mode is Mode.PLAN:
            return Decision(Verdict.DENY, f"plan mode is read-only: {tool} is not allowed")
        if mode is Mode.ACCEPT_EDITS and tool.lower() in _EDIT_TOOLS:
            target = _target(input, workspace)
            if target is not None:
                if target.is_relative_to(os.path.realpath(workspace)):
                    return Decision(Verdict.ALLOW, f"{tool} inside the workspace is allowed in {mode} mode")
                return Decision(Verdict.ASK, f"{tool} outside the workspace needs approval in {mode} mode")
        return Decision(Verdict.ASK, f"{tool} needs approval in {mode} mode")


def _checked(
    verdict: Verdict,
    rules: Sequence[Rule],
    tool: str,
    input: Mapping[str, Any],
    workspace: Path,
    reading: Reading | None,
) -> Decision | None:
    """The decision of the deny (or ask) ``rules`` about a call, or None when none applies."""
    by = "denied by" if verdict is Verdict.DENY else "approval required by"
    for rule in rules:
        why = _hits(rule, tool, input, workspace, reading)
        if why is not None:
            return Decision(verdict, f"{by} rule {_quote(rule.text)}{why}")
    if reading is not None and reading.opaque:
        specific = next((rule for rule in rules if rule.tool == "bash" and rule.specifier), None)
        if specific is not None:
            return Decision(verdict, _unreadable(reading.opaque, specific, verdict))
    return None


def _hits(
    rule: Rule, tool: str, input: Mapping[str, Any], workspace: Path, reading: Reading | None
) -> str | None:
    """None when a deny or ask rule does not match the call; else "" or why it may match.

    For bash, the rule matches when any one of the command's programs may match it."""
    if not rule.covers(tool):
        return None
    if rule.specifier is None:
        return ""
    if reading is None:
        subject = _subject(tool, input, workspace)
        return "" if subject is not None and _covers(rule.specifier, subject, workspace) else None
    _, by_name = _command_patterns(rule.specifier)
    maybe = None
    for command in reading.commands:
        if by_name.certain(command):
            return ""
        if maybe is None and by_name.possible(command):
            maybe = f" (`{_brief(command.source)}` may match it: not all its words are plain text)"
    return maybe


def _unreadable(reason: str, rule: Rule, verdict: Verdict) -> str:
    """Why an opaque command is denied or asked about while ``rule`` is in force."""
    if verdict is Verdict.DENY:
        return (
            f"cannot tell what this command runs ({reason}), so rule {_quote(rule.text)} may forbid it;"
            " write the command out plainly"
        )
    return f"cannot tell what this command runs ({reason}), so rule {_quote(rule.text)} may apply"


def _allowing(
    rules: Sequence[Rule], tool: str, input: Mapping[str, Any], workspace: Path, reading: Reading | None
) -> list[Rule]:
    """The allow rules that together allow the call, or none.

    A bash command is allowed by a rule for the whole tool, or when it can be
    read to its end, has no substitution, and each of its programs certainly
    matches some rule.
    """
    covering = [rule for rule in rules if rule.covers(tool)]
    whole = next((rule for rule in covering if rule.specifier is None), None)
    if whole is not None:
        return [whole]
    if reading is None:
        subject = _subject(tool, input, workspace)
        if subject is None:
            return []
        return [rule for rule in covering if _covers(rule.specifier or "", subject, workspace)][:1]
    if reading.opaque or reading.substitution or not reading.commands:
        return []
    used: list[Rule] = []
    for command in reading.commands:
        found = next((r for r in covering if _command_patterns(r.specifier or "")[0].certain(command)), None)
        if found is None:
            return []
        if found not in used:
            used.append(found)
    return used


def _command(input: Mapping[str, Any]) -> str:
    command = input.get("command")
    return command if isinstance(command, str) else ""


def _brief(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


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
class _Pattern:
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
def _command_patterns(specifier: str) -> tuple[_Pattern, _Pattern]:
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


def _pattern(words: list[str], *, path: bool) -> _Pattern:
    text = " ".join(words)
    texts = (text[:-2], text) if text.endswith(" *") else (text,)
    return _Pattern(tuple(_Glob(tuple(t.split("*"))) for t in texts), path)


def _target(input: Mapping[str, Any], workspace: Path) -> Path | None:
    """The call's ``file_path`` or ``path``, absolute, with ``..`` and symlinks resolved."""
    path = input.get("file_path", input.get("path"))
    if not isinstance(path, str) or not path:
        return None
    try:
        return Path(os.path.realpath(os.path.join(workspace, path)))
    except ValueError:  # a NUL or a lone surrogate: no file has that name, and the tool says so
        return None


def _subject(tool: str, input: Mapping[str, Any], workspace: Path) -> Path | None:
    """What a file tool's call is about: its target, or the workspace for a read, glob or grep without one."""
    target = _target(input, workspace)
    if target is None and tool in _COVERED["read"]:
        return Path(os.path.realpath(workspace))
    return target


def _covers(specifier: str, path: Path, workspace: Path) -> bool:
    """Whether a file specifier matches the canonical ``path`` or a directory above it."""
    pattern = _path_pattern(specifier, workspace)
    return any(pattern.fullmatch(str(p)) for p in (path, *path.parents))


def _path_pattern(specifier: str, workspace: Path) -> re.Pattern[str]:
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


def _quote(text: str) -> str:
    """``text`` in double quotes on one line."""
    return json.dumps(text, ensure_ascii=False)
