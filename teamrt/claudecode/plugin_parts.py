"""What one installed plugin's folder brings: agent files, skills, hooks, MCP servers, commands.

Read with the care of every file teamrt did not write (a plugin comes from a marketplace, someone else's
code): each JSON file a regular file of at most ``MAX_JSON_BYTES``, read without blocking, no key named
twice (``teamrt.claudecode.reading``); every path the manifest names starts with ``./`` (or
``${CLAUDE_PLUGIN_ROOT}/``) and, links followed, stays inside the plugin's folder; each file or entry that
cannot be used is one warning and left out, the rest loads. A manifest that cannot be read leaves the
whole plugin out (its paths are unknown): ``PluginUnreadable``, with ``inventory`` saying what the plugin
would have brought.

``${CLAUDE_PLUGIN_ROOT}`` (the plugin's folder) and ``${CLAUDE_PLUGIN_DATA}`` (its data folder) are
expanded where Claude Code expands them. In an MCP server's command, args, env, url and headers they are
replaced by the path (the server runs without a shell: ``teamrt.mcp.transport``), and the server also gets
both as variables. A hook's command runs in a shell, so there the text is left as written and the hook
gets both as variables: the shell expands ``${CLAUDE_PLUGIN_ROOT}`` to the same path, but as a value, never
as code, so a folder named ``$(curl ...|sh)`` stays a name. The plugin's folder is shown read-only in the
sandbox of its hooks and servers (it lies in ``~/.claude``, which the sandbox hides).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.claudecode.paths import claude_home
from teamrt.claudecode.reading import loads_json, read_head

MANIFEST = Path(".claude-plugin") / "plugin.json"
MAX_JSON_BYTES = 1 << 20
MAX_COUNTED = 1000
"""Files counted for ``inventory``; past it the count says "more than"."""
ROOT_VARIABLE = "CLAUDE_PLUGIN_ROOT"
DATA_VARIABLE = "CLAUDE_PLUGIN_DATA"
_VARIABLES = re.compile(r"\$\{(CLAUDE_PLUGIN_ROOT|CLAUDE_PLUGIN_DATA)\}")


class PluginUnreadable(ValueError):
    """The plugin's folder or manifest cannot be used; the message says why, without the plugin's name."""


@dataclass(frozen=True)
class PluginHooks:
    """A plugin's hooks, as a settings file (``teamrt.claudecode.hooks.SettingsSource``)."""

    scope: str
    """``plugin:<name>``."""
    path: Path
    data: dict[str, Any]
    """``{"hooks": {...}}``."""
    env: dict[str, str] = field(default_factory=dict)
    """``CLAUDE_PLUGIN_ROOT`` and ``CLAUDE_PLUGIN_DATA``, for its hooks' processes."""
    roots: tuple[Path, ...] = ()
    """Shown read-only in its hooks' sandbox: the plugin's folder."""


