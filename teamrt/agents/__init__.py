"""Agent definitions: Markdown files with YAML front matter, loaded as Claude Code loads its sub-agents."""

from teamrt.agents.definitions import (
    PERMISSION_MODES,
    AgentDefinition,
    AgentScan,
    DefinitionError,
    agent_folders,
    builtin_definitions,
    choose_model,
    kept_definition,
    load_definitions,
    one_line,
    parse_definition,
    role_name,
    scan_definitions,
)

__all__ = [
    "PERMISSION_MODES",
    "AgentDefinition",
    "AgentScan",
    "DefinitionError",
    "agent_folders",
    "builtin_definitions",
    "choose_model",
    "kept_definition",
    "load_definitions",
    "one_line",
    "parse_definition",
    "role_name",
    "scan_definitions",
]
