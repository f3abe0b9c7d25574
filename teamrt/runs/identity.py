"""Who an agent of a run is, as a person reads it: its role, and the agent file it runs.

An agent's name (``lead``, ``coder-1``) is its address; its role is the
team's name for its place. Neither says which agent definition it runs when
that is not the role's namesake: ``teamrt run --agent test-runner`` runs the
agent file ``test-runner`` as the run's lead, whose name and role are both
``lead``. ``show``, ``logs``, the progress lines and the TUI say it through
``role_text`` and ``definition_text``, so that such a run reads as what it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrt.agents import role_name
from teamrt.agents.definitions import BUILTIN
from teamrt.store import AgentRecord, RunRecord


def definition_name(agent: AgentRecord) -> str | None:
    """The name of the agent definition ``agent`` runs, as its file wrote it (None: not kept)."""
    name = agent.definition.get("name")
    return name if isinstance(name, str) and name else None


def role_text(agent: AgentRecord) -> str:
    """``agent``'s role as shown (``shown_role``); ``-`` for none."""
    return shown_role(agent.kind, agent.role, definition_name(agent))


def shown_role(kind: str, role: str | None, definition: str | None) -> str:
    """A role as shown: the role, when the agent's ``definition`` is the role's namesake (``coder``); a
    lead running another definition shows that one (``test-runner``: its kind says it leads); any other
    agent shows both, ``tester (test-runner)``. ``-`` for none."""
    if not role or definition is None or role_name(definition) == role:
        return role or "-"
    return definition if kind == "lead" else f"{role} ({definition})"


def definition_text(agent: AgentRecord | Mapping[str, Any], workdir: str | None = None) -> str | None:
    """``test-runner (agent file .claude/agents/test-runner.md)``: the definition an agent runs and where
    it comes from (a path under ``workdir`` relative to it; ``built-in``); None when not kept. Takes the
    record or its ``definition`` as kept."""
    definition = agent.definition if isinstance(agent, AgentRecord) else agent
    name, source = definition.get("name"), definition.get("source")
    if not isinstance(name, str) or not name:
        return None
    if not isinstance(source, str) or not source or source == BUILTIN:
        return f"{name} (built-in agent)"
    return f"{name} (agent file {_shown_path(source, workdir)})"


def alone(run: RunRecord) -> str | None:
    """The agent definition a run of one agent (``teamrt run --agent NAME``) runs, as its team keeps it;
    None for a run of a team."""
    team = run.settings.get("team")
    if not isinstance(team, dict):
        return None
    lead, roles = team.get("lead"), team.get("roles")
    agent = lead.get("agent") if isinstance(lead, dict) else None
    if roles or not isinstance(agent, str) or team.get("name") != agent:
        return None
    return agent


def alone_text(run: RunRecord, agents: Sequence[AgentRecord]) -> str | None:
    """What ``show`` says of a run of one agent: ``test-runner (agent file .claude/agents/test-runner.md),
    alone: no team``; None for a run of a team."""
    name = alone(run)
    if name is None:
        return None
    lead = next((a for a in agents if a.kind == "lead"), None)
    said = definition_text(lead, run.workdir) if lead is not None else None
    return f"{said or name}, alone: no team (teamrt run --agent)"


def agent_file(agent: AgentRecord) -> str | None:
    """The file ``agent``'s definition was read from (None: a built-in one, or not kept)."""
    source = agent.definition.get("source")
    return source if isinstance(source, str) and source and source != BUILTIN else None


def _shown_path(source: str, workdir: str | None) -> str:
    if workdir is None or not os.path.isabs(source):
        return source
    path, top = Path(source), Path(workdir)
    return str(path.relative_to(top)) if path.is_relative_to(top) else source