@dataclass(frozen=True)
class PluginParts:
    agents: tuple[Path, ...] = ()
    """Folders of agent files, or single agent files."""
    skills: tuple[Path, ...] = ()
    """Folders of ``<name>/SKILL.md`` folders."""
    hooks: tuple[PluginHooks, ...] = ()
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By the name the plugin gives, ``${CLAUDE_PLUGIN_ROOT}`` expanded."""
    commands: int = 0
    """Slash command files, which teamrt does not use."""
    warnings: tuple[str, ...] = ()

    def summary(self, *, agents: bool = True) -> str:
        """What it holds in words: ``2 agent folders, 1 skill folder, hooks, 1 MCP server``."""
        said = [_count(len(self.agents), "agent folder")] if agents and self.agents else []
        said += [_count(len(self.skills), "skill folder")] if self.skills else []
        said += ["hooks"] if self.hooks else []
        said += [_count(len(self.servers), "MCP server")] if self.servers else []
        return ", ".join(said)


def data_folder(plugin_id: str) -> Path:
    """The plugin's own data folder, as Claude Code names it (``plugins/data/<id>``, unsafe characters
    made ``-``)."""
    return claude_home() / "plugins" / "data" / re.sub(r"[^A-Za-z0-9_.-]", "-", plugin_id)


def read_parts(root: Path, name: str, plugin_id: str = "") -> PluginParts:
    """The parts of the plugin in ``root`` (``name``: its name); raises PluginUnreadable."""
    real = _usable_root(root)
    warnings: list[str] = []
    manifest: dict[str, Any] = {}
    if os.path.lexists(root / MANIFEST):
        found, why = _json(root / MANIFEST, real)
        if found is None:
            raise PluginUnreadable(f"{MANIFEST}: {why}")
        manifest = found
    scope = f"plugin:{name}"
    env = {ROOT_VARIABLE: str(root), DATA_VARIABLE: str(data_folder(plugin_id or name))}
    reader = _Reader(root, real, warnings)
    agents = reader.paths("agents", manifest.get("agents"), files=True)
    skills = reader.paths("skills", manifest.get("skills"))
    command_places = reader.paths("commands", _command_paths(manifest.get("commands")), files=True)
    skills += tuple(p for p in command_places if p.is_dir() and _holds_skills(p))
    commands = sum(_count_md(p) for p in command_places if not (p.is_dir() and _holds_skills(p)))
    if isinstance(manifest.get("commands"), dict):
        commands += len(manifest["commands"])
    hooks = tuple(
        PluginHooks(scope, path, {"hooks": data}, env, (root,)) for path, data in reader.hooks(manifest)
    )
    servers = {
        server: _expanded_server(entry, env) for server, entry in reader.servers(manifest.get("mcpServers"))
    }
    if commands:
        warnings.append(
            f"{root}: {_count(commands, 'slash command')} not used: teamrt has no slash commands (a"
            " command's task can be given to teamrt run)"
        )
    return PluginParts(agents, skills, hooks, servers, commands, tuple(warnings))


def _usable_root(root: Path) -> Path:
    """``root`` resolved, refused when it is no folder or holds the user's Claude or home folder (showing
    it to a sandbox would show their credentials)."""
    real = Path(os.path.realpath(root))
    if not real.is_dir():
        raise PluginUnreadable("its folder is not there")
    for place in (claude_home(), Path.home()):
        if Path(os.path.realpath(place)).is_relative_to(real):
            raise PluginUnreadable(f"its folder holds {place}; a plugin's folder must be its own")
    return real


@dataclass
class _Reader:
    root: Path
    real: Path
    warnings: list[str]

    def inside(self, written: str, what: str) -> Path | None:
        """The path a manifest names, when it may be used (one warning when not)."""
        relative = written.replace("${CLAUDE_PLUGIN_ROOT}/", "./", 1) if written.startswith("${") else written
        if not relative.startswith("./") or "\0" in relative:
            self.warnings.append(
                f"{self.root / MANIFEST}: {what} {json.dumps(written)[:80]}: a path must start with ./"
                " (inside the plugin); left out"
            )
            return None
        path = self.root / relative
        if not Path(os.path.realpath(path)).is_relative_to(self.real):
            self.warnings.append(
                f"{self.root / MANIFEST}: {what} {json.dumps(written)[:80]} leads outside the plugin;"
                " left out"
            )
            return None
        return path if os.path.exists(path) else None

    def paths(self, default: str, written: Any, *, files: bool = False) -> tuple[Path, ...]:
        """The default folder (when there) and the manifest's paths for one kind of part."""
        found: list[Path] = []
        place = self.inside(f"./{default}", default)
        if place is not None and place.is_dir():
            found.append(place)
        for item in _strings(written, default, self.root, self.warnings):
            path = self.inside(item, default)
            if path is not None and (path.is_dir() or (files and path.is_file())) and path not in found:
                found.append(path)
        return tuple(found)

    def hooks(self, manifest: dict[str, Any]) -> list[tuple[Path, dict[str, Any]]]:
        """Each hooks file (``hooks/hooks.json``, the manifest's paths) and the manifest's inline hooks."""
        found: list[tuple[Path, dict[str, Any]]] = []
        written = manifest.get("hooks")
        paths = ["./hooks/hooks.json"]
        if isinstance(written, dict):
            inner = written.get("hooks")
            found.append((self.root / MANIFEST, inner if isinstance(inner, dict) else written))
        else:
            paths += _strings(written, "hooks", self.root, self.warnings)
        for item in dict.fromkeys(paths):
            path = self.inside(item, "hooks")
            if path is None:
                continue
            data, why = _json(path, self.real)
            events = data.get("hooks") if data is not None else None
            if not isinstance(events, dict):
                self.warnings.append(f"{path}: {why or 'no hooks object'}; its hooks are left out")
                continue
            found.append((path, events))
        return found

    def servers(self, written: Any) -> list[tuple[str, dict[str, Any]]]:
        """The MCP servers of ``.mcp.json`` and the manifest's ``mcpServers`` (inline, or paths)."""
        tables: list[tuple[Path, Any]] = []
        paths = ["./.mcp.json"]
        if isinstance(written, dict):
            tables.append((self.root / MANIFEST, written))
        else:
            paths += _strings(written, "mcpServers", self.root, self.warnings)
        for item in dict.fromkeys(paths):
            path = self.inside(item, "mcpServers")
            if path is None:
                continue
            data, why = _json(path, self.real)
            if data is None:
                self.warnings.append(f"{path}: {why}; its MCP servers are left out")
                continue
            tables.append((path, data))
        found: list[tuple[str, dict[str, Any]]] = []
        for path, table in tables:
            servers = table.get("mcpServers", table) if isinstance(table, dict) else None
            if not isinstance(servers, dict):
                self.warnings.append(f"{path}: mcpServers must be an object of servers by name; left out")
                continue
            for server, entry in servers.items():
                if not isinstance(entry, dict):
                    self.warnings.append(f"{path}: MCP server {json.dumps(server)[:60]} is not an object")
                    continue
                found.append((str(server), entry))
        return found


