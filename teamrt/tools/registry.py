"""The built-in tools, by the names the model calls them (Claude Code's)."""

from __future__ import annotations

from .base import Tool
from .bash import Bash
from .files import Edit, Glob, Grep, MultiEdit, Read, Write
from .listing import LS


def builtin_tools() -> dict[str, Tool]:
    """Fresh instances of Read, Write, Edit, MultiEdit, Glob, Grep, LS and Bash, in the order the model
    sees them. ``TodoWrite`` and ``Task`` need the team: ``teamrt.tools.team.team_tools`` makes them."""
    tools: list[Tool] = [Read(), Write(), Edit(), MultiEdit(), Glob(), Grep(), LS(), Bash()]
    return {tool.name: tool for tool in tools}
