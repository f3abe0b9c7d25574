"""What a notification says: a run's events that need the person (an ask waiting for them, the run's end,
its budget near) as a title and a message, in plain text that no surface can mistake for instructions.

Every surface that tells the person shares these words: the terminal's bell and OSC notification
(``teamrt.runs.alerts``), the TUI's, Claude Code's ``Notification`` hooks and the ``[notify]`` command
(``teamrt.runtime.notify``). A notification quotes agent data (an ask's command, a run's reason), so its
text is made ``plain``: every control character, format character (bidi marks, zero-width ones) and line
break is gone, and it is clipped. An OSC notification is a string the terminal ends at BEL or ESC; a
command carrying ``\\x07`` or ``\\x1b]52;...`` must not end it early and write the clipboard.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from teamrt.runtime.asking import ASK
from teamrt.runtime.budget import Budget

BUDGET_NEAR: Final = "budget.near"
"""The event of a run's budget near its end: ``{"note", "limit": "usd"|"tokens", "spent", "max", "share"}``,
recorded once per limit (a run continued with a raised budget may record it again)."""
NOTIFY_FAILED: Final = "notify.failed"
"""The event of the ``[notify]`` command failing, the first time in a process: ``{"note", "command"}``."""
TITLE_CHARS = 60
MESSAGE_CHARS = 200
CALL_CHARS = 120
"""Of an ask's command (or path) in its message: enough for the person to know what is asked."""
CALL_KEYS = ("command", "file_path", "path", "url", "pattern", "to", "agent")
"""The input that says what an asked call is about, by the first key present."""
ENDED = frozenset({"done", "failed", "stopped", "blocked"})
"""The statuses a run ends with (``run.status`` events); ``running`` is a (re)start."""

What = Literal["ask", "end", "budget"]
NOTIFICATION_TYPES: Final[dict[What, str]] = {
    "ask": "permission_prompt",
    "end": "idle_prompt",
    "budget": "budget_near",
}
"""The ``notification_type`` of a ``Notification`` hook's input, which its matcher matches: Claude Code's
``permission_prompt`` and ``idle_prompt`` (the run ended: it waits for your next step), and teamrt's own
``budget_near``."""


@dataclass(frozen=True)
class Notice:
    """One notification: what happened, its words, and the facts a hook or a command may want."""

    what: What
    run_id: str
    title: str
    message: str
    facts: dict[str, Any] = field(default_factory=dict)
    """For a hook's input and the command's JSON: ``ask_id``, ``agent``, ``tool``, ``status`` ..."""

    @property
    def notification_type(self) -> str:
        return NOTIFICATION_TYPES[self.what]


def plain(text: str, limit: int) -> str:
    """``text`` on one line with nothing a terminal, a notification daemon or a shell would act on:
    control and format characters (C0, C1, DEL, bidi and zero-width marks, surrogates, private use) and
    line breaks dropped or made spaces, runs of spaces made one, ``;`` (which separates an OSC's fields)
    made ``,``; then clipped to ``limit`` characters, ending ``...``."""
    kept = []
    for char in text:
        category = unicodedata.category(char)
        if char.isspace() or category in ("Zl", "Zp"):
            kept.append(" ")
        elif category[0] != "C":
            kept.append("," if char == ";" else char)
    said = " ".join("".join(kept).split())
    return said if len(said) <= limit else said[: limit - 3].rstrip() + "..."


def waits_for_person(data: Mapping[str, Any]) -> bool:
    """Whether an ``ask`` event waits for a person's answer: put to the person at the run's terminal
    (``attended``), or waiting ``wait_s`` for their mail; else the run's policy answered it at once."""
    if data.get("attended") is True:
        return True
    wait = data.get("wait_s")
    return isinstance(wait, int | float) and not isinstance(wait, bool) and wait > 0


def about_call(tool: str, tool_input: Mapping[str, Any]) -> str:
    """``Bash: pytest -q``: the tool and the argument that says what the call does, plain."""
    key = next((k for k in CALL_KEYS if isinstance(tool_input.get(k), str | int)), None)
    said = tool if key is None else f"{tool}: {tool_input[key]}"
    return plain(said, CALL_CHARS)


def notice_of(kind: str, data: Mapping[str, Any], agent: str | None, run_id: str) -> Notice | None:
    """The notification an event makes, or None: an ask waiting for a person, the run's end, its budget
    near."""
    run = plain(run_id, 40)
    if kind == ASK and waits_for_person(data):
        tool = str(data.get("tool", "?"))
        tool_input = data.get("input") if isinstance(data.get("input"), dict) else {}
        who = plain(agent or "an agent", 40)
        ask_id = plain(str(data.get("id", "?")), 40)
        call = about_call(tool, tool_input or {})
        message = f"{who} asks to use {call} (teamrt answer {run} {ask_id} allow|deny)"
        facts = {"ask_id": ask_id, "agent": agent, "tool": tool}
        return Notice("ask", run_id, plain(f"teamrt {run}: permission needed", TITLE_CHARS),
                      plain(message, MESSAGE_CHARS), facts)  # fmt: skip
    if kind == "run.status" and data.get("status") in ENDED:
        status = str(data["status"])
        reason = data.get("reason")
        said = f"the run {status}" + (f": {reason}" if isinstance(reason, str) and reason else "")
        return Notice("end", run_id, plain(f"teamrt {run}: {status}", TITLE_CHARS),
                      plain(said, MESSAGE_CHARS), {"status": status})  # fmt: skip
    if kind == BUDGET_NEAR:
        note = str(data.get("note", "the run's budget is nearly spent"))
        facts = {k: data[k] for k in ("limit", "spent", "max", "share") if k in data}
        return Notice("budget", run_id, plain(f"teamrt {run}: budget nearly spent", TITLE_CHARS),
                      plain(note, MESSAGE_CHARS), facts)  # fmt: skip
    return None


def budget_near(budget: Budget, share: float) -> dict[str, Any] | None:
    """A ``budget.near`` event's data when ``budget`` has spent ``share`` of a limit (dollars first),
    else None."""
    if budget.max_usd and budget.spent_usd >= share * budget.max_usd:
        spent = budget.spent_usd / budget.max_usd
        note = (
            f"{spent:.0%} of the run's dollar budget spent: ${budget.spent_usd:.2f} of ${budget.max_usd:.2f}"
        )
        return {"note": note, "limit": "usd", "spent": round(budget.spent_usd, 6), "max": budget.max_usd,
                "share": round(spent, 4)}  # fmt: skip
    if budget.max_tokens and budget.spent_tokens >= share * budget.max_tokens:
        spent = budget.spent_tokens / budget.max_tokens
        note = (
            f"{spent:.0%} of the run's token budget spent:"
            f" {budget.spent_tokens:,} of {budget.max_tokens:,} tokens"
        )
        return {"note": note, "limit": "tokens", "spent": budget.spent_tokens, "max": budget.max_tokens,
                "share": round(spent, 4)}  # fmt: skip
    return None
