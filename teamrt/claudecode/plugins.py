"""Claude Code plugins: the ones a project's settings enable, found where Claude Code installed them.

``enabledPlugins`` (``{"name@marketplace": true}``) is merged across the settings files as Claude Code
merges them (user, then project, then local; a later file's value for a plugin over an earlier one's).
Each enabled plugin is looked up in Claude Code's registry of installed plugins,
``claude_home()/plugins/installed_plugins.json`` (version 2: ``{"version": 2, "plugins": {id: [{"scope",
"projectPath", "installPath", "version"}, ...]}}``, an install per scope, a project or local one only for
its project; version 1: ``{id: {"installPath", "version"}}``), and, when the registry does not name it,
in the cache Claude Code installs into, ``plugins/cache/<marketplace>/<plugin>/<version>/`` (the newest
version folder). teamrt never downloads: an enabled plugin that is not installed, whatever
``extraKnownMarketplaces`` says of its marketplace, gets one line saying so and what ``claude plugin
install`` would do, and is not loaded.

A plugin's folder holds, each optional (``teamrt.claudecode.plugin_parts`` reads them): its manifest
``.claude-plugin/plugin.json``; agent files in ``agents/`` (named ``<plugin>:<agent>``, below the
project's and the user's in precedence; as in Claude Code, their ``permissionMode``, ``hooks`` and
``mcpServers`` are not used); skills in ``skills/<name>/SKILL.md``; hooks in ``hooks/hooks.json`` or the
manifest's ``hooks``; MCP servers in ``.mcp.json`` or the manifest's ``mcpServers``; slash commands in
``commands/`` (teamrt has none: named as not used, but ``commands/<name>/SKILL.md`` folders are skills).
The manifest's ``agents``, ``skills``, ``commands``, ``hooks`` and ``mcpServers`` paths (``./`` first,
inside the plugin) add to those places.

Trust: a plugin enabled by the person's own settings (``~/.claude/settings.json``, an untracked
``settings.local.json``) is theirs. One only the repository's settings enable is someone else's choice:
its hooks, MCP servers and skills run only once the person trusts the project (``teamrt trust``; the
repository's ``enabledPlugins`` is part of what ``teamrt.claudecode.trust.hooks_digest`` hashes).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.plugin_parts import PluginHooks, PluginParts, PluginUnreadable, inventory, read_parts
from teamrt.claudecode.reading import read_json_object
from teamrt.claudecode.skills import SkillRoot
from teamrt.terminal import clean_line

PLUGINS_FOLDER = "plugins"
REGISTRY = "installed_plugins.json"
MAX_REGISTRY_BYTES = 8 << 20
PLUGIN_ID = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,127})@([A-Za-z0-9][A-Za-z0-9._-]{0,127})")
"""``name@marketplace`` as Claude Code writes it: the names of folders, never a path."""
PERSON_SCOPES = ("user",)
"""Settings files that are always the person's own; a ``local`` file is theirs when git does not track
it (``SettingsFile.repository``)."""


@dataclass(frozen=True)
class Plugin:
    """An enabled plugin, installed and read."""

    id: str
    """``name@marketplace``."""
    name: str
    root: Path
    mine: bool
    """Enabled by the person's own settings."""
    trusted: bool
    """Its hooks, servers and skills may run: it is the person's, or the project is trusted."""
    parts: PluginParts

    @property
    def scope(self) -> str:
        return f"plugin:{self.name}"


@dataclass(frozen=True)
class Plugins:
    """What a project's enabled plugins bring."""

    plugins: tuple[Plugin, ...] = ()
    agent_folders: tuple[tuple[str, Path], ...] = ()
    """(``plugin:<name>``, a folder or one agent file), every plugin's, agents of lower precedence than the
    project's and the user's."""
    skill_roots: tuple[SkillRoot, ...] = ()
    hook_files: tuple[PluginHooks, ...] = ()
    """The hooks of the plugins that may run them, as settings files (scope ``plugin:<name>``)."""
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``plugin_<plugin>_<server>`` (Claude Code's name, so its tools are
    ``mcp__plugin_<plugin>_<server>__<tool>``) -> its entry, ``${CLAUDE_PLUGIN_ROOT}`` expanded; only of
    the plugins that may run them."""
    server_roots: dict[str, Path] = field(default_factory=dict)
    """Each server's plugin folder: shown read-only in its sandbox."""
    warnings: tuple[str, ...] = ()
    """One line each, safe for a terminal."""
    untrusted: tuple[str, ...] = ()
    """The plugins only the repository enables, not trusted: their hooks, servers and skills do not run."""


