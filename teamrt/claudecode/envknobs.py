"""Claude Code's own knobs in a settings file's ``env``: honoured where teamrt has the same knob, named
where it has not.

Claude Code reads many variables of its ``env`` as its own configuration (``BASH_DEFAULT_TIMEOUT_MS``,
``MCP_TIMEOUT``, ``ANTHROPIC_MODEL`` ...; its settings documentation, "Environment variables"). teamrt
passes a settings file's ``env`` to the programs tools run (``teamrt.claudecode.settings``); this module
reads the knobs among them (``KNOBS``):

- ``HONOURED``: teamrt has the same knob; the value (milliseconds or characters, as Claude Code takes it)
  goes into ``Knobs``, which the run hands to the Bash tool and the MCP servers. A later file's value
  over an earlier one's, as for every ``env`` entry. A value that is not a whole number in range gets
  one line and the default. A repository's files may set these (they only change limits, which teamrt
  caps: ``HONOURED``'s bounds), so a cloned project's longer Bash timeout works as in Claude Code.
- ``MOOT``: what the knob turns off teamrt never does (telemetry, auto-updates, error reports): nothing
  to say.
- ``IGNORED``: teamrt has no such knob, or chooses it elsewhere (the team file chooses models and
  thinking): named once per file, one line, with where teamrt sets it when it does.

Any other ``CLAUDE_CODE_*`` variable is Claude Code's too: named as not used, in the same line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from teamrt.tools.base import Tool
from teamrt.tools.shell.bash import DEFAULT_TIMEOUT, MAX_TIMEOUT, OUTPUT_CHARS, Bash, BashLimits


@dataclass(frozen=True)
class Bound:
    """A honoured knob: the ``Knobs`` field it sets, its unit's divisor (1000: milliseconds to seconds),
    and the range of the value as written."""

    field: str
    divisor: int
    low: int
    high: int
    what: str


HONOURED: dict[str, Bound] = {
    "BASH_DEFAULT_TIMEOUT_MS": Bound("bash_timeout", 1000, 1, 86_400_000, "the Bash tool's default timeout"),
    "BASH_MAX_TIMEOUT_MS": Bound("bash_max_timeout", 1000, 1, 86_400_000, "the longest Bash timeout"),
    "BASH_MAX_OUTPUT_LENGTH": Bound("bash_output_chars", 1, 1_000, 1_000_000, "the Bash output kept"),
    "MCP_TIMEOUT": Bound("mcp_start_timeout", 1000, 1, 3_600_000, "MCP server start-up"),
    "MCP_TOOL_TIMEOUT": Bound("mcp_tool_timeout", 1000, 1, 86_400_000, "an MCP tool call's timeout"),
}
"""Knobs teamrt has too: the variable, and what of teamrt it sets (and within which range)."""
MOOT = frozenset({
    "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING", "DISABLE_BUG_COMMAND",
    "DISABLE_NON_ESSENTIAL_MODEL_CALLS", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE", "DISABLE_COST_WARNINGS", "CLAUDE_CODE_ENABLE_TELEMETRY",
    "CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY",
    "DISABLE_INSTALLATION_CHECKS", "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL",
})  # fmt: skip
"""Knobs that turn off what teamrt never does (or, for CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR, ask
for what it always does: each Bash call starts in the workspace)."""
IGNORED: dict[str, str] = {
    "ANTHROPIC_MODEL": "the team file chooses models",
    "ANTHROPIC_SMALL_FAST_MODEL": "the team file chooses models",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL": "the team file chooses models",
    "ANTHROPIC_DEFAULT_SONNET_MODEL": "the team file chooses models",
    "ANTHROPIC_DEFAULT_OPUS_MODEL": "the team file chooses models",
    "CLAUDE_CODE_SUBAGENT_MODEL": "the team file chooses models",
    "MAX_THINKING_TOKENS": "set [team] thinking in the team file",
    "CLAUDE_CODE_EFFORT_LEVEL": "set [team] effort in the team file",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "teamrt sizes replies per model",
    "DISABLE_PROMPT_CACHING": "set [team] cache in the team file",
    "MAX_MCP_OUTPUT_TOKENS": "teamrt keeps an MCP result as it keeps a tool's",
    "CLAUDE_CODE_USE_BEDROCK": "teamrt talks to the Anthropic API",
    "CLAUDE_CODE_USE_VERTEX": "teamrt talks to the Anthropic API",
    "CLAUDE_CODE_USE_FOUNDRY": "teamrt talks to the Anthropic API",
    "ANTHROPIC_BASE_URL": "read from teamrt's own environment",
    "ANTHROPIC_API_KEY": "read from teamrt's own environment",
    "ANTHROPIC_AUTH_TOKEN": "read from teamrt's own environment",
    "ANTHROPIC_CUSTOM_HEADERS": "not sent",
    "CLAUDE_CODE_SHELL": "Bash runs /bin/bash",
    "CLAUDE_CODE_SHELL_PREFIX": "Bash runs /bin/bash",
    "CLAUDE_ENV_FILE": "Bash runs /bin/bash",
    "USE_BUILTIN_RIPGREP": "Grep is teamrt's own",
    "CLAUDE_CODE_API_KEY_HELPER_TTL_MS": "teamrt runs no key helper",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "set [team] compact_at in the team file",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "set [team] compact_at in the team file",
    "DISABLE_AUTO_COMPACT": "set [team] compact_at in the team file",
    "DISABLE_COMPACT": "set [team] compact_at in the team file",
    "CLAUDE_CODE_DISABLE_THINKING": "set [team] thinking in the team file",
    "CLAUDE_CODE_DISABLE_ADAPTIVE_THINKING": "set [team] thinking in the team file",
    "CLAUDE_CODE_ENABLE_TASKS": "teamrt's team tools are always there",
    "CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS": "teamrt's team tools are always there",
    "SLASH_COMMAND_TOOL_CHAR_BUDGET": "teamrt has no slash commands",
    "CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS": "Read keeps its own limit",
}
"""Claude Code's knobs teamrt does not read from settings, and what it does instead."""
_CLAUDE = re.compile(r"CLAUDE_CODE_[A-Z0-9_]+")


