"""The agent's tools: the interface (``base``), the built-in file and bash tools and their sandbox.

Light to import: nothing here pulls in the ``anthropic`` SDK.
"""

from .base import OnProcess, Tool, ToolContext, ToolError, ToolResult, tool_param
from .bash import Bash
from .files import Edit, Glob, Grep, Read, Write
from .registry import builtin_tools
from .sandbox import Sandbox, default_sandbox

__all__ = [
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "OnProcess",
    "Read",
    "Sandbox",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "Write",
    "builtin_tools",
    "default_sandbox",
    "tool_param",
]
