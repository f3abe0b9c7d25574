"""Schema versions: created at head, older upgraded in place, newer refused; portable to a server."""

from __future__ import annotations

import asyncio
import io
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from teamrt.store import SchemaTooNew, create_store, open_reader, open_store
from teamrt.store.migrate import HEAD, alembic_config
from teamrt.store.schema import Base

RUN = "r1"


def test_head_constant_is_the_newest_migration() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_heads() == [HEAD]


def test_new_store_is_created_by_the_migrations_and_matches_the_models(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    engine = create_engine(f"sqlite:///{run_dir / 'run.db'}")
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == HEAD
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    engine.dispose()


def _store_at_0001(run_dir: Path) -> None:
    """A run written by the teamrt of revision 0001: a run, its lead and one turn."""
    db = run_dir / "run.db"
    engine = create_engine(f"sqlite:///{db}")
    config = alembic_config()
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.commit()
    engine.dispose()
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO runs (id, created_at, task, status, workdir, settings, input_tokens, output_tokens,"
            " cache_creation_tokens, cache_read_tokens, cost_usd) VALUES (?, 1, 'old task', 'running', '/',"
            " '{}', 5, 6, 7, 8, 0.5)",
            (RUN,),
        )
        conn.execute(
            "INSERT INTO agents (run_id, name, kind, depth, definition, model, status, epoch, created_at,"
            " updated_at, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens, cost_usd)"
            " VALUES (?, 'lead', 'lead', 0, '{}', 'sim', 'idle', 3, 1, 1, 0, 0, 0, 0, 0)",
            (RUN,),
        )
        conn.execute(
            "INSERT INTO turns (run_id, agent, seq, epoch, role, content, created_at, input_tokens,"
            " output_tokens, cache_creation_tokens, cache_read_tokens, cost_usd)"
            " VALUES (?, 'lead', 1, 3, 'user', '[\"hi\"]', 1, 0, 0, 0, 0, 0)",
            (RUN,),
        )
    assert not _has_table(db, "tasks")


def _has_table(db: Path, name: str) -> bool:
    with sqlite3.connect(db) as conn:
        return (
            conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
            is not None
        )


def test_older_store_is_upgraded_on_open_with_its_data(run_dir: Path) -> None:
    _store_at_0001(run_dir)

    async def go() -> None:
        with open_store(run_dir, RUN) as store:
            run = store.reader.run()
            assert run.task == "old task" and run.usage.cost_usd == 0.5
            assert store.reader.agent("lead").epoch == 3
            assert [t.content for t in store.reader.turns("lead")] == [["hi"]]
            task = await store.create_task("new table", "works", created_by="lead")  # 0002's table
            assert task.status == "open"
            turn = await store.append_turn("lead", epoch=4, role="user", content=["next"])
            assert turn.seq == 2

    asyncio.run(go())
    with sqlite3.connect(run_dir / "run.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == HEAD
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_reader_upgrades_an_older_store_nobody_owns(run_dir: Path) -> None:
    _store_at_0001(run_dir)
    reader = open_reader(run_dir, RUN)
    try:
        assert reader.tasks() == []
        assert reader.run().task == "old task"
    finally:
        reader.close()


def test_newer_store_is_refused_untouched(run_dir: Path) -> None:
    create_store(run_dir, RUN, task="t", workdir="/").close()
    db = run_dir / "run.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    before = db.read_bytes()
    with pytest.raises(SchemaTooNew) as info:
        open_store(run_dir, RUN)
    assert info.value.revision == "0099"
    assert "written by a newer teamrt (schema 0099" in str(info.value)
    assert "upgrade teamrt" in str(info.value)
    with pytest.raises(SchemaTooNew):
        open_reader(run_dir, RUN)
    assert db.read_bytes() == before
    # The refused owner left the run free for the right teamrt.
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT owner_pid FROM runs").fetchone()[0] is None


def test_migrations_render_for_postgresql() -> None:
    """Portable types only: the migrations compile for a server database, with no SQLite in them."""
    buffer = io.StringIO()
    config = alembic_config()
    config.output_buffer = buffer
    config.set_main_option("sqlalchemy.url", "postgresql://teamrt@localhost/teamrt")
    command.upgrade(config, "head", sql=True)
    ddl = buffer.getvalue()
    for table in ("runs", "agents", "turns", "tool_calls", "tool_processes", "mail", "tasks", "merge_queue"):
        assert f"CREATE TABLE {table} (" in ddl
    assert "BIGSERIAL" in ddl and "DOUBLE PRECISION" in ddl and "JSON" in ddl
    assert "sqlite" not in ddl.lower()


def test_a_reader_leaves_a_store_being_created_to_its_creator(run_dir: Path) -> None:
    """Between creating the empty file and taking the run's lock, a store has no schema: a reader
    (the TUI's runs list polls every store) must neither upgrade it nor take the lock."""
    from teamrt.store import RunNotFound
    from teamrt.store.engine import create_file
    from teamrt.store.ownership import OwnerLock

    db = run_dir / "run.db"
    create_file(db)
    with pytest.raises(RunNotFound):
        open_reader(run_dir, RUN)
    assert db.stat().st_size == 0  # no schema written
    lock = OwnerLock(run_dir, RUN)
    lock.acquire()  # free for the creator
    lock.release()
