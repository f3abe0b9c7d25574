"""Claude Code's settings: the user's ``settings.json``, the project's ``.claude/settings[.local].json``.

``read_settings`` reads each present file as Claude Code does (JSON with comments and trailing commas,
a key named twice keeping its last value: ``teamrt.claudecode.reading.loads_jsonc``), the lowest
precedence first; ``load_claude_settings`` merges what teamrt uses of them as Claude Code does (lists
concatenated, a later file's scalar over an earlier one's): ``permissions.allow/deny/ask`` (rules pooled
with the team file's: a deny of any source beats an allow of any, ``teamrt.tools.permissions``),
``permissions.defaultMode``, ``env`` (for the programs tools run) and Claude Code's own knobs in it
(``teamrt.claudecode.envknobs``). Hooks: ``teamrt.claudecode.hooks``.

No settings file stops a run, as none stops Claude Code: what cannot be used is left out with one line
each (``ClaudeSettings.warnings``, ``<file>: ...``), every problem at once, nothing raised for a file's
content. Deny rules fail closed:

- a file that is not valid JSON (or not UTF-8 and then not JSON) is left out, as Claude Code leaves it
  out, but the ``deny`` and ``ask`` lists found in its text still apply (``salvage_rules``);
- a file that cannot be read at all (no permission, not a regular file, a project file linking outside
  the project, larger than ``MAX_BYTES``: its first ``MAX_BYTES`` are searched) is left out with a line
  saying its deny and ask rules are not in force;
- a rule teamrt cannot read is left out when it allows, kept as strictly as it can be read when it
  denies or asks (``teamrt.claudecode.settings_rules``).

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt import settings as teamrt_settings
from teamrt.claudecode.envknobs import Knobs, is_knob, read_knobs
from teamrt.claudecode.settings_keys import key_lines
from teamrt.claudecode.settings_read import (
    MAX_BYTES,
    NOT_IN_FORCE,
    LeftOut,
    SettingsFile,
    SettingsRead,
    git_tracks,
    kind_of,
    read_settings,
    read_settings_files,
)
from teamrt.claudecode.settings_rules import RESTRICTING, parse_rules
from teamrt.tools.permissions import MODE_NAMES, Rules

__all__ = [
    "MAX_BYTES", "ClaudeSettings", "LeftOut", "SettingsError", "SettingsFile", "SettingsRead", "git_tracks",
    "load_claude_settings", "read_settings", "read_settings_files",
]  # fmt: skip


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
MCP_ENABLING_KEYS = ("enableAllProjectMcpServers", "enabledMcpjsonServers")
"""Keys that start a project's ``.mcp.json`` servers: only the person's own settings may set them
(``teamrt.mcp.config.project_enablement``), never the repository's ``.claude/settings.json``."""


class SettingsError(teamrt_settings.SettingsError):
    """Kept for callers that catch it: the Claude Code settings readers no longer raise it."""


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
    knobs: Knobs = field(default_factory=Knobs)
    """Claude Code's own knobs teamrt honours (``teamrt.claudecode.envknobs``)."""
    warnings: tuple[str, ...] = ()
    """One line each, ``<file>: <what is left out and why>``."""


def load_claude_settings(project: Path) -> ClaudeSettings:
    """The settings of ``project`` merged by Claude Code's precedence; never raises for a file."""
    read = read_settings(project)
    rules, mode, env, knobs = Rules(), None, dict[str, str](), Knobs()
    warnings = list(read.warnings)
    for lost in read.left_out:
        if any(lost.salvaged.values()):
            found, lines = parse_rules({k: v for k, v in lost.salvaged.items() if k in RESTRICTING},
                                       _shown(lost.path, project))  # fmt: skip
            rules += found
            warnings += lines
    allow_trusted = _allow_trusted(project, read.files, warnings)
    for file in read.files:
        shown = _shown(file.path, project)
        warnings += key_lines(file.data, shown)
        if file.scope == "project":
            warnings += [
                f"{shown}: {key!r} ignored: a repository's settings cannot start its own MCP servers (set"
                " it in your user settings, or run teamrt trust)"
                for key in MCP_ENABLING_KEYS
                if key in file.data
            ]
        permissions = _permissions(file, shown, warnings)
        texts = {kind: _texts(permissions, kind, shown, warnings) for kind in RULE_KINDS}
        parsed, lines = parse_rules(texts, shown)
        warnings += lines
        if parsed.allow and file.repository and not allow_trusted:
            parsed = Rules(deny=parsed.deny, ask=parsed.ask)
            warnings.append(_untrusted_allow(shown, len(texts["allow"]), project))
        rules += parsed
        chosen = _mode(permissions, shown, warnings)
        if chosen in UNTRUSTED_MODES and file.scope != "user":
            warnings.append(
                f"{shown}: defaultMode {chosen!r} ignored: a repository's settings cannot choose it (choose"
                " it in your user settings, the team file's permission_mode or the agent file)"
            )
        elif chosen is not None:
            mode = chosen
        entries = _env(file, shown, warnings)
        knobs, lines = read_knobs(entries, shown, knobs)
        warnings += lines
        kept, line = _env_kept(file, entries, shown)
        env |= kept
        warnings += [line] if line else []
    return ClaudeSettings(read.files, rules, mode, env, knobs, tuple(warnings))


