"""Throwaway PostgreSQL servers for the tests that run the store on PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy.pool import NullPool

from teamrt.testing.pgserver import NoServer, PgServer

PG_TEMPLATE = "teamrt_template"
"""The database each worker's server holds at the newest schema, copied for each test."""


def started_pg_server() -> PgServer:
    """A new PostgreSQL server (see ``teamrt.testing.pgserver``). Skips the test only where PostgreSQL is not
    installed and not in CI: CI installs it, so there a missing server fails."""
    try:
        return PgServer().start()
    except NoServer as e:
        if os.environ.get("CI"):
            pytest.fail(f"{e}: CI must test the store on PostgreSQL")
        pytest.skip(str(e))


@contextmanager
def pg_server_with_template(template: str) -> Iterator[PgServer]:
    """``started_pg_server`` with a database ``template`` at the newest schema, stopped afterwards."""
    server = started_pg_server()
    try:
        from sqlalchemy import create_engine

        from teamrt.store import migrate

        engine = create_engine(server.create_database(template), poolclass=NullPool)
        with engine.connect() as conn:
            migrate.upgrade(conn, "template")
        engine.dispose()
        yield server
    finally:
        server.stop()
