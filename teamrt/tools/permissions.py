"""Permission rules and modes for tool calls, in the form Claude Code's settings use.

A rule is ``Tool`` or ``Tool(specifier)``. A call is checked against the deny
rules, then the ask rules, then the allow rules; the first that matches
decides, and when none does the mode decides. Rules come from several sources
(the team file, the Claude Code settings files), and as in Claude Code a deny
from any source beats an allow from any source, and so does an ask: the
sources' rules are pooled, not layered (``Permissions``).

Tool names match case-insensitively, old names and new (``read`` is
``Read``, ``Agent`` is ``Task``). ``Read`` rules cover Read, Glob, Grep and
LS; ``Edit`` rules cover Edit and Write (``MultiEdit`` is Edit's older name: a ``MultiEdit(...)`` rule
is an Edit rule, and a MultiEdit call is judged as an Edit); ``mcp__server`` and
``mcp__server__*`` cover every tool of that server; other names match
exactly. ``Bash``, the file tools, ``Task`` (``Task(reviewer)``: that
subagent_type) and ``WebFetch`` take a specifier; so do ``WebSearch``,
Claude Code's tools teamrt lacks and ``mcp__`` tools, whose specifiers teamrt
cannot check: such a deny or ask rule covers every use of the tool, such an
allow rule none.

``WebFetch(domain:example.com)`` matches a fetch of that host, and
``WebFetch(domain:*.example.com)`` one of any of its subdomains (not of
``example.com`` itself); the host is the call's ``url`` read as WebFetch reads
it (``teamrt.tools.web.address``), in lower case and ASCII. A ``url`` that is
not valid matches no allow rule and every deny and ask rule for WebFetch.
WebFetch follows redirects only on the same host, so the rule that allowed the
call covers every page it reads.

Modes: ``default`` (also ``manual``) asks about what is not read-only;
``acceptEdits`` allows edits inside the workspace; ``auto`` is acceptEdits
here (what Claude Code hands to its classifier, teamrt asks about); ``plan``
denies what is not read-only; ``dontAsk`` denies whatever would be asked,
ask rules included; ``bypassPermissions`` allows what no rule decides.
Tools that reach outside the machine (``WebFetch`` and every ``mcp__`` tool)
are not allowed for being read-only: without an allow rule they are asked
about (denied in ``dontAsk``, allowed in ``bypassPermissions``). ``WebSearch``
runs on the API's side, where no call can be asked about: it counts as
read-only like the file reads, and only a deny rule keeps it from an agent.

``Bash(npm test)`` and ``Bash(npm run test *)`` are patterns over the programs
a command runs (``teamrt.tools.specifiers``).

``Spawn`` rules are not about a tool: they judge a spawn (``spawn_agent`` or
``Task``) by its forecast cost (``teamrt.runtime.forecast``), before its
children start. ``Spawn(cost>$2)`` in the ask list asks about a spawn forecast
above $2, in the deny list refuses it; ``Spawn(reviewer, cost>$1)`` only
spawns of that role (``fork`` for forks), ``Spawn(reviewer)`` every one of
them, ``Spawn`` every spawn. They go in ask and deny lists only (an allow list
with one is refused at load: the spawning tools' own rules allow a spawn), and
no tool call ever matches one: teamrt has no tool named Spawn, and an MCP
server's tool is always ``mcp__<server>__<tool>``, so an MCP tool named
``spawn`` is ruled as ``mcp__<server>__spawn`` and never confused with these
(``Rules.spawn_decision``).

A command is read with a real shell parser (``teamrt.tools.shell.programs``)
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
(``eval``, ``bash -c``, ``git -c``, a program named by a variable or a glob, a
nameref, arithmetic, bash it cannot parse, ...), or that reads text it cannot
see into a variable (``read``, ``mapfile``, ``printf -v``: ``Reading.hidden``), is
denied when any ``Bash`` deny rule has a specifier, asked
about when an ask rule has one, and never allowed by a rule with a specifier.
Rules judge the command line, not the programs it names: a script or a Makefile
runs whatever it holds, and the sandbox is what confines it.

A ``Bash`` deny or ask rule from Claude Code's settings that is not one simple command
(``Bash(time:*)``, ``Bash(curl:* | sh)``) carries a ``form`` and is matched as Claude Code reads it,
over the command's text or by its parts (``teamrt.tools.textrules``); the settings reader makes those,
and never an allow rule of that kind (``teamrt.claudecode.settings_rules``).

File specifiers are gitignore patterns (``teamrt.tools.specifiers``). The
call's ``file_path`` (or ``path``) is resolved against the workspace, with
``..`` and symlinks resolved, before it is matched; a read, glob or grep without
one is about the workspace. The file tools also skip, in their walks, and refuse
every file a ``Read`` deny rule covers (``read_denial``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from teamrt.errors import UserError
from teamrt.tools import bashguard, textrules
from teamrt.tools.names import EDITING, LATER, canonical
from teamrt.tools.shell.programs import Reading, read
from teamrt.tools.specifiers import command_patterns, path_pattern, spawn_limit
from teamrt.tools.web.address import domain_name, host_of


class Mode(StrEnum):
    DEFAULT = "default"
    ACCEPT_EDITS = "acceptEdits"
    PLAN = "plan"
    BYPASS = "bypassPermissions"
    DONT_ASK = "dontAsk"
    AUTO = "auto"

    @classmethod
    def _missing_(cls, value: object) -> Mode | None:
        return cls.DEFAULT if value == "manual" else None  # the name Claude Code's menus show


MODE_NAMES = (*(mode.value for mode in Mode), "manual")
"""Every name a mode may be given by."""


class Verdict(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str
    """One line naming the rule or the mode that decided."""


class RuleError(UserError, ValueError):
    """A rule that does not parse: ``text`` is the rule as written, ``problem`` what is wrong."""

    def __init__(self, text: str, problem: str) -> None:
        super().__init__(f"bad permission rule {_quote(text)}: {problem}")
        self.text = text
        self.problem = problem


_RULE = re.compile(r"(?P<tool>[^()]*)(?:\((?P<specifier>.*)\))?", re.DOTALL)
_TOOL_NAME = re.compile(r"[A-Za-z_][\w-]*")
_COVERED = {
    "read": frozenset({"read", "glob", "grep", "ls"}),
    "edit": frozenset(name.lower() for name in EDITING),
}
_FILE_TOOLS = frozenset({"read", "write", "edit", "glob", "grep", "ls"})
_EDIT_TOOLS = _COVERED["edit"]
_UNCHECKED = frozenset({"websearch", "skill", *(name.lower() for name in LATER)})
"""Tools whose specifiers teamrt keeps without checking them (with ``mcp__`` tools). ``Skill(name)``
is one: a deny or ask rule naming a skill covers every Skill call, an allow rule none (the Skill tool
is read-only and needs no allow rule)."""
MCP_SAMPLING = "mcpsampling"
"""The folded name of ``McpSampling`` rules: ``McpSampling(server)`` decides the sampling requests of that MCP
server (``teamrt.mcp.capabilities``), ``McpSampling`` every server's; no tool has that name. Without a rule a
sampling request is asked about like a call that reaches off the machine (allowed in bypassPermissions,
denied in dontAsk)."""
_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
SPAWN = "spawn"
"""The folded name of ``Spawn`` rules, which judge spawns by their forecast cost, never a tool call."""
_DOMAIN = re.compile(r"(?:\*\.)?[^\s*/:@\[\]?#]+")
"""A ``WebFetch(domain:...)`` host: a name, ``*.`` before it for its subdomains; no port, path or user."""


@dataclass(frozen=True)
class Rule:
    tool: str
    """The tool's name in lower case, as the model sees it (``bash``, ``task``, ``mcp__github``)."""
    specifier: str | None
    """What is inside the parentheses, stripped (a WebFetch rule's host in lower case and ASCII); None for
    every use of the tool."""
    text: str
    """The rule as written."""
    origin: str = ""
    """Where the rule is written (a settings file), for reasons; "" for the team file."""
    form: str = ""
    """How a ``Bash`` deny or ask rule's specifier is read: "" as one simple command
    (``teamrt.tools.specifiers``), ``parts`` or ``text`` when it is not one (``teamrt.tools.textrules``;
    made by the Claude Code settings reader, never for an allow rule)."""

    @classmethod
    def parse(cls, text: str, origin: str = "") -> Rule:
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
        tool, specifier = folded(tool), match["specifier"]
        if specifier is None:
            return cls(tool, None, text, origin)
        specifier = specifier.strip()
        if not specifier:
            raise RuleError(text, f"empty parentheses; write {match['tool'].strip()} to match every use")
        if tool == "bash":
            if specifier == "*":
                return cls(tool, None, text, origin)
            try:
                command_patterns(specifier)
            except ValueError as e:
                raise RuleError(text, str(e)) from None
        elif tool == "webfetch":
            specifier = _domain_specifier(text, specifier)
        elif tool == SPAWN:
            try:
                spawn_limit(specifier)
            except ValueError as e:
                raise RuleError(text, str(e)) from None
        elif tool == MCP_SAMPLING:
            if not _SERVER_NAME.fullmatch(specifier):
                raise RuleError(text, "McpSampling takes the name of an MCP server: McpSampling(github)")
        elif tool not in _FILE_TOOLS and tool != "task" and not _unchecked(tool):
            raise RuleError(
                text,
                "only Bash, the file tools (Read, Edit, Write, Glob, Grep, LS), Task, WebFetch,"
                " Spawn and Claude Code's tools teamrt lacks take a specifier",
            )
        return cls(tool, specifier, text, origin)

    def covers(self, tool: str) -> bool:
        """Whether the rule is about ``tool`` (a ``folded`` name), whatever its input. A ``Spawn`` rule is
        about no tool: it judges spawns by their forecast (``Rules.spawn_decision``)."""
        if self.tool == SPAWN:
            return False
        if self.tool in _COVERED:
            return tool in _COVERED[self.tool]
        if self.tool == _READ_RESOURCE:
            return tool == self.tool or tool.endswith(_RESOURCE_READS)
        if self.tool.endswith("__*"):
            return tool.startswith(self.tool[:-1])
        if self.tool.startswith("mcp__") and "__" not in self.tool[5:]:
            return tool.startswith(self.tool + "__")
        return tool == self.tool


