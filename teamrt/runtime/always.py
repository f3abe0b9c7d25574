"""Allow always, in a run: the call's rule written to ``.claude/settings.local.json`` and added to the live
run's rules, so later identical calls run without asking, in this run and the next.

The rule is formed by ``teamrt.claudecode.local_rules.rule_for`` against the
asking agent's workspace and written by ``add_allow_rule``. The file is among
the protected paths the run's guard keeps (no agent may plant rules there), so
the write goes through ``Guard.accept``: the person's change becomes part of the
guard's baseline instead of being moved out at the next scan as an agent's
would. The rule joins the Claude Code settings' layer of every agent's
permissions (as it will on the next run, read from the file) and of the agents
made from now on; a deny or ask rule of any source still beats it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from teamrt.claudecode.local_rules import LOCAL_FILE, LocalRuleError, RuleChoice, add_allow_rule, rule_for
from teamrt.runtime.asking import Ask, Remembered
from teamrt.runtime.assembly import Assembly
from teamrt.runtime.member import Member
from teamrt.sandbox.quarantine import Guard
from teamrt.tools.permissions import Rules


class LiveRules:
    """The supervisor's ``AlwaysRules``: what "allow always" does in its run."""

    def __init__(
        self, *, project: Path, guard: Guard, assembly: Assembly, members: dict[str, Member]
    ) -> None:
        self.project = project
        self.guard = guard
        self.assembly = assembly
        self.members = members

    def choice(self, ask: Ask) -> RuleChoice:
        member = self.members.get(ask.agent)
        workspace = member.loop.env.tools.workspace if member is not None else self.project
        return rule_for(ask.tool, ask.input, workspace, ask.reason)

    async def remember(self, ask: Ask) -> Remembered:
        rule = self.choice(ask).rule
        if rule is None:
            return Remembered(
                None, f"teamrt: no rule can allow it always ({self.choice(ask).why}); allowed once"
            )
        shown = LOCAL_FILE.as_posix()
        try:
            added = await self.guard.accept(self.project, [shown], lambda: add_allow_rule(self.project, rule))
        except LocalRuleError as e:
            return Remembered(None, f"teamrt: {e}; allowed once")
        except OSError as e:
            return Remembered(None, f"teamrt: cannot write {shown}: {e.strerror or e}; allowed once")
        self._add_live(rule)
        said = f"teamrt: added {rule} to {shown}" if added.new else f"teamrt: {rule} is in {shown} already"
        return Remembered(rule, said + (f" (but {added.note})" if added.note else ""))

    def _add_live(self, text: str) -> None:
        """``text`` among the Claude Code settings' rules of every agent, and of those made later."""
        added = Rules.parse(allow=[text], origin=LOCAL_FILE.as_posix())
        claude = self.assembly.claude
        self.assembly.claude = dataclasses.replace(claude, rules=claude.rules + added)
        for member in self.members.values():
            permissions = member.loop.spec.permissions  # a fork shares its parent's: added once
            if added.allow[0] not in permissions.rules.allow:
                permissions.rules = permissions.rules + added
