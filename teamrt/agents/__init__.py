"""Agent definitions: Markdown files with YAML front matter, field-compatible with Claude Code's."""

from .definitions import (
    PERMISSION_MODES,
    AgentDefinition,
    DefinitionError,
    builtin_definitions,
    load_definitions,
    parse_definition,
)

__all__ = [
    "PERMISSION_MODES",
    "AgentDefinition",
    "DefinitionError",
    "builtin_definitions",
    "load_definitions",
    "parse_definition",
]
