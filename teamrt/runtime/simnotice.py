"""The notice of a run on ``sim`` whose team has roles no team policy plays: the generic play rehearses
them (or, on a simulator without it, they only echo).

Not in ``teamrt.sim``, though it is about the simulator: importing any module
of that package runs its ``__init__``, which imports the simulator's server,
and a run on Claude must not (``sim_notice`` imports it only for a role on
sim). The supervisor records the notice at a run's start (``SIM_UNPLAYED``).
"""

from __future__ import annotations

from typing import Any, Final

from teamrt.agents import AgentDefinition
from teamrt.models import is_sim
from teamrt.team import Team

SIM_UNPLAYED: Final = "sim.unplayed"
"""The event of a run on ``sim`` whose team has roles no simulator policy plays (``sim_notice``)."""


def sim_notice(team: Team, definitions: dict[str, AgentDefinition], *, sim: Any = None) -> str | None:
    """The line a run of ``team`` on ``sim`` gives at its start when roles of it are played by no team
    policy (``unplayed_notice``: the generic play rehearses them, or they only echo their prompt): None
    when every role on sim is played, or none is on sim. ``sim``: the run's own ``SimServer`` (default:
    the process's, playing the example teams). Costs no SDK import; the simulator is imported (and the
    process's started) only when a role is on sim."""
    on_sim = [r for r in (team.lead, *team.roles.values()) if is_sim(r.model or team.model)]
    if not on_sim:
        return None
    from teamrt.sim import shared_server
    from teamrt.sim.plays import unplayed_notice

    server = sim if sim is not None else shared_server()
    lead = definitions.get(team.lead.agent)
    forks = lead is not None and "spawn_agent" not in lead.disallowed_tools
    roles = [r.name for r in on_sim]
    if roles and roles[0] == "lead" and forks:
        roles.insert(1, "fork")
    return unplayed_notice(team.name, roles, server.policies, server.default)
