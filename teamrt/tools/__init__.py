"""The agent's tools: the interface (``base``), the built-in file and Bash tools and their sandbox.

Light to import: nothing here pulls in the ``anthropic`` SDK.
"""

from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.tools.base import OnProcess, Tool, ToolContext, ToolError, ToolResult, tool_param
from teamrt.tools.files.edit import Edit, Glob, Grep, MultiEdit, Read, Write
from teamrt.tools.files.listing import LS
from teamrt.tools.registry import builtin_tools
from teamrt.tools.shell.bash import Bash

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
