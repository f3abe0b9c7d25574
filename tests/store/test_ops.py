"""The store's operations: each one transaction, records out, hostile calls refused with nothing changed."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sqlite3
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy.exc import IntegrityError

from teamrt.store import (
    IngestedMail,
    InvalidTransition,
    NewEvent,
    NotFound,
    RunExists,
    RunNotFound,
    Store,
    TaskUnavailable,
    ToolUse,
    Usage,
    create_store,
    migrate,
    open_reader,
)
from tests.helpers.events import marker

T = TypeVar("T")
RUN = "r1"


def with_store(run_dir: Path, body: Callable[[Store], Awaitable[T]]) -> T:
    """Create the run's store, run ``body`` on it in an event loop, close it."""

    async def go() -> T:
        with create_store(run_dir, RUN, task="fix the tests", workdir="/src") as store:
            await store.add_agent("lead", kind="lead", model="sim")
            return await body(store)

    return asyncio.run(go())


def text(s: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": s}]


def test_store_file_is_private_and_at_head(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        assert store.reader.run().task == "fix the tests"

    with_store(run_dir, body)
    db = run_dir / "run.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == migrate.HEAD


@pytest.mark.usefixtures("store_db")
def test_turns_get_sequence_numbers_and_records_are_plain_data(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        epoch = await store.begin_epoch("lead")
        first = await store.append_turn("lead", epoch=epoch, role="user", content=text("task"))
        second = await store.append_turn(
            "lead",
            epoch=epoch,
            role="assistant",
            content=text("done"),
            stop_reason="end_turn",
            model="sim",
            usage=Usage(100, 20, 300, 4000, 0.0125),
        )
        assert (first.seq, second.seq) == (1, 2)
        turns = store.reader.turns("lead")
        assert [t.content for t in turns] == [text("task"), text("done")]
        assert store.reader.turns("lead", after_seq=1) == [turns[1]]
        assert dataclasses.is_dataclass(turns[0])
        with pytest.raises(dataclasses.FrozenInstanceError):
            turns[0].seq = 9  # type: ignore[misc]
        agent = store.reader.agent("lead")
        assert agent.epoch == 1 and agent.status == "running"
        assert agent.usage == Usage(100, 20, 300, 4000, 0.0125)
        assert store.reader.run().usage == agent.usage

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_usage_adds_up_on_agent_and_run(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        await store.add_agent("w1", kind="fork", model="sim", parent="lead")
        await store.add_usage("lead", Usage(1, 2, 3, 4, 0.5))
        await store.add_usage("w1", Usage(10, 20, 30, 40, 0.25))
        await store.add_usage("w1", Usage(10, 20, 30, 40, 0.25))
        assert store.reader.agent("w1").usage == Usage(20, 40, 60, 80, 0.5)
        assert store.reader.run().usage == Usage(21, 42, 63, 84, 1.0)
        assert store.reader.agent("w1").depth == 1
        with pytest.raises(NotFound):
            await store.add_usage("ghost", Usage(1))
        assert store.reader.run().usage == Usage(21, 42, 63, 84, 1.0)

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_turn_with_ingested_mail_is_atomic(run_dir: Path) -> None:
    """A turn and the ids of the mail it read land together, or neither does."""

    def mail(msg_id: str) -> IngestedMail:
        return IngestedMail(msg_id, "alice", "message", {"id": msg_id, "body": "hello"})

    async def body(store: Store) -> None:
        first = await store.append_turn(
            "lead", epoch=1, role="user", content=text("m1"), ingested=[mail("m1")]
        )
        assert store.reader.ingested_ids("lead") == {"m1"}
        assert store.reader.mail("lead")[0].turn_id == first.id
        # m2 is new but m1 was ingested already: the whole turn is refused.
        with pytest.raises(IntegrityError):
            await store.append_turn(
                "lead", epoch=1, role="user", content=text("again"), ingested=[mail("m2"), mail("m1")]
            )
        assert [t.content for t in store.reader.turns("lead")] == [text("m1")]
        assert store.reader.ingested_ids("lead") == {"m1"}
        # The next turn takes the next sequence number: nothing of the refused one remains.
        later = await store.append_turn(
            "lead", epoch=1, role="user", content=text("m2"), ingested=[mail("m2")]
        )
        assert later.seq == 2
        assert store.reader.ingested_ids("lead") == {"m1", "m2"}

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_assistant_turn_journals_its_tool_calls_pending(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        turn = await store.append_turn(
            "lead",
            epoch=1,
            role="assistant",
            content=text("reading"),
            tool_uses=[
                ToolUse("tu_1", "read", {"path": "a.py"}, True),
                ToolUse("tu_2", "bash", {"c": "ls"}, False),
            ],
            events=[NewEvent(marker("turn"), {"tools": 2})],
        )
        calls = store.reader.tool_calls("lead")
        assert [(c.id, c.status, c.read_only, c.turn_id) for c in calls] == [
            ("tu_1", "pending", True, turn.id),
            ("tu_2", "pending", False, turn.id),
        ]
        assert store.reader.events()[-1].kind == "turn"
        assert store.reader.events()[-1].data == {"tools": 2}

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_tool_call_journal_moves_and_refuses_bad_moves(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        await store.append_turn(
            "lead",
            epoch=1,
            role="assistant",
            content=[],
            tool_uses=[
                ToolUse("a", "bash", {}, False),
                ToolUse("b", "write", {}, False),
                ToolUse("c", "x", {}, True),
            ],
        )
        await store.move_tool_call("a", "running")
        await store.record_tool_process("a", 4242, 777)
        await store.record_tool_process("a", 4243, 778)
        await store.move_tool_call("a", "done", text("ok"))
        await store.move_tool_call("b", "error", text("denied: Bash(rm:*)"), is_error=True)
        await store.move_tool_call("c", "running")
        await store.move_tool_call("c", "running")  # a read-only call run again after a crash
        await store.move_tool_call("c", "interrupted", text("interrupted by a crash; the outcome is unknown"))

        for call_id, wanted in [("a", "running"), ("a", "pending"), ("b", "done"), ("c", "done")]:
            with pytest.raises(InvalidTransition) as info:
                await store.move_tool_call(call_id, wanted)
            assert info.value.wanted == wanted
        with pytest.raises(InvalidTransition):
            await store.record_tool_process("b", 1, 1)  # a finished call starts no process
        with pytest.raises(NotFound):
            await store.move_tool_call("nope", "running")
        with pytest.raises(ValueError, match="unknown tool call status"):
            await store.move_tool_call("a", "exploded")

        calls = {c.id: c for c in store.reader.tool_calls()}
        assert calls["a"].status == "done" and calls["a"].result == text("ok") and not calls["a"].is_error
        assert [(p.pid, p.start_time) for p in calls["a"].processes] == [(4242, 777), (4243, 778)]
        assert calls["b"].status == "error" and calls["b"].is_error
        assert calls["c"].status == "interrupted"
        assert calls["a"].started_at is not None and calls["a"].finished_at is not None
        assert [c.id for c in store.reader.tool_calls(statuses=["error", "interrupted"])] == ["b", "c"]

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_claim_task_is_atomic_and_respects_blockers(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        for name in ("alice", "bob", "carol"):
            await store.add_agent(name, kind="team", model="sim", parent="lead")
        setup = await store.create_task("set up", "create the fixture", created_by="lead")
        fix = await store.create_task("fix", "fix test_a", created_by="lead", blocked_by=[setup.id])
        assert fix.blocked_by == (setup.id,)

        with pytest.raises(TaskUnavailable, match=f"blocked by unfinished task\\(s\\) {setup.id}"):
            await store.claim_task(fix.id, "alice")

        # Three teammates race for one task in the same group commit: exactly one wins.
        results = await asyncio.gather(
            *(store.claim_task(setup.id, name) for name in ("alice", "bob", "carol")), return_exceptions=True
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, TaskUnavailable)]
        assert len(winners) == 1 and len(losers) == 2
        owner = winners[0].owner
        assert all(loser.owner == owner and "already claimed" in str(loser) for loser in losers)

        await store.update_task(setup.id, "done", by=owner or "")
        claimed = await store.claim_task(fix.id, "bob")
        assert (claimed.status, claimed.owner) == ("in_progress", "bob")
        released = await store.update_task(fix.id, "open", by="bob")
        assert (released.status, released.owner) == ("open", None)
        with pytest.raises(InvalidTransition):
            await store.update_task(fix.id, "in_progress", by="bob")
        with pytest.raises(TaskUnavailable, match="already done"):
            await store.claim_task(setup.id, "carol")
        with pytest.raises(NotFound):
            await store.claim_task(999, "carol")
        with pytest.raises(NotFound):
            await store.create_task("x", "y", created_by="lead", blocked_by=[999])
        assert [t.subject for t in store.reader.tasks()] == ["set up", "fix"]
        kinds = [e.kind for e in store.reader.events()]
        assert kinds.count("task.claimed") == 2 and kinds.count("task.created") == 2

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_agent_lifecycle_and_bad_values(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        assert await store.begin_epoch("lead") == 1
        await store.set_agent_status("lead", "idle")
        assert await store.begin_epoch("lead") == 2
        await store.set_agent_status("lead", "failed", "model stream stalled")
        agent = store.reader.agent("lead")
        assert (agent.status, agent.status_reason, agent.epoch) == ("failed", "model stream stalled", 2)
        with pytest.raises(ValueError, match="unknown agent status"):
            await store.set_agent_status("lead", "zombie")
        with pytest.raises(ValueError, match="unknown agent kind"):
            await store.add_agent("x", kind="clone", model="sim")
        with pytest.raises(NotFound):
            await store.add_agent("orphan", kind="fork", model="sim", parent="ghost")
        with pytest.raises(IntegrityError):
            await store.add_agent("lead", kind="lead", model="sim")
        with pytest.raises(NotFound):
            await store.set_agent_status("ghost", "idle")
        assert [a.name for a in store.reader.agents()] == ["lead"]
        await store.set_run_status("done")
        run = store.reader.run()
        assert run.status == "done" and run.finished_at is not None

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_events_are_appended_in_order(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        ids = [await store.append_event(marker("note"), {"i": i}, agent="lead") for i in range(5)]
        assert ids == sorted(ids)
        tail = store.reader.events(after_id=ids[1])
        assert [e.data for e in tail] == [{"i": 2}, {"i": 3}, {"i": 4}]
        assert store.reader.events(after_id=ids[1], limit=1)[0].data == {"i": 2}

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_reader_cannot_write_and_sees_each_commit(run_dir: Path) -> None:
    async def body(store: Store) -> None:
        reader = open_reader(run_dir, RUN)
        try:
            await store.append_event(marker("one"))
            assert reader.events()[-1].kind == "one"
            with pytest.raises(Exception, match=r"readonly|read-only"), reader._engine.connect() as conn:
                conn.exec_driver_sql("DELETE FROM events")
            await store.append_event(marker("two"))
            assert [e.kind for e in reader.events()][-2:] == ["one", "two"]
        finally:
            reader.close()

    with_store(run_dir, body)


@pytest.mark.usefixtures("store_db")
def test_create_twice_and_missing_run_are_clear(run_dir: Path, tmp_path: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    with pytest.raises(RunExists, match="run 'r1' already exists"):
        create_store(run_dir, RUN, task="t", workdir="/")
    missing = tmp_path / "home" / "runs" / "nope"
    missing.mkdir()
    with pytest.raises(RunNotFound, match="no run named 'nope'"):
        open_reader(missing, "nope")
    assert not (missing / "run.db").exists()


def test_one_server_database_holds_many_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_db: str
) -> None:
    """``TEAMRT_DB`` puts every run in one database (a shared SQLite file, or PostgreSQL); each run numbers
    its tasks from 1, as it would in a file of its own, so its agents see the same numbers either way."""
    shared = tmp_path / "all-runs.db"
    if store_db == "sqlite":
        monkeypatch.setenv("TEAMRT_DB", f"sqlite:///{shared}")
    dirs = []
    for run in ("ra", "rb"):
        d = tmp_path / "home" / "runs" / run
        d.mkdir(parents=True)
        dirs.append(d)

        async def body(run: str = run, d: Path = d) -> None:
            with create_store(d, run, task=f"task {run}", workdir="/") as store:
                await store.add_agent("lead", kind="lead", model="sim")
                await store.append_turn("lead", epoch=1, role="user", content=text(run))
                first = await store.create_task("one", "", created_by="lead")
                second = await store.create_task("two", "", created_by="lead", blocked_by=[first.id])
                assert (first.id, second.id, second.blocked_by) == (1, 2, (1,))
                with pytest.raises(TaskUnavailable, match="blocked by unfinished task"):
                    await store.claim_task(2, "lead")
                await store.claim_task(1, "lead")
                await store.update_task(1, "done", by="lead")
                assert (await store.claim_task(2, "lead")).owner == "lead"

        asyncio.run(body())
        assert not (d / "run.db").exists()
    with pytest.raises(RunExists):
        create_store(dirs[0], "ra", task="again", workdir="/")
    for run, d in zip(("ra", "rb"), dirs, strict=True):
        reader = open_reader(d, run)
        assert reader.run().task == f"task {run}"
        assert [t.content for t in reader.turns("lead")] == [text(run)]
        assert [(t.id, t.subject, t.blocked_by, t.status) for t in reader.tasks()] == [
            (1, "one", (), "done"), (2, "two", (1,), "in_progress"),
        ]  # fmt: skip
        reader.close()
    assert os.path.getsize(shared) > 0 if store_db == "sqlite" else not shared.exists()
