"""The agent's tools: the interface (``base``) and the built-in file and Bash tools.

The programs they run are confined by ``teamrt.sandbox``.

Light to import: nothing here pulls in the ``anthropic`` SDK.
"""

from teamrt.tools.base import OnProcess, Tool, ToolContext, ToolError, ToolResult, tool_param
from teamrt.tools.files.edit import Edit, Glob, Grep, MultiEdit, Read, Write
from teamrt.tools.files.listing import LS
from teamrt.tools.registry import builtin_tools, legacy_tools
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
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "Write",
    "builtin_tools",
    "legacy_tools",
    "tool_param",
]
