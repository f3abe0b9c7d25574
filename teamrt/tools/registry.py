"""The built-in tools, by the names the model calls them."""

from __future__ import annotations

from .base import Tool
from .bash import Bash
from .files import Edit, Glob, Grep, Read, Write


def builtin_tools() -> dict[str, Tool]:
    """Fresh instances of read, write, edit, glob, grep and bash, in that order (the order the model sees)."""
    tools: list[Tool] = [Read(), Write(), Edit(), Glob(), Grep(), Bash()]
    return {tool.name: tool for tool in tools}
