"""A kept conversation whose system prompt or tools changed (a continued or resumed agent's are built anew)
goes on without the thinking blocks the API would refuse; one whose prefix is the same keeps them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from teamrt.models import Reply, open_model
from teamrt.models.catalog import lookup
from teamrt.runtime import prefixguard
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.history import rebuild
from teamrt.runtime.loop import AgentLoop
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions
from tests.helpers.teams import FAST
from tests.runtime.test_loop import AGENT, Rig, rig

__all__ = ["rig"]  # the fixture, imported for pytest

SONNET = "sim:claude-sonnet-5-5"  # binds its thinking to the prefix, and thinks by default


def thinker(request: SimRequest) -> Reply:
    return Reply().think(f"Turn {request.turns}: what is asked.").say(f"Answer {request.turns}.")


def run(rig: Rig, sim: SimServer, system: str, task: str | None, messages: list[Any] | None) -> AgentLoop:
    async def go() -> AgentLoop:
        provider = open_model(SONNET, sim=sim, settings=FAST)
        try:
            spec = AgentSpec(
                name=AGENT, model=provider, model_name=SONNET, system=system, tools={},
                permissions=Permissions("bypassPermissions"), info=lookup(SONNET), role="worker",
                max_tokens=2000,
            )  # fmt: skip
            env = AgentEnv(
                store=rig.store, tools=ToolContext(workspace=rig.workspace, run_dir=rig.run_dir),
                spill_dir=rig.run_dir / "spill", asker=policy_asker("deny"), budgets=[],
            )  # fmt: skip
            loop = AgentLoop(spec, env, epoch=1, messages=messages)
            outcome: Outcome = await loop.run(task)
            assert outcome.status == "done", outcome.reason
            return loop
        finally:
            await provider.aclose()

    return asyncio.run(go())


def follow_up(loop: AgentLoop) -> list[Any]:
    """The agent's kept history, as a continued run rebuilds it, with the person's next question."""
    return [*rebuild(loop.env.store.reader.turns(AGENT)), {"role": "user", "content": "And then?"}]


def thinking_blocks(messages: list[Any]) -> int:
    return sum(
        1 for m in messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "thinking"
    )


def test_a_changed_system_prompt_goes_on_without_the_old_thinking_and_the_api_takes_it(rig: Rig) -> None:
    with SimServer(policies={"worker": thinker}) as sim:
        first = run(rig, sim, "You answer questions.", "What is asked?", None)
        assert thinking_blocks(first.messages) == 1
        # a rule allowed "always" meanwhile: the next round's prompt lists another command
        second = run(rig, sim, "You answer questions. You may run pytest.", None, follow_up(first))
        assert [c.status for c in sim.calls] == [200, 200], "no 400: bound to a different conversation"
    assert thinking_blocks(second.messages) == 1, "the old block left out, the new reply's kept"
    events = rig.store.reader.events()
    assert [e.data["how"] for e in events if e.kind == "agent.compacted"] == [
        "thinking left out: the system prompt or tools changed"
    ]
    assert len([e for e in events if e.kind == prefixguard.PREFIX]) == 2
    again = rebuild(rig.store.reader.turns(AGENT), lookup(SONNET))
    assert again == second.messages, "a resume rebuilds the history as the agent went on with it"


def test_the_same_prompt_keeps_the_thinking_and_the_cache(rig: Rig) -> None:
    with SimServer(policies={"worker": thinker}) as sim:
        first = run(rig, sim, "You answer questions.", "What is asked?", None)
        second = run(rig, sim, "You answer questions.", None, follow_up(first))
        assert [c.status for c in sim.calls] == [200, 200]
    assert thinking_blocks(second.messages) == 2
    assert not [e for e in rig.store.reader.events() if e.kind == "agent.compacted"]
    assert len([e for e in rig.store.reader.events() if e.kind == prefixguard.PREFIX]) == 1


def test_the_digest_is_the_system_and_the_tools_without_cache_markers() -> None:
    tool = {"name": "read", "description": "d", "input_schema": {"type": "object"}}
    base = prefixguard.digest("s", [tool])
    assert base == prefixguard.digest(
        [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}], [tool]
    )
    assert base != prefixguard.digest("s2", [tool]) and base != prefixguard.digest("s", [])
    assert prefixguard.digest("st", []) != prefixguard.digest("s", [{"type": "text", "text": "t"}])


def test_without_thinking_drops_the_blocks_and_a_message_left_empty() -> None:
    think = {"type": "thinking", "thinking": "t", "signature": "x"}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [think, {"type": "text", "text": "a"}]},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "d"}]},
    ]
    assert prefixguard.without_thinking(messages) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": "more"},
    ]


@pytest.mark.hostile
@pytest.mark.parametrize("forged", [{"digest": 7}, {"digest": None}, {}, {"digest": ["x"]}])
def test_a_damaged_prefix_record_counts_as_none(rig: Rig, forged: dict[str, Any]) -> None:
    asyncio.run(rig.store.append_event(prefixguard.PREFIX, forged, agent=AGENT))
    assert prefixguard.recorded(rig.store, AGENT) is None