@dataclass(frozen=True)
class Enabled:
    id: str
    mine: bool
    """A file of the person's own enables it."""
    sources: tuple[str, ...]


def enabled_plugins(files: Sequence[Any]) -> tuple[list[Enabled], list[str]]:
    """The plugins the settings ``files`` (lowest precedence first, ``SettingsFile``s) enable, and the
    problems in their ``enabledPlugins``."""
    value: dict[str, bool] = {}
    mine: dict[str, bool] = {}
    sources: dict[str, list[str]] = {}
    problems: list[str] = []
    for file in files:
        raw = file.data.get("enabledPlugins")
        if raw is None:
            continue
        if not isinstance(raw, dict):
            problems.append(f'{file.path}: enabledPlugins must be an object of "name@marketplace": true')
            continue
        own = not getattr(file, "repository", file.scope != "user")
        for key, on in raw.items():
            if not isinstance(on, bool):
                problems.append(f"{file.path}: enabledPlugins.{key}: must be true or false; left as it was")
                continue
            if PLUGIN_ID.fullmatch(key) is None:
                problems.append(
                    f"{file.path}: enabledPlugins: {json.dumps(key)[:80]} is not name@marketplace; left out"
                )
                continue
            value[key] = on
            mine[key] = mine.get(key, False) or (on and own)
            sources.setdefault(key, []).append(str(file.path))
    found = [Enabled(key, mine[key], tuple(sources[key])) for key, on in value.items() if on]
    return found, problems


def repository_enabled(files: Sequence[Any]) -> list[str]:
    """The plugins the repository's settings files enable, as written (what ``teamrt trust`` hashes)."""
    found: set[str] = set()
    for file in files:
        raw = file.data.get("enabledPlugins")
        if isinstance(raw, dict) and getattr(file, "repository", file.scope != "user"):
            found.update(str(key) for key, on in raw.items() if on is True)
    return sorted(found)


def load_plugins(project: Path, files: Sequence[Any] | None = None) -> Plugins:
    """The enabled, installed plugins of ``project`` and what they bring; never raises. ``files``: the
    settings files read already (``read_settings_files``)."""
    if files is None:
        from teamrt.claudecode.settings import SettingsError, read_settings_files

        try:
            files = read_settings_files(project)
        except (SettingsError, OSError) as e:
            return Plugins(warnings=(clean_line(f"plugins not loaded: {e}"),))
    enabled, warnings = enabled_plugins(files)
    if not enabled:
        return Plugins(warnings=tuple(clean_line(w) for w in warnings))
    home = claude_home() / PLUGINS_FOLDER
    registry = _registry(home, warnings)
    trusted_project = _project_trusted(project, files, warnings)
    marketplaces = _extra_marketplaces(files)
    plugins: list[Plugin] = []
    untrusted: list[str] = []
    for item in enabled:
        name, marketplace = item.id.split("@", 1)
        root = _install_path(registry, item.id, project) or _cached(home, name, marketplace)
        if root is None:
            warnings.append(_not_installed(item, marketplace, marketplaces))
            continue
        try:
            parts = read_parts(root, name, item.id)
        except PluginUnreadable as e:
            warnings.append(
                f"plugin {item.id} ({root}) cannot be read: {e}; it would bring {inventory(root)}; not loaded"
            )
            continue
        warnings += parts.warnings
        trusted = item.mine or trusted_project
        if not trusted:
            untrusted.append(item.id)
            warnings.append(_untrusted(item, parts, project))
        plugins.append(Plugin(item.id, name, root, item.mine, trusted, parts))
    return _gathered(plugins, warnings, untrusted)


def _gathered(plugins: list[Plugin], warnings: list[str], untrusted: list[str]) -> Plugins:
    folders: list[tuple[str, Path]] = []
    skills: list[SkillRoot] = []
    hooks: list[PluginHooks] = []
    servers: dict[str, dict[str, Any]] = {}
    roots: dict[str, Path] = {}
    for plugin in plugins:
        folders += [(plugin.scope, folder) for folder in plugin.parts.agents]
        skills += [SkillRoot(folder, plugin.scope, plugin.trusted) for folder in plugin.parts.skills]
        if not plugin.trusted:
            continue
        hooks += plugin.parts.hooks
        for server, entry in plugin.parts.servers.items():
            name = f"plugin_{plugin.name}_{server}"
            if name in servers:
                warnings.append(f"plugin {plugin.id}: MCP server {server!r} is named already; left out")
                continue
            servers[name] = entry
            roots[name] = plugin.root
    lines = tuple(clean_line(w) for w in dict.fromkeys(warnings))
    return Plugins(
        tuple(plugins), tuple(folders), tuple(skills), tuple(hooks), servers, roots, lines, tuple(untrusted)
    )


