"""Which MCP servers a run has: the team file's, the person's own, the project's ``.mcp.json``, agent files'.

The places, as Claude Code keeps them, the highest precedence first (a name
defined in two places is the first's):

- the team file's ``[mcp.servers.<name>]`` tables (teamrt's own);
- the person's local servers for this project: ``projects.<path>.mcpServers``
  in ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``);
- the project's ``.mcp.json`` (``{"mcpServers": {...}}``), which came with the
  repository: its servers start only when the person trusted the project
  (``teamrt trust``) or enabled them (``enableAllProjectMcpServers``,
  ``enabledMcpjsonServers``) in their own settings, never because the
  repository's settings say so (``project_enablement``);
- the person's user servers: ``mcpServers`` at the top of ``~/.claude.json``.

An agent file's ``mcpServers`` lists servers by name (configured above) or
inline, ``{name: entry}``; inline servers of a repository's agent file need
the same trust as ``.mcp.json``.

An entry is ``{"command", "args", "env"}`` (``type: "stdio"``, the default) or
``{"type": "http", "url", "headers"}`` (``"sse"`` for a server on MCP's
deprecated HTTP+SSE transport, as Claude Code still takes it); ``timeout`` (seconds per call) is
teamrt's own. ``${VAR}`` and ``${VAR:-default}`` are expanded from teamrt's
environment in the command, args, env, url and headers; teamrt's own
credentials (``ANTHROPIC_*``, ``TEAMRT_DB``) are never expanded. A
repository's entry (``.mcp.json``, a repository agent file's inline servers)
is someone else's text, trusted or not: it may expand only the variables the
person's team file lists in ``[mcp] env``; naming any other leaves it out, so
a planted ``${AWS_SECRET_ACCESS_KEY}`` in a URL or a header never leaves the
machine. An entry that cannot be used is left out with one line naming its
file and its name.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from teamrt.claudecode.paths import CONFIG_DIR_ENV, claude_home
from teamrt.claudecode.plugins import Plugins, load_plugins
from teamrt.claudecode.reading import read_json_object
from teamrt.claudecode.settings import git_tracks, load_claude_settings
from teamrt.errors import UserError
from teamrt.mcp.launchers import Launch, granted, launch, notice
from teamrt.sandbox.bwrap import NEVER_PASSED

MCP_JSON = ".mcp.json"
USER_CONFIG = ".claude.json"
MAX_CONFIG_BYTES = 64 << 20
"""``~/.claude.json`` holds Claude Code's whole state and may grow large; past this it is not read."""
MAX_MCP_JSON_BYTES = 1 << 20
TRANSPORTS = ("stdio", "http", "sse")
REMOTE = ("http", "sse")
"""The transports that reach a server at a URL (``sse``: MCP's deprecated HTTP+SSE, still in use)."""
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
DEFAULT_TIMEOUT = 600.0
"""Seconds a tool call may take when neither the entry's ``timeout`` nor ``MCP_TOOL_TIMEOUT`` says."""
TIMEOUT_ENV = "MCP_TOOL_TIMEOUT"
"""Claude Code's variable for the tool-call timeout, in milliseconds."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

TEAM, LOCAL, PROJECT, USER, AGENT = "team", "local", "project", "user", "agent"
PLUGIN = "plugin"
"""An enabled plugin's server (``teamrt.claudecode.plugins``): the lowest precedence, as in Claude Code."""


