"""Shared fixtures: a fresh run mailbox or run directory in a temporary directory, a watcher per test."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from sqlalchemy.pool import NullPool

from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.mailbox import Mailbox, open_watcher
from teamrt.mailbox.watcher import Watcher
from teamrt.models import BLOCK_ENV, ModelRequest, ModelResponse, open_model
from teamrt.models.sim import SimServer
from teamrt.pgserver import NoServer, PgServer
from teamrt.settings import SETTINGS_ENV, ModelSettings, Settings
from teamrt.tools.base import ToolContext
from teamrt.tools.sandbox import TOOLCHAINS, default_sandbox

if TYPE_CHECKING:
    from hostile import Scene

    from teamrt.runtime.agent import Outcome

# On a developer's machine without bubblewrap the sandbox tests are skipped (bash is then refused
# unless a run opts in); CI installs it in .ci/run, so there a missing bwrap fails them instead.
needs_bwrap = pytest.mark.skipif(
    not default_sandbox().confined and not os.environ.get("CI"),
    reason="bubblewrap (bwrap) is not installed here; install the bubblewrap package to test the sandbox",
)

MAILPROC = str(Path(__file__).with_name("mailproc.py"))


def shown_in_homes() -> set[str]:
    """What the sandbox may show at the top of a hidden home: the toolchain places, and the way to the
    Python teamrt runs on (a user's ``~/project/.venv``, ``/root/.pyenv``)."""
    names = {Path(p).parts[1] for p in TOOLCHAINS}
    for prefix in map(Path, (sys.prefix, sys.base_prefix)):
        for home in map(Path, ("/root", "/home", os.environ.get("HOME", "/"))):
            if home != Path("/") and prefix.is_relative_to(home) and prefix != home:
                names.add(prefix.relative_to(home).parts[0])
    return names


RUN = "run1"


def started_pg_server() -> PgServer:
    """A new PostgreSQL server (see ``teamrt.pgserver``). Skips the test only where PostgreSQL is not
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


@contextmanager
def mounted_tmpfs(where: Path, size: str, inodes: int) -> Iterator[Path]:
    """A tmpfs of ``size`` and ``inodes`` mounted at ``where`` (made), for a test to fill; unmounted after.
    Root only: a test that needs it says so with its skip."""
    where.mkdir()
    options = f"size={size},nr_inodes={inodes}"
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server of this worker's own, with a template database at the newest schema."""
    with pg_server_with_template(PG_TEMPLATE) as server:
        yield server


PG_TEMPLATE = "teamrt_template"
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


T = TypeVar("T")


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, failing if it has not returned within ``seconds``: a bound on a hang, not a timing (what
    blocks is left in a daemon thread)."""
    returned: list[T] = []
    raised: list[BaseException] = []

    def target() -> None:
        try:
            returned.append(call())
        except BaseException as e:
            raised.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if raised:
        raise raised[0]
    return returned[0]


FAST = Settings(
    model=ModelSettings(stall_seconds=0.5, stream_retries=2, stream_retry_delay=0.01, sdk_retries=2)
)
"""Model settings that keep retries and stalls short in tests."""


def supervise(project: Path, sim: SimServer, run_dir: Path, prompt: str = "go") -> Outcome:
    """``prompt`` run to its end by the real supervisor, as ``project``'s ``team.toml`` says, its models on
    ``sim``, in a new run kept in ``run_dir``; 60 s only bound a hang."""
    from teamrt.agents import load_definitions
    from teamrt.runtime.supervisor import Supervisor
    from teamrt.runtime.teamfile import load_team_file
    from teamrt.store import create_store

    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r1", task=prompt, workdir=str(project))

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=load_team_file(project / "team.toml", project=project),
            definitions=load_definitions(project), project=project, settings=FAST, sim=sim,
        )  # fmt: skip
        return await asyncio.wait_for(supervisor.run(prompt), 60)

    try:
        return asyncio.run(go())
    finally:
        store.close()


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer() as server:
        yield server


def complete(sim: SimServer, request: ModelRequest, **kw: Any) -> ModelResponse:
    """One call through the real SDK to ``sim``, with FAST settings, from a fresh event loop."""

    async def go() -> ModelResponse:
        model = open_model("sim", sim=sim, settings=FAST)
        try:
            return await model.complete(request, **kw)
        finally:
            await model.aclose()

    return asyncio.run(go())


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


def mailproc(*args: str) -> subprocess.Popen[str]:
    """Start tests/mailproc.py as a separate process with piped text stdout."""
    return subprocess.Popen(
        [sys.executable, MAILPROC, *args], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scene:
    """A project to attack through a scripted lead (tests/hostile.py)."""
    from hostile import Scene  # it imports this module

    return Scene(tmp_path, monkeypatch)