@dataclass(frozen=True)
class Rules:
    """One layer of rules: its deny rules decide first, then its ask rules, then its allow rules."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()

    @classmethod
    def parse(
        cls, *, allow: Iterable[str] = (), deny: Iterable[str] = (), ask: Iterable[str] = (), origin: str = ""
    ) -> Rules:
        def parsed(texts: Iterable[str]) -> tuple[Rule, ...]:
            return tuple(Rule.parse(text, origin) for text in texts)

        allowing = parsed(allow)
        for rule in allowing:
            if rule.tool == SPAWN:
                raise RuleError(
                    rule.text,
                    "a Spawn rule asks about or denies spawns by their forecast cost: put it in the ask or"
                    " deny list (spawn_agent and Task rules allow spawning)",
                )
        return cls(allowing, parsed(deny), parsed(ask))

    def __add__(self, other: Rules) -> Rules:
        return Rules(self.allow + other.allow, self.deny + other.deny, self.ask + other.ask)

    def decide(
        self, tool: str, input: Mapping[str, Any], workspace: Path, reading: Reading | None
    ) -> Decision | None:
        """The decision of the first of these rules that matches the call (``tool`` folded), or None."""
        for verdict, rules in ((Verdict.DENY, self.deny), (Verdict.ASK, self.ask)):
            decision = _checked(verdict, rules, tool, input, workspace, reading)
            if decision is not None:
                return decision
        allowing = _allowing(self.allow, tool, input, workspace, reading)
        if allowing:
            texts = ", ".join(_named(rule) for rule in allowing)
            return Decision(Verdict.ALLOW, f"allowed by rule{'s' if len(allowing) > 1 else ''} {texts}")
        return None

    def spawn_decision(self, role: str, usd: float | None, forecast: str) -> Decision | None:
        """The decision of the first ``Spawn`` deny (then ask) rule that matches a spawn of ``role``
        forecast at ``usd`` dollars (None: the cost cannot be forecast, so every cost limit may be passed:
        rules fail closed); ``forecast``: the forecast in words, for the reason. None when none matches."""
        for verdict, rules in ((Verdict.DENY, self.deny), (Verdict.ASK, self.ask)):
            by = "denied by" if verdict is Verdict.DENY else "approval required by"
            for rule in rules:
                if rule.tool != SPAWN:
                    continue
                limit = spawn_limit(rule.specifier) if rule.specifier is not None else None
                if limit is not None and limit.role is not None and limit.role != role:
                    continue
                if limit is None or limit.usd is None or usd is None or limit.passes(usd):
                    return Decision(verdict, f"{by} rule {_named(rule)}: {forecast}")
        return None

    def read_decided(self, path: Path, workspace: Path) -> tuple[bool, str | None]:
        """Whether a rule of this layer decides a read of the canonical ``path``, and the deny rule
        (as written, with its origin) that forbids it, if one does."""
        for rule in self.deny:
            if rule.covers("read") and (rule.specifier is None or _covers(rule.specifier, path, workspace)):
                return True, f"{rule.text} in {rule.origin}" if rule.origin else rule.text
        for rule in (*self.ask, *self.allow):
            if rule.covers("read") and (rule.specifier is None or _covers(rule.specifier, path, workspace)):
                return True, None
        return False, None


class Permissions:
    """The mode and the rules an agent's tool calls are decided by.

    ``allow``, ``deny`` and ``ask`` are the team file's rules; ``then`` the Claude Code settings'. They
    are pooled: a deny rule of either beats an ask or allow rule of either, an ask rule beats an allow
    rule (Claude Code's precedence: no source lifts another's deny)."""

    def __init__(
        self,
        mode: Mode | str = Mode.DEFAULT,
        *,
        allow: Iterable[str] = (),
        deny: Iterable[str] = (),
        ask: Iterable[str] = (),
        then: Rules = Rules(),
    ) -> None:
        try:
            self.mode = Mode(mode)
        except ValueError:
            raise ValueError(
                f"unknown permission mode {mode!r}; use one of: {', '.join(MODE_NAMES)}"
            ) from None
        self.rules = Rules.parse(allow=allow, deny=deny, ask=ask) + then

    def decide(self, tool: str, input: Mapping[str, Any], *, read_only: bool, workspace: Path) -> Decision:
        """A deny rule from any source, else an ask rule, else an allow rule, else the mode decides; paths
        are under ``workspace``."""
        name = _resource_subject(folded(tool), input)
        reading = read(_command(input)) if name == "bash" else None
        decision = self.rules.decide(name, input, workspace, reading)
        if reading is not None and (decision is None or decision.verdict is Verdict.ALLOW):
            decision = self._bash_reach(decision, _command(input), reading, workspace)
        if decision is None:
            decision = self._by_mode(tool, name, input, read_only, workspace)
        if decision.verdict is Verdict.ASK and self.mode is Mode.DONT_ASK:
            return Decision(Verdict.DENY, f"{decision.reason}; dontAsk mode denies what it would ask")
        return decision

    def spawn_decision(self, role: str, usd: float | None, forecast: str) -> Decision | None:
        """How the ``Spawn`` rules of every source judge a spawn (``Rules.spawn_decision``): deny, ask, or
        None when none applies (the spawn goes on). dontAsk mode denies what a rule would ask."""
        decision = self.rules.spawn_decision(role, usd, forecast)
        if decision is not None and decision.verdict is Verdict.ASK and self.mode is Mode.DONT_ASK:
            return Decision(Verdict.DENY, f"{decision.reason}; dontAsk mode denies what it would ask")
        return decision

    def read_denial(self, path: Path, workspace: Path) -> str | None:
        """The deny rule (as written) that forbids reading the canonical ``path``, or None.

        These are the ``Read`` rules (they cover Read, Glob, Grep and LS), from any source: the
        file tools refuse such a path and leave it out of their walks."""
        return self.rules.read_decided(path, workspace)[1]

    def _bash_reach(
        self, decision: Decision | None, command: str, reading: Reading, workspace: Path
    ) -> Decision | None:
        """A command that names a file a ``Read`` deny rule forbids is denied; one an allow rule with a
        specifier lets through that may read such a file unnamed, or write one through a redirection, is
        left to the mode, with the reason (``teamrt.tools.bashguard``)."""
        specific = [rule for rule in self.rules.deny if rule.covers("read") and rule.specifier is not None]

        def denial(path: Path) -> str | None:
            return next((_named(r) for r in specific if _covers(r.specifier or "", path, workspace)), None)

        why = bashguard.named(command, denial, workspace) if specific else None
        if why is not None:
            return Decision(Verdict.DENY, why)
        whole = any(rule.covers("bash") and rule.specifier is None for rule in self.rules.allow)
        if decision is None or whole:
            return decision  # a rule for every command allows what any command does
        why = bashguard.unseen(command, reading, denial, [r.specifier or "" for r in specific], workspace)
        if why is None:
            return decision
        by_mode = self._by_mode("Bash", "bash", {"command": command}, False, workspace)
        return Decision(by_mode.verdict, f"{decision.reason}, but not this command: {why}; {by_mode.reason}")

    def _by_mode(
        self, tool: str, name: str, input: Mapping[str, Any], read_only: bool, workspace: Path
    ) -> Decision:
        mode = self.mode
        if mode is Mode.BYPASS:
            return Decision(Verdict.ALLOW, f"{tool} is allowed in {mode} mode")
        if read_only and not _outward(name):
            return Decision(Verdict.ALLOW, f"{tool} is read-only ({mode} mode)")
        if read_only:
            return Decision(Verdict.ASK, f"{tool} reaches off the machine: it needs approval in {mode} mode")
        if mode is Mode.PLAN:
            return Decision(Verdict.DENY, f"plan mode is read-only: {tool} is not allowed")
        if mode is Mode.DONT_ASK:
            return Decision(Verdict.DENY, f"no rule allows {tool}, and dontAsk mode denies what it would ask")
        if mode in (Mode.ACCEPT_EDITS, Mode.AUTO) and name in _EDIT_TOOLS:
            target = _target(input, workspace)
            if target is not None:
                if target.is_relative_to(os.path.realpath(workspace)):
                    return Decision(Verdict.ALLOW, f"{tool} inside the workspace is allowed in {mode} mode")
                return Decision(Verdict.ASK, f"{tool} outside the workspace needs approval in {mode} mode")
        if mode is Mode.AUTO:
            return Decision(Verdict.ASK, f"{tool} needs approval in auto mode (teamrt has no classifier)")
        return Decision(Verdict.ASK, f"{tool} needs approval in {mode} mode")


def folded(tool: str) -> str:
    """``tool``'s name as rules compare it: the model-facing name (``names.canonical``), in lower case."""
    return (canonical(tool) or tool.strip()).lower()


