"""Hard budgets: role and lead budgets from the team file, budgets restored on resume, racing reservations.

Team runs go through the real supervisor, store and mailbox on ``sim`` (the real SDK); the reservation
tests drive ``Budget`` and ``Reservation`` themselves, and the agent loop on a model gated by events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.api import RunResult
from teamrt.models import ModelRequest, ModelResponse, Reply, ScriptedModel
from teamrt.models.catalog import ModelInfo, Price
from teamrt.models.types import OnRestart, OnText
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.budget import Budget, BudgetExhausted, Reservation, role_budget, run_budget
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.supervisor import Supervisor
from teamrt.sim import Fault, SimRequest, SimServer
from teamrt.store import Store, ToolUse, Usage, create_store
from teamrt.team import load_team
from teamrt.testing import run_on_sim
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions
from tests.helpers.teams import FAST, Kept, kept

DEADLINE = 90.0
"""Bounds a hang only; every wait below ends on an event long before."""

TOKENS = re.compile(
    r"^budget exhausted: agent (?P<agent>\S+) token budget: (?P<spent>[\d,]+) spent, (?P<held>[\d,]+) held,"
    r" the next call could use (?P<next>[\d,]+), the limit is (?P<limit>[\d,]+); raise it with (?P<hint>.+)$"
)
DOLLARS = re.compile(
    r"^budget exhausted: agent (?P<agent>\S+) dollar budget: \$(?P<spent>[\d.]+) spent, \$(?P<held>[\d.]+)"
    r" held, the next call could cost \$(?P<next>[\d.]+), the limit is \$(?P<limit>[\d.]+);"
    r" raise it with (?P<hint>.+)$"
)
RUN_TOKENS = re.compile(
    r"^budget exhausted: run token budget: (?P<spent>[\d,]+) spent, (?P<held>[\d,]+) held,"
    r" the next call could use (?P<next>[\d,]+), the limit is (?P<limit>[\d,]+); raise it with"
)
RUN_DOLLARS = re.compile(
    r"^budget exhausted: run dollar budget: \$(?P<spent>[\d.]+) spent, \$(?P<held>[\d.]+) held,"
    r" the next call could cost \$(?P<next>[\d.]+), the limit is \$(?P<limit>[\d.]+); raise it with"
)
CENT = 0.0001
"""Messages show dollars to four places."""


def figures(pattern: re.Pattern[str], reason: str | None) -> dict[str, Any]:
    """The numbers (and agent, hint) a budget-exhausted reason says, or a failure naming the reason."""
    found = pattern.match(reason or "")
    assert found is not None, f"not a budget message of that kind: {reason!r}"
    said: dict[str, Any] = {}
    for key, value in found.groupdict().items():
        if key in ("agent", "hint"):
            said[key] = value
        elif pattern in (DOLLARS, RUN_DOLLARS):
            said[key] = float(value)
        else:
            said[key] = int(value.replace(",", ""))
    return said


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "notes.toml").write_text("x = 1\n")
    return path


def supervisor_for(project: Path, store: Store, sim: SimServer) -> Supervisor:
    run_dir = project / ".teamrt" / "runs" / store.run_id
    team = load_team(project / "team.toml", project=project)
    return Supervisor(
        store=store, run_dir=run_dir, team=team, definitions=load_definitions(project), project=project,
        settings=FAST, sim=sim,
    )  # fmt: skip


def new_store(project: Path) -> Store:
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    return create_store(run_dir, "r1", task="go", workdir=str(project))


def run_team(project: Path, sim: SimServer) -> tuple[RunResult, Kept]:
    result = run_on_sim(
        project / "team.toml",
        "go",
        project=project,
        sim=sim,
        run_dir=project / ".teamrt" / "runs" / "r1",
        settings=FAST,
        timeout=DEADLINE,
    )
    return result, kept(result)


def globbing(most: int, answer: str) -> Any:
    """A policy that lists files, turn after turn, at most ``most`` times, then answers ``answer``."""

    def policy(request: SimRequest) -> Reply:
        if request.calls("Glob") < most:
            return Reply().call("Glob", {"pattern": "*.toml"})
        return Reply().say(answer)

    return policy


def spawning(*roles: str) -> Any:
    """A lead that spawns one teammate of each of ``roles`` in turn, waiting for each, then reports."""

    def lead(request: SimRequest) -> Reply:
        spawned = request.calls("spawn_agent")
        if spawned < len(roles):
            return Reply().call(
                "spawn_agent", {"kind": "team", "role": roles[spawned], "directives": ["dig"], "wait": True}
            )
        return Reply().say("Reports: " + request.tool_outcomes[0].output)

    return lead


def calls_by(sim: SimServer, agent: str) -> int:
    """The distinct requests ``agent`` sent: a stream retried on a loaded machine (``FAST`` allows half a
    second of silence) sends the same bytes again, and is still one call."""
    return len({body for who, body in sim.bodies if who == agent})


def model_turns(store: Store | Kept, agent: str) -> int:
    return sum(1 for turn in store.reader.turns(agent) if turn.role == "assistant")


# -- budgets given in the team file --------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "limit"), [("budget_tokens", "20000"), ("budget_usd", "0.11")], ids=["tokens", "usd"]
)
def test_a_role_budget_from_the_team_file_stops_its_agent_alone_before_the_call_that_could_overrun(
    project: Path, sim: SimServer, key: str, limit: str
) -> None:
    """``[roles.researcher]``'s limit stops the researcher at the call that could pass it; the reviewer (no
    limit) and the lead go on to their answers."""
    (project / "team.toml").write_text(
        f'[team]\nmodel = "sim"\n[roles.researcher]\n{key} = {limit}\n[roles.reviewer]\n'
    )
    sim.policies.update(
        {
            "lead": spawning("researcher", "reviewer"),
            "researcher": globbing(30, "the researcher never stopped"),
            "reviewer": globbing(8, "reviewed"),
        }
    )
    sim.faults.add(Fault("cut", agent="reviewer"))  # one stream retried: still one call (``calls_by``)
    outcome, store = run_team(project, sim)
    try:
        researcher, reviewer = store.reader.agent("researcher"), store.reader.agent("reviewer")
        lead_turns, turns = model_turns(store, "lead"), model_turns(store, "researcher")
        model_turns_of_reviewer = model_turns(store, "reviewer")
    finally:
        store.close()
    assert researcher.status == "stopped", researcher
    if key == "budget_tokens":
        said = figures(TOKENS, researcher.status_reason)
        assert said["spent"] == researcher.usage.total_tokens, "what it spent, as the store recorded it"
        assert reviewer.usage.total_tokens > said["limit"], "the reviewer has no such limit"
    else:
        said = figures(DOLLARS, researcher.status_reason)
        assert abs(said["spent"] - researcher.usage.cost_usd) < CENT
        assert reviewer.usage.cost_usd > 0
    assert (said["agent"], said["held"]) == ("researcher", 0)
    assert said["limit"] == float(limit)
    assert said["hint"] == f"[roles.researcher] {key} in the team file"
    assert said["spent"] <= said["limit"] < said["spent"] + said["next"] + CENT, "the next call could overrun"
    assert said["next"] <= said["limit"], "the refused call would fit a fresh budget"
    assert turns >= 2, "the budget let calls through before the limit"
    assert calls_by(sim, "researcher") == turns, "the call that could overrun never reached the model"
    assert "budget" not in (reviewer.status_reason or ""), reviewer.status_reason
    assert calls_by(sim, "reviewer") == 9 == model_turns_of_reviewer, "the reviewer went on to its answer"
    assert sum(c.agent == "reviewer" for c in sim.calls) == 10, "its cut stream was sent again"
    assert outcome.status == "done" and "reviewed" in outcome.answer, outcome
    assert lead_turns == 3 == calls_by(sim, "lead"), "the lead went on after its researcher stopped"


@pytest.mark.parametrize(
    ("key", "limit"), [("budget_tokens", "25000"), ("budget_usd", "0.12")], ids=["tokens", "usd"]
)
def test_the_lead_budget_from_the_team_file_stops_the_lead_while_its_teammate_goes_on(
    project: Path, sim: SimServer, key: str, limit: str
) -> None:
    """``[lead]``'s limit is the lead's alone: its researcher spends past it, the lead stops at it."""
    (project / "team.toml").write_text(
        f'[team]\nmodel = "sim"\n[lead]\n{key} = {limit}\n[roles.researcher]\n'
    )

    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call(
                "spawn_agent", {"kind": "team", "role": "researcher", "directives": ["dig"], "wait": True}
            )
        if request.calls("Glob") < 30:
            return Reply().call("Glob", {"pattern": "*.toml"})
        return Reply().say("the lead never stopped")

    sim.policies.update({"lead": lead, "researcher": globbing(10, "researched")})
    outcome, store = run_team(project, sim)
    try:
        researcher = store.reader.agent("researcher")
        lead_record = store.reader.agent("lead")
        turns = model_turns(store, "lead")
    finally:
        store.close()
    assert outcome.status == "stopped" and outcome.reason == lead_record.status_reason
    pattern = TOKENS if key == "budget_tokens" else DOLLARS
    said = figures(pattern, outcome.reason)
    assert (said["agent"], said["held"], said["limit"]) == ("lead", 0, float(limit))
    assert said["hint"] == f"[lead] {key} in the team file"
    assert said["spent"] <= said["limit"] < said["spent"] + said["next"] + CENT
    assert turns >= 2 and calls_by(sim, "lead") == turns, "the call that could overrun was never made"
    assert "budget" not in (researcher.status_reason or ""), researcher.status_reason
    assert calls_by(sim, "researcher") == 11, "the researcher went on to its answer"
    if key == "budget_tokens":
        assert researcher.usage.total_tokens > said["limit"], "the lead's limit is not the researcher's"


def test_a_fork_of_the_lead_has_the_lead_limits_for_itself(project: Path, sim: SimServer) -> None:
    """A fork gets ``[lead]``'s limits as a budget of its own: it stops, the lead still has room."""
    (project / "team.toml").write_text('[team]\nmodel = "sim"\n[lead]\nbudget_tokens = 25000\n')

    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call("spawn_agent", {"kind": "fork", "directives": ["look around"]})
        return Reply().say("The fork said: " + request.tool_outcomes[0].output)

    sim.policies.update({"lead": lead, "fork": globbing(30, "the fork never stopped")})
    outcome, store = run_team(project, sim)
    try:
        fork, turns = store.reader.agent("lead-fork"), model_turns(store, "lead-fork")
    finally:
        store.close()
    said = figures(TOKENS, fork.status_reason)
    assert fork.status == "stopped" and (said["agent"], said["limit"]) == ("lead-fork", 25_000)
    assert said["hint"] == "[lead] budget_tokens in the team file", "a fork's limits are the lead's"
    assert said["spent"] == fork.usage.total_tokens and said["spent"] + said["next"] > said["limit"]
    assert turns >= 2 and calls_by(sim, "lead-fork") == turns, "the call that could overrun was never made"
    assert outcome.status == "done" and "budget exhausted" in outcome.answer, "the lead's own budget had room"
    assert calls_by(sim, "lead") == 2


