"""The agent's tools: the interface (``base``), the built-in file and Bash tools and their sandbox.

Light to import: nothing here pulls in the ``anthropic`` SDK.
"""

from .base import OnProcess, Tool, ToolContext, ToolError, ToolResult, tool_param
from .bash import Bash
from .files import Edit, Glob, Grep, MultiEdit, Read, Write
from .listing import LS
from .registry import builtin_tools
from .sandbox import Sandbox, default_sandbox

__all__ = [
    "LS",
    "Bash",
    "Edit",
    "Glob",
    "Grep",
    "MultiEdit",
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
