"""Shared fixtures: a fresh run mailbox or run directory in a temporary directory, a watcher per test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.mailbox import Mailbox, open_watcher
from teamrt.mailbox.watcher import Watcher

MAILPROC = str(Path(__file__).with_name("mailproc.py"))
RUN = "run1"


@pytest.fixture(autouse=True)
def _no_server_db(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a developer's ``TEAMRT_DB`` server; each run gets its own SQLite file."""
    monkeypatch.delenv("TEAMRT_DB", raising=False)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """An empty run directory, ``<home>/runs/r1``."""
    path = tmp_path / "home" / "runs" / "r1"
    path.mkdir(parents=True)
    return path


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
