"""Claude Code's settings: the user's ``settings.json``, the project's ``.claude/settings[.local].json``.

``read_settings_files`` reads each present file as JSON, the lowest precedence
first; ``load_claude_settings`` merges what teamrt uses of them as Claude Code
does (lists concatenated, a later file's scalar over an earlier one's):
``permissions.allow/deny/ask`` (rules pooled with the team file's: a deny of
any source beats an allow of any, ``teamrt.tools.permissions.Permissions``),
``permissions.defaultMode`` and ``env`` (for the programs tools run). A file
that cannot be used is an error of one line naming it: a run must not
silently lose deny rules. Hooks: ``teamrt.claudecode.hooks``.

The repository is not trusted code. What came with it (``.claude/settings.json``,
and ``.claude/settings.local.json`` when git tracks it: ``SettingsFile.repository``):

- cannot set ``bypassPermissions`` or ``auto`` as the default mode (the user's can);
- sets in ``env`` only variables that change no program's behaviour
  (``REPOSITORY_ENV``: locale, time zone, colour and CI flags, each with a plain
  value); any other (``XDG_CONFIG_HOME`` makes git read a config that runs a
  planted fsmonitor, ``PAGER``, ``LESSOPEN``, ``EDITOR`` run programs) is
  refused with one line naming them all. The person's own files (the user's,
  an untracked ``settings.local.json``) may set more, but never teamrt's or
  Anthropic's variables nor those that choose which program or code a name
  runs (``REFUSED_ENV``: ``PATH``, ``LD_PRELOAD``, ``BASH_ENV``, ``GIT_*`` ...);
- grants nothing with ``permissions.allow`` until ``teamrt trust`` records the
  hash of those rules (``teamrt.claudecode.trust.allow_digest``); a change
  needs trusting again. Its ``deny`` and ``ask`` rules only restrict, and
  always apply.

A JSON object naming a key twice is refused (``teamrt.claudecode.reading.loads_json``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt import settings as teamrt_settings
from teamrt.claudecode.paths import settings_files
from teamrt.claudecode.reading import DuplicateKey, loads_json, read_head
from teamrt.tools.permissions import MODE_NAMES, RuleError, Rules

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
_LOCALE = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
"""A locale's name (``C``, ``en_US.UTF-8``, ``de_DE@euro``): never a path (glibc reads a name with a ``/``
as a file of locale data)."""
_FLAG = re.compile(r"[A-Za-z0-9_.-]{0,32}")
_TIME_ZONE = re.compile(r"(?!.*\.\.)[A-Za-z0-9_+<>,.-][A-Za-z0-9_+<>,.:/-]{0,63}")
"""A zone name (``Europe/Paris``, ``UTC``) or a POSIX rule (``EST5EDT,M3.2.0,M11.1.0``): never a file
(``:/path``, ``/path``, a ``..`` climbing out of the zone folder)."""
REPOSITORY_ENV: dict[str, re.Pattern[str]] = {
    # The locale: the language of messages, how text sorts and numbers print; data, not code.
    "LANG": _LOCALE, "LANGUAGE": re.compile(r"[A-Za-z0-9_.@:-]{1,200}"),
    **{f"LC_{part}": _LOCALE for part in (
        "ALL", "ADDRESS", "COLLATE", "CTYPE", "IDENTIFICATION", "MEASUREMENT", "MESSAGES", "MONETARY",
        "NAME", "NUMERIC", "PAPER", "TELEPHONE", "TIME",
    )},
    "TZ": _TIME_ZONE,  # the clock's zone, for tests that print dates
    # Colour on or off (no-color.org, force-color.org, BSD's CLICOLOR): how output looks.
    "NO_COLOR": _FLAG, "FORCE_COLOR": _FLAG, "CLICOLOR": _FLAG, "CLICOLOR_FORCE": _FLAG,
    "CI": _FLAG,  # test runners print for a log, not a terminal
    # Python's buffering of output and its bytecode cache: the same code runs.
    "PYTHONUNBUFFERED": _FLAG, "PYTHONDONTWRITEBYTECODE": _FLAG,
}  # fmt: skip
"""The variables a repository's settings may set for tool processes, each with the values it may take:
those that change no program's behaviour beyond how it prints. Every other variable may make a program
that an allow rule names run another one (``XDG_CONFIG_HOME`` and git's fsmonitor, ``PAGER``, ``EDITOR``,
``LESSOPEN``, ``PYTEST_ADDOPTS``, ``PYTHONWARNINGS`` importing a module, ``*_proxy`` redirecting traffic):
only the person's own files set those."""
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
    tracked: bool = True
    """Whether git tracks the file (so it came with the repository); True when git cannot tell."""

    @property
    def repository(self) -> bool:
        """Whether the file came with the repository, so is someone else's word: the project's
        ``.claude/settings.json``, and a ``settings.local.json`` that git tracks."""
        return self.scope == "project" or (self.scope == "local" and self.tracked)


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
    allow_trusted = _allow_trusted(project, files, warnings)
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
        texts = {kind: _texts(file, permissions, kind) for kind in RULE_KINDS}
        try:
            parsed = Rules.parse(**texts, origin=shown)
        except RuleError as e:
            raise SettingsError(f"settings file {file.path}: permissions: {e}") from None
        if parsed.allow and file.repository and not allow_trusted:
            parsed = Rules(deny=parsed.deny, ask=parsed.ask)
            warnings.append(_untrusted_allow(shown, len(texts["allow"]), project))
        rules += parsed
        chosen = _mode(file, permissions)
        if chosen in UNTRUSTED_MODES and file.scope != "user":
            warnings.append(
                f"{shown}: defaultMode {chosen!r} ignored: a repository's settings cannot choose it (choose"
                " it in your user settings, the team file's permission_mode or the agent file)"
            )
        elif chosen is not None:
            mode = chosen
        kept, line = _env_kept(file, shown)
        env |= kept
        warnings += [line] if line else []
    return ClaudeSettings(tuple(files), rules, mode, env, tuple(warnings))


