"""A run that ends leaves no WAL beside its ``run.db`` (issue 35: 1.4 MB stayed): its owner checkpoints it
into the file as it closes, and nothing that checks the store against its run directory (the commit
counter, ``verify`` before a resume) takes the checkpoint for a loss."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import teamrt
from teamrt.runtime.verify import verify
from teamrt.store import create_store, open_reader, open_store
from teamrt.store import engine as eng


def wal_of(run_dir: Path) -> int:
    """The size of the run's WAL; 0 when there is none."""
    wal = run_dir / "run.db-wal"
    return wal.stat().st_size if wal.exists() else 0


def busy_run(run_dir: Path, run: str, events: int = 200) -> None:
    """A run whose commits fill the WAL, ended ``done``; a reader stays open across its end, as
    ``teamrt logs -f`` does."""
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, run, task="t", workdir="/w")
    reader = open_reader(run_dir, run)
    try:

        async def fill() -> None:
            await store.add_agent("lead", kind="lead", model="sim")
            for i in range(events):
                await store.append_event("agent.status", {"status": "running", "step": i}, agent="lead")
            await store.set_run_status("done")

        asyncio.run(fill())
        assert reader.run().status == "done"
        assert wal_of(run_dir) > 100_000, "the run's commits are in its WAL until it ends"
        store.close()
        assert reader.run().status == "done"
    finally:
        reader.close()


def test_a_run_that_ended_keeps_no_wal_and_verifies_clean(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    busy_run(run_dir, "r1")
    assert wal_of(run_dir) == 0
    reader = open_reader(run_dir, "r1")
    try:
        assert len(reader.events()) > 200 and reader.run().status == "done"
        assert verify(run_dir, "r1", reader) == [], "a checkpoint is no lost commit"
    finally:
        reader.close()
    with open_store(run_dir, "r1") as store:  # a resume or a follow-up takes it again, and writes
        asyncio.run(store.append_event("agent.status", {"status": "idle"}, agent="lead"))
        assert wal_of(run_dir) > 0
    assert wal_of(run_dir) == 0
    reader = open_reader(run_dir, "r1")
    try:
        assert verify(run_dir, "r1", reader) == []
    finally:
        reader.close()


def test_a_reader_holding_a_snapshot_leaves_the_wal_whole_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint waits a moment for readers, then gives up: the WAL stays, whole, and the run reads
    as it ended."""
    monkeypatch.setattr(eng, "CHECKPOINT_WAIT_MS", 50)
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r1", task="t", workdir="/w")
    asyncio.run(store.add_agent("lead", kind="lead", model="sim"))
    asyncio.run(store.set_run_status("done"))
    reader = open_reader(run_dir, "r1")
    with reader.snapshot() as snap:
        assert snap.run().status == "done"
        store.close()
    assert wal_of(run_dir) > 0
    try:
        assert reader.run().status == "done" and verify(run_dir, "r1", reader) == []
    finally:
        reader.close()


def test_a_run_of_teamrt_ends_with_no_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    result = teamrt.run("Say hello.", agent="lead", project=tmp_path, model="sim")
    assert result.status == "done"
    run_dir = tmp_path / ".teamrt" / "runs" / result.run_id
    assert (run_dir / "run.db").stat().st_size > 0 and wal_of(run_dir) == 0
