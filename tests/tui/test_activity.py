"""What the TUI says an agent is doing, read from a real store as the loop leaves it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from teamrt.runs.render import describe_call
from teamrt.store import ToolUse, create_store
from teamrt.tui.activity import WAITING, activity


def test_activity_follows_an_agent_through_its_turn(tmp_path: Path) -> None:
    async def go() -> list[str]:
        (tmp_path / "run").mkdir()
        store = create_store(tmp_path / "run", "run1", task="t", workdir=str(tmp_path))
        seen = []

        def now() -> str:
            agent = store.reader.agent("lead")
            turns = store.reader.turns("lead")
            calls = [c for c in store.reader.tool_calls("lead") if c.status in ("pending", "running")]
            return activity(agent, turns[-1].role if turns else None, calls)

        await store.add_agent("lead", kind="lead", model="sim")
        seen.append(now())
        await store.set_agent_status("lead", "running")
        await store.append_turn("lead", epoch=1, role="user", content=[{"type": "text", "text": "go"}])
        seen.append(now())
        use = ToolUse("toolu_1", "bash", {"command": "python3 -m unittest   tests.test_dates"}, False)
        await store.append_turn("lead", epoch=1, role="assistant", content=[], tool_uses=[use])
        await store.move_tool_call("toolu_1", "running")
        seen.append(now())
        await store.set_agent_status("lead", "idle")
        seen.append(now())
        await store.set_agent_status("lead", "merging")
        seen.append(now())
        await store.set_agent_status("lead", "done", "merged onto teamrt/run1 at 4c45fb8b37d1")
        seen.append(now())
        store.close()
        return seen

    assert asyncio.run(go()) == [
        "starting",
        "thinking",
        "bash: python3 -m unittest tests.test_dates",
        "waiting for mail",
        "merging",
        "done: merged onto teamrt/run1 at 4c45fb8b37d1",
    ]


def test_a_long_argument_is_cut_and_a_call_without_one_is_named() -> None:
    long = describe_call("write", {"file_path": "x" * 200, "content": "..."})
    assert long.startswith("write: xxx") and long.endswith("...") and len(long) == len("write: ") + 60
    assert describe_call("task_list", {}) == "task_list"
    assert describe_call("send_message", {"to": "reviewer", "body": "hi"}) == "send_message: reviewer"


def test_an_agent_whose_ask_waits_is_waiting_for_approval_not_running_its_command(tmp_path: Path) -> None:
    async def go() -> list[str]:
        (tmp_path / "run").mkdir()
        store = create_store(tmp_path / "run", "run1", task="t", workdir=str(tmp_path))
        await store.add_agent("lead", kind="lead", model="sim")
        await store.set_agent_status("lead", "running")
        use = ToolUse("toolu_1", "bash", {"command": "rm -rf build"}, False)
        await store.append_turn("lead", epoch=1, role="assistant", content=[], tool_uses=[use])
        calls = store.reader.tool_calls("lead")
        agent = store.reader.agent("lead")
        seen = [activity(agent, "assistant", calls), activity(agent, "assistant", calls, asking=True)]
        await store.set_agent_status("lead", "stopped", "stopped by the user")
        seen.append(activity(store.reader.agent("lead"), "assistant", calls, asking=True))  # ended: why
        store.close()
        return seen

    assert asyncio.run(go()) == [
        "bash: rm -rf build",
        WAITING,
        "stopped: stopped by the user",
    ]
    assert WAITING == "waiting for approval"