def _env_kept(file: SettingsFile, shown: str) -> tuple[dict[str, str], str | None]:
    """The ``env`` of ``file`` that tool processes get, and the warning naming what is refused."""
    kept: dict[str, str] = {}
    refused: list[str] = []
    for name, value in _env(file).items():
        allowed = REPOSITORY_ENV.get(name)
        if _settable(file, name, value):
            kept[name] = value
        else:
            refused.append(f"{name} (its value)" if file.repository and allowed else _shown_name(name))
    if not refused:
        return kept, None
    if not file.repository:
        them = "them" if len(refused) > 1 else "it"
        return (
            kept,
            f"{shown}: env {', '.join(refused)} ignored: settings may not set {them} for tool processes",
        )
    return kept, (
        f"{shown}: env {', '.join(refused)} ignored: a repository's settings may set only variables that"
        " change no program (LANG, LANGUAGE, LC_*, TZ, NO_COLOR, FORCE_COLOR, CLICOLOR, CLICOLOR_FORCE, CI,"
        " PYTHONUNBUFFERED, PYTHONDONTWRITEBYTECODE; a locale, zone or flag as value); set others in your"
        " ~/.claude/settings.json or an untracked .claude/settings.local.json"
    )


def _settable(file: SettingsFile, name: str, value: str) -> bool:
    """Whether ``file`` may give tool processes ``name=value``."""
    if not file.repository:
        return not _refused(name)
    allowed = REPOSITORY_ENV.get(name)
    return allowed is not None and allowed.fullmatch(value) is not None


def _untrusted_allow(shown: str, count: int, project: Path) -> str:
    """The warning for a repository file's allow rules that do not count."""
    return (
        f"{shown}: its {count} permissions.allow rule{'s' if count != 1 else ''} not used: a repository's"
        f" allow rules grant nothing until you trust them (read them, then run teamrt trust in {project});"
        " its deny and ask rules apply"
    )


def _allow_trusted(project: Path, files: Sequence[SettingsFile], warnings: list[str]) -> bool:
    """Whether the person trusted the repository's allow rules as they are now (False when it has none)."""
    from teamrt.claudecode.trust import TrustError, allow_digest, is_allow_trusted

    digest = allow_digest(files)
    if digest is None:
        return False
    try:
        return is_allow_trusted(project, digest)
    except TrustError as e:
        warnings.append(str(e))
        return False


def git_tracks(project: Path, path: Path) -> bool:
    """Whether git tracks ``path`` in ``project`` (True when git cannot say: the safe answer). git runs
    with teamrt's pinned settings: nothing the repository's configuration names (an fsmonitor) runs."""
    from teamrt.worktree.git import SAFE

    try:
        done = subprocess.run(
            ["git", *SAFE, "-C", str(project), "ls-files", "--error-unmatch", "--", str(path)],
            capture_output=True, timeout=10, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return True
    if done.returncode == 0:
        return True
    return b"not a git repository" not in done.stderr and b"did not match" not in done.stderr


def read_settings_files(project: Path) -> list[SettingsFile]:
    """The settings files present for ``project``, the lowest precedence first.

    Raises SettingsError when one is not a regular file of a JSON object, or
    (for the project's own files) resolves to outside the project."""
    found = []
    for scope, path in settings_files(project):
        data = _read(path, None if scope == "user" else project)
        if data is not None:
            tracked = scope != "user" and (scope == "project" or git_tracks(project, path))
            found.append(SettingsFile(scope, path, data, tracked))
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
        data = loads_json(raw.decode("utf-8-sig"))
    except DuplicateKey as e:
        raise SettingsError(
            f"settings file {path}: {e}: JSON readers disagree on which value counts; refusing it"
        ) from None
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
            raise SettingsError(
                f"settings file {file.path}: env {_shown_name(name)} must be a string, not {_kind(item)}"
            )
        if isinstance(item, str) and "\0" in item:
            raise SettingsError(f"settings file {file.path}: env {_shown_name(name)} holds a NUL character")
        env[name] = str(item)
    return env


def _shown_name(name: str) -> str:
    """A variable's name on one line of a terminal: as it is when plain, else escaped and quoted."""
    return name if re.fullmatch(r"[!-~]{1,128}", name) and '"' not in name else json.dumps(name)[:80]


def _refused(name: str) -> bool:
    return name.upper() in REFUSED_ENV or name.upper().startswith(REFUSED_ENV_PREFIXES)


def _shown(path: Path, project: Path) -> str:
    """``path`` relative to ``project`` when inside it, else as it is."""
    try:
        return str(path.relative_to(project))
    except ValueError:
        return str(path)
