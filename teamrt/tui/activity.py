"""What an agent is doing now, in a few words, from what the store has kept.

    thinking                      its last kept turn is the user's: the model is at work
    bash: python3 -m unittest     a call of its last turn is running (the tool and its argument)
    mcp__s__t: 3/10 copying      an MCP call is running, with its server's latest progress
    waiting for approval          a call of its waits for the user's answer to a permission ask
    waiting for mail              idle
    merging                       its branch is in the merge queue
    done: merged onto ...         ended, with the reason

Read-only and cheap: the agent's record, the role of its last turn and its calls still
running, which the TUI reads in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from teamrt.mcp.shown import progress_line
from teamrt.mcp.tools import tool_name
from teamrt.runs.render import describe_call
from teamrt.store import AgentRecord, ToolCallRecord

WAITING = "waiting for approval"


def activity(
    agent: AgentRecord,
    last_role: str | None,
    calls: Sequence[ToolCallRecord],
    *,
    asking: bool = False,
    progress: dict[str, Any] | None = None,
) -> str:
    """``agent``'s activity; ``last_role``: the role of its last kept turn (None: it has none);
    ``calls``: its tool calls not yet finished; ``asking``: a permission ask of its waits for an answer;
    ``progress``: the data of its latest ``mcp.progress`` event (shown while that tool's call runs)."""
    if agent.status in ("done", "failed", "stopped"):
        return agent.status + (f": {agent.status_reason}" if agent.status_reason else "")
    if asking:
        return WAITING
    if agent.status == "idle":
        return "waiting for mail"
    if agent.status == "merging":
        return "merging"
    if agent.status == "pending" or last_role is None:
        return "starting"
    running = [c for c in calls if c.status == "running"] or [c for c in calls if c.status == "pending"]
    if last_role == "assistant" and running:
        said = describe_call(running[0].name, running[0].input)
        server, tool = (progress or {}).get("server"), (progress or {}).get("tool")
        if isinstance(server, str) and isinstance(tool, str) and running[0].name == tool_name(server, tool):
            said = f"{said}: {progress_line(progress or {})}"
        return said
    return "thinking"