def _expanded_server(entry: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """``entry`` with the plugin's variables replaced where Claude Code replaces them, and given to a
    stdio server as variables too."""

    def text(value: Any) -> Any:
        return _VARIABLES.sub(lambda m: env[m.group(1)], value) if isinstance(value, str) else value

    out = dict(entry)
    for key in ("command", "url"):
        out[key] = text(entry.get(key)) if key in entry else None
        if out[key] is None:
            del out[key]
    if isinstance(entry.get("args"), list):
        out["args"] = [text(a) for a in entry["args"]]
    for key in ("env", "headers"):
        if isinstance(entry.get(key), dict):
            out[key] = {k: text(v) for k, v in entry[key].items()}
    if "url" not in out or "command" in out:
        written = out.get("env")
        out["env"] = {**env, **(written if isinstance(written, dict) else {})}
    return out


def _json(path: Path, real_root: Path) -> tuple[dict[str, Any] | None, str]:
    """The JSON object in ``path`` inside the plugin, or None and why not."""
    if not Path(os.path.realpath(path)).is_relative_to(real_root):
        return None, "a link leading outside the plugin"
    try:
        head = read_head(path, MAX_JSON_BYTES + 1)
    except OSError as e:
        return None, f"cannot be read ({e.strerror or e})"
    if head is None:
        return None, "not a regular file"
    if len(head[0]) > MAX_JSON_BYTES:
        return None, f"over {MAX_JSON_BYTES >> 20} MiB"
    try:
        data = loads_json(head[0].decode("utf-8-sig"))
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        return None, f"not valid JSON ({str(e)[:80]})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    return data, ""


def _strings(value: Any, what: str, root: Path, warnings: list[str]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    warnings.append(f"{root / MANIFEST}: {what} must be a path or a list of paths; left out")
    return []


def _command_paths(value: Any) -> Any:
    """The paths of the manifest's ``commands`` (an object maps names to commands: none)."""
    return None if isinstance(value, dict) else value


def _holds_skills(folder: Path) -> bool:
    try:
        return any((child / "SKILL.md").is_file() for child in folder.iterdir() if child.is_dir())
    except OSError:
        return False


def _count_md(path: Path) -> int:
    if path.is_file():
        return 1 if path.name.endswith(".md") else 0
    return _walk_count(path, lambda name: name.endswith(".md"))


def _walk_count(folder: Path, wanted: Any) -> int:
    count = 0
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        count += sum(1 for f in files if wanted(f) and not f.startswith("."))
        if count > MAX_COUNTED:
            break
    return count


def inventory(root: Path) -> str:
    """What a plugin's folder would bring, counted by its standard layout without reading its manifest:
    ``2 agents, 1 skill, hooks, 1 MCP server``."""
    if not os.path.isdir(root):
        return "nothing (its folder is not there)"
    agents = _walk_count(root / "agents", lambda name: name.endswith(".md"))
    skills = _walk_count(root / "skills", lambda name: name == "SKILL.md")
    said = [_count(agents, "agent")] if agents else []
    said += [_count(skills, "skill")] if skills else []
    said += ["hooks"] if (root / "hooks" / "hooks.json").exists() else []
    if (root / ".mcp.json").exists():
        data, _ = _json(root / ".mcp.json", Path(os.path.realpath(root)))
        servers = data.get("mcpServers", data) if data is not None else None
        said.append(_count(len(servers), "MCP server") if isinstance(servers, dict) else "MCP servers")
    return ", ".join(said) or "nothing in the standard layout (its manifest may name more)"


def _count(n: int, thing: str) -> str:
    shown = f"more than {MAX_COUNTED}" if n > MAX_COUNTED else str(n)
    return f"{shown} {thing}{'' if n == 1 else 's'}"
