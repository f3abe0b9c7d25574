"""The cache's lifetime chosen from an agent's waits: the prices' break-even, the history kept in the run,
and a lead on the simulator, through the real SDK, whose long waits get a 1-hour entry it then reads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from teamrt.mailbox import Inbox, Mailbox
from teamrt.models import ModelRequest, ModelResponse, open_model
from teamrt.models.catalog import ModelInfo, Price, lookup
from teamrt.models.types import Model, OnRestart, OnText
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.cachettl import WAITED, WINDOW, Wait, WaitHistory, break_even_share, choose_ttl, costs
from teamrt.runtime.loop import AgentLoop
from teamrt.settings import load_settings
from teamrt.sim import SimServer
from teamrt.store import Store, create_store
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions

_sonnet = lookup("claude-sonnet-5-5")
assert _sonnet is not None
SONNET: ModelInfo = _sonnet
MINUTE = 60.0


def test_no_waits_and_no_prices_keep_five_minutes() -> None:
    assert choose_ttl([], SONNET) == "5m"
    assert choose_ttl([Wait(600, 50_000)], None) == "5m"


def test_a_role_setting_forces_the_lifetime() -> None:
    assert choose_ttl([], SONNET, "1h") == "1h"
    assert choose_ttl([Wait(10 * MINUTE, 50_000)] * 5, SONNET, "5m") == "5m"


def test_long_waits_choose_an_hour_and_short_ones_five_minutes() -> None:
    long = [Wait(10 * MINUTE, 50_000 + 2_000 * i) for i in range(6)]
    short = [Wait(MINUTE, 50_000 + 2_000 * i) for i in range(6)]
    assert choose_ttl(long, SONNET) == "1h"
    assert choose_ttl(short, SONNET) == "5m"
    too_long = [Wait(2 * 3600, 50_000 + 2_000 * i) for i in range(6)]
    assert choose_ttl(too_long, SONNET) == "5m", "past an hour both expire, and 5m writes cost less"


def test_the_break_even_follows_the_prices() -> None:
    """1.25x, 2x and 0.1x of the input price: an hour pays past 65% long waits when the whole prompt is
    written between waits, past 13% when a fifth of it is."""
    assert break_even_share(SONNET.price) == pytest.approx((4.0 - 2.5) / (2.5 - 0.2))
    assert break_even_share(SONNET.price, growth=0.2) == pytest.approx(0.2 * 1.5 / 2.3)
    free_reads = Price(input=1, output=1, cache_write_5m=1, cache_write_1h=1, cache_read=1)
    assert break_even_share(free_reads) == float("inf")


def test_the_choice_turns_where_the_break_even_says() -> None:
    """A prompt that grows a fifth between waits: below 13% long waits 5m, above it 1h."""

    def waits(long: int, of: int) -> list[Wait]:
        sizes = [100_000 * 1.25**i for i in range(of)]
        return [Wait(10 * MINUTE if i < long else MINUTE, int(s)) for i, s in enumerate(sizes)]

    grown = costs(waits(0, 12), SONNET)
    assert grown[1] > grown[0]
    assert choose_ttl(waits(1, 12), SONNET) == "5m"
    assert choose_ttl(waits(6, 12), SONNET) == "1h"


def test_a_compaction_counts_as_a_whole_prompt_written() -> None:
    """A prompt that shrank was written anew: its growth is all of it, not a negative number."""
    five, hour = costs([Wait(MINUTE, 100_000), Wait(MINUTE, 20_000)], SONNET)
    written = 100_000 + 20_000
    read = (100_000 + 20_000) * 0.2
    assert five == pytest.approx((written * 2.5 + read) / 1e6)
    assert hour == pytest.approx((written * 4.0 + read) / 1e6)


def test_only_the_newest_waits_count() -> None:
    old_long = [Wait(10 * MINUTE, 50_000 + i) for i in range(WINDOW)]
    new_short = [Wait(MINUTE, 50_000 + WINDOW + i) for i in range(WINDOW)]
    assert choose_ttl(old_long, SONNET) == "1h"
    assert choose_ttl(old_long + new_short, SONNET) == "5m"


def test_the_long_context_band_prices_a_big_prompt() -> None:
    dear = Price(input=4, output=20, cache_write_5m=5, cache_write_1h=8, cache_read=0.4)
    info = replace(SONNET, long_context_from=200_000, long_context_price=dear)
    assert costs([Wait(MINUTE, 300_000)], info)[0] == pytest.approx(300_000 * (5 + 0.4) / 1e6)
    assert costs([Wait(MINUTE, 100_000)], info)[0] == pytest.approx(100_000 * (2.5 + 0.2) / 1e6)


# -- the history, kept in the run ------------------------------------------------------------


@pytest.fixture
def store(run_dir: Path) -> Iterator[Store]:
    store = create_store(run_dir, "r1", task="test", workdir=str(run_dir))

    async def enrol() -> None:
        for name in ("lead", "mate"):
            await store.add_agent(name, kind="lead" if name == "lead" else "team", model="sim")

    asyncio.run(enrol())
    yield store
    store.close()


def test_waits_are_kept_as_events_and_read_back_by_a_resumed_agent(store: Store) -> None:
    async def record() -> None:
        history = WaitHistory(store, "lead")
        assert history.waits == []
        await history.record(612.5, 40_000)
        await history.record(-3, 41_000)  # a clock that stepped back counts as no wait
        await WaitHistory(store, "mate").record(30, 10)

    asyncio.run(record())
    events = [e for e in store.reader.events(kinds=(WAITED,)) if e.agent == "lead"]
    assert [e.data for e in events] == [
        {"seconds": 612.5, "tokens": 40_000},
        {"seconds": 0.0, "tokens": 41_000},
    ]
    assert WaitHistory(store, "lead").waits == [Wait(612.5, 40_000), Wait(0.0, 41_000)]


@pytest.mark.hostile
def test_a_damaged_wait_record_counts_as_nothing(store: Store) -> None:
    async def forge() -> None:
        await store.append_event(WAITED, {"seconds": "forever", "tokens": -5}, agent="lead")
        await store.append_event(WAITED, {"seconds": 1e308, "tokens": True}, agent="lead")

    asyncio.run(forge())
    waits = WaitHistory(store, "lead").waits
    assert waits == [Wait(0.0, 0), Wait(1e308, 0)]
    assert choose_ttl(waits, SONNET) in ("5m", "1h")


# -- a lead on the simulator, through the real SDK -------------------------------------------


@dataclass
class Clock:
    """Seconds that pass only when a test says so: the loop's and the simulator's."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Recording:
    """The sim's model, keeping each response (its usage split by the cache's lifetimes)."""

    model: Model
    responses: list[ModelResponse]
    name: str = "sim"

    async def count_tokens(self, request: ModelRequest) -> int:
        return await self.model.count_tokens(request)

    async def aclose(self) -> None:
        await self.model.aclose()

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        response = await self.model.complete(request, on_text=on_text, on_restart=on_restart)
        self.responses.append(response)
        return response


