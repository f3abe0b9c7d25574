"""A spawn's cost forecast: the model of turns, the role's history, the caps; what the run's budget publishes
as held; and a fork's forecast drawn from the forks before it, on sim through the real SDK."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from teamrt.events import AgentStatus
from teamrt.models import Reply
from teamrt.models.catalog import CATALOG, ModelInfo, Price
from teamrt.runtime.budget import HELD_FILE, Budget, Reservation, read_held, run_budget
from teamrt.runtime.forecast import (
    DEFAULT_TURNS,
    GROWTH_TOKENS,
    OUTPUT_TOKENS,
    SPAWN_FORECAST,
    Child,
    dollars,
    forecast,
    modeled,
    remaining,
    role_history,
)
from teamrt.sim import SimRequest, SimServer
from teamrt.store import AgentRecord, Usage
from tests.runtime.test_team import run_team

FLAT = ModelInfo(Price(input=1.0, output=10.0, cache_write_5m=2.0, cache_write_1h=3.0, cache_read=0.1), 1024)
"""Round prices ($ per million tokens) to check the arithmetic by hand."""


def agent(
    name: str, role: str, status: AgentStatus = "done", usd: float = 0.0, tokens: int = 0
) -> AgentRecord:
    return AgentRecord(
        name=name, kind="team", parent="lead", depth=1, role=role, definition={}, model="sim",
        status=status, status_reason=None, epoch=1, workspace=None, branch=None, budget_tokens=None,
        budget_usd=None, usage=Usage(input_tokens=tokens, cost_usd=usd), created_at=0.0, updated_at=0.0,
    )  # fmt: skip


def child(**kw: Any) -> Child:
    fields: dict[str, Any] = {
        "label": "reviewer", "model": "flat", "info": FLAT, "prefix_tokens": 10_000, "cached": False,
        "max_turns": None, "budget_usd": None, "budget_tokens": None,
    }  # fmt: skip
    return Child(**(fields | kw))


# -- the model of turns ----------------------------------------------------------------


def test_one_turn_by_hand() -> None:
    fresh, tokens = modeled(FLAT, 10_000, cached=False, turns=1)
    assert (
        fresh == pytest.approx((10_000 * 2.0 + OUTPUT_TOKENS * 10.0) / 1e6)
        and tokens == 10_000 + OUTPUT_TOKENS
    )
    fork, _ = modeled(FLAT, 10_000, cached=True, turns=1)
    assert fork == pytest.approx((10_000 * 0.1 + OUTPUT_TOKENS * 10.0) / 1e6), "a fork reads its prefix"


def test_later_turns_read_what_came_before_and_write_what_they_add() -> None:
    two, _ = modeled(FLAT, 10_000, cached=False, turns=2)
    one, _ = modeled(FLAT, 10_000, cached=False, turns=1)
    second = (10_000 * 0.1 + GROWTH_TOKENS * 2.0 + OUTPUT_TOKENS * 10.0) / 1e6
    assert two - one == pytest.approx(second)


def test_a_fork_fan_out_costs_less_than_fresh_children_of_the_same_prefix() -> None:
    fork, _ = modeled(FLAT, 100_000, cached=True, turns=DEFAULT_TURNS)
    fresh, _ = modeled(FLAT, 100_000, cached=False, turns=DEFAULT_TURNS)
    assert fork < fresh


def test_a_long_prompt_is_priced_at_its_band() -> None:
    sonnet = next(info for info in CATALOG.values() if info.long_context_from is not None)
    assert sonnet.long_context_from is not None
    below, _ = modeled(sonnet, sonnet.long_context_from - 50_000, cached=True, turns=1)
    above, _ = modeled(sonnet, sonnet.long_context_from + 50_000, cached=True, turns=1)
    assert above > below * (sonnet.long_context_from + 50_000) / (sonnet.long_context_from - 50_000)


# -- the forecast ----------------------------------------------------------------------


def test_no_history_models_the_turns_and_says_so() -> None:
    f = forecast(child(max_turns=4), 1, [])
    usd, tokens = modeled(FLAT, 10_000, cached=False, turns=4)
    assert f.usd == pytest.approx(usd) and (f.tokens, f.children) == (tokens, 1)
    assert f.basis == "no reviewer has ended yet: 4 turns from a 10,000-token prefix at flat's prices"
    assert f.text().startswith("forecast ~$") and f.basis in f.text()


def test_the_roles_history_is_the_mean_of_its_ended_agents() -> None:
    agents = [
        agent("reviewer", "reviewer", usd=0.30, tokens=1000),
        agent("reviewer-1", "reviewer", "failed", usd=0.50, tokens=3000),
        agent("reviewer-2", "reviewer", "running", usd=9.0),  # not ended: not history
        agent("coder", "coder", usd=5.0),  # another role
    ]
    past = role_history(agents, "reviewer")
    assert past is not None and (past.count, past.mean_tokens) == (2, 2000)
    assert past.mean_usd == pytest.approx(0.4)
    f = forecast(child(), 3, agents)
    assert f.usd == pytest.approx(1.2) and f.tokens == 6000
    assert f.basis == "3 × $0.40: 2 earlier reviewers averaged $0.40"
    assert f.text() == "forecast ~$1.20 for 3 agents (3 × $0.40: 2 earlier reviewers averaged $0.40)"


def test_the_forecast_is_capped_by_each_childs_budget_and_the_runs_money_left() -> None:
    agents = [agent("reviewer", "reviewer", usd=2.0, tokens=50_000)]
    f = forecast(child(budget_usd=0.5, budget_tokens=10_000), 2, agents)
    assert f.usd == pytest.approx(1.0) and f.tokens == 20_000
    assert f.basis.endswith("; capped at each agent's $0.50 budget")
    left = forecast(child(), 2, agents, run_left_usd=1.5)
    assert left.usd == pytest.approx(1.5) and left.basis.endswith("the run's budget has left")


def test_a_model_without_a_price_has_no_dollar_forecast() -> None:
    f = forecast(child(info=None, model="mystery"), 1, [])
    assert f.usd is None and f.tokens > 0 and "mystery has no price" in f.basis
    assert f.text().startswith("its cost cannot be forecast")


# -- what live agents are still expected to spend -------------------------------------------


def test_remaining_is_each_live_agents_forecast_less_what_it_spent() -> None:
    agents = {
        "a": agent("a", "reviewer", "running", usd=0.25),
        "b": agent("b", "reviewer", "idle", usd=2.0),  # past its forecast: nothing more
        "c": agent("c", "reviewer", "done", usd=0.1),  # ended: nothing more
    }
    forecasts = [{"agents": {"a": 1.0, "b": 1.0}}, {"agents": {"c": 1.0, "gone": 1.0}}]
    assert remaining(forecasts, agents) == pytest.approx(0.75)


@pytest.mark.hostile
def test_remaining_believes_no_figure_that_is_not_a_finite_sum() -> None:
    agents = {"a": agent("a", "reviewer", "running")}
    for bad in (math.nan, math.inf, -1.0, "1.0", True, None, [1]):
        assert remaining([{"agents": {"a": bad}}], agents) == 0.0, bad
    assert remaining([{"agents": ["a"]}, {"agents": None}, {}], agents) == 0.0


# -- what the run's budget holds, published ----------------------------------------------------


def test_the_runs_budget_publishes_what_it_holds(tmp_path: Path) -> None:
    budget = run_budget(None, 5.0, run_dir=tmp_path)
    assert read_held(tmp_path) is not None and read_held(tmp_path).usd == 0.0  # type: ignore[union-attr]
    first = Reservation([Budget("agent a"), budget], 1000, 0.25)
    second = Reservation([budget], 500, 0.5)
    held = read_held(tmp_path)
    assert held is not None and (held.usd, held.tokens, held.calls) == (0.75, 1500, 2)
    first.settle(800, 0.1)
    second.settle(0, 0.0)
    held = read_held(tmp_path)
    assert held is not None and (held.usd, held.tokens, held.calls) == (0.0, 0, 0)
    assert budget.left_usd() == pytest.approx(4.9)
    assert [p.name for p in tmp_path.iterdir()] == [HELD_FILE], "no partial file left behind"


@pytest.mark.hostile
@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"held_usd": NaN, "held_tokens": 0, "calls": 0, "at": 1}',
        '{"held_usd": -1, "held_tokens": 0, "calls": 0, "at": 1}',
        '{"held_usd": 1e999, "held_tokens": 0, "calls": 0, "at": 1}',
        '{"held_usd": "1", "held_tokens": 0, "calls": 0, "at": 1}',
        '{"held_usd": true, "held_tokens": 0, "calls": 0, "at": 1}',
        '{"held_usd": 1}',
    ],
)
def test_a_forged_held_file_is_not_believed(tmp_path: Path, text: str) -> None:
    (tmp_path / HELD_FILE).write_text(text)
    assert read_held(tmp_path) is None


def test_a_held_file_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    budget = run_budget(None, None, run_dir=tmp_path / "gone")  # no such directory: nothing published
    Reservation([budget], 10, 0.01).settle(10, 0.01)
    assert budget.spent_usd == 0.01 and not (tmp_path / "gone").exists()


# -- on sim ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("store_db")
def test_a_forks_forecast_comes_from_the_forks_before_it(tmp_path: Path, sim: SimServer) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text('[team]\nmodel = "sim"\n')

    def lead(request: SimRequest) -> Reply:
        spawned = request.calls("spawn_agent")
        if spawned < 2:
            return Reply().call("spawn_agent", {"kind": "fork", "directives": [f"part {spawned + 1}"]})
        return Reply().say("done")

    sim.policies.update({"lead": lead, "fork": lambda request: Reply().say("found it")})
    outcome, store = run_team(project, sim, "go")
    assert outcome.status == "done", outcome
    first, second = store.reader.events(kinds=(SPAWN_FORECAST,))
    assert first.data["basis"].startswith("no fork has ended yet: ")
    assert "-token prefix read from the cache at sim's prices" in first.data["basis"]
    [fork] = [a for a in store.reader.agents() if a.name == next(iter(first.data["agents"]))]
    assert second.data["basis"] == f"1 earlier fork averaged {dollars(fork.usage.cost_usd)}"
    assert second.data["usd"] == pytest.approx(fork.usage.cost_usd)
    assert json.dumps(second.data)  # plain JSON in the store
