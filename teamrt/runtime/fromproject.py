"""What a run takes from its project beyond its team file: the built-in team gains a role per agent file
and the project's test command, and the start of a run says which agent files did not load."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from teamrt.agents import AgentScan, role_name
from teamrt.agents.definitions import BUILTIN
from teamrt.team import LEAD, RESERVED, Role, Team

Notice = Callable[[str], None]
MAX_AGENT_NOTICES = 10
"""Agent-file warnings a run's start shows; ``teamrt agents`` lists them all."""


def tell_agents(scan: AgentScan, on_notice: Notice | None) -> None:
    """Say at a run's start which agent files did not load and what was left out of those that did."""
    if on_notice is None:
        return
    lines = scan.warnings
    for line in lines[:MAX_AGENT_NOTICES]:
        on_notice(f"teamrt: warning: {line}")
    if len(lines) > MAX_AGENT_NOTICES:
        on_notice(f"teamrt: warning: {len(lines) - MAX_AGENT_NOTICES} more about agent files; teamrt agents"
                  " lists them all")  # fmt: skip


def with_agent_roles(team: Team, scan: AgentScan, on_notice: Notice | None = None) -> Team:
    """``team`` (the built-in one) with a role for each user and project agent, named by its
    ``role_name``, so that the lead may spawn it; an agent whose role name is taken is said and left
    out."""
    roles = dict(team.roles)
    for definition in scan.definitions.values():
        if definition.scope == BUILTIN or definition.name == team.lead.agent:
            continue
        name = role_name(definition.name)
        taken = roles.get(name)
        if taken is not None and taken.agent == definition.name:
            continue  # the team's own role for it
        if taken is not None or name in (LEAD, *RESERVED):
            if on_notice is not None:
                on_notice(
                    f"teamrt: warning: {definition.source}: agent {definition.name!r} is no role of the"
                    f" default team: the role name {name!r} is taken"
                )
            continue
        roles[name] = Role(name, definition.name, None, None, None, None, None)
    return dataclasses.replace(team, roles=roles)


def with_test_command(team: Team, project: Path, on_notice: Notice | None = None) -> Team:
    """``team`` (the built-in one) allowed to run the project's test command, when its files name one
    (``teamrt.testcommand``). It is not made a gate: a suite that fails already, or needs what a fresh
    checkout lacks, would merge nothing; ``teamrt init`` writes the gate, saying so. The line saying so is
    no warning: ``--quiet`` leaves it out."""
    from teamrt.testcommand import find_test_commands

    found = find_test_commands(project)
    if not found:
        return team
    runner = found[0].runner
    if on_notice is not None:
        on_notice(
            f"the built-in team allows {runner.rule}: found {runner.name} ({found[0].source});"
            " teamrt init writes it as the merge gate too"
        )
    return dataclasses.replace(team, allow=(runner.rule, *team.allow))