def _env_kept(
    file: SettingsFile, entries: Mapping[str, str], shown: str
) -> tuple[dict[str, str], str | None]:
    """The ``env`` of ``file`` that tool processes get, and the warning naming what is refused. Claude
    Code's own knobs are said by ``envknobs``; one that may not reach tool processes is left out quietly."""
    kept: dict[str, str] = {}
    refused: list[str] = []
    for name, value in entries.items():
        allowed = REPOSITORY_ENV.get(name)
        if _settable(file, name, value):
            kept[name] = value
        elif not is_knob(name):
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


def _permissions(file: SettingsFile, shown: str, warnings: list[str]) -> dict[str, Any]:
    value = file.data.get("permissions", {})
    if isinstance(value, dict):
        return value
    warnings.append(f"{shown}: 'permissions' is {kind_of(value)}, not an object: left out ({NOT_IN_FORCE})")
    return {}


def _texts(permissions: dict[str, Any], kind: str, shown: str, warnings: list[str]) -> list[str]:
    """The rule texts of a ``kind`` list. A deny or ask rule written as a lone string is one rule (fail
    closed); items that are not strings are named and left out."""
    value = permissions.get(kind, [])
    if isinstance(value, str) and kind in RESTRICTING:
        warnings.append(f"{shown}: 'permissions.{kind}' is a string, not a list: read as one rule")
        return [value]
    if not isinstance(value, list):
        warnings.append(f"{shown}: 'permissions.{kind}' is {kind_of(value)}, not a list of rules: left out")
        return []
    texts = [item for item in value if isinstance(item, str)]
    others = [kind_of(item) for item in value if not isinstance(item, str)]
    if others:
        warnings.append(
            f"{shown}: 'permissions.{kind}' holds {len(others)} item{'s' if len(others) > 1 else ''} that"
            f" {'are' if len(others) > 1 else 'is'} not a rule ({', '.join(sorted(set(others)))}): left out"
        )
    return texts


def _mode(permissions: dict[str, Any], shown: str, warnings: list[str]) -> str | None:
    value = permissions.get("defaultMode")
    if value is not None and value not in MODE_NAMES:
        warnings.append(
            f"{shown}: 'permissions.defaultMode' {json.dumps(value)[:60]} is not one of"
            f" {', '.join(MODE_NAMES)}: left out"
        )
        return None
    return value


def _env(file: SettingsFile, shown: str, warnings: list[str]) -> dict[str, str]:
    """The file's ``env`` entries that are a variable's name and a value; one line naming the others."""
    value = file.data.get("env", {})
    if not isinstance(value, dict):
        warnings.append(f"{shown}: 'env' is {kind_of(value)}, not an object: left out")
        return {}
    env, bad = {}, []
    for name, item in value.items():
        if not name or "=" in name or "\0" in name:
            bad.append(f"{json.dumps(name)[:60]} (not a variable name)")
        elif isinstance(item, bool) or not isinstance(item, str | int | float):
            bad.append(f"{_shown_name(name)} ({kind_of(item)}, not a string)")
        elif isinstance(item, str) and "\0" in item:
            bad.append(f"{_shown_name(name)} (holds a NUL character)")
        else:
            env[name] = str(item)
    if bad:
        warnings.append(f"{shown}: env entries left out: {', '.join(bad)}")
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