_READ_RESOURCE = "readmcpresourcetool"
_RESOURCE_READS = "__(resources)"
"""What a ``ReadMcpResourceTool`` call on server ``s`` is judged as: ``mcp__s__(resources)``, which
``mcp__s`` and ``mcp__s__*`` rules cover (it sends the model's URI to that server) and a
``ReadMcpResourceTool`` rule too; no MCP tool can have the name (``teamrt.mcp.tools.tool_name``)."""
_SERVER = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _resource_subject(tool: str, input: Mapping[str, Any]) -> str:
    """``tool`` (folded), or for a resource read the server's name it is judged as (``_RESOURCE_READS``)."""
    server = input.get("server")
    if tool != _READ_RESOURCE or not isinstance(server, str) or "__" in server:
        return tool
    if not _SERVER.fullmatch(server):
        return tool
    return f"mcp__{server.lower()}{_RESOURCE_READS}"


def _outward(tool: str) -> bool:
    """Whether a tool (``folded``) reaches outside the machine, so that being read-only does not make it
    harmless: what it sends (a URL, a query) may carry what it read."""
    return tool in ("webfetch", MCP_SAMPLING) or tool.startswith("mcp__")


def _domain_specifier(text: str, specifier: str) -> str:
    """A WebFetch rule's ``domain:<host>`` with the host as WebFetch spells hosts, or a RuleError."""
    kind, _, host = specifier.partition(":")
    if kind.strip() != "domain" or not _DOMAIN.fullmatch(host.strip()):
        raise RuleError(
            text,
            "a WebFetch rule names a host: WebFetch(domain:example.com), or WebFetch(domain:*.example.com)"
            " for its subdomains",
        )
    host = host.strip()
    wildcard = "*." if host.startswith("*.") else ""
    try:
        return f"domain:{wildcard}{domain_name(host.removeprefix('*.'))}"
    except ValueError as e:
        raise RuleError(text, str(e)) from None