def _untrusted(item: Enabled, parts: PluginParts, project: Path) -> str:
    held = parts.summary(agents=False)
    return (
        f"plugin {item.id}: enabled only by the repository's settings ({', '.join(item.sources)}), which"
        f" you have not trusted as they are now: its {held or 'parts'} do not run (its agents load); read"
        f" them, then run `teamrt trust` in {project}, or enable it in your ~/.claude/settings.json"
    )


def _not_installed(item: Enabled, marketplace: str, known: Mapping[str, str]) -> str:
    where = f" (marketplace {marketplace}: {known[marketplace]}, from extraKnownMarketplaces)" if (
        marketplace in known) else ""  # fmt: skip
    add = f"`claude plugin marketplace add {known[marketplace]}`, then " if marketplace in known else ""
    return (
        f"plugin {item.id}, enabled in {', '.join(item.sources)}, is not installed{where}: teamrt never"
        f" downloads plugins; {add}`claude plugin install {item.id}` would install it into"
        f" {claude_home() / PLUGINS_FOLDER}; not loaded"
    )


def _extra_marketplaces(files: Sequence[Any]) -> dict[str, str]:
    """``extraKnownMarketplaces``: name -> its source in words (``github:owner/repo``)."""
    found: dict[str, str] = {}
    for file in files:
        raw = file.data.get("extraKnownMarketplaces")
        if not isinstance(raw, dict):
            continue
        for name, entry in raw.items():
            source = entry.get("source") if isinstance(entry, dict) else None
            if isinstance(source, dict):
                kind = str(source.get("source", ""))
                where = source.get("repo") or source.get("url") or source.get("path") or source.get("package")
                found[str(name)] = f"{kind}:{where}" if where else kind or "an unknown source"
    return found


def _registry(home: Path, warnings: list[str]) -> dict[str, Any]:
    """The registry's ``plugins`` object ({} when there is none or it cannot be read: one warning)."""
    path = home / REGISTRY
    found: list[str] = []
    data = read_json_object(path, MAX_REGISTRY_BYTES, found)
    warnings += found
    plugins = data.get("plugins")
    if data and not isinstance(plugins, dict):
        warnings.append(f"{path}: no 'plugins' object; not read")
        return {}
    return plugins or {}


def _install_path(registry: Mapping[str, Any], plugin: str, project: Path) -> Path | None:
    """Where the registry says ``plugin`` is installed for ``project``: the project's (or local) install,
    else the user's."""
    entries = registry.get(plugin)
    if isinstance(entries, dict):  # version 1: one install
        entries = [{"scope": "user", **entries}]
    if not isinstance(entries, list):
        return None
    here = os.path.realpath(project)
    best: tuple[int, Path] | None = None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("installPath"), str):
            continue
        scope = entry.get("scope", "user")
        if scope in ("project", "local"):
            where = entry.get("projectPath")
            if not isinstance(where, str) or os.path.realpath(where) != here:
                continue
        rank = {"local": 0, "project": 1, "user": 2, "managed": 3}.get(str(scope), 4)
        path = Path(os.path.expanduser(entry["installPath"]))
        if path.is_absolute() and os.path.isdir(path) and (best is None or rank < best[0]):
            best = (rank, path)
    return best[1] if best else None


def _cached(home: Path, name: str, marketplace: str) -> Path | None:
    """The newest version folder of the plugin in Claude Code's cache (or the folder itself when it holds
    the plugin without one), for a registry that does not name it."""
    folder = home / "cache" / marketplace / name
    if not folder.is_dir():
        return None
    if (folder / ".claude-plugin").is_dir():
        return folder
    try:
        versions = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return None
    return max(versions, key=lambda p: (p.stat().st_mtime, p.name)) if versions else None


def _project_trusted(project: Path, files: Sequence[Any], warnings: list[str]) -> bool:
    """Whether the person trusts the project's hooks as they are now (its enabled plugins among them)."""
    from teamrt.claudecode.trust import TrustError, hooks_digest, is_trusted

    digest = hooks_digest(files)
    if digest is None:
        return False
    try:
        return is_trusted(project, digest)
    except TrustError as e:
        warnings.append(str(e))
        return False
