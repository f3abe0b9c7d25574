"""Every injected fault is either recovered (the SDK's retries, teamrt's stream retry) or
surfaced as a typed teamrt error; FAST allows 3 SDK attempts and 3 stream attempts."""

from __future__ import annotations

from typing import Any

import pytest

from teamrt.models import (
    ModelConnectionError,
    ModelError,
    ModelOverloaded,
    ModelRateLimited,
    ModelRequest,
    ModelResponse,
    ModelServerError,
    ModelStalled,
    ModelStreamCut,
    Reply,
)
from teamrt.sim import Fault, SimServer
from tests.helpers.teams import complete

TEXT = "The answer is forty-two. " * 20


def ask(sim: SimServer, *, agent: str = "a1", **kw: Any) -> ModelResponse:
    req = ModelRequest(model="sim", messages=[{"role": "user", "content": "q"}], max_tokens=1000, agent=agent)
    return complete(sim, req, **kw)


@pytest.fixture
def talker(sim: SimServer) -> SimServer:
    sim.default = lambda req: Reply().say(TEXT)
    return sim


@pytest.mark.parametrize(
    ("fault", "statuses"),
    [
        (Fault("rate_limit", retry_after=0.01), [429, 200]),
        (Fault("overloaded", retry_after=0.01), [529, 200]),
        (Fault("server_error", retry_after=0.01), [500, 200]),
    ],
)
def test_errors_before_the_stream_are_retried_by_the_sdk(
    talker: SimServer, fault: Fault, statuses: list[int]
) -> None:
    talker.faults.add(fault)
    response = ask(talker)
    assert response.text == TEXT and response.attempts == 1
    assert [c.status for c in talker.calls] == statuses


@pytest.mark.parametrize(
    ("fault", "error", "status"),
    [
        (Fault("rate_limit", retry_after=0.01), ModelRateLimited, 429),
        (Fault("overloaded", retry_after=0.01), ModelOverloaded, 529),
        (Fault("server_error", retry_after=0.01), ModelServerError, 500),
    ],
)
def test_errors_that_outlast_the_sdk_retries_are_typed(
    talker: SimServer, fault: Fault, error: type[ModelError], status: int
) -> None:
    talker.faults.add(fault, times=3)
    with pytest.raises(error) as caught:
        ask(talker)
    assert caught.value.status == status and caught.value.attempts == 3
    assert caught.value.request_id is not None
    assert len(talker.calls) == 3


@pytest.mark.parametrize(
    "fault",
    [
        Fault("cut", after_events=4),
        Fault("stall", after_events=4, seconds=5),
        Fault("stream_error", after_events=4),
    ],
)
def test_a_stream_broken_mid_way_is_retried_by_teamrt(talker: SimServer, fault: Fault) -> None:
    talker.faults.add(fault)
    shown: list[str] = []
    response = ask(talker, on_text=shown.append, on_restart=shown.clear)
    assert response.text == TEXT and response.attempts == 2
    assert "".join(shown) == TEXT, "the listener was told to drop the first attempt's text"
    assert [c.fault for c in talker.calls] == [fault.kind, None]


def test_a_stream_cut_on_every_attempt_is_a_typed_error(talker: SimServer) -> None:
    talker.faults.add(Fault("cut", after_events=4), times=3)
    with pytest.raises(ModelStreamCut) as caught:
        ask(talker)
    assert not isinstance(caught.value, ModelStalled)
    assert caught.value.attempts == 3


def test_a_stream_that_stalls_on_every_attempt_is_a_typed_error(talker: SimServer) -> None:
    talker.faults.add(Fault("stall", after_events=4, seconds=5), times=3)
    with pytest.raises(ModelStalled) as caught:
        ask(talker)
    assert caught.value.attempts == 3


def test_a_slow_stream_under_the_stall_limit_completes(talker: SimServer) -> None:
    talker.faults.add(Fault("slow", delay=0.01))
    pieces: list[str] = []
    response = ask(talker, on_text=pieces.append)
    assert response.text == TEXT == "".join(pieces) and response.attempts == 1


def test_a_malformed_tool_input_is_reported_not_fatal(sim: SimServer) -> None:
    sim.default = lambda req: Reply().say("Reading.").call("read", {"path": "a.txt"})
    sim.faults.add("bad_tool_input")
    response = ask(sim)
    [call] = response.tool_uses
    assert call["input"] == {}
    assert "not valid JSON" in response.invalid_tool_inputs[call["id"]]
    clean = ask(sim)
    assert clean.tool_uses[0]["input"] == {"path": "a.txt"} and not clean.invalid_tool_inputs


def test_faults_can_target_one_agent(talker: SimServer) -> None:
    talker.faults.add(Fault("overloaded", agent="b2", retry_after=0.01), times=3)
    assert ask(talker, agent="a1").text == TEXT
    assert talker.faults.queued == 3
    with pytest.raises(ModelOverloaded):
        ask(talker, agent="b2")


def test_random_faults_are_reproducible_from_the_seed_and_survived() -> None:
    kinds = ("rate_limit", "overloaded", "cut", "stream_error")
    sequences = []
    for _ in range(2):
        with SimServer(default=lambda req: Reply().say(TEXT)) as sim:
            sim.faults.at_random(
                0.3, seed=11, kinds=kinds, like=Fault("cut", retry_after=0.01, after_events=4)
            )
            for _ in range(12):
                assert ask(sim).text == TEXT
            sequences.append([c.fault for c in sim.calls])
    assert sequences[0] == sequences[1]
    assert sum(f is not None for f in sequences[0]) >= 2, "the seed injected faults"


def test_no_server_is_a_connection_error() -> None:
    sim = SimServer()
    sim.close()
    with pytest.raises(ModelConnectionError):
        ask(sim)