# -- budgets restored on resume ----------------------------------------------------------------------

GLOB: dict[str, Any] = {
    "type": "tool_use", "id": "toolu_before_crash", "name": "Glob", "input": {"pattern": "*.toml"},
}  # fmt: skip


def crashed_run(project: Path, spent: Usage) -> Store:
    """The store of a run whose owner died while the lead's second call was in flight: the lead's first
    turn (its usage ``spent``) and its call are kept, the call never ran, the call in flight left
    nothing."""
    store = new_store(project)
    definition = load_definitions(project)["lead"]

    async def build() -> None:
        await store.add_agent(
            "lead", kind="lead", model="sim", role="lead", definition=dataclasses.asdict(definition),
            workspace=str(project),
        )  # fmt: skip
        epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])
        await store.append_turn(
            "lead", epoch=epoch, role="assistant", content=[{"type": "text", "text": "Looking."}, GLOB],
            stop_reason="tool_use", model="sim", usage=spent,
            tool_uses=[ToolUse(GLOB["id"], "Glob", GLOB["input"], read_only=True)],
        )  # fmt: skip

    asyncio.run(build())
    return store


def resume(project: Path, store: Store, sim: SimServer) -> tuple[Outcome, Supervisor]:
    supervisor = supervisor_for(project, store, sim)

    async def go() -> Outcome:
        return await asyncio.wait_for(supervisor.resume(), DEADLINE)

    return asyncio.run(go()), supervisor


