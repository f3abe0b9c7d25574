"""The run view's reads: what a follower reading only what moved sees is what a fresh full read sees."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from teamrt.runtime.asking import ANSWERED
from teamrt.runtime.stream import TextStream
from teamrt.store import FinishedCall, Store, ToolUse, Usage, create_store, open_store
from teamrt.tui import state
from teamrt.tui.activity import WAITING
from teamrt.tui.state import RunFollower, RunState
from tests.helpers.events import marker

AGENTS = 12


def comparable(s: RunState) -> tuple[object, ...]:
    return (s.status, s.agents, s.tasks, s.merges, s.asks, s.detail)


async def churn(
    store: Store, rng: random.Random, names: list[str], epochs: dict[str, int], step: int, asked: list[str]
) -> None:
    """One random step of what the runtime writes; ``asked``: the asks waiting (an agent's row says so)."""
    name = rng.choice(names)
    what = rng.randrange(6)
    if what == 0 and len(names) < AGENTS:
        new = f"agent-{len(names)}"
        await store.add_agent(new, kind=rng.choice(("team", "fork", "worktree")), model="sim", parent=name)
        epochs[new] = await store.begin_epoch(new)
        names.append(new)
    elif what == 1:
        call = f"toolu_{step}"
        use = ToolUse(call, "bash", {"command": f"echo {step}"}, False)
        usage = Usage(
            input_tokens=rng.randrange(100, 900), cache_read_tokens=rng.randrange(500), cost_usd=0.001
        )
        await store.append_turn(
            name, epoch=epochs[name], role="assistant", content=[], usage=usage, tool_uses=[use]
        )
        if rng.random() < 0.5:
            await store.move_tool_call(call, "running")
        if rng.random() < 0.5:
            result = [{"type": "tool_result", "tool_use_id": call, "content": "ok"}]
            done = [FinishedCall(call, "done", [{"type": "text", "text": "ok"}])]
            await store.append_turn(name, epoch=epochs[name], role="user", content=result, finished=done)
    elif what == 2:
        await store.set_agent_status(name, rng.choice(("idle", "running", "merging")))
    elif what == 3:
        await store.create_task(f"task {step}", "do it", created_by=name, blocked_by=[])
    elif what == 4 and asked and rng.random() < 0.4:  # an answer: the agent's row changes, not its record
        agent, ask_id = asked.pop(rng.randrange(len(asked))).split(" ")
        await store.append_event(ANSWERED, {"id": ask_id, "allowed": True, "by": "user"}, agent=agent)
    elif what == 4:
        asked.append(f"{name} ask-{step}")
        ask = {
            "id": f"ask-{step}",
            "tool": "bash",
            "input": {"command": "rm x"},
            "reason": "asks",
            "wait_s": 60,
        }
        await store.append_event("ask", ask, agent=name)
    else:
        await store.append_turn(
            name, epoch=epochs[name], role="user", content=[{"type": "text", "text": "mail"}]
        )


def test_reading_only_what_moved_sees_what_a_full_read_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "FULL_READ_S", 3600.0)  # never a full read but the first
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    async def go() -> int:
        store = create_store(run_dir, "run1", task="t", workdir=str(tmp_path))
        await store.add_agent("lead", kind="lead", model="sim")
        epochs = {"lead": await store.begin_epoch("lead")}
        names = ["lead"]
        asked: list[str] = []
        rng = random.Random(7)
        follower = RunFollower(run_dir, "run1")
        compared = waited = 0
        try:
            for step in range(300):
                await churn(store, rng, names, epochs, step, asked)
                if step % 7 == 0:
                    selected = rng.choice(names)
                    ours = await asyncio.to_thread(follower.read, selected)
                    fresh = RunFollower(run_dir, "run1")
                    try:
                        theirs = await asyncio.to_thread(fresh.read, selected)
                    finally:
                        fresh.close()
                    assert comparable(ours) == comparable(theirs), f"step {step}"
                    shown_waiting = {r.name for r in ours.agents if r.activity == WAITING}
                    assert shown_waiting <= {a.split(" ")[0] for a in asked}
                    waited += bool(shown_waiting)
                    compared += 1
        finally:
            follower.close()
            store.close()
        assert waited, "no agent was seen waiting for approval"
        return compared

    assert asyncio.run(go()) == 43