def _unchecked(tool: str) -> bool:
    """Whether teamrt keeps the tool's specifiers without checking them: WebSearch's (Claude Code's takes
    none), those of Claude Code's tools teamrt lacks, and ``mcp__`` tools'."""
    return tool in _UNCHECKED or tool.startswith("mcp__")


def _named(rule: Rule) -> str:
    """A rule in a reason: as written, and where, when not in the team file."""
    return f"{_quote(rule.text)} in {rule.origin}" if rule.origin else _quote(rule.text)


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
            return Decision(verdict, f"{by} rule {_named(rule)}{why}")
    if reading is not None and reading.hidden:
        specific = next((rule for rule in rules if rule.tool == "bash" and rule.specifier), None)
        if specific is not None:
            return Decision(verdict, _unreadable(reading.hidden, specific, verdict))
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
    if rule.form:
        return "" if textrules.matches(rule.specifier, rule.form, _command(input), reading) else None
    if reading is None:
        about = _about(rule.specifier, tool, input, workspace)
        if about is None and tool == "webfetch":
            return " (its url is not one WebFetch can read, so it may name that host)"
        if about is None:
            return " (teamrt cannot check its specifier, so it applies to every use)"
        return "" if about else None
    _, by_name = command_patterns(rule.specifier)
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
            f"cannot tell what this command runs ({reason}), so rule {_named(rule)} may forbid it;"
            " write the command out plainly"
        )
    return f"cannot tell what this command runs ({reason}), so rule {_named(rule)} may apply"


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
        return [rule for rule in covering if _about(rule.specifier or "", tool, input, workspace)][:1]
    if reading.hidden or reading.substitution or not reading.commands:
        return []
    used: list[Rule] = []
    for command in reading.commands:
        found = next((r for r in covering if command_patterns(r.specifier or "")[0].certain(command)), None)
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


