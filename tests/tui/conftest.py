"""The TUI tests' shared fixtures: a fresh home, and the coding run mid-way in it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.tuidata import coding_run, freeze


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def live(home: Path) -> Iterator[Path]:
    """A run mid-way, its store held open by this process (so it is live), times frozen."""
    store = asyncio.run(coding_run(home / "runs"))
    freeze(home / "runs" / "run-demo")
    yield home / "runs"
    store.close()