@dataclass(frozen=True)
class Knobs:
    """The honoured knobs' values from the settings files; None: teamrt's default."""

    bash_timeout: float | None = None
    """Seconds: the Bash tool's timeout when the model gives none (Claude Code: 120 s)."""
    bash_max_timeout: float | None = None
    """Seconds: the longest timeout the model may give a Bash command (Claude Code: 600 s)."""
    bash_output_chars: int | None = None
    """Characters of a Bash command's output kept (its beginning and its end)."""
    mcp_start_timeout: float | None = None
    """Seconds an MCP server has to start and list its tools."""
    mcp_tool_timeout: float | None = None
    """Seconds an MCP tool call may take when its server's entry gives no ``timeout``."""
    sources: Mapping[str, str] = field(default_factory=dict)
    """Each set field's variable and the file that set it, for the docs and ``teamrt`` notes."""


def read_knobs(env: Mapping[str, Any], shown: str, knobs: Knobs) -> tuple[Knobs, list[str]]:
    """``knobs`` with the honoured variables of one file's ``env`` (``shown``: the file) laid over it, and
    the lines that file gets: one per value that is not usable, one naming the knobs teamrt ignores."""
    lines: list[str] = []
    ignored: list[str] = []
    for name, value in env.items():
        bound = HONOURED.get(name)
        if bound is not None:
            number = _number(value, bound)
            if number is None:
                lines.append(
                    f"{shown}: env {name} {_shown(value)} is not a whole number from {bound.low:,} to"
                    f" {bound.high:,}; {bound.what} stays teamrt's default"
                )
                continue
            converted: Any = number / bound.divisor if bound.divisor != 1 else number
            knobs = replace(
                knobs, **{bound.field: converted, "sources": {**knobs.sources, bound.field: shown}}
            )
        elif name in IGNORED:
            ignored.append(f"{name} ({IGNORED[name]})")
        elif name not in MOOT and _CLAUDE.fullmatch(name):
            ignored.append(name)
    if ignored:
        lines.append(f"{shown}: env knobs of Claude Code's that teamrt does not use: {', '.join(ignored)}")
    return knobs, lines


def knob_tools(knobs: Knobs) -> dict[str, Tool]:
    """The built-in tools the knobs change, made with them (``{}`` when none is set, so that a run
    without knobs shows the model the very same tools)."""
    if knobs.bash_timeout is None and knobs.bash_max_timeout is None and knobs.bash_output_chars is None:
        return {}
    timeout = knobs.bash_timeout or DEFAULT_TIMEOUT
    most = max(knobs.bash_max_timeout or MAX_TIMEOUT, timeout)  # a default above the most raises the most
    limits = BashLimits(timeout, most, knobs.bash_output_chars or OUTPUT_CHARS)
    return {"Bash": Bash(limits=limits)}


def is_knob(name: str) -> bool:
    """Whether ``name`` is one of Claude Code's own knobs (so not a variable for the programs tools run)."""
    return name in HONOURED or name in MOOT or name in IGNORED or _CLAUDE.fullmatch(name) is not None


def _number(value: Any, bound: Bound) -> int | None:
    """``value`` (a string or a number, as JSON gives it) as a whole number within ``bound``, or None."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    if not re.fullmatch(r"\d{1,12}", text):
        return None
    number = int(text)
    return number if bound.low <= number <= bound.high else None


def _shown(value: Any) -> str:
    text = (
        repr(value) if not isinstance(value, str) else '"' + value[:40] + ('..."' if len(value) > 40 else '"')
    )
    return "".join(c if c.isprintable() else "?" for c in text)
