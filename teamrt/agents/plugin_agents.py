"""An enabled plugin's agent files (``teamrt.claudecode.plugins``), as Claude Code loads them.

A plugin's agent is named ``<plugin>:<agent>``, with the folders between the plugin's agents folder and
the file in between (``my-plugin:review:security``), so no two plugins, nor a plugin and the project,
clash. As in Claude Code, a plugin's agent file may not choose its permission mode, nor bring MCP servers
or hooks: a plugin's agents come with the plugin's author's words, and those fields are ignored, each with
a warning. Plugin agents rank below the user's and the project's (``agent_folders`` lists them first).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Protocol, TypeVar

PLUGIN_SCOPE = "plugin:"


class _Definition(Protocol):
    """An agent definition (``teamrt.agents.definitions.AgentDefinition``, which imports this module)."""

    @property
    def name(self) -> str: ...
    @property
    def permission_mode(self) -> str | None: ...
    @property
    def mcp_servers(self) -> tuple[Any, ...]: ...
    @property
    def warnings(self) -> tuple[str, ...]: ...


D = TypeVar("D", bound=_Definition)


def is_plugin(scope: str) -> bool:
    return scope.startswith(PLUGIN_SCOPE)


def inside(folder: Path) -> Path:
    """What a plugin's agent files must resolve into: their folder (a single file's own folder)."""
    return folder.parent if folder.is_file() else folder


def plugin_definition(definition: D, scope: str, folder: Path, path: Path) -> D:
    """``definition``, read from ``path`` under the plugin folder ``folder``, as a plugin's agent."""
    plugin = scope.removeprefix(PLUGIN_SCOPE)
    between = path.parent.relative_to(folder).parts if folder.is_dir() and path.is_relative_to(folder) else ()
    name = ":".join([plugin, *between, definition.name])
    ignored = [f for f, on in (("permissionMode", definition.permission_mode is not None),
                               ("mcpServers", bool(definition.mcp_servers))) if on]  # fmt: skip
    warnings = [
        f"{path}: {field} ignored: a plugin's agent may not set it (as in Claude Code)" for field in ignored
    ]
    return dataclasses.replace(  # type: ignore[type-var]  # a dataclass, as _Definition cannot say
        definition, name=name, permission_mode=None, mcp_servers=(),
        warnings=(*definition.warnings, *warnings),
    )  # fmt: skip
