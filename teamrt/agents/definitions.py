"""Agent definitions: Markdown files with YAML front matter, loaded the way Claude Code loads its sub-agents.

The front matter (``teamrt.agents.frontmatter``) uses Claude Code's field
names; the Markdown body is the agent's system prompt. Definitions come from
four sources, the lowest precedence first: teamrt's built-ins, the user's
``~/.claude/agents/`` (``$CLAUDE_CONFIG_DIR/agents``), the project's
``.claude/agents/`` and the project's ``.teamrt/agents/``; folders are
searched at any depth, and a later source replaces an earlier one's agent of
the same name, or of the same role name. A file that cannot load is skipped with one warning line
``<path>: <cause>`` and the rest load (``scan_definitions``). A field teamrt
cannot honour (a tool it lacks, an unknown mode, a field it does not use)
is left out with a warning, never silently.

Names: an agent's ``name`` is kept as the person wrote it, as Claude Code keeps
it: ``Python Testing Expert`` and ``team/reviewer`` load, and that name is the
agent type the model passes to Task. teamrt also needs a name it can use for a
role, a mailbox and a folder, so each agent gets a ``role_name`` made only of
``a-z 0-9 _ -`` (``python-testing-expert``, ``team-reviewer``): a slash, ``..``
or any other character of a path never reaches one. Two of the person's agents
whose names become the same role name clash as two of the same name do: a
later source's wins (the project's over the user's), with a warning naming
both; in one folder the first file by path wins and the other is skipped.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from teamrt.agents import plugin_agents
from teamrt.agents.frontmatter import FrontMatterError, parse, split
from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.plugins import load_plugins
from teamrt.errors import UserError
from teamrt.models.catalog import EFFORT_LEVELS
from teamrt.tools.names import LATER, canonical

PERMISSION_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
"""Claude Code's permission modes; ``manual`` is read as ``default``."""
MODE_ALIASES = {"manual": "default"}
REPOSITORY_REFUSED_MODES = ("bypassPermissions", "auto")
"""Modes a repository's agent file may not choose, as a repository's settings may not (a cloned
repository is someone else's): the agent then runs in the mode its role or the settings give."""

TEAM_TOOLS = (
    "spawn_agent", "send_message", "broadcast", "task_create", "task_claim", "task_update", "task_list",
    "request_shutdown", "respond_shutdown",
)  # fmt: skip
"""teamrt's team tools (``teamrt.tools.team``): a definition may name them as they are."""

BUILTIN, USER, PROJECT, TEAMRT = "built-in", "user", "project", "teamrt"
"""The scopes a definition comes from, the lowest precedence first."""

FIELDS = frozenset({
    "name", "description", "tools", "disallowedTools", "model", "permissionMode", "maxTurns", "mcpServers",
    "effort", "skills",
})  # fmt: skip
"""The front matter fields teamrt uses."""
SILENT_FIELDS = frozenset({"color"})
"""Claude Code's fields that only change how Claude Code shows an agent: ignored without a word."""
UNUSED_FIELDS = ("hooks", "memory", "background", "isolation", "initialPrompt")
"""Claude Code's fields teamrt does not use (yet): ignored with a warning."""

MAX_NAME = 64
"""The longest role name (``teamrt.mailbox.names``)."""
MAX_WRITTEN = 128
"""The longest name an agent file may give: Claude Code sets no limit, but the name is shown in prompts,
logs and hook input."""
MAX_BYTES = 512 * 1024
"""A larger agent file is skipped unread."""
MAX_FILES = 1000
"""Agent files looked at in one source's folder; past it the rest are skipped with a warning."""
MAX_ENTRIES = 20_000
"""Files and folders walked in one source's folder, agent files or not."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BREAKS = ("Zl", "Zp")
"""Unicode's line and paragraph separators: a name is one line."""
_TOOL_PATTERN = re.compile(r"(\w+)\s*\((.*)\)\s*", re.DOTALL)
_MCP_TOOL = re.compile(r"mcp__[A-Za-z0-9_-]+(__\*)?")
"""Every tool of an MCP server (``mcp__github``, ``mcp__github__*``), or one (``mcp__github__get_issue``)."""


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    """As written: Claude Code's names may hold capitals, dots and underscores (``role_name`` is the
    role and mailbox name)."""
    description: str
    prompt: str
    """The Markdown body, stripped: the agent's system prompt."""
    tools: tuple[str, ...] | None
    """The model-facing names (``Read``, ``Bash``, ``spawn_agent``); None: every tool the runtime offers."""
    disallowed_tools: tuple[str, ...]
    model: str | None
    """As written (``sonnet``, ``claude-opus-5``); None: ``inherit``, or none given (``choose_model``)."""
    permission_mode: str | None
    max_turns: int | None
    source: str
    """The file's path, or ``built-in``."""
    scope: str = PROJECT
    """Where it comes from: ``built-in``, ``user``, ``project`` (``.claude/agents``) or ``teamrt``
    (``.teamrt/agents``)."""
    warnings: tuple[str, ...] = ()
    """What was left out of the file, each ``<source>: <what>`` on one line."""
    mcp_servers: tuple[str | dict[str, Any], ...] = ()
    """``mcpServers`` as written: names of configured MCP servers, or inline ``{name: entry}`` objects
    (``teamrt.mcp.config`` checks them)."""
    effort: str | None = None
    """The agent's ``output_config.effort``, as Claude Code's ``effort`` field gives it; None: its team
    file role's, else the team's (a role's own setting wins over it, as a role's model does)."""
    skills: tuple[str, ...] = ()
    """Claude Code's ``skills``: the skills whose bodies the agent starts with in its context (as Claude
    Code preloads them into a subagent), by name."""


