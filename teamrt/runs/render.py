"""How a run's facts are written for a person: money, ages, aligned tables, the agent tree, a call.

One vocabulary for every view of a run, so that ``teamrt ls``, ``show``, ``logs``, the progress lines
and the TUI say a cost, an age or a call the same way. Each function is pure: it takes facts already
read (``teamrt.runs.query``) and returns text; what it quotes of agent data (a call's argument, a table's
cells) is made safe for a terminal here (``terminal.clean_line``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from teamrt.sandbox.bwrap import describe
from teamrt.store import AgentRecord
from teamrt.terminal import clean_line

ARGUMENT_CHARS = 60  # of a call's argument in ``describe_call``
ARGUMENT_KEYS = ("command", "file_path", "path", "pattern", "to", "agent", "subject", "task_id", "kind")
"""The input that says what a call is about, by the first key present."""


def money(usd: float, simulated: bool) -> str:
    """A cost as shown everywhere: ``$0.1234``, or ``$0.1234 (sim)`` when nothing was billed."""
    return f"${usd:.4f}" + (" (sim)" if simulated else "")


def budget_text(usd: float) -> str:
    """A budget in dollars: ``$5.00``, or to the tenth of a cent when it needs it (``$0.0050``)."""
    return f"${usd:.2f}" if round(usd, 2) == usd else f"${usd:.4f}"


def spent_text(usd: float, budget_usd: float | None, simulated: bool) -> str:
    """What a run cost, with its budget when it has one: ``$0.1234/$5.00``, ``$0.1234 (sim)``."""
    if budget_usd is None:
        return money(usd, simulated)
    return f"${usd:.4f}/{budget_text(budget_usd)}" + (" (sim)" if simulated else "")


def iso_time(at: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC to the millisecond (``2026-11-22T13:35:12.345Z``)."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def age_text(seconds: float) -> str:
    """``42s``, ``3m``, ``2h``, ``4d``: the largest whole unit."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def duration_text(seconds: float) -> str:
    """``12s``, ``3m 12s``, ``2h 05m``, ``4d 3h``: two units at most."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, its end then ``...``."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def table(rows: Sequence[tuple[str, ...]], right: tuple[int, ...] = ()) -> list[str]:
    """Rows as aligned columns (``right`` ones right-aligned); the last column is never padded. Each
    cell is made safe for a terminal first (``clean_line``): its width is what the terminal shows."""
    rows = [tuple(clean_line(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row[:-1], widths, strict=True))
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def describe_call(tool: str, tool_input: dict[str, Any]) -> str:
    """``bash: python3 -m unittest``: the tool, and the argument that says what the call is about."""
    key = next((k for k in ARGUMENT_KEYS if k in tool_input), None)
    if key is None:
        return tool
    return f"{tool}: {clip(' '.join(str(tool_input[key]).split()), ARGUMENT_CHARS)}"


def describe_sandbox(data: dict[str, Any]) -> str:
    """A ``sandbox`` event's data in one line."""
    return describe(
        confined=bool(data.get("confined")),
        unconfined=bool(data.get("unconfined")),
        network=bool(data.get("network")),
    )


def agent_tree(agents: list[AgentRecord]) -> list[tuple[AgentRecord, int]]:
    """Agents depth-first from each root, with their depth; one whose parent is unknown is a root."""
    names = {a.name for a in agents}
    children: dict[str | None, list[AgentRecord]] = {}
    for a in agents:
        children.setdefault(a.parent if a.parent in names else None, []).append(a)
    out: list[tuple[AgentRecord, int]] = []
    stack = [(a, 0) for a in reversed(children.get(None, []))]
    while stack:
        agent, depth = stack.pop()
        out.append((agent, depth))
        stack += [(c, depth + 1) for c in reversed(children.get(agent.name, []))]
    return out
