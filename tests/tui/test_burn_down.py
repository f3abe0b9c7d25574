"""The TUI's burn-down: the header's cost says what calls in flight hold and what agents at work are still
forecast to spend, read live from the run's store and its published reservations."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.runtime.budget import HELD_FILE
from teamrt.runtime.forecast import SPAWN_FORECAST
from teamrt.store import Store
from teamrt.tui.state import RunFollower
from tests.helpers.tuidata import NOW, coding_run, freeze
from tests.tui.test_snapshots import SMALL, Compare, app, shown


def hold(run_dir: Path, usd: float) -> None:
    (run_dir / HELD_FILE).write_text(json.dumps({"held_usd": usd, "held_tokens": 900, "calls": 1, "at": NOW}))


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Store]]:
    """The coding run, its lead having forecast $0.50 for the reviewer (it has spent $0.0041), and $0.03
    held for a call in flight. Its owner beats no heartbeat while the test lasts: a heartbeat is a commit,
    which would wake the follower whenever a loaded machine stretched the checks past its 2 s."""
    monkeypatch.setattr("teamrt.store.store.HEARTBEAT_S", 3600.0)
    store = asyncio.run(coding_run(tmp_path / "runs"))
    asyncio.run(store.append_event(SPAWN_FORECAST, {"agents": {"reviewer": 0.5}, "usd": 0.5}, agent="lead"))
    freeze(tmp_path / "runs" / "run-demo")
    hold(tmp_path / "runs" / "run-demo", 0.03)
    yield tmp_path / "runs", store
    store.close()


def test_the_follower_reads_the_burn_down_and_wakes_for_a_new_hold(demo: tuple[Path, Store]) -> None:
    runs, store = demo
    follower = RunFollower(runs / "run-demo", "run-demo")
    try:
        assert follower.changed(None)
        burn = follower.read(None).burn
        assert burn is not None and burn.reserved_usd == 0.03
        assert burn.forecast_usd == pytest.approx(0.5 - 0.0041) and burn.budget_usd == 2.0
        assert not follower.changed(None)
        hold(runs / "run-demo", 0.0)  # the call ended; nothing was committed yet
        assert follower.changed(None), "a new hold wakes the view without a commit"
        burn = follower.read(None).burn
        assert burn is not None and burn.reserved_usd == 0.0
        asyncio.run(store.set_agent_status("reviewer", "done"))
        burn = follower.read(None).burn
        assert burn is not None and burn.forecast_usd == 0.0, "an agent that ended is forecast nothing more"
    finally:
        follower.close()


def test_the_run_view_at_80x24_shows_the_burn_down(snap_compare: Compare, demo: tuple[Path, Store]) -> None:
    assert snap_compare(app(demo[0]), terminal_size=SMALL, run_before=shown)