SPENT = Usage(
    input_tokens=1_000,
    output_tokens=1_000,
    cache_creation_tokens=4_000,
    cache_read_tokens=20_000,
    cost_usd=0.4,
)
"""Spent before the crash: with the next call's worst case (about 14,000 tokens, $0.16) over every
limit below, though that call alone fits each."""


@pytest.mark.parametrize(
    ("limits", "pattern", "hint"),
    [
        ("[lead]\nbudget_tokens = 30000", TOKENS, "[lead] budget_tokens in the team file"),
        ("[lead]\nbudget_usd = 0.5", DOLLARS, "[lead] budget_usd in the team file"),
        ("budget_tokens = 30000", RUN_TOKENS, None),
        ("budget_usd = 0.5", RUN_DOLLARS, None),
    ],
    ids=["lead-tokens", "lead-usd", "run-tokens", "run-usd"],
)
def test_a_resumed_run_counts_what_was_spent_before_the_crash(
    project: Path, sim: SimServer, limits: str, pattern: re.Pattern[str], hint: str | None
) -> None:
    """The lead's and the run's budgets start from the store's usage, with nothing held: the next call,
    which a fresh budget would take, is refused before it is made."""
    (project / "team.toml").write_text(f'[team]\nmodel = "sim"\n{limits}\n')
    sim.policies["lead"] = lambda request: Reply().say("resumed and done")
    store = crashed_run(project, SPENT)
    try:
        outcome, supervisor = resume(project, store, sim)
        lead = store.reader.agent("lead")
        glob = store.reader.tool_calls("lead")[0]
    finally:
        store.close()
    assert glob.status == "done", "the resume went as far as the lead's next call"
    assert outcome.status == "stopped" and outcome.reason == lead.status_reason, outcome
    said = figures(pattern, outcome.reason)
    expected = SPENT.cost_usd if pattern in (DOLLARS, RUN_DOLLARS) else SPENT.total_tokens
    assert said["spent"] == expected and said["held"] == 0, "spent once, as recorded; nothing held"
    assert said["next"] <= said["limit"] < said["spent"] + said["next"], (
        "it fits a fresh budget, not this one"
    )
    if hint is not None:
        assert said["hint"] == hint and said["agent"] == "lead"
    assert sim.calls == [], "the call that could overrun was never made"
    assert lead.usage == SPENT and supervisor.run_budget.held_tokens == 0


