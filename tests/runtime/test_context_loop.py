"""The agent loop keeping its context: on ``sim`` through the real SDK (thinking bound to its prefix,
the cache, compaction on demand) and on the scripted model (recovery from "prompt is too long", a
compaction that returns no summary)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
from dataclasses import replace
from typing import Any

import pytest

from teamrt.models import ModelRequest, ModelResponse, Reply, ScriptedModel, open_model
from teamrt.models.catalog import lookup
from teamrt.models.errors import ModelContextTooLong
from teamrt.models.types import Usage
from teamrt.runtime import context
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.compaction import ON_DEMAND_BETA, ContextPolicy
from teamrt.runtime.history import rebuild
from teamrt.runtime.loop import AgentLoop
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions
from tests.helpers.teams import FAST
from tests.runtime.test_loop import AGENT, FakeTool, Rig, page, rig, small_window, user_texts

__all__ = ["rig"]  # the fixture, imported for pytest

SONNET = "sim:claude-sonnet-5-5"


def on_sim(
    rig: Rig,
    sim: SimServer,
    model: str,
    tools: list[FakeTool],
    *,
    system: str = "You read pages.",
    **spec: Any,
) -> Outcome:
    """The agent run to its end on ``sim`` through the real SDK."""
    return run_on_sim(rig, sim, model, tools, system=system, **spec)[0]


def run_on_sim(
    rig: Rig, sim: SimServer, model: str, tools: list[FakeTool], *, system: str, **spec: Any
) -> tuple[Outcome, list[Any]]:
    """The agent run to its end on ``sim``, and its history as it ended."""
    kept: list[Any] = []
    info = spec.pop("info", lookup(model))

    async def go() -> Outcome:
        provider = open_model(model, sim=sim, settings=FAST)
        try:
            agent = AgentSpec(
                name=AGENT, model=provider, model_name=model, system=system, tools={t.name: t for t in tools},
                permissions=Permissions("bypassPermissions"), info=info, role="worker",
                max_tokens=2000, **spec,
            )  # fmt: skip
            env = AgentEnv(
                store=rig.store, tools=ToolContext(workspace=rig.workspace, run_dir=rig.run_dir),
                spill_dir=rig.run_dir / "spill", asker=policy_asker("deny"), budgets=[],
            )  # fmt: skip
            loop = AgentLoop(agent, env, epoch=1)
            outcome = await loop.run("Read every page.")
            kept.extend(loop.messages)
            return outcome
        finally:
            await provider.aclose()

    return asyncio.run(go()), kept


def client_side(model: str, compact_at: int) -> ContextPolicy:
    """teamrt's own layers on ``model`` (the fallback when compaction on demand returns no summary)."""
    policy = ContextPolicy.for_model(lookup(model), 2000, compact_at)
    return replace(policy, strategy="client")


def reader(pages: int) -> Any:
    """A worker that thinks, then reads page after page, then ends; asked for a summary it writes one."""
    count = itertools.count()

    def play(request: SimRequest) -> Reply:
        if context.SUMMARY_INSTRUCTION in request.last_user_text:
            return Reply().think("What matters so far.").say("SUMMARY: pages read, nothing wrong yet.")
        n = next(count)
        if n >= pages:
            return Reply().think("All read.").say("All pages read.")
        return (
            Reply()
            .think(f"Page {n} next.")
            .say(f"Notes on page {n - 1}: " + "n" * 1_600)
            .call("read", {"n": n})
        )

    return play


def compactions(rig: Rig) -> list[str]:
    return [e.data["how"] for e in rig.store.reader.events() if e.kind == "agent.compacted"]


def test_a_thinking_agent_compacts_many_times_and_never_sends_a_block_the_api_refuses(rig: Rig) -> None:
    info = lookup(SONNET)
    assert info is not None and info.binds_thinking, "the sim binds this model's thinking to its prefix"
    with SimServer({"worker": reader(30)}, record=True) as sim:
        outcome = on_sim(rig, sim, SONNET, [FakeTool("read", act=page)], thinking={"type": "adaptive"},
                         context=client_side(SONNET, 6_000))  # fmt: skip
        bodies = [json.loads(body) for _, body in sim.bodies]
    assert outcome.status == "done", outcome.reason  # a refused block is a 400, which ends the agent failed
    done = compactions(rig)
    assert len(done) >= 4 and "summarised" in done and "cleared old tool results" in done
    replayed = [
        b for body in bodies for m in body["messages"][:-2] if m["role"] == "assistant" for b in m["content"]
        if b["type"] == "thinking"
    ]  # fmt: skip
    assert replayed, "thinking whose prefix did not change is sent back, not stripped wholesale"


