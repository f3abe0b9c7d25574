"""Shared fixtures: a fresh run mailbox or run directory in a temporary directory, a watcher per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.mailbox import Mailbox, open_watcher
from teamrt.mailbox.watcher import Watcher
from teamrt.models import BLOCK_ENV
from teamrt.settings import SETTINGS_ENV
from teamrt.sim import SimServer
from teamrt.testing.pgserver import PgServer
from teamrt.tools.base import ToolContext
from tests.helpers.mail import RUN
from tests.helpers.pg import PG_TEMPLATE, pg_server_with_template

if TYPE_CHECKING:
    from tests.helpers.hostile import Scene


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this worker's own, with a template database at the newest schema."""
    with pg_server_with_template(PG_TEMPLATE) as server:
        yield server


_databases = itertools.count(1)


@pytest.fixture(params=["sqlite", "postgres"])
def store_db(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs the test once on per-run SQLite files and once with ``TEAMRT_DB`` on a fresh PostgreSQL
    database at the newest schema, dropped afterwards. Yields the backend's name."""
    if request.param != "postgres":
        yield str(request.param)
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = f"t{next(_databases)}"
    monkeypatch.setenv("TEAMRT_DB", server.create_database(name, PG_TEMPLATE))
    yield "postgres"
    server.drop_database(name)


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Tests never reach a developer's ``TEAMRT_DB`` server, settings files, ``~/.claude`` or model account.

    ``TEAMRT_NO_REAL_MODELS`` makes any model off loopback fail loudly, in this
    process and in every process a test starts.
    """
    monkeypatch.delenv("TEAMRT_DB", raising=False)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(BLOCK_ENV, "1")
    monkeypatch.setenv(SETTINGS_ENV, str(tmp_path / "no-settings.toml"))
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "no-claude-home"))


@pytest.fixture
def sim() -> Iterator[SimServer]:
    """The simulator, keeping every request it is sent (``sim.requests``) for a test to read."""
    with SimServer(record=True) as server:
        yield server


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``<home>/runs`` of a fresh ``TEAMRT_HOME`` (created, empty)."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    path = tmp_path / "home" / "runs"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """An empty run directory, ``<home>/runs/r1``."""
    path = tmp_path / "home" / "runs" / "r1"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An agent's workspace."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    """A tool context in ``ws``; its run directory (with a store file) lies inside, as the lead's does."""
    run_dir = ws / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.db").write_text("secret store\n")
    return ToolContext(workspace=ws, run_dir=run_dir)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "mailbox"


@pytest.fixture
def mailbox(root: Path) -> Iterator[Mailbox]:
    with Mailbox(root, RUN) as mb:
        for agent in ("lead", "alice", "bob"):
            mb.register(agent)
        yield mb


@pytest.fixture
def watcher() -> Iterator[Watcher]:
    w = open_watcher("inotify")
    yield w
    w.close()


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scene:
    """A project to attack through a scripted lead (tests/helpers/hostile.py)."""
    from tests.helpers.hostile import Scene  # it imports this module

    return Scene(tmp_path, monkeypatch)