def test_a_resumed_run_charges_each_budget_once_with_what_it_spent_before_and_after(
    project: Path, sim: SimServer
) -> None:
    """With room left, the resumed lead goes on; every budget then holds nothing and counts the
    recorded spending once plus the new call."""
    (project / "team.toml").write_text(
        '[team]\nmodel = "sim"\nbudget_tokens = 60000\nbudget_usd = 1.0\n[lead]\nbudget_tokens = 50000\n'
    )
    sim.policies["lead"] = lambda request: Reply().say("resumed and done")
    store = crashed_run(project, SPENT)
    try:
        outcome, supervisor = resume(project, store, sim)
        run_usage, lead_usage = store.reader.run().usage, store.reader.agent("lead").usage
    finally:
        store.close()
    assert outcome.status == "done" and outcome.answer == "resumed and done", outcome
    assert calls_by(sim, "lead") == 1
    assert lead_usage.total_tokens > SPENT.total_tokens and lead_usage.cost_usd > SPENT.cost_usd
    lead_budget, shared = supervisor.members["lead"].loop.env.budgets
    assert shared is supervisor.run_budget and lead_budget.scope == "agent lead"
    for budget in (lead_budget, shared):
        assert (budget.held_tokens, budget.held_usd) == (0, 0.0)
        assert budget.spent_tokens == lead_usage.total_tokens == run_usage.total_tokens
        assert budget.spent_usd == pytest.approx(lead_usage.cost_usd)
    assert lead_budget.max_tokens == 50_000 and shared.max_tokens == 60_000