def test_the_summary_request_reads_the_cached_prefix(rig: Rig) -> None:
    with SimServer({"worker": reader(30)}, record=True) as sim:
        outcome = on_sim(rig, sim, SONNET, [FakeTool("read", act=page)], system="You read pages. " * 400,
                         context=client_side(SONNET, 9_000))  # fmt: skip
        asks = [
            (json.loads(body), call)
            for (_, body), call in zip(sim.bodies, sim.calls, strict=True)
            if context.SUMMARY_INSTRUCTION.encode() in body
        ]
    assert outcome.status == "done" and asks
    for body, call in asks:
        assert "tool_choice" not in body and body["tools"], "the agent's own tools and tool_choice"
        assert call.cache_read > 0, "the summary call read the agent's cache"


FACTS = {"fact0": "amber-41", "fact1": "birch-7.5", "fact2": "cobalt-903"}


def fact_reader(pages: int) -> Any:
    """A worker that thinks, reads page after page (the first ones each plant a fact), then answers with
    every planted fact it can still see in its context."""
    count = itertools.count()

    def play(request: SimRequest) -> Reply:
        n = next(count)  # a compaction request takes a number too: the sim's policy cannot tell it apart
        if n >= pages:
            seen = dict(re.findall(r"(fact\d) = ([\w.-]+)", request.all_text()))
            return (
                Reply()
                .think("All read.")
                .say("Facts: " + ", ".join(f"{k}={v}" for k, v in sorted(seen.items())))
            )
        return Reply().think(f"Page {n} next.").say(f"Reading page {n}.").call("read", {"n": n})

    return play


async def fact_page(input: dict[str, Any]) -> str:
    n = int(input.get("n", 0))
    fact = f"NOTE: fact{n} = {FACTS[f'fact{n}']}\n" if f"fact{n}" in FACTS else ""
    return fact + "z" * 3_000


def test_compaction_on_demand_reads_the_cache_keeps_the_facts_and_resumes_exactly(rig: Rig) -> None:
    info = lookup(SONNET)
    assert info is not None and info.compaction_on_demand and not info.server_compaction
    with SimServer({"worker": fact_reader(40)}, record=True) as sim:
        outcome, history = run_on_sim(rig, sim, SONNET, [FakeTool("read", act=fact_page)],
                                      system="You read pages. " * 200, thinking={"type": "adaptive"},
                                      compact_at=7_000)  # fmt: skip
        sent = [(json.loads(body), call) for (_, body), call in zip(sim.bodies, sim.calls, strict=True)]
    assert outcome.status == "done", outcome.reason  # a refused block is a 400, which ends the agent failed
    assert all(call.status == 200 for _, call in sent), "never a 4xx"
    asks = [(body, call) for body, call in sent if "compaction" in body]
    assert len(asks) >= 3 and compactions(rig).count("server") == len(asks)
    for body, call in asks:
        assert (
            body["compaction"]["type"] == "summarize" and "file paths" in body["compaction"]["instructions"]
        )
        assert "context_management" not in body and "tool_choice" not in body and body["tools"]
        assert call.cache_read > 0, "the compaction request read the agent's cache"
    assert all("context_management" not in body for body, _ in sent), "the API refuses it with compaction"
    first_after = sent[sent.index(asks[0]) + 1][0]
    assert first_after["messages"][0]["content"][0]["type"] == "compaction"
    kept = [b["type"] for b in first_after["messages"][1]["content"]]
    assert kept[0] == "thinking", "the kept reply keeps its thinking: the API wrote the summary"
    assert outcome.answer == "Facts: " + ", ".join(f"{k}={v}" for k, v in sorted(FACTS.items()))
    assert rebuild(rig.store.reader.turns(AGENT), info) == history, "a resume rebuilds the swapped history"
    last = json.dumps(sent[-1][0]["messages"])
    assert "NOTE: fact0" not in last and FACTS["fact0"] in last, (
        "fact 0 was compacted and kept by the summary"
    )


