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
``npm run tests``. ``Bash`` and ``Bash(*)`` match every command. A compound
command (``&&``, ``||``, ``;``, ``|``, ``&``, newlines, subshells) is split into
its simple commands: it is allowed only when every one matches an allow rule,
and denied (or asked about) when any one matches a deny (or ask) rule. A command
with a substitution (``$(...)``, backticks, ``<(...)``) is never allowed by a
rule with a specifier.

File specifiers are gitignore patterns (``*``, ``?``, ``**``; brackets are
literal): ``//abs/path`` is absolute, ``~/path`` is under the home directory,
``/path``, ``./path`` and ``dir/path`` are under the workspace, and a bare name
such as ``.env`` or ``*.pem`` matches at any depth under the workspace. A
pattern that matches a directory covers everything in it, and ``dir/**`` also
matches ``dir``, so ``Read(secrets/**)`` stops a grep of ``secrets`` too. The
call's ``file_path`` (or ``path``) is resolved against the workspace, with
``..`` and symlinks resolved, before it is matched; a call without one is not
matched.

This is a convenience layer that spares asking about calls someone has
already judged, not confinement: a rule sees a command's text, not what it
does (``Bash(git:*)`` allows ``git -c core.sshCommand=... fetch``). The file
tools' workspace check and bash's sandbox confine.
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
            commands, substitution = _split(_legacy_prefix(specifier))
            if len(commands) != 1 or substitution:
                raise RuleError(text, "a Bash rule matches one simple command; write one rule per command")
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
        for rule in self.deny:
            if _hits(rule, name, input, workspace):
                return Decision(Verdict.DENY, f"denied by rule {_quote(rule.text)}")
        for rule in self.ask:
            if _hits(rule, name, input, workspace):
                return Decision(Verdict.ASK, f"approval required by rule {_quote(rule.text)}")
        allowing = _allowing(self.allow, name, input, workspace)
        if allowing:
            texts = ", ".join(_quote(rule.text) for rule in allowing)
            return Decision(Verdict.ALLOW, f"allowed by rule{'s' if len(allowing) > 1 else ''} {texts}")
        return self._by_mode(tool, input, read_only, workspace)

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


def _hits(rule: Rule, tool: str, input: Mapping[str, Any], workspace: Path) -> bool:
    """Whether a deny or ask rule matches the call: for bash, any one of its commands."""
    if not rule.covers(tool):
        return False
    if rule.specifier is None:
        return True
    if rule.tool == "bash":
        commands, _ = _split(_command(input))
        return any(_command_pattern(rule.specifier).fullmatch(command) for command in commands)
    return _path_matches(rule.specifier, input, workspace)


def _allowing(rules: Sequence[Rule], tool: str, input: Mapping[str, Any], workspace: Path) -> list[Rule]:
    """The allow rules that together allow the call, or none.

    A bash command is allowed by a rule for the whole tool, or when each of its
    commands matches some rule and it has no substitution.
    """
    covering = [rule for rule in rules if rule.covers(tool)]
    whole = next((rule for rule in covering if rule.specifier is None), None)
    if whole is not None:
        return [whole]
    if tool != "bash":
        return [rule for rule in covering if _path_matches(rule.specifier or "", input, workspace)][:1]
    commands, substitution = _split(_command(input))
    if substitution or not commands:
        return []
    used: list[Rule] = []
    for command in commands:
        found = next((r for r in covering if _command_pattern(r.specifier or "").fullmatch(command)), None)
        if found is None:
            return []
        if found not in used:
            used.append(found)
    return used


def _command(input: Mapping[str, Any]) -> str:
    command = input.get("command")
    return command if isinstance(command, str) else ""


def _legacy_prefix(specifier: str) -> str:
    """``npm run test:*`` is the older spelling of ``npm run test *``."""
    return specifier[:-2] + " *" if specifier.endswith(":*") else specifier


@cache
def _command_pattern(specifier: str) -> re.Pattern[str]:
    (command,), _ = _split(_legacy_prefix(specifier))
    command, tail = (command[:-2], "(?: .*)?") if command.endswith(" *") else (command, "")
    return re.compile(".*".join(map(re.escape, command.split("*"))) + tail, re.DOTALL)


def _split(command: str) -> tuple[list[str], bool]:
    """The simple commands in ``command``, and whether it has a substitution.

    Quotes and backslashes are respected; unquoted runs of blanks become one
    space; the body of a substitution or subshell is a command of its own.
    """
    commands: list[str] = []
    current: list[str] = []
    open_: list[str] = []  # '"' inside double quotes, '(' inside parentheses, '`' inside backticks
    substitution = False

    def cut() -> None:
        text = "".join(current).strip()
        if text:
            commands.append(text)
        current.clear()

    i, end = 0, len(command)
    while i < end:
        c = command[i]
        quoted = bool(open_) and open_[-1] == '"'
        step = 1
        if c == "\\":
            step = 2
            if command[i + 1 : i + 2] != "\n":  # a backslash-newline joins lines
                current.append(command[i : i + 2])
        elif c == "'" and not quoted:
            close = command.find("'", i + 1)
            step = (close + 1 if close >= 0 else end) - i
            current.append(command[i : i + step])
        elif c == '"':
            if quoted:
                open_.pop()
            else:
                open_.append('"')
            current.append(c)
        elif c == "`":
            substitution = True
            if open_ and open_[-1] == "`":
                open_.pop()
            else:
                open_.append("`")
            cut()
        elif command.startswith("$(", i) or (not quoted and command.startswith(("<(", ">("), i)):
            substitution, step = True, 2
            open_.append("(")
            cut()
        elif quoted:
            current.append(c)
        elif c == "(":
            open_.append("(")
            cut()
        elif c == ")":
            if open_ and open_[-1] == "(":
                open_.pop()
            cut()
        elif c in ";\n" or (c == "|" and command[i - 1 : i] != ">") or (c == "&" and _is_and(command, i)):
            cut()
        elif c in " \t":
            if current and current[-1] != " ":
                current.append(" ")
        else:
            current.append(c)
        i += step
    cut()
    return commands, substitution


def _is_and(command: str, i: int) -> bool:
    """Whether the ``&`` at ``i`` separates commands rather than redirecting (``2>&1``, ``&>file``)."""
    return command[i - 1 : i] not in (">", "<") and command[i + 1 : i + 2] != ">"


def _target(input: Mapping[str, Any], workspace: Path) -> Path | None:
    """The call's ``file_path`` or ``path``, absolute, with ``..`` and symlinks resolved."""
    path = input.get("file_path", input.get("path"))
    if not isinstance(path, str) or not path:
        return None
    return Path(os.path.realpath(os.path.join(workspace, path)))


def _path_matches(specifier: str, input: Mapping[str, Any], workspace: Path) -> bool:
    target = _target(input, workspace)
    if target is None:
        return False
    pattern = _path_pattern(specifier, workspace)
    return any(pattern.fullmatch(str(path)) for path in (target, *target.parents))


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
