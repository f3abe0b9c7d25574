"""Tool names: Claude Code's, which the model is trained on, and the ones teamrt used before them.

The model sees Claude Code's names (``Read``, ``Grep``, ``Task`` ...). Agent
files, team files, permission rules and hook matchers may name a tool either
way, in any case; ``canonical`` turns any of them into the name the model
sees. Runs started before a rename hold calls to the older names in their
history; the loop dispatches those through ``canonical`` too, so they resume.

``MultiEdit`` is an older name of ``Edit``: Claude Code 2.1 has no MultiEdit
tool (its tools reference lists Edit, Write and NotebookEdit as the tools that
edit files), so a new agent is offered Edit only, and wherever a person wrote
MultiEdit (an agent file's ``tools``, a rule ``MultiEdit(...)``, a hook
matcher) it means Edit. An agent of an older run that called MultiEdit is
offered it again on resume (``teamrt.tools.registry.legacy_tools``) and its
calls answer to Edit's rules and hooks.
"""

from __future__ import annotations

from typing import Any

FILE_TOOLS = ("Read", "Write", "Edit", "Glob", "Grep", "LS")
CLAUDE_TOOLS = (*FILE_TOOLS, "Bash", "WebFetch", "WebSearch", "TodoWrite", "Task", "Skill")
"""Claude Code's built-in tools that teamrt has, by the names the model calls them (``Skill`` only for an
agent of a run that has skills: ``teamrt.tools.skill``)."""

EDITING = ("Write", "Edit")
"""The file tools that change a file (``Edit`` also under its older name ``MultiEdit``)."""

FOLDED = {"MultiEdit": "Edit"}
"""Tools teamrt offered before, each folded into the tool that does its work now: Claude Code 2.1 has no
MultiEdit, whose edits are a sequence of Edit's."""
ALIASES = {"Agent": "Task", **FOLDED}
"""Claude Code's other names for a tool teamrt has (``Agent`` is ``Task``'s newer name, ``MultiEdit``
``Edit``'s older one)."""

LATER = ("NotebookEdit", "NotebookRead", "BashOutput", "KillShell", "KillBash", "SlashCommand",
         "ExitPlanMode")  # fmt: skip
"""Claude Code's tools that teamrt does not have: an agent file naming one gets a warning."""

_BY_FOLDED = {name.lower(): name for name in (*CLAUDE_TOOLS, *ALIASES)}


def canonical(name: str) -> str | None:
    """The name the model sees for ``name`` (``read``, ``Read``, ``Agent``, ``MultiEdit`` ...), or None if
    teamrt has no such built-in tool. Team tools (``spawn_agent`` ...) and ``mcp__`` names are not
    built-ins."""
    found = _BY_FOLDED.get(name.strip().lower())
    return None if found is None else ALIASES.get(found, found)


def names_of(name: str) -> tuple[str, ...]:
    """``name`` and every other name Claude Code or teamrt gives that tool, ``name`` first: ``Edit`` is
    also ``MultiEdit``, ``MultiEdit`` also ``Edit``, ``Task`` also ``Agent``. A name teamrt does not know
    (an MCP tool's) is just itself. Hook matchers that are regular expressions are tried on each."""
    main = canonical(name)
    if main is None:
        return (name,)
    others = (main, *(alias for alias, target in ALIASES.items() if target == main))
    return (name, *(other for other in others if other != name))


def legacy_input(name: str, input: dict[str, Any]) -> dict[str, Any]:
    """A call's ``input`` as its tool takes it now, for a call named ``name`` in an older run: the old
    ``bash`` took its timeout in seconds, ``Bash`` takes milliseconds as Claude Code's does."""
    timeout = input.get("timeout")
    if name == "bash" and isinstance(timeout, int | float) and not isinstance(timeout, bool):
        return {**input, "timeout": timeout * 1000}
    return input