def test_changed_moves_with_a_commit_or_with_the_selected_agents_text(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    async def go() -> list[bool]:
        store = create_store(run_dir, "run1", task="t", workdir=str(tmp_path))
        await store.add_agent("lead", kind="lead", model="sim")
        follower = RunFollower(run_dir, "run1")
        seen = [follower.changed("lead")]  # the first call: yes
        seen.append(follower.changed("lead"))  # nothing since
        await store.append_event(marker("x"), {}, agent="lead")
        seen.append(follower.changed("lead"))
        seen.append(follower.changed("lead"))
        stream = TextStream(run_dir, "lead")
        stream.write("thinking about")
        seen.append(follower.changed("lead"))
        seen.append(follower.changed("lead"))
        stream.close()
        follower.close()
        store.close()
        return seen

    assert asyncio.run(go()) == [True, False, True, False, True, False]


def test_the_selected_agents_streamed_text_is_read_until_its_turn_is_kept(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    async def go() -> list[str]:
        store = create_store(run_dir, "run1", task="t", workdir=str(tmp_path))
        await store.add_agent("lead", kind="lead", model="sim")
        epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])
        follower = RunFollower(run_dir, "run1")
        stream = TextStream(run_dir, "lead")
        seen = [follower.read("lead").streaming]
        stream.write("First I will read")
        seen.append(follower.read("lead").streaming)
        stream.write(" the tests.")
        said = [{"type": "text", "text": "First I will read the tests."}]
        await store.append_turn("lead", epoch=epoch, role="assistant", content=said)
        stream.end_turn()
        seen.append(follower.read("lead").streaming)
        stream.close()
        follower.close()
        store.close()
        return seen

    assert asyncio.run(go()) == ["", "First I will read", ""]


def test_each_tool_result_is_shown_under_the_call_it_answers() -> None:
    from teamrt.store import TurnRecord
    from teamrt.tui.detail import transcript

    def turn(seq: int, role: str, content: list[object]) -> TurnRecord:
        return TurnRecord(
            id=seq, agent="a", seq=seq, epoch=1, role=role, content=content, stop_reason=None, model=None,
            usage=Usage(), created_at=0.0,
        )  # fmt: skip

    calls = [
        {"type": "text", "text": "Two at once."},
        {
            "type": "tool_use",
            "id": "t1",
            "name": "write",
            "input": {"file_path": "kit/dates.py", "content": "x"},
        },
        {"type": "tool_use", "id": "t2", "name": "bash", "input": {"command": "python3 -m unittest"}},
    ]
    results = [
        {"type": "tool_result", "tool_use_id": "t2", "content": "Ran 3 tests\nOK", "is_error": True},
        {"type": "tool_result", "tool_use_id": "t1", "content": "overwrote kit/dates.py"},
        {"type": "tool_result", "tool_use_id": "t9", "content": "a result whose call is not kept"},
    ]
    lines = transcript([turn(1, "assistant", calls), turn(2, "user", results)])
    assert [(line.kind, line.text) for line in lines] == [
        ("assistant", "Two at once."),
        ("call", "write: kit/dates.py"),
        ("result", "overwrote kit/dates.py"),
        ("call", "bash: python3 -m unittest"),
        ("error", "2 lines: Ran 3 tests"),
        ("result", "a result whose call is not kept"),
    ]
    assert lines[4].more == "Ran 3 tests\nOK"


def test_the_runs_list_reads_again_only_the_runs_that_are_live_or_were_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrt.runs import query as runs

    runs_dir = tmp_path / "runs"
    stores = {}
    for run in ("done-run", "live-run", "crashed-run"):
        (runs_dir / run).mkdir(parents=True)
        stores[run] = create_store(runs_dir / run, run, task="t", workdir=str(tmp_path))
    asyncio.run(stores["done-run"].set_run_status("done"))
    stores["done-run"].close()
    stores["crashed-run"].close()  # its owner gone, still recorded as running

    read: list[str] = []
    summarize = runs.summarize

    def counted(run_dir: Path) -> runs.RunSummary:
        read.append(run_dir.name)
        return summarize(run_dir)

    monkeypatch.setattr(runs, "summarize", counted)
    cache: runs.SummaryCache = {}
    first = {s.id: s.status for s in runs.list_runs(runs_dir, cache)}
    assert first == {"done-run": "done", "live-run": "running", "crashed-run": "crashed"}
    read.clear()
    assert {s.id: s.status for s in runs.list_runs(runs_dir, cache)} == first
    assert read == ["live-run"]
    read.clear()
    stores["live-run"].close()  # its owner goes: read again, it shows crashed, and is kept so
    assert {s.id: s.status for s in runs.list_runs(runs_dir, cache)}["live-run"] == "crashed"
    read.clear()
    runs.list_runs(runs_dir, cache)
    assert read == []
    with open_store(runs_dir / "done-run", "done-run") as store:  # a write: read again
        asyncio.run(store.append_event(marker("noted"), {}))
    read.clear()
    runs.list_runs(runs_dir, cache)
    assert read == ["done-run"]
