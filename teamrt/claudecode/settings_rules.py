"""A settings file's permission rules read so that no rule stops a run, and no deny is lost.

Claude Code starts with rules it cannot use (it leaves them out); teamrt does too, saying so one line
per rule, but it reads each kind of list by what a mistake would cost:

- an ``allow`` rule teamrt cannot read, or that names a tool neither teamrt nor Claude Code has
  (``Delete(./.env)``), is left out: leaving out an allow only asks more;
- a ``deny`` or ``ask`` rule is kept whenever it names a tool, so it fails closed: a ``Bash`` rule that
  is not one simple command (``Bash(time:*)``, ``Bash(for i:*)``, ``Bash(curl:* | sh)``) is read as
  Claude Code reads it, over the command's text (``teamrt.tools.textrules``); one that cannot be read at
  all (``Bash(rm -r /)*``, unbalanced) covers every use of its tool; one of an unknown tool is kept
  under that name (it covers none of teamrt's tools, and the warning says which it does not cover when
  it looks like a file rule). Only a rule that names no tool at all is left out.

``parse_rules`` never raises; its warnings are lines ``<file>: ...``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from teamrt.tools import textrules
from teamrt.tools.names import FILE_TOOLS, LATER, canonical
from teamrt.tools.permissions import SPAWN, Rule, RuleError, Rules, folded
from teamrt.tools.specifiers import command_patterns

CLAUDE_ONLY_TOOLS = frozenset(
    name.lower()
    for name in (*LATER, "AskUserQuestion", "EnterPlanMode", "ExitPlanMode", "TaskOutput", "TaskStop",
                 "ListMcpResourcesTool", "ReadMcpResourceTool", "LSP", "ToolSearch", "Agent", "TaskCreate",
                 "TaskGet", "TaskList", "TaskUpdate", "TeamCreate", "TeamDelete", "SendMessage", "Monitor",
                 "CronCreate", "CronDelete", "CronList", "EnterWorktree", "ExitWorktree", "PowerShell")
)  # fmt: skip
"""Claude Code's tools that teamrt lacks (or has under another name): a rule naming one is no mistake."""
TEAM_TOOLS = frozenset({"spawn_agent", "send_message", "broadcast", "task_create", "task_claim",
                        "task_update", "task_list", "request_shutdown", "respond_shutdown"})  # fmt: skip
"""teamrt's coordination tools, which a person's ``settings.local.json`` may name."""
_KEYWORD = re.compile(r"\s*(?:for|while|until|if|case|select|time|function|coproc|\{|\(|\[\[|!)(?:\s|:|$)")
"""A specifier that starts with a shell keyword: not one simple command, whatever the parser makes of it."""
_MIDDLE_PREFIX = re.compile(r":\*(?=\s|[|&;)<>])")
"""``:*`` before more of the rule (``Bash(cat:* > /etc/passwd)``): a prefix marker for a deny or ask."""
_TOOL = re.compile(r"\s*([A-Za-z_][\w-]*)\s*(?:\(|$)")
_PATHY = re.compile(r"^(?:\.{0,2}/|~|\*\*|[^\s()]*[./][^\s()]*$)")
RESTRICTING = ("deny", "ask")


def parse_rules(lists: Mapping[str, Sequence[str]], origin: str) -> tuple[Rules, list[str]]:
    """The rules of a file's ``allow``, ``deny`` and ``ask`` lists (rule texts), and a warning for each
    rule that is left out or read otherwise than as written. ``origin``: the file, as reasons show it."""
    warnings: list[str] = []
    kept: dict[str, list[Rule]] = {"allow": [], "deny": [], "ask": []}
    for kind in ("allow", "deny", "ask"):
        for text in lists.get(kind, ()):
            rule, line = _rule(kind, text, origin)
            if rule is not None:
                kept[kind].append(rule)
            if line is not None:
                warnings.append(f"{origin}: permissions.{kind} rule {_quote(text)} {line}")
    return Rules(tuple(kept["allow"]), tuple(kept["deny"]), tuple(kept["ask"])), warnings


def _rule(kind: str, text: str, origin: str) -> tuple[Rule | None, str | None]:
    """The rule ``text`` in a ``kind`` list, or None, and what to say of it (None: nothing)."""
    restricting = kind in RESTRICTING
    try:
        rule = Rule.parse(text, origin)
    except RuleError as e:
        return _unreadable(kind, text, origin, e.problem)
    if restricting and rule.tool == "bash" and rule.specifier and _MIDDLE_PREFIX.search(rule.specifier):
        return _restricting_bash(kind, text, origin, rule.specifier)
    if rule.tool == "bash" and rule.specifier and _KEYWORD.match(rule.specifier):
        return _unreadable(kind, text, origin, "it starts with a shell keyword")
    if rule.tool == SPAWN and not restricting:
        return None, "left out: a Spawn rule only asks about or denies spawns (put it in ask or deny)"
    if not _known(rule.tool):
        if not restricting:
            return None, f"left out: neither teamrt nor Claude Code has a tool named {_tool(text)}"
        return rule, _unknown(kind, text)
    return rule, None