class EntryError(UserError, ValueError):
    """An entry that cannot be used; the message says why, without naming its file."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    scope: str
    """``team``, ``local``, ``project``, ``user``, or ``agent`` (an agent file's inline server)."""
    source: str
    """Where it is written, for messages: a path, or ``<team file> [mcp.servers.x]``."""
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    """Seconds one tool call may take."""
    launch: Launch | None = None
    """Its command read as a package launcher's (``npx -y pkg``), or None (``teamrt.mcp.launchers``)."""
    fetch: bool = False
    """Whether the team file's ``[mcp] fetch_packages`` lets it fetch its launched package: it runs with the
    network and a package cache of its own."""
    repository: bool = False
    """Whether the repository wrote it (``.mcp.json``, a repository agent file): its sandbox shows it
    nothing outside what every command sees (``teamrt.mcp.transport.program_files``)."""
    roots: tuple[Path, ...] = ()
    """Folders shown read-only in its sandbox: a plugin's server, its plugin's folder."""

    @property
    def where(self) -> str:
        """What the server runs or reaches, for ``teamrt mcp``: its command line or its URL."""
        return self.url if self.transport in REMOTE else " ".join([self.command, *self.args])


@dataclass(frozen=True)
class Blocked:
    """A configured server that does not start, and why."""

    config: ServerConfig
    reason: str


@dataclass(frozen=True)
class McpConfig:
    """The servers of a run."""

    servers: dict[str, ServerConfig] = field(default_factory=dict)
    """Every agent's (unless its ``tools`` leave them out), by name."""
    agent_servers: dict[str, dict[str, ServerConfig]] = field(default_factory=dict)
    """An agent file's inline servers, by agent, then by server name."""
    blocked: dict[str, Blocked] = field(default_factory=dict)
    """Servers configured that do not start (a repository's, not trusted or enabled), by name."""
    problems: tuple[str, ...] = ()
    """One line each: an entry left out, and why."""
    private_hosts: tuple[str, ...] = ()
    """Hosts (``name`` or ``name:port``) on loopback or private addresses HTTP servers may be at: the team
    file's ``[mcp] private_hosts`` and ``[web] private_hosts``; every other such address is refused."""

    def for_agent(self, agent: str) -> dict[str, ServerConfig]:
        """The servers an agent may use: the run's, then its own inline ones."""
        return {**self.servers, **self.agent_servers.get(agent, {})}

    @property
    def all_servers(self) -> dict[str, ServerConfig]:
        """Every server that may start, inline ones included (the first of a name)."""
        found = dict(self.servers)
        for servers in self.agent_servers.values():
            for name, config in servers.items():
                found.setdefault(name, config)
        return found


@dataclass(frozen=True)
class Enablement:
    """What the person's own settings say of the project's ``.mcp.json`` servers."""

    all: bool = False
    enabled: frozenset[str] = frozenset()
    disabled: frozenset[str] = frozenset()
    sources: tuple[str, ...] = ()
    """The files that said it."""


def user_config_path() -> Path:
    """``~/.claude.json``, or ``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set (as Claude Code has it)."""
    return claude_home() / USER_CONFIG if os.environ.get(CONFIG_DIR_ENV) else Path.home() / USER_CONFIG


def mcp_config(project: Path, team: Any, definitions: Mapping[str, Any]) -> McpConfig:
    """The servers of a run of ``team`` (a ``Team``) in ``project`` with these agent definitions; a call's
    timeout, where an entry gives none, is ``MCP_TOOL_TIMEOUT`` from the settings' ``env`` (as Claude Code
    sets its own environment from them), else from teamrt's environment."""
    allowed_env, private_hosts = mcp_allowed(team)
    return load_mcp_config(
        project, team.mcp_servers, definitions.values(), team_source=str(team.path),
        allowed_env=allowed_env, private_hosts=private_hosts,
        fetch_packages=tuple(getattr(team, "mcp_fetch_packages", ())),
        call_timeout=load_claude_settings(project).knobs.mcp_tool_timeout,
    )  # fmt: skip


def mcp_allowed(team: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What ``team`` (a ``Team``, or None) lets MCP entries use: the variables a repository's entries
    may expand (``[mcp] env``), and the private hosts HTTP servers may be at (``[mcp] private_hosts``, and
    ``[web] private_hosts``, which agents may fetch from already)."""
    web = getattr(team, "web", None)
    hosts = (*getattr(team, "mcp_private_hosts", ()), *getattr(web, "private_hosts", ()))
    return tuple(getattr(team, "mcp_env", ())), hosts


def mcp_notices(config: McpConfig) -> list[str]:
    """What a run's start tells the person about its MCP servers: entries left out, the repository's
    servers that do not start (and how to let them), and servers launched with a package launcher that
    may not fetch their package (``teamrt.mcp.launchers.notice``)."""
    blocked = [
        f"teamrt: note: MCP server {b.config.name!r} ({b.config.source}) does not start: {b.reason}"
        for b in config.blocked.values()
    ]
    offline = [
        f"teamrt: note: {notice(c.name, c.launch, c.source)}"
        for c in config.all_servers.values()
        if c.launch is not None and not c.fetch
    ]
    return [*(f"teamrt: warning: {problem}" for problem in config.problems), *blocked, *offline]


def load_mcp_config(
    project: Path,
    team_servers: Mapping[str, Mapping[str, Any]],
    agents: Iterable[Any] = (),
    *,
    team_source: str = "team file",
    trusted: bool | None = None,
    allowed_env: Iterable[str] = (),
    private_hosts: tuple[str, ...] = (),
    plugins: Plugins | None = None,
    fetch_packages: tuple[str, ...] = (),
    call_timeout: float | None = None,
) -> McpConfig:
    """The servers of a run of ``project``. ``agents``: the run's agent definitions (their
    ``mcp_servers``); ``trusted``: whether the person trusts the project's MCP servers as they are now
    (None: look it up, ``teamrt.claudecode.trust``); ``allowed_env``: the variables a repository's entries
    may expand (``[mcp] env``); ``private_hosts``: see ``McpConfig.private_hosts``; ``plugins``: the
    enabled plugins (None: read them), whose servers come last, those of plugins not trusted left out
    (their warnings say so); ``fetch_packages``: the packages launched servers may fetch (``[mcp]
    fetch_packages``, ``teamrt.mcp.launchers``); ``call_timeout``: seconds a call may take where an entry
    gives no ``timeout`` (None: ``MCP_TOOL_TIMEOUT`` of teamrt's environment, else ``DEFAULT_TIMEOUT``)."""
    plugins = load_plugins(project) if plugins is None else plugins
    allowed = frozenset(allowed_env)
    problems: list[str] = []
    user = read_json_object(user_config_path(), MAX_CONFIG_BYTES, problems)
    local_entry = _project_entry(user, project)
    repository = repository_servers(project, agents, problems)
    if trusted is None:
        trusted = _trusted(project, repository, problems)
    enablement = project_enablement(project, local_entry)
    found: dict[str, ServerConfig] = {}
    blocked: dict[str, Blocked] = {}
    places = [
        (TEAM, team_source, team_servers),
        (LOCAL, f"{user_config_path()} (projects.{project})", _servers_of(local_entry, "mcpServers")),
        (PROJECT, str(project / MCP_JSON), repository.get(MCP_JSON, {})),
        (USER, str(user_config_path()), _servers_of(user, "mcpServers")),
        *((PLUGIN, f"plugin {root}", {name: entry for name, entry in plugins.mcp_servers.items()
                                      if plugins.server_roots.get(name) == root})
          for root in dict.fromkeys(plugins.server_roots.values())),
    ]  # fmt: skip
    for scope, source, entries in places:
        for name, entry in entries.items():
            config = _entry(
                name, entry, scope, source, problems, allowed if scope == PROJECT else None, call_timeout
            )
            if config is None or name in found or name in blocked:
                continue
            if scope == PLUGIN:
                config = replace(config, roots=(plugins.server_roots[name],))
            refusal = _refusal(config, trusted, enablement) if scope == PROJECT else None
            if refusal is None:
                found[name] = config
            else:
                blocked[name] = Blocked(config, refusal)
    agent_servers = _agent_servers(agents, found, trusted, blocked, problems, allowed, call_timeout)
    found = {name: _fetching(c, fetch_packages) for name, c in found.items()}
    agent_servers = {
        a: {n: _fetching(c, fetch_packages) for n, c in s.items()} for a, s in agent_servers.items()
    }
    return McpConfig(found, agent_servers, blocked, tuple(problems), tuple(private_hosts))


def _fetching(config: ServerConfig, fetch_packages: tuple[str, ...]) -> ServerConfig:
    """``config``, allowed to fetch its launched package when ``fetch_packages`` names it exactly."""
    if config.launch is None or not granted(config.launch, fetch_packages):
        return config
    return replace(config, fetch=True)


def repository_servers(project: Path, agents: Iterable[Any], problems: list[str]) -> dict[str, Any]:
    """The MCP server entries that came with the repository, as written: ``.mcp.json``'s under its name,
    and each repository agent file's inline ones under ``agent:<name>``. What ``teamrt trust`` hashes."""
    written: dict[str, Any] = {}
    mcp_json = read_json_object(project / MCP_JSON, MAX_MCP_JSON_BYTES, problems, within=project)
    servers = _servers_of(mcp_json, "mcpServers", str(project / MCP_JSON), problems)
    if servers:
        written[MCP_JSON] = servers
    for definition in agents:
        inline = [item for item in getattr(definition, "mcp_servers", ()) if isinstance(item, dict)]
        if inline and getattr(definition, "scope", "") in ("project", "teamrt"):
            written[f"agent:{definition.name}"] = inline
    return written


def project_enablement(project: Path, local_entry: Mapping[str, Any] | None = None) -> Enablement:
    """What the person's settings say of the project's ``.mcp.json`` servers: their user settings,
    their ``~/.claude.json`` entry for the project, and the project's ``.claude/settings.local.json``
    when git does not track it (a file committed to the repository is not the person's word)."""
    from teamrt.claudecode.settings import read_settings_files

    said: list[tuple[str, Mapping[str, Any]]] = []
    for file in read_settings_files(project):  # a file left out: the run's settings warnings name it
        if file.scope == "user" or (file.scope == "local" and not git_tracks(project, file.path)):
            said.append((str(file.path), file.data))
    if local_entry is None:
        local_entry = _project_entry(read_json_object(user_config_path(), MAX_CONFIG_BYTES, []), project)
    if local_entry:
        said.append((f"{user_config_path()} (projects.{project})", local_entry))
    every, enabled, disabled, sources = False, set[str](), set[str](), []
    for source, data in said:
        keys = ("enableAllProjectMcpServers", "enabledMcpjsonServers", "disabledMcpjsonServers")
        if any(key in data for key in keys):
            sources.append(source)
        every = every or data.get("enableAllProjectMcpServers") is True
        enabled.update(_names(data.get("enabledMcpjsonServers")))
        disabled.update(_names(data.get("disabledMcpjsonServers")))
    return Enablement(every, frozenset(enabled), frozenset(disabled), tuple(sources))


# -- entries -------------------------------------------------------------------------------------------


def _entry(
    name: str,
    entry: Any,
    scope: str,
    source: str,
    problems: list[str],
    allowed: frozenset[str] | None,
    call_timeout: float | None = None,
) -> ServerConfig | None:
    """``parse_entry``, or None with a problem line; ``allowed`` and ``call_timeout``: see ``parse_entry``."""
    try:
        return parse_entry(
            name, entry, scope=scope, source=source, allowed=allowed, call_timeout=call_timeout
        )
    except EntryError as e:
        problems.append(f"{source}: MCP server {name!r}: {e}; left out")
        return None


def parse_entry(
    name: str,
    entry: Any,
    *,
    scope: str,
    source: str,
    allowed: frozenset[str] | None = None,
    call_timeout: float | None = None,
) -> ServerConfig:
    """One server entry, checked and expanded; raises ``EntryError``. ``allowed``: None for the person's own
    entry (any variable but teamrt's credentials expands), else the repository's entry, which may expand
    only these variables. ``call_timeout``: the seconds a call may take when the entry gives no
    ``timeout`` (None: ``MCP_TOOL_TIMEOUT`` of teamrt's environment)."""
    repository = allowed is not None

    def expand(text: str, key: str) -> str:
        return _expand(text, key, allowed)

    if not SERVER_NAME.fullmatch(name) or "__" in name:
        raise EntryError(
            "a server's name must be 1-64 letters, digits, '-' or '_', without '__' (its tools are named"
            " mcp__<server>__<tool>)"
        )
    if not isinstance(entry, dict):
        raise EntryError("must be an object (command, args, env; or type http or sse, url, headers)")
    kind = entry.get("type", "http" if "url" in entry and "command" not in entry else "stdio")
    if kind not in TRANSPORTS:
        raise EntryError(f"type {json.dumps(kind)[:40]} is not one teamrt speaks ({', '.join(TRANSPORTS)})")
    timeout = entry.get("timeout", call_timeout or _env_timeout())
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86_400:
        raise EntryError("timeout must be a number of seconds, above 0 and at most 86400")
    if kind in REMOTE:
        url = expand(_text(entry.get("url"), "url"), "url")
        if not url.startswith(("http://", "https://")):
            raise EntryError(f"url must start with http:// or https://, not {url[:60]!r}")
        written = _strings(entry.get("headers"), "headers")
        headers = {k: expand(v, f"headers.{k}") for k, v in written.items()}
        return ServerConfig(
            name, scope, source, kind, url=url, headers=headers, timeout=float(timeout), repository=repository
        )
    command = expand(_text(entry.get("command"), "command"), "command")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise EntryError("args must be a list of strings")
    env = {k: expand(v, f"env.{k}") for k, v in _strings(entry.get("env"), "env").items()}
    for key in env:
        if not key or "=" in key or "\0" in key:
            raise EntryError(f"env name {key!r} is not a variable name")
    expanded = tuple(expand(a, "args") for a in args)
    return ServerConfig(
        name, scope, source, kind, command, expanded, env, timeout=float(timeout), repository=repository,
        launch=launch(command, expanded, env),
    )  # fmt: skip


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EntryError(f"{key} must be a non-empty string")
    return value


def _strings(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise EntryError(f"{key} must be an object of strings")
    return value


def _expand(text: str, key: str, allowed: frozenset[str] | None = None) -> str:
    """``text`` with ``${VAR}`` and ``${VAR:-default}`` replaced from the environment; ``allowed`` (a
    repository's entry): the only variables it may name, else any but teamrt's own credentials."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name.startswith(NEVER_PASSED):
            raise EntryError(f"{key}: ${{{name}}} is teamrt's own credential and is never passed to a server")
        if allowed is not None and name not in allowed:
            raise EntryError(
                f"{key}: ${{{name}}} is not expanded in a repository's entry unless your team file's"
                f" [mcp] env names {name}"
            )
        found = os.environ.get(name)
        if found is None and default is None:
            raise EntryError(f"{key}: ${{{name}}} is not set (give a default with ${{{name}:-value}})")
        return found if found is not None else default

    expanded = _VARIABLE.sub(value, text)
    if "\0" in expanded:
        raise EntryError(f"{key} holds a NUL character")
    return expanded


def _env_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        ms = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT
    return ms / 1000 if 0 < ms <= 86_400_000 else DEFAULT_TIMEOUT


# -- agents' servers -------------------------------------------------------------------------------------


def _agent_servers(
    agents: Iterable[Any],
    found: dict[str, ServerConfig],
    trusted: bool,
    blocked: dict[str, Blocked],
    problems: list[str],
    allowed: frozenset[str],
    call_timeout: float | None,
) -> dict[str, dict[str, ServerConfig]]:
    """Each agent file's inline servers, checked; a name it lists that no place configures is said. A
    repository agent file's entries may expand only ``allowed`` variables."""
    by_agent: dict[str, dict[str, ServerConfig]] = {}
    inline_names: dict[str, ServerConfig] = {}
    for definition in sorted(agents, key=lambda d: str(d.name)):
        source = str(getattr(definition, "source", definition.name))
        repository = getattr(definition, "scope", "") in ("project", "teamrt")
        mine: dict[str, ServerConfig] = {}
        for item in getattr(definition, "mcp_servers", ()):
            if isinstance(item, str):
                if item not in found and item not in blocked:
                    problems.append(f"{source}: mcpServers names {item!r}, which no MCP configuration has")
                continue
            for name, entry in item.items():
                config = _entry(
                    name, entry, AGENT, source, problems, allowed if repository else None, call_timeout
                )
                if config is None:
                    continue
                if name in found or name in blocked:
                    problems.append(
                        f"{source}: MCP server {name!r} is defined already ({_first(name, found, blocked)});"
                        " the agent uses that one"
                    )
                    continue
                earlier = inline_names.get(name)
                if earlier is not None and earlier != config:
                    problems.append(
                        f"{source}: MCP server {name!r} is defined differently in {earlier.source}; left out"
                    )
                    continue
                if repository and not trusted:
                    blocked[name] = Blocked(config, _UNTRUSTED)
                    continue
                inline_names[name] = config
                mine[name] = config
        if mine:
            by_agent[definition.name] = mine
    return by_agent


def _first(name: str, found: dict[str, ServerConfig], blocked: dict[str, Blocked]) -> str:
    config = found[name] if name in found else blocked[name].config
    return config.source


# -- trust -------------------------------------------------------------------------------------------------

_UNTRUSTED = (
    "it came with the repository, which you have not trusted as it is now: read it, then run teamrt trust"
)


def _refusal(config: ServerConfig, trusted: bool, enablement: Enablement) -> str | None:
    """Why a ``.mcp.json`` server does not start, or None."""
    if config.name in enablement.disabled:
        return "disabled by disabledMcpjsonServers in your settings"
    if trusted or enablement.all or config.name in enablement.enabled:
        return None
    return _UNTRUSTED


def _trusted(project: Path, repository: Mapping[str, Any], problems: list[str]) -> bool:
    from teamrt.claudecode.trust import TrustError, is_mcp_trusted, mcp_digest

    digest = mcp_digest(repository)
    if digest is None:
        return False
    try:
        return is_mcp_trusted(project, digest)
    except TrustError as e:
        problems.append(str(e))
        return False


# -- reading -----------------------------------------------------------------------------------------------


def _servers_of(
    data: Mapping[str, Any] | None, key: str, source: str = "", problems: list[str] | None = None
) -> dict[str, Any]:
    value = (data or {}).get(key) or {}
    if not isinstance(value, dict):
        if problems is not None:
            problems.append(f"{source}: {key} must be an object of servers by name; not read")
        return {}
    return value


def _project_entry(user: Mapping[str, Any], project: Path) -> dict[str, Any]:
    """``~/.claude.json``'s entry for ``project`` (by its path as given or resolved), or {}."""
    projects = user.get("projects")
    if not isinstance(projects, dict):
        return {}
    for key in (str(project), os.path.realpath(project)):
        entry = projects.get(key)
        if isinstance(entry, dict):
            return entry
    return {}


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
