"""The queue's database for admission, stop and fleet tests: a copy of the worker's template database
(at the newest schema, the library's included) per test, and rows written as a run's owner would."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, insert, text
from sqlalchemy.pool import NullPool

from teamrt.cli import main
from teamrt.store import tables as t
from teamrt.testing.pgserver import PgServer
from tests.helpers.pg import PG_TEMPLATE

_names = itertools.count(1)


@pytest.fixture
def queue_db(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """``TEAMRT_DB`` on a fresh copy of the template (the queue's tables and the library's in it), a run
    home of its own and ``TEAMRT_USER=alice``; yields the URL."""
    name = f"queue{next(_names)}"
    url = pg_server.create_database(name, PG_TEMPLATE)
    monkeypatch.setenv("TEAMRT_DB", url)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TEAMRT_USER", "alice")
    yield url
    pg_server.drop_database(name)


@pytest.fixture
def db(queue_db: str) -> Iterator[Engine]:
    engine = create_engine(queue_db, poolclass=NullPool)
    yield engine
    engine.dispose()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``teamrt ARGV`` in this process: its exit status, stdout and stderr."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def submit(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``teamrt submit ARGV`` that must succeed; the run id."""
    status, out, err = cli(capsys, "submit", *argv)
    assert status == 0, err
    return out.strip()


def rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params))


def one(engine: Engine, sql: str, **params: Any) -> Any:
    found = rows(engine, sql, **params)
    assert len(found) == 1, found
    return found[0]


def runs_row(
    engine: Engine, run_id: str, *, status: str = "running", cost_usd: float = 0.0, host: str = "elsewhere",
    heartbeat_age_s: float = 60.0,
) -> None:  # fmt: skip
    """The ``runs`` row a queued run's first start writes, its owner on ``host`` with a heartbeat
    ``heartbeat_age_s`` old (60: gone, as after a worker crash)."""
    now = time.time()
    with engine.begin() as conn:
        conn.execute(
            insert(t.runs).values(
                id=run_id, created_at=now - 120, task="the task", status=status, workdir="/nowhere",
                settings={}, owner_host=host, owner_pid=4242, owner_start_time=1, owner_since=now - 120,
                heartbeat_at=now - heartbeat_age_s, owner_token=1, input_tokens=0, output_tokens=0,
                cache_creation_tokens=0, cache_read_tokens=0, cost_usd=cost_usd,
            )
        )  # fmt: skip
