"""Policies for the example teams (``examples/``), by ``<team>/<role>``, and the generic play for
every other role: the simulator plays them.

A team file named ``research`` or ``coding`` gets these on ``sim``; any other
team's roles get the generic play (``generic.play``, the default policy of the
simulator ``--model sim`` uses): each role looks, runs what it may and reports
what its tools returned. A run says so as it starts (``unplayed_notice``), as
the rehearsal it is.
"""

from __future__ import annotations

from collections.abc import Mapping

from teamrt.sim.plays import coding, coding_review, generic, research
from teamrt.sim.policy import Policy, echo

POLICIES: dict[str, Policy] = {
    "research/lead": research.lead,
    "research/fork": research.fork,
    "research/reviewer": research.reviewer,
    "coding/lead": coding.lead,
    "coding/coder": coding.coder,
    "coding/reviewer": coding_review.reviewer,
}
DEFAULT: Policy = generic.play
"""What plays a role no policy of ``POLICIES`` names."""


def played(team: str, role: str, policies: Mapping[str, Policy] = POLICIES) -> bool:
    """Whether a policy plays ``role`` of ``team`` (as the server looks it up: ``team/role``, then
    ``role``)."""
    return f"{team}/{role}" in policies or role in policies


def unplayed_notice(
    team_name: str, roles: list[str], policies: Mapping[str, Policy] = POLICIES, default: Policy = DEFAULT
) -> str | None:
    """One line saying which of ``roles`` (``lead``, ``fork`` where the lead can fork, the team's roles)
    no policy of ``policies`` plays, and so what ``default`` makes of them: the generic play (a
    rehearsal: they look, run what they may and report) or ``echo`` (they only echo their prompt).
    None when every one is played, or ``default`` is another policy (a server that plays every role).

    A fork counts as played when its lead is: a policy forks only where its team has a fork policy
    (the coding lead never forks), and the generic lead never forks."""
    lead_played = played(team_name, "lead", policies) or default is generic.play
    unplayed = [
        role
        for role in dict.fromkeys(roles)
        if not played(team_name, role, policies) and not (role == "fork" and lead_played)
    ]
    if not unplayed or default not in (echo, generic.play):
        return None
    if default is generic.play:
        return (
            f"teamrt: note: sim plays this team's {', '.join(unplayed)} generically: each looks at the"
            " files, runs the commands the team allows and its gates, and reports only what its tools"
            " returned (a lead with coders, on failing tests, works as the coding example does); a rehearsal"
            " of the team, not its work: name a Claude model (--model) for real work"
        )
    teams: dict[str, list[str]] = {}
    for key in policies:
        team, _, role = key.rpartition("/")
        teams.setdefault(team or "any team", []).append(role)
    listed = "; ".join(f"{team}: {', '.join(names)}" for team, names in teams.items())
    if policies.keys() == POLICIES.keys():
        plays = f"sim plays the example teams' roles ({listed})"
    else:
        plays = f"sim plays only these roles ({listed})" if listed else "sim plays no role"
    echoes = "only echoes its prompt" if len(unplayed) == 1 else "only echo their prompt"
    return (
        f"teamrt: note: {plays}; this team's {', '.join(unplayed)} {echoes}:"
        " name a Claude model (--model) for real work"
    )


__all__ = ["DEFAULT", "POLICIES", "played", "unplayed_notice"]