@pytest.mark.slow  # 200K tokens of context, the least window of a model the simulator serves
def test_a_window_smaller_than_the_catalog_said_is_found_by_the_api_s_400_and_compacted_under(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """The API's "prompt is too long" answer, through the real SDK: the client believed a 400K window (a
    stale catalog), the simulator's is 200K; the loop learns the real one from the message, compacts
    under it and goes on."""
    model = "sim:claude-haiku-4-5"
    believed = replace(lookup(model), context_window=400_000)  # type: ignore[type-var]
    policy = replace(ContextPolicy.for_model(believed, 2000, 300_000), strategy="client")

    async def big_page(input: dict[str, Any]) -> str:
        return f"page {input.get('n')}: " + "y" * 45_000  # under the spill limit: it stays in the context

    with SimServer({"worker": reader(20)}) as sim, caplog.at_level(logging.INFO, "teamrt.runtime.loop"):
        outcome = on_sim(rig, sim, model, [FakeTool("read", act=big_page)], info=believed, context=policy)
    assert outcome.status == "done", outcome.reason
    refused = [r.getMessage() for r in caplog.records if "prompt is too long" in r.getMessage()]
    assert len(refused) == 1, "one 'prompt is too long', then the real window is known"
    assert "> 200000 maximum" in refused[0] and "cleared old tool results" in compactions(rig)


# -- recovery, on the scripted model ----------------------------------------------------------------------


def too_long(tokens: int, maximum: int) -> ModelContextTooLong:
    detail = f"prompt is too long: {tokens} tokens > {maximum} maximum"
    return ModelContextTooLong(f"scripted: {detail} (HTTP 400)", status=400, detail=detail)


def test_prompt_is_too_long_compacts_and_asks_again(rig: Rig) -> None:
    model = ScriptedModel(
        [
            Reply().call("read", {}),
            too_long(9_000, 8_000),
            Reply().say("SUMMARY: read one page."),
            lambda request: Reply().say("done after " + str(request.messages[0]["content"][0]["text"][:9])),
        ]
    )
    outcome = asyncio.run(rig.loop(model, [FakeTool("read", act=page)], info=small_window(50_000)).run("go"))
    model.check_done()
    assert outcome.status == "done" and outcome.answer == "done after [Summary "
    assert "summarised" in compactions(rig)


def test_a_context_still_too_long_after_three_compactions_fails_in_one_line(rig: Rig) -> None:
    steps: list[Any] = [Reply().call("read", {})]
    for _ in range(3):
        steps += [too_long(9_000, 8_000), Reply().say("SUMMARY")]
    model = ScriptedModel(steps)
    outcome = asyncio.run(rig.loop(model, [FakeTool("read", act=page)], info=small_window(50_000)).run("go"))
    model.check_done()
    assert outcome.status == "failed" and "\n" not in (outcome.reason or "")
    assert "too long after 3 compactions" in (outcome.reason or "")


def test_the_legacy_policy_still_compacts_as_before(rig: Rig) -> None:
    def act(request: ModelRequest) -> Reply:
        if "Write a summary" in user_texts(request):
            assert request.tool_choice == {"type": "none"}, "the legacy summary forces no tool"
            return Reply().say("SUMMARY: read pages 0-4, nothing wrong.")
        return Reply().call("read", {})

    model = ScriptedModel([act] * 12)
    made = rig.loop(model, [FakeTool("read", act=page)], info=small_window(3_400), max_turns=6)
    legacy = ContextPolicy.legacy(made.spec.info, made.spec.max_tokens)
    asyncio.run(AgentLoop(replace(made.spec, context=legacy), made.env, epoch=1).run("go"))
    assert any("Write a summary" in user_texts(r) for r in model.requests)


def on_demand_window(tokens: int) -> Any:
    return replace(small_window(tokens), compaction_on_demand=True, context_editing=True)


def test_a_compaction_that_returns_no_summary_falls_back_to_teamrt_layers(rig: Rig) -> None:
    failed = ModelResponse(
        id="m", model="scripted", content=[{"type": "compaction", "content": None, "signature": None}],
        stop_reason="compaction", usage=Usage(input_tokens=3_000, output_tokens=1),
    )  # fmt: skip

    answered = replace(failed, content=[{"type": "text", "text": "Sure."}], stop_reason="end_turn")
    failures = itertools.cycle([failed, answered])  # a null summary, then no compaction at all

    def act(request: ModelRequest) -> Reply | ModelResponse:
        if request.compaction is not None:
            assert ON_DEMAND_BETA in request.betas and request.context_management is None
            return next(failures)
        if context.SUMMARY_INSTRUCTION in user_texts(request):
            return Reply().say("SUMMARY: read pages, nothing wrong.")
        return Reply().call("read", {})

    model = ScriptedModel([act] * 80)
    loop = rig.loop(model, [FakeTool("read", act=page)], info=on_demand_window(9_000), max_turns=24)
    outcome = asyncio.run(loop.run("go"))
    assert outcome.status == "stopped" and "24 turns" in (outcome.reason or ""), outcome.reason
    asked = [r for r in model.requests if r.compaction is not None]
    assert len(asked) >= 2 and "server" not in compactions(rig)
    assert "cleared old tool results" in compactions(rig) or "summarised" in compactions(rig)
    assert all(ON_DEMAND_BETA in r.betas for r in model.requests), "the beta on every request"
    turns = [t.usage.input_tokens for t in rig.store.reader.turns(AGENT) if t.role == "assistant"]
    spent = rig.store.reader.agent(AGENT).usage.input_tokens
    assert spent >= sum(turns) + 3_000 * len(asked), "every compaction call's usage is the agent's"
