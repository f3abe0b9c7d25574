"""Migration 0005: a PostgreSQL database of runs gains the library's schema, from its shipped SQL, and
teamrt's queue tables; only the pinned library may apply it; SQLite stores have no queue."""

from __future__ import annotations

import itertools
from importlib import metadata
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.pool import NullPool

from teamrt.errors import UserError
from teamrt.store import create_store, migrate
from teamrt.store import queue_tables as q
from teamrt.testing.pgserver import PgServer

_names = itertools.count(1)


def _database_at_0004(pg_server: PgServer) -> str:
    url = pg_server.create_database(f"schema{next(_names)}")
    engine = create_engine(url, poolclass=NullPool)
    config = migrate.alembic_config()
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0004")
        conn.commit()
        conn.execute(
            text(
                "INSERT INTO runs (id, created_at, task, status, workdir, settings, input_tokens,"
                " output_tokens, cache_creation_tokens, cache_read_tokens, cost_usd)"
                " VALUES ('r1', 1, 't', 'done', '/', '{}', 0, 0, 0, 0, 0)"
            )
        )
        conn.commit()
    engine.dispose()
    return url


def test_a_database_at_0004_is_upgraded_with_the_library_schema_and_the_queue_tables(
    pg_server: PgServer,
) -> None:
    url = _database_at_0004(pg_server)
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as conn:
        migrate.upgrade(conn, "test")
        assert migrate.current_revision(conn) == migrate.HEAD == "0005"
        tables = set(inspect(conn).get_table_names())
        assert {"procrastinate_jobs", "procrastinate_workers", "procrastinate_events"} <= tables
        assert set(q.metadata.tables) <= tables
        for name, table in q.metadata.tables.items():  # the migration's tables are the module's
            assert {c["name"] for c in inspect(conn).get_columns(name)} == set(table.columns.keys())
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 1
        procedures = conn.execute(text("SELECT count(*) FROM pg_proc WHERE proname LIKE 'procrastinate_%'"))
        assert procedures.scalar_one() > 10
    engine.dispose()


def test_another_library_version_is_refused_before_any_sql(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _database_at_0004(pg_server)
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "3.11.0" if name == "procrastinate" else real(name))
    engine = create_engine(url, poolclass=NullPool)
    with engine.connect() as conn:
        with pytest.raises(
            UserError, match=r"applies procrastinate 3\.10\.0's schema, but 3\.11\.0 is installed"
        ):
            migrate.upgrade(conn, "test")
        conn.rollback()
        assert migrate.current_revision(conn) == "0004"
        assert "procrastinate_jobs" not in inspect(conn).get_table_names()
    engine.dispose()


def test_a_sqlite_store_has_no_queue(run_dir: Path) -> None:
    create_store(run_dir, "r1", task="t", workdir="/").close()
    engine = create_engine(f"sqlite:///{run_dir / 'run.db'}")
    with engine.connect() as conn:
        assert migrate.current_revision(conn) == "0005"
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert not tables & {"queue_runs", "run_jobs", "batches", "user_quotas", "procrastinate_jobs"}