# -- reservations ----------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["tokens", "usd"])
def test_a_reservation_up_to_the_limit_is_taken_and_one_past_it_is_refused(unit: str) -> None:
    """Spent plus held plus the next worst case may reach the limit, not pass it."""
    budget = Budget("run", max_tokens=100) if unit == "tokens" else Budget("run", max_usd=1.0)
    first = Reservation([budget], 60, 0.6)
    with pytest.raises(BudgetExhausted, match="60 held" if unit == "tokens" else r"\$0.6000 held"):
        Reservation([budget], 41, 0.41)  # held amounts count: 60 + 41 is over
    first.settle(30, 0.25)
    second = Reservation([budget], 70, 0.75)  # 30 + 70 (0.25 + 0.75) is exactly the limit
    assert (budget.held_tokens, budget.held_usd) == (70, 0.75)
    with pytest.raises(BudgetExhausted):
        Reservation([budget], 1, 0.01)
    second.settle(70, 0.75)
    assert (budget.spent_tokens, budget.held_tokens) == (100, 0)
    assert (budget.spent_usd, budget.held_usd) == (1.0, 0.0)


def test_settle_releases_exactly_the_hold_and_charges_what_the_call_used_once() -> None:
    """Settling gives back the whole worst case held on every budget and charges the real use, once."""
    agent, run = Budget("agent alice", max_tokens=10_000), Budget("run", max_usd=5.0)
    reservation = Reservation([agent, run], 9_000, 1.5)
    assert [(b.held_tokens, b.held_usd) for b in (agent, run)] == [(9_000, 1.5)] * 2
    reservation.settle(1_234, 0.25)
    reservation.settle(1_234, 0.25)  # a second settle (a failed call's cleanup) changes nothing
    for budget in (agent, run):
        assert (budget.held_tokens, budget.held_usd) == (0, 0.0)
        assert (budget.spent_tokens, budget.spent_usd) == (1_234, 0.25)
    Reservation([agent, run], 10_000 - 1_234, 4.75).settle(0, 0.0)  # the released room is there again
    assert (agent.spent_tokens, agent.held_tokens, run.held_usd) == (1_234, 0, 0.0)


@pytest.mark.parametrize("refusing", ["agent", "run"])
@pytest.mark.parametrize("order", ["agent first", "run first"])
def test_a_refused_reservation_holds_nothing_on_any_budget(refusing: str, order: str) -> None:
    """All or nothing, whichever budget refuses and wherever it stands in the list."""
    agent = role_budget("alice", "coder", 1_000 if refusing == "agent" else None, None)
    run = run_budget(1_000 if refusing == "run" else None, None)
    budgets = [agent, run] if order == "agent first" else [run, agent]
    with pytest.raises(BudgetExhausted) as refused:
        Reservation(budgets, 1_001, 0.5)
    assert refused.value.reason.startswith("agent alice" if refusing == "agent" else "run")
    assert [(b.held_tokens, b.held_usd, b.spent_tokens) for b in budgets] == [(0, 0.0, 0)] * 2


