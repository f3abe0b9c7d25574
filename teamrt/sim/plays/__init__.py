"""Policies for the example teams (``examples/``), by ``<team>/<role>``: the simulator plays them.

A team file named ``research`` or ``coding`` gets these on ``sim``; any other
team gets the simulator's default (``echo``), and a run says so as it starts
(``unplayed_notice``).
"""

from __future__ import annotations

from collections.abc import Mapping

from teamrt.sim.plays import coding, research
from teamrt.sim.policy import Policy

POLICIES: dict[str, Policy] = {
    "research/lead": research.lead,
    "research/fork": research.fork,
    "research/reviewer": research.reviewer,
    "coding/lead": coding.lead,
    "coding/coder": coding.coder,
    "coding/reviewer": coding.reviewer,
}


def played(team: str, role: str, policies: Mapping[str, Policy] = POLICIES) -> bool:
    """Whether a policy plays ``role`` of ``team`` (as the server looks it up: ``team/role``, then
    ``role``)."""
    return f"{team}/{role}" in policies or role in policies


def unplayed_notice(
    team_name: str, roles: list[str], policies: Mapping[str, Policy] = POLICIES
) -> str | None:
    """One line saying which of ``roles`` (``lead``, ``fork`` where the lead can fork, the team's roles)
    no policy plays, so that on ``sim`` they only echo their prompt; None when every one is played.

    A fork counts as played when its lead is: a policy forks only where its team has a fork policy
    (the coding lead never forks)."""
    lead_played = played(team_name, "lead", policies)
    unplayed = [
        role
        for role in dict.fromkeys(roles)
        if not played(team_name, role, policies) and not (role == "fork" and lead_played)
    ]
    if not unplayed:
        return None
    teams: dict[str, list[str]] = {}
    for key in policies:
        team, _, role = key.rpartition("/")
        teams.setdefault(team or "any team", []).append(role)
    listed = "; ".join(f"{team}: {', '.join(names)}" for team, names in teams.items())
    if policies.keys() == POLICIES.keys():
        plays = f"sim plays the example teams' roles ({listed})"
    else:
        plays = f"sim plays only these roles ({listed})" if listed else "sim plays no role"
    echo = "only echoes its prompt" if len(unplayed) == 1 else "only echo their prompt"
    return (
        f"teamrt: note: {plays}; this team's {', '.join(unplayed)} {echo}:"
        " name a Claude model (--model) for real work"
    )


__all__ = ["POLICIES", "played", "unplayed_notice"]
