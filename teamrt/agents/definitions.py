"""Agent definitions: Markdown files with YAML front matter, as Claude Code's sub-agent files.

The front matter sits between a first line ``---`` and the next ``---`` line and
uses Claude Code's field names; the Markdown body is the agent's system prompt.
Unknown fields are kept out of the definition with a warning, so files written
for Claude Code (``color``, ``skills``, ``hooks``...) load unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from teamrt.mailbox.names import is_name

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions")

# Claude Code's tool names for the tools teamrt has under its own lowercase names.
CLAUDE_TOOL_NAMES = {
    "Read": "read",
    "Write": "write",
    "Edit": "edit",
    "Glob": "glob",
    "Grep": "grep",
    "Bash": "bash",
}

# Project directories searched after the built-ins; a later one overrides an earlier one by name.
PROJECT_DIRS = (Path(".claude", "agents"), Path(".teamrt", "agents"))

BUILTIN_SOURCE = "built-in"

# The front matter fields teamrt uses; any other field is warned about and ignored.
FIELDS = frozenset({"name", "description", "tools", "disallowedTools", "model", "permissionMode", "maxTurns"})


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    description: str
    prompt: str
    """The Markdown body, stripped: the agent's system prompt."""
    tools: tuple[str, ...] | None
    """None: every tool the runtime offers."""
    disallowed_tools: tuple[str, ...]
    model: str | None
    """None: inherit the parent's model; else as written ("sonnet", "claude-sonnet-5-5", "sim")."""
    permission_mode: str | None
    max_turns: int | None
    source: str
    """The file path, or "built-in"."""
    warnings: tuple[str, ...] = ()


class DefinitionError(ValueError):
    """A definition that cannot be used; the message is one line, ``<source>: <problem>``."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(_one_line(f"{source}: {problem}"))


def parse_definition(text: str, source: str) -> AgentDefinition:
    """Parse one definition file's text; ``source`` names it in errors and warnings."""
    header, body = _split(text, source)
    fields = _load_yaml(header, source)
    definition = AgentDefinition(
        name=_name(fields.get("name"), "name", source),
        description=_required_text(fields.get("description"), "description", source),
        prompt=body.strip(),
        tools=_tools(fields.get("tools"), "tools", source),
        disallowed_tools=_tools(fields.get("disallowedTools"), "disallowedTools", source) or (),
        model=_model(fields.get("model"), "model", source),
        permission_mode=_permission_mode(fields.get("permissionMode"), "permissionMode", source),
        max_turns=_max_turns(fields.get("maxTurns"), "maxTurns", source),
        source=source,
        warnings=tuple(
            _one_line(f"{source}: unknown field {str(key)!r} ignored") for key in fields if key not in FIELDS
        ),
    )
    if not definition.prompt:
        raise DefinitionError(source, "empty body; the Markdown after the front matter is the agent's prompt")
    return definition


def builtin_definitions() -> dict[str, AgentDefinition]:
    """The definitions shipped with teamrt (``lead``, ``researcher``, ``coder``, ``reviewer``)."""
    return dict(_builtins())


def load_definitions(project: Path) -> dict[str, AgentDefinition]:
    """Built-ins, then ``<project>/.claude/agents/*.md``, then ``<project>/.teamrt/agents/*.md``.

    A later definition replaces an earlier one of the same name; two files of one
    directory defining the same name are an error. Hidden files are skipped.
    """
    found = builtin_definitions()
    for directory in PROJECT_DIRS:
        found.update(_load_dir(project / directory))
    return found


@functools.cache
def _builtins() -> tuple[tuple[str, AgentDefinition], ...]:
    folder = resources.files("teamrt.agents").joinpath("builtin")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".md")), key=lambda f: f.name)
    definitions = (parse_definition(f.read_text(encoding="utf-8"), BUILTIN_SOURCE) for f in files)
    return tuple((d.name, d) for d in definitions)


def _load_dir(directory: Path) -> dict[str, AgentDefinition]:
    if not directory.is_dir():
        return {}
    found: dict[str, AgentDefinition] = {}
    for path in sorted(directory.glob("*.md")):
        if path.name.startswith(".") or not path.is_file():
            continue
        definition = parse_definition(_read(path), str(path))
        earlier = found.get(definition.name)
        if earlier is not None:
            raise DefinitionError(str(path), f"agent {definition.name!r} is also defined in {earlier.source}")
        found[definition.name] = definition
    return found


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DefinitionError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise DefinitionError(str(path), f"not UTF-8 text (byte {exc.start})") from exc


def _split(text: str, source: str) -> tuple[str, str]:
    """The front matter's YAML text and the body, with a BOM and CRLF line ends undone."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != "---":
        raise DefinitionError(source, "no front matter: the file must start with a '---' line")
    for end in range(1, len(lines)):
        if lines[end].rstrip() == "---":
            return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :])
    raise DefinitionError(source, "front matter not closed: no '---' line after the first")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error, not last-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key.value!r} given twice", key.start_mark
                    )
                seen.add(key.value)
        return super().construct_mapping(node, deep)


def _load_yaml(header: str, source: str) -> dict[Any, Any]:
    try:
        fields = yaml.load(header, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        where = f"line {exc.problem_mark.line + 2}: " if exc.problem_mark else ""  # +2: 0-based, after '---'
        raise DefinitionError(
            source, f"{where}YAML error: {exc.problem or exc.context or 'invalid YAML'}"
        ) from exc
    except yaml.YAMLError as exc:
        raise DefinitionError(source, f"YAML error: {exc}") from exc
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise DefinitionError(
            source, f"front matter must be a mapping of fields, not a {type(fields).__name__}"
        )
    return fields


def _required_text(value: object, key: str, source: str) -> str:
    if value is None:
        raise DefinitionError(source, f"missing required field {key!r}")
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError(source, f"field {key!r} must be a non-empty string, not {_show(value)}")
    return value.strip()


def _name(value: object, key: str, source: str) -> str:
    name = _required_text(value, key, source)
    if not is_name(name):
        raise DefinitionError(
            source,
            f"field {key!r} must be 1-64 of lowercase letters, digits, '-' and '_', "
            f"starting with a letter or digit, not {_show(name)}",
        )
    return name


def _tools(value: object, key: str, source: str) -> tuple[str, ...] | None:
    """A comma-separated string or a list, Claude Code's names mapped to teamrt's."""
    if value is None:
        return None
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise DefinitionError(
            source, f"field {key!r} must be a comma-separated string or a list of strings, not {_show(value)}"
        )
    names = (item.strip() for item in items)
    return tuple(dict.fromkeys(CLAUDE_TOOL_NAMES.get(name, name) for name in names if name))


def _model(value: object, key: str, source: str) -> str | None:
    if value is None:
        return None
    model = _required_text(value, key, source)
    return None if model == "inherit" else model


def _permission_mode(value: object, key: str, source: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value in PERMISSION_MODES:
        return value
    raise DefinitionError(
        source, f"field {key!r} must be one of {', '.join(PERMISSION_MODES)}, not {_show(value)}"
    )


def _max_turns(value: object, key: str, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(source, f"field {key!r} must be a positive integer, not {_show(value)}")
    return value


def _show(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")