def kept_definition(data: Mapping[str, Any]) -> AgentDefinition:
    """A definition as a run kept it (``dataclasses.asdict``), for a resume after its file stopped
    loading; tools kept under older names (``read``, ``MultiEdit``) get the names the model sees now."""

    def names(kept: Any) -> tuple[str, ...]:
        return tuple(dict.fromkeys(canonical(str(name)) or str(name) for name in kept or ()))

    return AgentDefinition(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        prompt=str(data.get("prompt", "")),
        tools=None if data.get("tools") is None else names(data["tools"]),
        disallowed_tools=names(data.get("disallowed_tools")),
        model=data.get("model"),
        permission_mode=data.get("permission_mode"),
        max_turns=data.get("max_turns"),
        source=str(data.get("source", "")),
        scope=str(data.get("scope", PROJECT)),
        mcp_servers=tuple(data.get("mcp_servers") or ()),
        effort=data.get("effort") if data.get("effort") in EFFORT_LEVELS else None,
        skills=tuple(str(name) for name in data.get("skills") or ()),
    )


@dataclass(frozen=True)
class AgentScan:
    """What ``scan_definitions`` found."""

    definitions: dict[str, AgentDefinition]
    """The agents that load, by name, each from the highest-precedence source defining it."""
    skipped: tuple[str, ...] = ()
    """The files that did not load, each ``<path>: <cause>`` on one line."""
    overridden: tuple[AgentDefinition, ...] = ()
    """Definitions a later source replaced (a project's agent over a user's of the same name)."""
    notes: tuple[str, ...] = ()
    """Warnings about the scan itself (a folder too large)."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every line the user should see: the skipped files, then the loaded agents' warnings."""
        loaded = (line for d in self.definitions.values() for line in d.warnings)
        return (*self.notes, *self.skipped, *loaded)


