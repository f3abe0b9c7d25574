"""What an agent of the generic play looks at and runs, chosen from its request alone.

The paths its task names, the commands its team lets it run (the allow rules and
merge gates the runtime puts in its system prompt, ``teamrt.tools.commands_brief``),
and how it quotes a tool's result in its report: inert (control characters shown
as escapes, never passed on), trimmed, and never anything but what the tool said.
Nothing here takes a command from a file's content: only the task, which a person
or the lead wrote, and the team's own rules name what is run.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path, PurePosixPath

from teamrt.tools.commands_brief import CommandsBrief
from teamrt.tools.permissions import Permissions, Rules, Verdict

MAX_PATHS = 4
"""Files named in a task that an agent reads."""
MAX_COMMANDS = 6
"""Commands an agent runs in one round."""
QUOTED_LINES = 12
QUOTED_CHARS = 200

_PATH = re.compile(
    r"(?<![\w./:@-])((?:[\w-][\w.-]*/)*[\w.-]*[A-Za-z_][\w-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
    r"|(?:[\w-][\w.-]*/)+[\w-][\w.-]*)(?![\w/@-]|\.\w)"
)
_NOT_PATHS = frozenset({"e.g", "i.e", "etc", "vs"})
_NAMED_COMMAND = re.compile(r"`([^`\n]{1,300})`")
FAMILIES: tuple[tuple[str, ...], ...] = (
    ("git status --short", "git status"),
    ("git log --oneline -10", "git log"),
    ("git diff --stat", "git diff"),
)
"""Read-only commands worth running with nothing else named, each in the forms tried in turn (the
first the rules allow is run)."""
LISTING = ("ls -1p", "ls")
_WORKSPACE = Path("/workspace")
"""Where the rules are read from: the policy does not know the agent's workspace (the runtime decides)."""


def inert(text: str) -> str:
    """``text`` with every control or format character (escape sequences, bidi overrides, NUL) written
    as an escape such as ``\\x1b``: quoted, never passed on to a terminal or read as markup."""
    return "".join(ch if ch in "\n\t" or unicodedata.category(ch)[0] != "C" else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def quote(output: str, *, lines: int = QUOTED_LINES) -> list[str]:
    """A tool's result as lines to quote: inert, each cut to ``QUOTED_CHARS``, the first ``lines`` of it
    and a line saying how many more there were."""
    text = inert(output.rstrip("\n"))
    rows = text.splitlines() or ["(no output)"]
    shown = [row if len(row) <= QUOTED_CHARS else row[: QUOTED_CHARS - 3] + "..." for row in rows[:lines]]
    if len(rows) > lines:
        shown.append(f"({len(rows) - lines} more lines)")
    return [f"    | {row}" for row in shown]


def named_paths(task: str) -> list[str]:
    """The relative paths a task names (``src/app.py``, ``README.md``, ``docs/``), in order, at most
    ``MAX_PATHS``: none absolute or leading out of the workspace."""
    found = []
    for match in _PATH.finditer(task):
        path = match.group(1).rstrip(".").rstrip("/")
        if path and path.lower() not in _NOT_PATHS and ".." not in PurePosixPath(path).parts:
            found.append(path)
    return list(dict.fromkeys(found))[:MAX_PATHS]


class Allowed:
    """Whether the team's allow rules, as the agent was told them, let a command run without asking."""

    def __init__(self, brief: CommandsBrief) -> None:
        rules = brief.rules()
        self._permissions = Permissions("dontAsk", then=Rules(allow=rules)) if rules else None

    def __call__(self, command: str) -> bool:
        if self._permissions is None:
            return False
        decision = self._permissions.decide(
            "Bash", {"command": command}, read_only=False, workspace=_WORKSPACE
        )
        return decision.verdict is Verdict.ALLOW


def commands(task: str, brief: CommandsBrief) -> tuple[list[str], list[str]]:
    """What an agent with Bash runs for ``task``, and the commands the task names that no allow rule lets
    it run (it says so and runs none of them).

    Run: the commands the task names in backquotes that the rules allow, then the team's merge gates
    (asked about if no rule allows one: they are the team's own checks); with none named, the first
    allowed form of each read-only command of ``FAMILIES``. At most ``MAX_COMMANDS``."""
    allowed = Allowed(brief)
    named = [c.strip() for c in _NAMED_COMMAND.findall(task) if c.strip()]
    runnable = [c for c in named if allowed(c)]
    refused = [c for c in named if not allowed(c) and c not in brief.gates]
    run = [*runnable, *brief.gates]
    if not runnable:
        run += [form for family in FAMILIES if (form := next((f for f in family if allowed(f)), None))]
    return list(dict.fromkeys(run))[:MAX_COMMANDS], list(dict.fromkeys(refused))


def listing(brief: CommandsBrief) -> str | None:
    """The ``ls`` an agent with Bash but no listing tool may run to look at the tree, if the rules allow
    one."""
    allowed = Allowed(brief)
    return next((form for form in LISTING if allowed(form)), None)