def test_many_racing_reservations_never_overrun_a_shared_budget_and_settle_to_exactly_what_was_used() -> None:
    """Forty agents, some with an agent budget too small for their call, reserve at once against one run
    budget with room for ten calls in flight; settled calls make room for the next."""
    width, room, agents = 1_000, 10, 40
    limit = width * room + width // 2
    run = run_budget(limit, None)
    budgets = {
        f"a{i}": role_budget(f"a{i}", "coder", width - 1 if i % 4 == 0 else None, None) for i in range(agents)
    }
    rng = random.Random(24)

    async def go() -> tuple[list[str], list[str], int]:
        gate = asyncio.Event()
        taken: list[str] = []
        refused: list[str] = []
        most = 0

        async def call(name: str) -> None:
            nonlocal most
            await asyncio.sleep(0)  # all start before any reserves
            try:
                reservation = Reservation([budgets[name], run], width, 0.0)
            except BudgetExhausted as e:
                refused.append(e.reason.split(" budget")[0])
                return
            taken.append(name)
            most = max(most, run.held_tokens)
            assert run.spent_tokens + run.held_tokens <= limit
            await gate.wait()
            reservation.settle(rng.randrange(width // 2), 0.0)

        tasks = [asyncio.create_task(call(name)) for name in budgets]
        while len(taken) + len(refused) < agents:  # every call has reserved or been refused
            await asyncio.sleep(0)
        gate.set()
        await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)
        return taken, refused, most

    taken, refused, most = asyncio.run(go())
    small = {name for i, name in enumerate(budgets) if i % 4 == 0}
    assert len(taken) == room and not small & set(taken), (
        "ten calls fit; an agent's own limit refuses its call"
    )
    assert refused.count("run token") == agents - room - len(small)
    assert sorted(r for r in refused if r != "run token") == sorted(f"agent {n} token" for n in small)
    assert most == room * width
    assert run.held_tokens == 0 and all(b.held_tokens == 0 for b in budgets.values())
    assert run.spent_tokens == sum(budgets[name].spent_tokens for name in taken) < room * width // 2
    for name in taken:  # the released room takes a new call at once
        Reservation([budgets[name], run], width, 0.0).settle(0, 0.0)


@pytest.mark.parametrize("unit", ["tokens", "usd"])
def test_interleaved_calls_of_many_agents_hold_exactly_what_is_in_flight_and_never_pass_a_limit(
    unit: str,
) -> None:
    """Thirty agents make five calls each, every call held across a varying number of turns of the event
    loop; after every step each budget holds exactly the worst cases of its calls in flight, and what it
    spent plus what it holds stays within its limits."""
    tokens = unit == "tokens"
    run = run_budget(8_000, None) if tokens else run_budget(None, 0.8)
    agents = {
        f"a{i}": role_budget(f"a{i}", "coder", *((3_000, None) if tokens else (None, 0.3))) for i in range(30)
    }
    rng = random.Random(24)
    in_flight: dict[int, tuple[str, int, float]] = {}
    counts = {"taken": 0, "refused": 0}

    def check() -> None:
        for budget, calls in [(run, list(in_flight.values()))] + [
            (b, [c for c in in_flight.values() if c[0] == name]) for name, b in agents.items()
        ]:
            assert budget.held_tokens == sum(c[1] for c in calls), budget
            assert budget.held_usd == pytest.approx(sum(c[2] for c in calls), abs=1e-9), budget
            if budget.max_tokens is not None:
                assert budget.spent_tokens + budget.held_tokens <= budget.max_tokens, budget
            if budget.max_usd is not None:
                assert budget.spent_usd + budget.held_usd <= budget.max_usd + 1e-9, budget

    async def agent(name: str) -> None:
        for _ in range(5):
            worst = rng.randrange(200, 1_500)
            try:
                reservation = Reservation([agents[name], run], worst, worst / 10_000)
            except BudgetExhausted:
                counts["refused"] += 1
                check()
                await asyncio.sleep(0)
                continue
            counts["taken"] += 1
            in_flight[id(reservation)] = (name, worst, worst / 10_000)
            check()
            for _ in range(rng.randrange(6)):
                await asyncio.sleep(0)  # other agents reserve and settle meanwhile
            used = rng.randrange(worst // 2)
            del in_flight[id(reservation)]
            reservation.settle(used, used / 20_000)
            check()

    async def go() -> None:
        await asyncio.wait_for(asyncio.gather(*(agent(name) for name in agents)), DEADLINE)

    asyncio.run(go())
    assert counts["taken"] > 10 and counts["refused"] > 10, counts
    assert run.held_tokens == 0 and run.held_usd == pytest.approx(0.0, abs=1e-12)
    assert run.spent_tokens == sum(b.spent_tokens for b in agents.values())
    assert run.spent_usd == pytest.approx(sum(b.spent_usd for b in agents.values()))


class GatedModel:
    """A model whose calls wait at a gate, so that two agents' calls are in flight together."""

    def __init__(self, name: str, gate: asyncio.Event, entered: asyncio.Event) -> None:
        self.name = name
        self.inner = ScriptedModel([Reply().say(f"{name} answered")], name=name)
        self.gate = gate
        self.entered = entered

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.complete(request, on_text=on_text, on_restart=on_restart)

    async def count_tokens(self, request: ModelRequest) -> int:
        return await self.inner.count_tokens(request)

    async def aclose(self) -> None:
        pass


PRICED = ModelInfo(
    Price(input=1.0, output=2.0, cache_write_5m=1.25, cache_write_1h=2.0, cache_read=0.1), 1024
)


@pytest.mark.parametrize("unit", ["tokens", "usd"])
def test_two_agents_whose_calls_fit_alone_but_not_together_one_is_refused(run_dir: Path, unit: str) -> None:
    """Two agent loops share a run budget with room for one worst case: while one call is in flight the
    other agent stops, its call never made; the first settles and holds nothing after."""
    workspace = run_dir.parent / "work"
    workspace.mkdir()
    store = create_store(run_dir, "r1", task="test", workdir=str(workspace))
    # each call's worst case is about 1,030 tokens (1,000 of them max_tokens), $0.0021
    run = run_budget(1_500, None) if unit == "tokens" else run_budget(None, 0.003)

    async def go() -> tuple[list[Outcome], list[GatedModel], list[Budget]]:
        gate = asyncio.Event()
        models = [GatedModel(name, gate, asyncio.Event()) for name in ("alice", "bob")]
        own = [role_budget(m.name, "coder", 10_000, 1.0) for m in models]
        loops = []
        for model, budget in zip(models, own, strict=True):
            await store.add_agent(model.name, kind="team", model="scripted")
            spec = AgentSpec(
                name=model.name, model=model, model_name="scripted", system="You are a test agent.", tools={},
                permissions=Permissions("bypassPermissions"), info=PRICED, max_tokens=1000,
            )  # fmt: skip
            env = AgentEnv(
                store=store, tools=ToolContext(workspace=workspace, run_dir=run_dir),
                spill_dir=run_dir / "spill", asker=policy_asker("deny"), budgets=[budget, run],
            )  # fmt: skip
            loops.append(AgentLoop(spec, env, epoch=await store.begin_epoch(model.name)))
        runs = [asyncio.create_task(loop.run("go")) for loop in loops]
        both = asyncio.ensure_future(asyncio.gather(*(m.entered.wait() for m in models)))
        waiting: list[asyncio.Future[Any]] = [*runs, both]
        done, _ = await asyncio.wait(waiting, timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
        both.cancel()
        assert done and both not in done, "both calls reached their models at once"
        assert [m.entered.is_set() for m in models].count(True) == 1, "one call is in flight, holding"
        gate.set()
        return await asyncio.wait_for(asyncio.gather(*runs), DEADLINE), models, own

    try:
        outcomes, models, own = asyncio.run(go())
    finally:
        store.close()
    statuses = sorted(o.status for o in outcomes)
    assert statuses == ["done", "stopped"], outcomes
    [refused] = [o for o in outcomes if o.status == "stopped"]
    said = figures(RUN_TOKENS if unit == "tokens" else RUN_DOLLARS, refused.reason)
    assert (
        said["spent"] == 0
        and said["held"] > 0
        and said["next"] <= said["limit"] < said["held"] + said["next"]
    )
    assert sorted(len(m.inner.requests) for m in models) == [0, 1], "the refused call never reached its model"
    [answered] = [m for m in models if m.inner.requests]
    [mine] = [b for b, m in zip(own, models, strict=True) if m is answered]
    assert (run.held_tokens, run.held_usd) == (0, 0.0) and all(b.held_tokens == 0 for b in own)
    assert run.spent_tokens == mine.spent_tokens > 0
    assert sum(b.spent_tokens for b in own) == mine.spent_tokens, "the refused agent spent nothing"