def _unreadable(kind: str, text: str, origin: str, problem: str) -> tuple[Rule | None, str | None]:
    """What becomes of a rule ``Rule.parse`` refuses for ``problem``."""
    match = _TOOL.match(text)
    name = match[1] if match else None
    tool = folded(name) if name else None
    specifier = _specifier(text) if match and text.rstrip().endswith(")") else None
    if tool == "bash" and specifier is not None and _bash_other(specifier):
        form = textrules.reading_of(specifier)
        if kind not in RESTRICTING:
            return None, (
                f"left out: it is not one simple command ({problem}); teamrt allows a compound command"
                " when each command in it is allowed, so allow those commands, one rule each"
            )
        return Rule(
            tool, specifier, text, origin, form
        ), f"is not one simple command: it {_verb(kind)} {_how(form)}"
    if kind not in RESTRICTING:
        if tool is not None and not _known(tool):
            return None, f"left out: neither teamrt nor Claude Code has a tool named {_tool(text)}"
        return None, f"left out: {problem}"
    if tool is None:
        return None, f"left out: {problem}; it names no tool, so it cannot {_verb(kind, base=True)} anything"
    if tool != "bash" and not _known(tool):
        line = _unknown(kind, text)
        return Rule(tool, specifier, text, origin), line
    return Rule(tool, None, text, origin), (
        f"cannot be read ({problem}): it {_verb(kind)} every use of {_tool(text)} (fail closed)"
    )


def _restricting_bash(kind: str, text: str, origin: str, specifier: str) -> tuple[Rule, str]:
    """A Bash deny or ask rule with ``:*`` before more of it, read with each ``:*`` a prefix marker
    (broader than Claude Code, which reads that ``:`` as text and so matches almost nothing)."""
    widened = textrules.normalized(specifier)
    if not _bash_other(widened):
        return Rule("bash", widened, text, origin), f"is read as Bash({widened}): it {_verb(kind)} that"
    form = textrules.reading_of(widened)
    return Rule(
        "bash", widened, text, origin, form
    ), f"is not one simple command: it {_verb(kind)} {_how(form)}"


def _how(form: str) -> str:
    if form == textrules.PARTS:
        return "a command that runs a program matching each of its commands, however joined"
    return "a command whose text matches it where a subcommand starts, as Claude Code reads it"


def _bash_other(specifier: str) -> bool:
    """Whether a Bash specifier is one teamrt reads only as Claude Code's text (not one simple command):
    one that does not parse as one, or starts with a shell keyword (``for f in *; do rm $f; done`` parses
    to its body alone)."""
    if _KEYWORD.match(specifier):
        return True
    try:
        command_patterns(specifier)
    except ValueError:
        return bool(specifier.strip())
    return False


def _specifier(text: str) -> str:
    return text[text.index("(") + 1 : text.rstrip().rindex(")")].strip()


def _known(tool: str) -> bool:
    """Whether a folded tool name is teamrt's, Claude Code's, an MCP server's or a Spawn rule's."""
    return (
        canonical(tool) is not None
        or tool in CLAUDE_ONLY_TOOLS
        or tool in TEAM_TOOLS
        or tool == SPAWN
        or tool.startswith("mcp__")
    )


def _unknown(kind: str, text: str) -> str:
    """The warning for a deny or ask rule of a tool no one has."""
    name = _tool(text)
    line = f"names {name}, a tool neither teamrt nor Claude Code has: kept, it {_verb(kind)} no call"
    specifier = _specifier(text) if "(" in text and text.rstrip().endswith(")") else ""
    if specifier and _PATHY.match(specifier):
        files = ", ".join(FILE_TOOLS)
        line += (
            f"; it does not cover {files} or Bash: write Edit({specifier}) and Read({specifier}) to keep"
            " agents from that path"
        )
    return line


def _verb(kind: str, *, base: bool = False) -> str:
    if kind == "deny":
        return "deny" if base else "denies"
    return "ask about" if base else "asks about"


def _tool(text: str) -> str:
    match = _TOOL.match(text)
    return match[1] if match else _quote(text.split("(")[0].strip())


def _quote(text: str) -> str:
    """A rule on one line of a terminal, quoted and escaped, cut to 120 characters."""
    shown = json.dumps(text, ensure_ascii=False)
    shown = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in shown)
    return shown if len(shown) <= 120 else shown[:117] + '..."'