class DefinitionError(UserError, ValueError):
    """A definition that cannot be used; the message is one line, ``<source>: <problem>``."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(one_line(f"{source}: {problem}"))


def parse_definition(text: str, source: str, *, scope: str = PROJECT) -> AgentDefinition:
    """Parse one definition file's text; ``source`` names it in errors and warnings. Raises
    ``DefinitionError`` for a file that cannot load."""
    try:
        document = split(text)
        fields = parse(document.header)
        warnings: list[str] = []
        definition = AgentDefinition(
            name=_name(fields.get("name")),
            description=_required_text(fields.get("description"), "description"),
            prompt=document.body.strip(),
            tools=_tools(fields.get("tools"), "tools", warnings),
            disallowed_tools=_tools(fields.get("disallowedTools"), "disallowedTools", warnings) or (),
            model=_model(fields.get("model"), warnings),
            permission_mode=_permission_mode(fields.get("permissionMode"), scope, warnings),
            max_turns=_max_turns(fields.get("maxTurns")),
            source=source,
            scope=scope,
            mcp_servers=_mcp_servers(fields.get("mcpServers")),
            effort=_effort(fields.get("effort"), warnings),
            skills=_skills(fields.get("skills"), warnings),
        )
    except (FrontMatterError, _Problem) as exc:
        raise DefinitionError(source, str(exc)) from None
    if not definition.prompt:
        raise DefinitionError(source, "empty body; the Markdown after the front matter is the agent's prompt")
    if definition.tools == () and fields.get("tools") not in ([], ""):
        warnings.append("none of the tools it names is available: it has only the team tools")
    for key in fields:
        if key in UNUSED_FIELDS:
            warnings.append(f"Claude Code's field {key!r} is not used by teamrt")
        elif key not in FIELDS and key not in SILENT_FIELDS:
            warnings.append(f"unknown field {_show(key)} ignored")
    return dataclasses.replace(
        definition, warnings=tuple(one_line(f"{source}: {warning}") for warning in warnings)
    )


def role_name(name: str) -> str:
    """The role (and mailbox) name of agent ``name``: lowercased, every character other than a-z, 0-9,
    ``_`` and ``-`` made ``-``, leading ``-`` and ``_`` dropped (``Code.Reviewer`` is ``code-reviewer``,
    ``Python Testing Expert`` ``python-testing-expert``, ``team/reviewer`` ``team-reviewer``). A name with
    no such letter or digit at all (``日本語``, ``..``) is ``agent-`` and a digest of the name: still one
    name per agent, and never a path."""
    made = re.sub(r"[^a-z0-9_-]", "-", name.lower()).lstrip("-_")[:MAX_NAME]
    if made.strip("-_"):
        return made
    return "agent-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def builtin_definitions() -> dict[str, AgentDefinition]:
    """The definitions shipped with teamrt (``lead``, ``researcher``, ``coder``, ``reviewer``)."""
    return dict(_builtins())


def agent_folders(project: Path) -> list[tuple[str, Path]]:
    """The folders agent files load from by scope, the lowest precedence first (the built-ins before):
    the enabled plugins' (``plugin:<name>``, a folder or one file; ``teamrt.agents.plugin_agents``), the
    user's, the project's."""
    return [
        *load_plugins(project).agent_folders,
        (USER, claude_home() / "agents"),
        (PROJECT, project / ".claude" / "agents"),
        (TEAMRT, project / ".teamrt" / "agents"),
    ]


def scan_definitions(project: Path) -> AgentScan:
    """The built-ins, then each of ``agent_folders``; never raises for a file that cannot load.

    In one folder, ``*.md`` files load at any depth; hidden files and folders are skipped. Two files of
    one source naming the same agent: the first by sorted path loads, the other is skipped. A project's
    file that resolves outside the project (a symlink) is skipped: the repository is not trusted to
    point teamrt at the user's other files.
    """
    found = builtin_definitions()
    skipped: list[str] = []
    overridden: list[AgentDefinition] = []
    notes: list[str] = []
    for scope, folder in agent_folders(project):
        plugin = plugin_agents.is_plugin(scope)
        inside = plugin_agents.inside(folder) if plugin else None if scope == USER else project
        mine: dict[str, AgentDefinition] = {}  # by role name
        for path in [folder] if plugin and folder.is_file() else _files(folder, inside, notes):
            try:
                definition = parse_definition(_read(path, inside), str(path), scope=scope)
            except DefinitionError as exc:
                skipped.append(str(exc))
                continue
            if plugin:
                definition = plugin_agents.plugin_definition(definition, scope, folder, path)
            role = role_name(definition.name)
            earlier = mine.get(role)
            if earlier is not None:
                skipped.append(one_line(f"{path}: {_clash(definition, earlier, role)}"))
                continue
            mine[role] = definition
        for role, definition in mine.items():
            replaced = _replaced(found, definition, role)
            if replaced is not None:
                overridden.append(found.pop(replaced.name))
                if replaced.name != definition.name:
                    clash = _clash(definition, replaced, role)
                    notes.append(one_line(f"{definition.source}: {clash}; the {scope} agent is used"))
            found[definition.name] = definition
    return AgentScan(found, tuple(skipped), tuple(overridden), tuple(notes))


def _replaced(
    found: Mapping[str, AgentDefinition], definition: AgentDefinition, role: str
) -> AgentDefinition | None:
    """The agent of an earlier source that ``definition`` replaces: the one of its name, else one of the
    person's (not a built-in, whose name the built-in team's roles name) whose name becomes ``role``."""
    if definition.name in found:
        return found[definition.name]
    return next((d for d in found.values() if d.scope != BUILTIN and role_name(d.name) == role), None)


def _clash(definition: AgentDefinition, earlier: AgentDefinition, role: str) -> str:
    """Why ``definition`` and ``earlier`` cannot both load, on one line."""
    if definition.name == earlier.name:
        return f"agent {definition.name!r} is defined already in {earlier.source}"
    return (
        f"agent {definition.name!r} and agent {earlier.name!r} of {earlier.source} both become the role"
        f" {role!r}"
    )


def load_definitions(project: Path) -> dict[str, AgentDefinition]:
    """The agents of ``project`` by name (``scan_definitions``, without its warnings)."""
    return scan_definitions(project).definitions


def choose_model(role_model: str | None, definition: AgentDefinition, team_model: str) -> str:
    """The model an agent runs on: its team-file role's, else its definition's, else the team's.

    A definition's alias is resolved (``opus``); on a team on ``sim`` a definition's Claude model
    becomes ``sim:<model>``, so the run stays offline, priced as that model. A definition's model
    teamrt does not know, or one the API has retired, is passed over for the team's (its definition's
    warnings say so).
    """
    from teamrt.models.catalog import lookup, resolve
    from teamrt.models.registry import is_sim

    if role_model or definition.model is None:
        model = resolve(role_model or team_model)
    else:
        model = resolve(definition.model)
    if is_sim(team_model) and not is_sim(model):
        model = f"sim:{model}"
    if role_model or definition.model is None:
        return model
    info = lookup(model)
    return model if info is not None and info.retired is None else team_model


@functools.cache
def _builtins() -> tuple[tuple[str, AgentDefinition], ...]:
    folder = resources.files("teamrt.agents").joinpath("builtin")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".md")), key=lambda f: f.name)
    definitions = (parse_definition(f.read_text(encoding="utf-8"), BUILTIN, scope=BUILTIN) for f in files)
    return tuple((d.name, d) for d in definitions)


def _files(folder: Path, inside: Path | None, notes: list[str]) -> list[Path]:
    """The visible ``*.md`` files under ``folder`` at any depth, sorted by path. Symlinked folders are
    followed once each; with ``inside``, only those that resolve into it."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    seen: set[str] = set()
    entries = 0
    for top, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(top)
        if real in seen:  # a symlink loop, or a folder reached twice
            dirs.clear()
            continue
        if inside is not None and not Path(real).is_relative_to(inside.resolve()):
            notes.append(one_line(f"{top}: a link to a folder outside the project; not read"))
            dirs.clear()
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += (Path(top, f) for f in files if f.endswith(".md") and not f.startswith("."))
        entries += len(dirs) + len(files)
        if len(found) > MAX_FILES or entries > MAX_ENTRIES:
            notes.append(one_line(f"{folder}: too many files; only some of its agent files were looked at"))
            break
    return sorted(found)[:MAX_FILES]


