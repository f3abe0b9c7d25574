"""Tool names: Claude Code's, which the model is trained on, and the ones teamrt used before them.

The model sees Claude Code's names (``Read``, ``Grep``, ``Task`` ...). Agent
files, team files and permission rules may name a tool either way, in any
case; ``canonical`` turns any of them into the name the model sees. Runs
started before the rename hold calls to the old lowercase names in their
history; the loop dispatches those through ``canonical`` too, so they resume.
"""

from __future__ import annotations

from typing import Any

FILE_TOOLS = ("Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS")
CLAUDE_TOOLS = (*FILE_TOOLS, "Bash", "WebFetch", "WebSearch", "TodoWrite", "Task")
"""Claude Code's built-in tools that teamrt has, by the names the model calls them."""

ALIASES = {"Agent": "Task"}
"""Claude Code's other names for a tool teamrt has (``Agent`` is ``Task``'s newer name)."""

LATER = ("NotebookEdit", "NotebookRead", "BashOutput", "KillShell", "KillBash", "SlashCommand",
         "ExitPlanMode", "Skill")  # fmt: skip
"""Claude Code's tools that teamrt does not have: an agent file naming one gets a warning."""

_BY_FOLDED = {name.lower(): name for name in (*CLAUDE_TOOLS, *ALIASES)}


def canonical(name: str) -> str | None:
    """The name the model sees for ``name`` (``read``, ``Read``, ``Agent`` ...), or None if teamrt
    has no such built-in tool. Team tools (``spawn_agent`` ...) and ``mcp__`` names are not built-ins."""
    found = _BY_FOLDED.get(name.strip().lower())
    return None if found is None else ALIASES.get(found, found)


def legacy_input(name: str, input: dict[str, Any]) -> dict[str, Any]:
    """A call's ``input`` as its tool takes it now, for a call named ``name`` in an older run: the old
    ``bash`` took its timeout in seconds, ``Bash`` takes milliseconds as Claude Code's does."""
    timeout = input.get("timeout")
    if name == "bash" and isinstance(timeout, int | float) and not isinstance(timeout, bool):
        return {**input, "timeout": timeout * 1000}
    return input
