"""What an agent with ``Bash`` is told of the commands it may run and of the team's merge gates.

Without it an agent learns what it may run only by being refused: a model wastes
turns on commands a rule will deny, and never learns which command proves its
change (the merge queue's gates). The runtime appends ``render``'s paragraph to
the system prompt of every agent that has ``Bash``; the simulator's policies read
it back with ``parse``, so a team's own rules drive what ``sim`` runs, as they
would steer Claude. One module writes and reads it, so the two never drift.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from teamrt.tools.permissions import Rule, RuleError

ALLOWED = (
    "Commands you may run with Bash without being asked, by the team's allow rules (Claude Code's rule"
    " syntax: `Bash(npm test:*)` allows `npm test` with any arguments); any other command is asked"
    " about or refused:"
)
GATES = (
    "The team's merge gates: a worktree agent's branch merges onto the run's integration branch only"
    " when each of these commands passes there, so they are the checks that prove a change:"
)
_ITEM = re.compile(r"^- `(?P<text>.+)`$")


@dataclass(frozen=True)
class CommandsBrief:
    """The Bash allow rules and the gates an agent was told of."""

    allow: tuple[str, ...] = ()
    """Allow rules as written (``Bash(git log:*)``, ``Bash``)."""
    gates: tuple[str, ...] = ()

    def rules(self) -> tuple[Rule, ...]:
        """The allow rules that parse (a rule the runtime showed always does)."""
        parsed = []
        for text in self.allow:
            try:
                parsed.append(Rule.parse(text))
            except RuleError:
                continue
        return tuple(parsed)


def _shown(texts: Iterable[str]) -> list[str]:
    """The texts that fit on one list line: no line break, no backtick (which would end the quote)."""
    return [t for t in dict.fromkeys(texts) if t.strip() and "\n" not in t and "\r" not in t and "`" not in t]


def bash_allow_rules(rules: Iterable[Rule]) -> list[str]:
    """The texts of the rules that allow some ``Bash`` command."""
    return [rule.text.strip() for rule in rules if rule.tool == "bash"]


def render(allow: Iterable[str], gates: Iterable[str]) -> str:
    """The paragraph for an agent's system prompt ('' when there is nothing to tell): ``allow`` the Bash
    allow rules as written, ``gates`` the merge gates' commands."""
    parts = []
    rules, checks = _shown(allow), _shown(gates)
    if rules:
        parts.append("\n".join([ALLOWED, *(f"- `{r}`" for r in rules)]))
    if checks:
        parts.append("\n".join([GATES, *(f"- `{g}`" for g in checks)]))
    return "\n\n".join(parts)


def parse(system: str) -> CommandsBrief:
    """What ``render`` told, read back from a system prompt (empty when it told nothing). Only the first
    list under each heading counts: the runtime's comes before the project's memory files."""
    found: dict[str, list[str]] = {ALLOWED: [], GATES: []}
    seen: set[str] = set()
    current: list[str] | None = None
    for line in system.splitlines():
        if line in found:
            current = None if line in seen else found[line]
            seen.add(line)
            continue
        item = _ITEM.match(line) if current is not None else None
        if item is None:
            current = None
        elif current is not None:
            current.append(item["text"])
    return CommandsBrief(tuple(found[ALLOWED]), tuple(found[GATES]))