def _target(input: Mapping[str, Any], workspace: Path) -> Path | None:
    """The call's ``file_path`` or ``path``, absolute, with ``..`` and symlinks resolved."""
    path = input.get("file_path", input.get("path"))
    if not isinstance(path, str) or not path:
        return None
    try:
        return Path(os.path.realpath(os.path.join(workspace, path)))
    except ValueError:  # a NUL or a lone surrogate: no file has that name, and the tool says so
        return None


def _about(specifier: str, tool: str, input: Mapping[str, Any], workspace: Path) -> bool | None:
    """Whether a specifier matches a call that is not bash's; None when teamrt cannot tell."""
    if tool in _FILE_TOOLS:
        subject = _subject(tool, input, workspace)
        return subject is not None and _covers(specifier, subject, workspace)
    if tool == MCP_SAMPLING:  # the server that asks to sample
        return input.get("server") == specifier
    if tool == "task":  # the subagent it starts; none is Claude Code's general-purpose one
        kind = input.get("subagent_type") or "general-purpose"
        return isinstance(kind, str) and kind.strip().lower() == specifier.lower()
    if tool == "webfetch":
        host = host_of(input.get("url"))
        if host is None:
            return None
        pattern = specifier.removeprefix("domain:")
        return host.endswith(pattern[1:]) if pattern.startswith("*.") else host == pattern
    return None


def _subject(tool: str, input: Mapping[str, Any], workspace: Path) -> Path | None:
    """What a file tool's call is about: its target, or the workspace for a read, glob or grep without one."""
    target = _target(input, workspace)
    if target is None and tool in _COVERED["read"]:
        return Path(os.path.realpath(workspace))
    return target


def _covers(specifier: str, path: Path, workspace: Path) -> bool:
    """Whether a file specifier matches the canonical ``path`` or a directory above it."""
    pattern = path_pattern(specifier, workspace)
    return any(pattern.fullmatch(str(p)) for p in (path, *path.parents))


def _quote(text: str) -> str:
    """``text`` in double quotes on one line."""
    return json.dumps(text, ensure_ascii=False)