def _read(path: Path, inside: Path | None) -> str:
    """The text of ``path``, a regular UTF-8 file of at most ``MAX_BYTES``; ``inside``: a folder the
    file must resolve into. A FIFO or device is refused without blocking on it."""
    source = str(path)
    if inside is not None and not path.resolve().is_relative_to(inside.resolve()):
        raise DefinitionError(source, "a link to a file outside the project; not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DefinitionError(source, f"cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DefinitionError(source, "not a regular file")
        if st.st_size > MAX_BYTES:
            raise DefinitionError(
                source, f"over {MAX_BYTES // 1024} KiB; an agent file is a short Markdown file"
            )
        data = f.read(MAX_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DefinitionError(source, f"not UTF-8 text (byte {exc.start})") from None


def _required_text(value: object, key: str) -> str:
    if value is None:
        raise _Problem(f"missing required field {key!r}")
    if not isinstance(value, str) or not value.strip():
        raise _Problem(f"field {key!r} must be a non-empty string, not {_show(value)}")
    return value.strip()


def _name(value: object) -> str:
    """The name as written, as Claude Code takes it: spaces, slashes, dots and letters of any script
    included (``role_name`` makes the name teamrt files it under). Control, format and line-separator
    characters are refused: the name is shown on terminals and in prompts."""
    name = _required_text(value, "name")
    bad = next(
        (c for c in name if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in _BREAKS), None
    )
    if len(name) > MAX_WRITTEN or bad is not None:
        raise _Problem(
            f"field 'name' must be 1-{MAX_WRITTEN} printable characters on one line, not {_show(name)}"
        )
    return name


def _tools(value: object, key: str, warnings: list[str]) -> tuple[str, ...] | None:
    """A comma-separated string or a list of tool names, as the model sees them; ``*``: all (None).

    A tool teamrt lacks is left out with a warning, never silently."""
    if value is None:
        return None
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise _Problem(
            f"field {key!r} must be a comma-separated string or a list of strings, not {_show(value)}"
        )
    names: list[str] = []
    for item in (item.strip() for item in items):
        if item == "*" and key == "tools":
            return None
        if not item:
            continue
        known = canonical(item) or (item if item in TEAM_TOOLS or _MCP_TOOL.fullmatch(item) else None)
        if known is not None:
            names.append(known)
        else:
            warnings.append(f"{key}: {_why_not(item)}")
    return tuple(dict.fromkeys(names))


def _why_not(tool: str) -> str:
    """Why a tool named in a definition is left out."""
    pattern = _TOOL_PATTERN.fullmatch(tool)
    if pattern is not None and (canonical(pattern.group(1)) or pattern.group(1) in LATER):
        return (
            f"{_show(tool)}: a tool with a rule in parentheses is not supported in a definition; left out"
            " (put the rule in the team file's [permissions])"
        )
    if tool.lower() in {name.lower() for name in LATER}:
        return f"{_show(tool)} is not available in teamrt yet; left out"
    return f"no such tool {_show(tool)}; left out"


def _mcp_servers(value: object) -> tuple[str | dict[str, Any], ...]:
    """A list of server names and inline ``{name: entry}`` objects, as Claude Code takes it; one object
    of servers by name (as many public agent files write it) is taken as that list of one."""
    if value is None:
        return ()
    if isinstance(value, dict):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(item, str | dict) for item in value):
        raise _Problem(
            f"field 'mcpServers' must be a list of server names and {{name: entry}} objects, not"
            f" {_show(value)}"
        )
    return tuple(value)


def _model(value: object, warnings: list[str]) -> str | None:
    """As written; ``inherit`` is None. One teamrt does not know is kept, with a warning."""
    from teamrt.models.catalog import lookup, resolve

    if value is None:
        return None
    model = _required_text(value, "model")
    if model == "inherit":
        return None
    info = lookup(resolve(model))
    if info is None:
        warnings.append(
            f"model {_show(model)} is not one teamrt knows (teamrt models lists them); the agent runs on"
            " the team's model"
        )
    elif info.retired is not None:
        warnings.append(
            f"model {_show(model)} was retired on {info.retired} (the API answers 404 for it); the agent runs"
            " on the team's model"
        )
    return model


def _permission_mode(value: object, scope: str, warnings: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value in REPOSITORY_REFUSED_MODES and scope in (PROJECT, TEAMRT):
        warnings.append(
            f"permissionMode {value!r} ignored: a repository's agent file may not lift the permission"
            " checks (your own ~/.claude/agents files and the team file's permission_mode may)"
        )
        return None
    if isinstance(value, str) and value in (*PERMISSION_MODES, *MODE_ALIASES):
        return MODE_ALIASES.get(value, value)
    warnings.append(
        f"permissionMode {_show(value)} is not one of {', '.join(PERMISSION_MODES)}; ignored, as Claude"
        " Code ignores it"
    )
    return None


def _effort(value: object, warnings: list[str]) -> str | None:
    """Claude Code's ``effort``; a level the API does not have is left out with a warning, as a model
    teamrt does not know is (whether the agent's model takes the level is checked when it starts)."""
    if value is None:
        return None
    if value not in EFFORT_LEVELS:
        warnings.append(f"effort {_show(value)} is not one of {', '.join(EFFORT_LEVELS)}; left out")
        return None
    return str(value)


def _skills(value: object, warnings: list[str]) -> tuple[str, ...]:
    """Claude Code's ``skills``: skills whose bodies the agent starts with (``teamrt.claudecode.skills``),
    a comma-separated string or a list of names; the run warns of a name it has no skill for."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        warnings.append(f"skills: a comma-separated string or a list of names, not {_show(value)}; left out")
        return ()
    return tuple(dict.fromkeys(item.strip() for item in items if item.strip()))


def _max_turns(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Problem(f"field 'maxTurns' must be a positive integer, not {_show(value)}")
    return value


class _Problem(Exception):
    """A field that makes the file unusable; ``parse_definition`` names the file."""


def _show(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def one_line(text: str) -> str:
    """``text`` safe to print on one line of a terminal: a line break as ``\\n``, any other control or
    bidirectional-override character (an escape sequence in a hostile file's name) as its escape."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m.group()) or ascii(m.group())[1:-1], text)