SYSTEM = "You lead a team. " + "Keep every promise you make to your teammates and report plainly. " * 120


async def until(condition: Callable[[], bool], bound: float = 30.0) -> None:
    """Wait for ``condition``, failing after ``bound`` seconds: a bound on a hang, not a timing."""
    async with asyncio.timeout(bound):
        while not condition():
            await asyncio.sleep(0.005)


@dataclass
class Lead:
    """A persistent lead on the simulator that answers, then waits ``gap`` seconds (on both clocks)
    for each of three letters from its teammate, then stops at its limit of three turns."""

    store: Store
    run_dir: Path
    responses: list[ModelResponse] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def run(self, gap: float, **spec: Any) -> Outcome:
        return asyncio.run(self._run(gap, spec))

    async def _run(self, gap: float, spec: dict[str, Any]) -> Outcome:
        clock, mailbox = Clock(), Mailbox(self.run_dir / "mailbox", "r1")
        for name in ("lead", "mate"):
            mailbox.register(name)
        await self.store.begin_epoch("lead")
        with SimServer(clock=clock, record=True) as sim:
            model = Recording(open_model("sim", settings=load_settings(), sim=sim), self.responses)
            async with Inbox(mailbox, "lead") as inbox:
                loop = AgentLoop(
                    AgentSpec(
                        name="lead", model=model, model_name="sim", system=SYSTEM, tools={},
                        permissions=Permissions("bypassPermissions"), info=lookup("sim"), persistent=True,
                        max_turns=3, **spec,
                    ),
                    AgentEnv(
                        store=self.store, tools=ToolContext(workspace=self.run_dir, run_dir=self.run_dir),
                        spill_dir=self.run_dir / "spill", asker=policy_asker("deny"), budgets=[], inbox=inbox,
                        clock=clock,
                    ),
                    epoch=1,
                )  # fmt: skip
                running = asyncio.create_task(loop.run("Plan the work."))
                for letter in range(3):
                    await until(
                        lambda n=letter: (
                            len(self.responses) > n  # type: ignore[misc]
                            and self.store.reader.agent("lead").status == "idle"
                        )
                    )
                    clock.now += gap
                    mailbox.post(sender="mate", recipient="lead", body=f"Report {letter}: done.")
                outcome = await running
            self.bodies = [json.loads(body) for _, body in sim.bodies]
        mailbox.close()
        assert outcome.status == "stopped" and "limit of 3 turns" in (outcome.reason or "")
        return outcome


@pytest.fixture
def lead(store: Store, run_dir: Path) -> Lead:
    return Lead(store, run_dir)


def test_a_lead_that_waits_ten_minutes_writes_an_hour_entry_and_reads_it(lead: Lead) -> None:
    lead.run(10 * MINUTE)
    first, second, third = (r.usage for r in lead.responses)
    assert first.cache_write_5m > 0 and first.cache_write_1h == 0, "no waits yet: five minutes"
    assert second.cache_read_input_tokens == 0, "the 5-minute entry expired during the wait"
    assert second.cache_write_1h > 0 and second.cache_write_5m == 0, "one 10-minute wait: an hour pays"
    assert third.cache_read_input_tokens >= second.cache_write_1h, "read after another 10 minutes"
    markers = [b["system"][-1]["cache_control"] for b in lead.bodies]
    assert markers == [{"type": "ephemeral"}, *[{"type": "ephemeral", "ttl": "1h"}] * 2]
    waited = [e.data["seconds"] for e in lead.store.reader.events(kinds=(WAITED,))]
    assert waited == [600.0] * 3


def test_a_lead_whose_waits_are_short_keeps_five_minutes(lead: Lead) -> None:
    lead.run(MINUTE)
    assert all(r.usage.cache_write_1h == 0 for r in lead.responses)
    assert all(r.usage.cache_read_input_tokens > 0 for r in lead.responses[1:]), "read within five minutes"


def test_effort_and_a_forced_lifetime_reach_the_request(lead: Lead) -> None:
    lead.run(MINUTE, effort="low", cache="1h")
    assert [b["output_config"]["effort"] for b in lead.bodies] == ["low"] * 3
    assert all(b["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for b in lead.bodies)
