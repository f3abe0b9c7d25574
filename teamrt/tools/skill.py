"""The ``Skill`` tool: the model loads one of the run's skills by name, as Claude Code's Skill tool does.

Progressive disclosure: the tool's description lists only the skills' names
and descriptions (``listing``), built once for the agent so that the request's
cached prefix (system prompt and tools) stays byte-identical across turns; a
skill's body reaches the model only when it calls the tool, as the call's
result: ``Base directory for this skill: <folder>`` and then SKILL.md without
its front matter, Claude Code's arguments substituted (``$ARGUMENTS``,
``$ARGUMENTS[N]``, ``$N``, ``${CLAUDE_SKILL_DIR}``, ``${CLAUDE_SESSION_ID}``:
the run's id). The skill's folder is among the agent's read-only roots
(``teamrt.runtime.assembly``), so its other files can be read with Read, Glob
and Grep; nothing in it is writable.

Claude Code caps the listing at 1% of the context window in characters
(about 4 characters a token: 8,000 for 200,000 tokens), ``SLASH_COMMAND_TOOL_CHAR_BUDGET`` overriding
it; past the budget, descriptions are dropped and then names, and the listing
says how many it left out.

The skills come from ``teamrt.claudecode.skills`` (a layer above this one),
through the ``SkillCatalog`` protocol.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema

BUDGET_ENV = "SLASH_COMMAND_TOOL_CHAR_BUDGET"
"""Claude Code's variable for the listing's budget in characters."""
FALLBACK_BUDGET = 8000
CHARS_PER_TOKEN = 4
MAX_ARGS = 10_000
"""Characters of ``args`` a call may pass."""
INTRO = (
    "Load a skill: instructions (and files beside them) written for tasks of one kind. When a task matches"
    " a skill's description below, call this tool with the skill's name before doing the task, then follow"
    " what it returns; its base directory holds the files it refers to, which you can read. Pass the"
    " task's particulars in args when the skill takes them. Do not call it for a skill already loaded in"
    " this conversation."
)
_POSITIONAL = re.compile(r"\$ARGUMENTS\[(\d+)\]|\$(\d+)(?!\d)")


class SkillCatalog(Protocol):
    """The run's skills as the tool needs them (``teamrt.claudecode.skills.SkillSet``)."""

    def listed(self) -> list[tuple[str, str]]:
        """(name, description) of every skill the model may invoke, in a fixed order."""
        ...

    def launch(self, name: str) -> tuple[Path, str]:
        """The base directory and body of skill ``name``; KeyError when the model may not invoke it,
        ValueError when it cannot be read now."""
        ...


def listing_budget(context_window: int | None, env: Mapping[str, str]) -> int:
    """The listing's budget in characters: ``SLASH_COMMAND_TOOL_CHAR_BUDGET`` when set to a positive
    number, else 1% of ``context_window`` tokens at 4 characters a token, else 8,000."""
    configured = env.get(BUDGET_ENV, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return context_window * CHARS_PER_TOKEN // 100 if context_window else FALLBACK_BUDGET


def listing(skills: Sequence[tuple[str, str]], budget: int) -> tuple[str, int, int]:
    """The skills as the model is shown them, within ``budget`` characters: every one with its
    description while they fit, then names alone, then a count of those left out. Also returns how many
    lost their description and how many were left out."""
    lines: list[str] = []
    used = bare = 0
    for index, (name, description) in enumerate(skills):
        full = f"- {name}: {description}" if description else f"- {name}"
        if not bare and used + len(full) + 1 <= budget:
            lines.append(full)
            used += len(full) + 1
            continue
        short = f"- {name}"
        if used + len(short) + 1 > budget:
            left = len(skills) - index
            lines.append(
                f"({left} more skill{'s' if left != 1 else ''} not listed: over the listing's budget)"
            )
            return "\n".join(lines), bare, left
        bare += 1
        lines.append(short)
        used += len(short) + 1
    return "\n".join(lines), bare, 0


class SkillTool:
    """Claude Code's ``Skill``: ``{"skill": name, "args"?: text}``."""

    name = "Skill"
    read_only = True
    input_schema = object_schema(
        {
            "skill": {"type": "string", "description": "The skill's name, as listed (e.g. 'pdf')."},
            "args": {"type": "string", "description": "Optional arguments for the skill."},
        },
        "skill",
    )

    def __init__(self, catalog: SkillCatalog, budget: int = FALLBACK_BUDGET) -> None:
        self.catalog = catalog
        shown, self.bare, self.left_out = listing(catalog.listed(), budget)
        self.description = f"{INTRO}\n\n<available_skills>\n{shown}\n</available_skills>"

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name, args = input.get("skill"), input.get("args", "")
        if not isinstance(name, str) or not name.strip():
            raise ToolError("Skill: 'skill' must be the name of a listed skill")
        if not isinstance(args, str):
            raise ToolError("Skill: 'args' must be text")
        if len(args) > MAX_ARGS:
            raise ToolError(f"Skill: 'args' holds {len(args)} characters, more than {MAX_ARGS}")
        name = name.strip().removeprefix("/")
        try:
            folder, body = self.catalog.launch(name)
        except KeyError:
            known = ", ".join(n for n, _ in self.catalog.listed()[:50])
            raise ToolError(f"Skill: no skill {name[:100]!r} is available; the skills are: {known}") from None
        except ValueError as e:
            raise ToolError(f"Skill: {e}") from None
        text = substitute(body, args, folder=folder, session=ctx.run_dir.name)
        return ToolResult(f"Launching skill: {name}\n\nBase directory for this skill: {folder}\n\n{text}")


def substitute(body: str, args: str, *, folder: Path, session: str) -> str:
    """``body`` with Claude Code's placeholders filled in: ``${CLAUDE_SKILL_DIR}``,
    ``${CLAUDE_SESSION_ID}``, ``$ARGUMENTS[N]`` and ``$N`` (the Nth argument, from 0, split as a shell
    splits words), ``$ARGUMENTS`` (all of them); without ``$ARGUMENTS`` in the body, arguments given are
    appended as ``ARGUMENTS: <args>``, as Claude Code does."""
    try:
        words = shlex.split(args)
    except ValueError:  # an unclosed quote: words as spaces part them
        words = args.split()
    text = body.replace("${CLAUDE_SKILL_DIR}", str(folder)).replace("${CLAUDE_SESSION_ID}", session)
    mentioned = "$ARGUMENTS" in text

    def positional(match: re.Match[str]) -> str:
        index = int(match.group(1) or match.group(2))
        return words[index] if index < len(words) else ""

    text = _POSITIONAL.sub(positional, text).replace("$ARGUMENTS", args)
    if not mentioned and args.strip():
        text = f"{text}\n\nARGUMENTS: {args}"
    return text
