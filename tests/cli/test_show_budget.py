"""``teamrt show``'s burn-down: spent, reserved (what the live run's budget holds for calls in flight) and
forecast (what its agents at work are still expected to spend), against the budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from teamrt.runs.follow import format_event
from teamrt.runtime.budget import HELD_FILE, Reservation, run_budget
from teamrt.runtime.forecast import SPAWN_FORECAST
from teamrt.store import EventRecord, Store
from tests.cli.test_runs import SIM_TEAM, add, new_store
from tests.helpers.cli import cli


def cost_line(out: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith("cost     ")]
    return line


async def scene(store: Store, forecasts: list[dict[str, Any]]) -> None:
    """A lead and a reviewer (each spent $0.0125), the reviewer at work; ``forecasts``: the spawn.forecast
    events' data."""
    await add(store, "lead", "lead")
    await add(store, "reviewer", "team", parent="lead")
    for data in forecasts:
        await store.append_event(SPAWN_FORECAST, data, agent="lead")


@pytest.mark.usefixtures("store_db")
def test_a_live_run_shows_spent_reserved_and_forecast_of_its_budget(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = new_store(runs, "r1", budget_usd=5.0, settings=SIM_TEAM)
    with store:
        asyncio.run(scene(store, [{"agents": {"reviewer": 0.5}, "usd": 0.5, "tokens": 9, "basis": "x"}]))
        budget = run_budget(None, 5.0, run_dir=runs / "r1")
        call = Reservation([budget], 1000, 0.3)
        code, out, err = cli(capsys, "show", "r1")
        assert code == 0 and err == ""
        assert (
            cost_line(out) == "cost     $0.0250 spent · $0.3000 reserved · ~$0.4875 forecast of $5.00 (sim)"
        )
        code, dumped, _ = cli(capsys, "show", "r1", "--json")
        shown = json.loads(dumped)
        assert (shown["reserved_usd"], shown["forecast_usd"]) == (0.3, 0.4875)
        call.settle(1000, 0.3)  # the call ends: nothing held
        code, out, _ = cli(capsys, "show", "r1")
        assert (
            cost_line(out) == "cost     $0.0250 spent · $0.0000 reserved · ~$0.4875 forecast of $5.00 (sim)"
        )


@pytest.mark.usefixtures("store_db")
def test_a_run_that_is_not_live_reserves_nothing_whatever_its_file_says(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with new_store(runs, "r1", budget_usd=2.0, budget_tokens=10**6) as store:
        asyncio.run(scene(store, [{"agents": {"reviewer": 1.0}}]))
        asyncio.run(store.set_agent_status("reviewer", "done"))  # ended: no forecast left
        asyncio.run(store.set_run_status("done"))
    (runs / "r1" / HELD_FILE).write_text('{"held_usd": 9, "held_tokens": 9, "calls": 1, "at": 1}')
    code, out, err = cli(capsys, "show", "r1")
    assert code == 0 and err == ""
    assert cost_line(out) == "cost     $0.0250; budget $2.00, 1,000,000 tokens", "as before the burn-down"
    code, dumped, _ = cli(capsys, "show", "r1", "--json")
    assert (json.loads(dumped)["reserved_usd"], json.loads(dumped)["forecast_usd"]) == (None, 0.0)


@pytest.mark.usefixtures("store_db")
def test_a_stopped_run_still_shows_what_its_unended_agents_are_forecast(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with new_store(runs, "r1", budget_tokens=1000) as store:
        asyncio.run(scene(store, [{"agents": {"reviewer": 0.25}}]))
        asyncio.run(store.set_run_status("stopped"))
    _, out, _ = cli(capsys, "show", "r1")
    assert cost_line(out) == "cost     $0.0250 spent · ~$0.2375 forecast; budget 1,000 tokens"


@pytest.mark.hostile
@pytest.mark.usefixtures("store_db")
def test_forged_forecasts_and_held_figures_change_nothing_shown(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store and the run directory hold what was written; show believes only finite sums, and says
    nothing a forecast's basis holds (a name an agent chose could carry terminal codes)."""
    forged: list[dict[str, Any]] = [
        {"agents": {"reviewer": -1.0, "\x1b]0;pwned\x07": 1.0}, "basis": "\x1b[2J\x1b]0;x\x07"},
        {"agents": {"reviewer": "1e9"}},
        {"agents": "reviewer"},
    ]
    store = new_store(runs, "r1", settings=SIM_TEAM)
    with store:
        asyncio.run(scene(store, forged))
        (runs / "r1" / HELD_FILE).write_text('{"held_usd": -5, "held_tokens": 0, "calls": 0, "at": 1}')
        code, out, err = cli(capsys, "show", "r1")
    assert code == 0 and err == "" and "\x1b" not in out and "\x07" not in out
    assert cost_line(out) == "cost     $0.0250 (sim); no budget"


@pytest.mark.hostile
def test_a_forecast_in_the_event_log_is_one_safe_line() -> None:
    event = EventRecord(7, 12.0, "lead", SPAWN_FORECAST, {
        "agents": {"reviewer\x1b[2J": 0.2, "x": 0.2}, "usd": 0.4, "basis": "2 × $0.20:\n\x1b]0;t\x07 ok",
    })  # fmt: skip
    line = format_event(event, 10.0)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert line.endswith("~$0.4000 for reviewer\ufffd[2J, x (2 × $0.20: \ufffd]0;t\ufffd ok)"), line
    data = {"agents": {"a": None}, "usd": None, "basis": "b"}
    unpriced = EventRecord(8, 12.0, "lead", SPAWN_FORECAST, data)
    assert format_event(unpriced, 10.0).endswith("~? (no price) for a (b)")
