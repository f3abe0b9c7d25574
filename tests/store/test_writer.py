"""The one writer: group commit, no caller released before its commit, storage failures stop it cleanly."""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import signal
import sqlite3
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, func, select
from sqlalchemy.pool import NullPool

from teamrt import faults
from teamrt.store import NotFound, Store, StoreClosed, StoreWriteFailed, Usage, create_store, open_store
from teamrt.store import tables as t
from teamrt.store.engine import store_url
from tests.helpers.events import marker

pytestmark = pytest.mark.usefixtures("store_db")

RUN = "r1"


def text(s: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": s}]


@contextmanager
def outside(run_dir: Path) -> Iterator[Connection]:
    """A connection of its own to the run's database (its SQLite file or the server's), as another
    process reading it sees it: what the writer has committed, nothing more."""
    engine = create_engine(store_url(run_dir), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def committed_turns(run_dir: Path) -> int:
    """The run's turns, as committed."""
    with outside(run_dir) as conn:
        return int(conn.execute(select(func.count()).where(t.turns.c.run_id == RUN)).scalar_one())


def integrity(db: Path) -> str:
    with sqlite3.connect(db) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


class HeldCommit:
    """Blocks the writer thread just before its next COMMIT until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._once = True

    def __call__(self, detail: str = "") -> None:
        if self._once:
            self._once = False
            self.entered.set()
            assert self.release.wait(30), "the test never released the held commit"

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 30)


@contextmanager
def hold_first_commit() -> Iterator[HeldCommit]:
    held = HeldCommit()
    with faults.inject("store.before_commit", held):
        try:
            yield held
        finally:
            held.release.set()


async def new_store(run_dir: Path) -> Store:
    store = create_store(run_dir, RUN, task="t", workdir="/")
    await store.add_agent("lead", kind="lead", model="sim")
    return store


def test_no_caller_is_released_before_its_commit(run_dir: Path) -> None:
    """Fifty writers wait while their commit is held; none hears back until it is on disk."""

    async def go() -> None:
        store = await new_store(run_dir)
        for i in range(50):
            await store.add_agent(f"w{i:02}", kind="team", model="sim", parent="lead")
        commits_before = store.commits
        with hold_first_commit() as held:
            writers = [
                asyncio.create_task(store.append_turn(f"w{i:02}", epoch=1, role="user", content=text(f"{i}")))
                for i in range(50)
            ]
            await held.wait_entered()
            # A caller settled before the commit would have been told before the writer reached the held
            # point, so its news is already in the loop's queue: a few turns of the loop deliver it.
            for _ in range(10):
                await asyncio.sleep(0)
            assert not any(w.done() for w in writers)
            assert committed_turns(run_dir) == 0  # and the held group is not visible either
            held.release.set()
            turns = await asyncio.gather(*writers)
        assert committed_turns(run_dir) == 50
        assert sorted(t.agent for t in turns) == [f"w{i:02}" for i in range(50)]
        # Fifty writes in (at most) three commits: the held one and what queued behind it.
        assert store.commits - commits_before <= 3
        store.close()

    asyncio.run(go())


def event_kinds(run_dir: Path) -> list[str]:
    with outside(run_dir) as conn:
        rows = conn.execute(select(t.events.c.kind).where(t.events.c.run_id == RUN).order_by(t.events.c.id))
        return [str(kind) for (kind,) in rows]


async def queued(store: Store, count: int) -> None:
    """Until ``count`` operations wait in the writer's queue (the writer is held, so none is taken)."""
    deadline = asyncio.get_running_loop().time() + 30
    while store._writer._queue.qsize() < count:  # the queue itself: nothing public says what waits
        assert asyncio.get_running_loop().time() < deadline, f"{count} operations never queued"
        await asyncio.sleep(0.01)


def test_a_failing_operation_fails_alone_in_its_group(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five operations queued behind a held commit land in ONE commit; the two that raise fail alone."""
    monkeypatch.setattr("teamrt.store.store.HEARTBEAT_S", 3600.0)  # no heartbeat takes the held commit
    mine = {"first", "a", "b", "c"}
    after_each_commit: list[tuple[str, ...]] = []  # this test's events as each commit left them

    def look(detail: str) -> None:
        after_each_commit.append(tuple(k for k in event_kinds(run_dir) if k in mine))

    async def go() -> None:
        store = await new_store(run_dir)
        with hold_first_commit() as held, faults.inject("store.after_commit", look):
            first = asyncio.create_task(store.append_event(marker("first")))
            await held.wait_entered()
            # These queue behind the held commit and form one group, two of them bad.
            group = [
                asyncio.create_task(op)
                for op in (
                    store.append_event(marker("a")),
                    store.add_usage("ghost", Usage(1)),  # no such agent: NotFound
                    store.append_event(marker("b")),
                    store.add_agent("lead", kind="lead", model="sim"),  # a duplicate: IntegrityError
                    store.append_event(marker("c")),
                )
            ]
            await queued(store, len(group))
            held.release.set()
            results = await asyncio.gather(*group, return_exceptions=True)
            await first
        assert isinstance(results[1], NotFound)
        assert type(results[3]).__name__ == "IntegrityError"
        assert all(isinstance(r, int) for r in (results[0], results[2], results[4]))
        assert store.failure is None, "an operation's own error does not stop the store"
        # A commit that added none of these would leave the same state twice; drop repeats.
        states = [s for i, s in enumerate(after_each_commit) if i == 0 or s != after_each_commit[i - 1]]
        assert states == [("first",), ("first", "a", "b", "c")], "a, b and c were committed together"
        store.close()

    asyncio.run(go())


def test_a_cancelled_caller_still_gets_its_write(run_dir: Path) -> None:
    async def go() -> None:
        store = await new_store(run_dir)
        with hold_first_commit() as held:
            writer = asyncio.create_task(store.append_event(marker("kept")))
            await held.wait_entered()
            writer.cancel()
            held.release.set()
        await asyncio.sleep(0)
        await store.append_event(marker("after"))
        assert [e.kind for e in store.reader.events()][-2:] == ["kept", "after"]
        store.close()

    asyncio.run(go())


def test_a_closed_store_refuses_writes(run_dir: Path) -> None:
    async def go() -> None:
        store = await new_store(run_dir)
        store.close()
        with pytest.raises(StoreClosed, match="is closed"):
            await store.append_event(marker("late"))

    asyncio.run(go())


def test_injected_disk_full_mid_commit_stops_the_store_and_keeps_what_was_committed(
    run_dir: Path, store_db: str
) -> None:
    db = run_dir / "run.db"

    def disk_full(detail: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async def go() -> None:
        store = await new_store(run_dir)
        for i in range(3):
            await store.append_turn("lead", epoch=1, role="user", content=text(f"kept {i}"))
        with faults.inject("store.before_commit", disk_full), pytest.raises(StoreWriteFailed) as info:
            await store.append_turn("lead", epoch=1, role="user", content=text("lost"))
        message = str(info.value)
        assert "no space left on device" in message and "resume" in message and store.where in message
        with pytest.raises(StoreWriteFailed):
            await store.append_event(marker("refused"))  # the store accepts nothing more
        store.close()
        with pytest.raises(StoreWriteFailed):
            await store.append_event(marker("closed"))  # the failure stays the news after close

    asyncio.run(go())
    if store_db == "sqlite":
        assert integrity(db) == "ok"
    assert committed_turns(run_dir) == 3

    async def resume() -> None:
        with open_store(run_dir, RUN) as store:
            turn = await store.append_turn("lead", epoch=2, role="user", content=text("after space returned"))
            assert turn.seq == 4

    asyncio.run(resume())
    assert committed_turns(run_dir) == 4


@pytest.mark.parametrize("store_db", ["sqlite"], indirect=True)  # SQLite's own write of its WAL fails
def test_a_real_write_failure_inside_sqlite_is_clear_and_harmless(run_dir: Path) -> None:
    """The file-size limit makes SQLite's own write of the WAL fail mid-commit (root ignores file modes)."""
    db = run_dir / "run.db"
    asyncio.run(new_store(run_dir)).close()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write big turns until the disk "fills"
        code = 1
        try:
            os.close(read_end)

            async def child() -> str:
                store = open_store(run_dir, RUN)
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                wal = Path(f"{db}-wal")
                limit = max(db.stat().st_size, wal.stat().st_size if wal.exists() else 0) + 300_000
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
                acked = 0
                try:
                    for i in range(10_000):
                        await store.append_turn(
                            "lead", epoch=1, role="user", content=text(f"{i}" + "x" * 50_000)
                        )
                        acked += 1
                except StoreWriteFailed as e:
                    return f"{acked}\n{e}"
                finally:
                    store.close()
                return f"{acked}\nnever failed"

            os.write(write_end, asyncio.run(child()).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        report = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, report
    acked_text, message = report.split("\n", 1)
    assert "disk I/O error" in message or "full" in message, message
    assert message.startswith(f"the run store {db} stopped:")
    acked = int(acked_text)
    assert acked >= 1
    assert integrity(db) == "ok"
    assert committed_turns(run_dir) == acked
