"""Claude Code's settings: the user's ``settings.json``, the project's ``.claude/settings[.local].json``.

``read_settings_files`` reads each present file as JSON, the lowest precedence
first; ``load_claude_settings`` merges what teamrt uses of them as Claude Code
does (lists concatenated, a later file's scalar over an earlier one's):
``permissions.allow/deny/ask`` (rules that decide what the team file's rules
do not match), ``permissions.defaultMode`` and ``env`` (for the programs tools
run). A file that cannot be used is an error of one line naming it: a run must
not silently lose deny rules. Hooks: ``teamrt.claudecode.hooks``.

The repository is not trusted code: the project's files cannot set
``bypassPermissions`` or ``auto`` as the default mode (the user's can), and ``env`` cannot set
teamrt's or Anthropic's variables, nor those that choose which program or code
a name runs (``PATH``, ``LD_PRELOAD``, ``BASH_ENV``, ``GIT_*`` ...): an allow
rule names a program, and that must be the program that runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import settings as teamrt_settings
from ..tools.permissions import MODE_NAMES, RuleError, Rules
from .paths import settings_files
from .reading import read_head

MAX_BYTES = 1 << 20
"""A settings file larger than this is refused (Claude Code's are a few kilobytes)."""


RULE_KINDS = ("allow", "deny", "ask")
UNTRUSTED_MODES = ("bypassPermissions", "auto")
"""Default modes only the user's settings may choose: a cloned repository holds the others."""
REFUSED_ENV = frozenset({
    "PATH", "HOME", "SHELL", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "PROMPT_COMMAND",
    "CDPATH", "GLOBIGNORE", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "NODE_OPTIONS",
    "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GCONV_PATH", "CLAUDE_CONFIG_DIR",
})  # fmt: skip
"""Variables settings may not give tool processes: they choose what a program name runs, or what code
a shell or an interpreter loads before the command."""
REFUSED_ENV_PREFIXES = ("ANTHROPIC_", "TEAMRT_", "LD_", "DYLD_", "BASH_FUNC_", "GIT_")
"""teamrt's and Anthropic's (credentials, endpoints), the loader's, exported shell functions, git's
(the worktree sets those git needs)."""
UNUSED_KEYS = {
    "sandbox": "teamrt's own sandbox confines commands ([sandbox] in the team file)",
    "apiKeyHelper": "teamrt takes its key from ANTHROPIC_API_KEY; the helper is not run",
    "awsAuthRefresh": "it is not run",
    "awsCredentialExport": "it is not run",
    "otelHeadersHelper": "it is not run",
}
"""Claude Code settings teamrt leaves alone that a person may count on: each gets a warning."""
MCP_ENABLING_KEYS = ("enableAllProjectMcpServers", "enabledMcpjsonServers")
"""Keys that start a project's ``.mcp.json`` servers: only the person's own settings may set them
(``teamrt.mcp.config.project_enablement``), never the repository's ``.claude/settings.json``."""
UNUSED_PERMISSION_KEYS = {
    "additionalDirectories": "agents work only in their workspace",
    "disableBypassPermissionsMode": "only the team file and the agent files choose modes",
}


class SettingsError(teamrt_settings.SettingsError):
    """A Claude Code settings file cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class SettingsFile:
    scope: str
    """``user``, ``project`` or ``local``."""
    path: Path
    data: dict[str, Any]
    """The file's JSON object."""


@dataclass(frozen=True)
class ClaudeSettings:
    """What teamrt uses of the Claude Code settings files, merged."""

    files: tuple[SettingsFile, ...] = ()
    rules: Rules = field(default_factory=Rules)
    """Every file's rules, each naming its file."""
    default_mode: str | None = None
    """``permissions.defaultMode`` of the last file that sets it (and may)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """For the programs tools run; a later file's value over an earlier one's."""
    warnings: tuple[str, ...] = ()
    """One line each, ``<file>: <what is left out and why>``."""


def load_claude_settings(project: Path) -> ClaudeSettings:
    """The settings of ``project`` merged by Claude Code's precedence; raises SettingsError."""
    rules, mode, env, warnings = Rules(), None, dict[str, str](), list[str]()
    files = read_settings_files(project)
    for file in files:
        shown = _shown(file.path, project)
        warnings += [f"{shown}: {key!r} is not used by teamrt ({why})" for key, why in UNUSED_KEYS.items()
                     if key in file.data]  # fmt: skip
        if file.scope == "project":
            warnings += [
                f"{shown}: {key!r} ignored: a repository's settings cannot start its own MCP servers (set"
                " it in your user settings, or run teamrt trust)"
                for key in MCP_ENABLING_KEYS
                if key in file.data
            ]
        permissions = _permissions(file)
        for key, why in UNUSED_PERMISSION_KEYS.items():
            if key in permissions:
                warnings.append(f"{shown}: 'permissions.{key}' is not used by teamrt ({why})")
        try:
            rules += Rules.parse(
                **{kind: _texts(file, permissions, kind) for kind in RULE_KINDS}, origin=shown
            )
        except RuleError as e:
            raise SettingsError(f"settings file {file.path}: permissions: {e}") from None
        chosen = _mode(file, permissions)
        if chosen in UNTRUSTED_MODES and file.scope != "user":
            warnings.append(
                f"{shown}: defaultMode {chosen!r} ignored: a repository's settings cannot choose it (choose"
                " it in your user settings, the team file's permission_mode or the agent file)"
            )
        elif chosen is not None:
            mode = chosen
        for name, value in _env(file).items():
            if _refused(name):
                warnings.append(f"{shown}: env {name} ignored: settings may not set it for tool processes")
            else:
                env[name] = value
    return ClaudeSettings(tuple(files), rules, mode, env, tuple(warnings))


def read_settings_files(project: Path) -> list[SettingsFile]:
    """The settings files present for ``project``, the lowest precedence first.

    Raises SettingsError when one is not a regular file of a JSON object, or
    (for the project's own files) resolves to outside the project."""
    found = []
    for scope, path in settings_files(project):
        data = _read(path, None if scope == "user" else project)
        if data is not None:
            found.append(SettingsFile(scope, path, data))
    return found


def _read(path: Path, within: Path | None) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no file. ``within``: where it must resolve to."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SettingsError(f"settings file {path}: {e.strerror}") from None
    if within is not None:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(os.path.realpath(within)):
            raise SettingsError(f"settings file {path}: a link to {real}, outside the project; refusing it")
    raw = _regular_bytes(path)
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise SettingsError(f"settings file {path}: not UTF-8 text") from None
    except RecursionError:
        raise SettingsError(f"settings file {path}: JSON nested too deeply") from None
    except json.JSONDecodeError as e:
        raise SettingsError(
            f"settings file {path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"settings file {path}: must hold a JSON object, not {_kind(data)}")
    return data


def _regular_bytes(path: Path) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most MAX_BYTES."""
    try:
        head = read_head(path, MAX_BYTES + 1)
    except OSError as e:
        raise SettingsError(f"settings file {path}: {e.strerror}") from None
    if head is None:
        raise SettingsError(f"settings file {path}: not a regular file")
    raw, size = head
    if max(size, len(raw)) > MAX_BYTES:
        raise SettingsError(f"settings file {path}: larger than {MAX_BYTES // 1024} KiB")
    return raw


def _kind(value: Any) -> str:
    """A JSON value's kind in words."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def _permissions(file: SettingsFile) -> dict[str, Any]:
    value = file.data.get("permissions", {})
    if not isinstance(value, dict):
        raise SettingsError(f"settings file {file.path}: 'permissions' must be an object, not {_kind(value)}")
    return value


def _texts(file: SettingsFile, permissions: dict[str, Any], kind: str) -> list[str]:
    value = permissions.get(kind, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SettingsError(f"settings file {file.path}: 'permissions.{kind}' must be a list of strings")
    return value


def _mode(file: SettingsFile, permissions: dict[str, Any]) -> str | None:
    value = permissions.get("defaultMode")
    if value is not None and value not in MODE_NAMES:
        raise SettingsError(
            f"settings file {file.path}: 'permissions.defaultMode' must be one of {', '.join(MODE_NAMES)},"
            f" not {json.dumps(value)[:60]}"
        )
    return value


def _env(file: SettingsFile) -> dict[str, str]:
    value = file.data.get("env", {})
    if not isinstance(value, dict):
        raise SettingsError(f"settings file {file.path}: 'env' must be an object, not {_kind(value)}")
    env = {}
    for name, item in value.items():
        if not name or "=" in name or "\0" in name:
            raise SettingsError(
                f"settings file {file.path}: env name {json.dumps(name)[:60]} is not a variable name"
            )
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise SettingsError(f"settings file {file.path}: env {name} must be a string, not {_kind(item)}")
        if isinstance(item, str) and "\0" in item:
            raise SettingsError(f"settings file {file.path}: env {name} holds a NUL character")
        env[name] = str(item)
    return env


def _refused(name: str) -> bool:
    return name.upper() in REFUSED_ENV or name.upper().startswith(REFUSED_ENV_PREFIXES)


def _shown(path: Path, project: Path) -> str:
    """``path`` relative to ``project`` when inside it, else as it is."""
    try:
        return str(path.relative_to(project))
    except ValueError:
        return str(path)
