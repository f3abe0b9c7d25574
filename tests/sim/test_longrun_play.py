"""The long-run play and its benchmark's machinery (``benchmarks/longrun.py``), at a small size.

The benchmark's figures only mean something if its recall is measured where the answer is given, from
what the request shows: these tests check the play answers from the request alone (a request without the
fact gets "unknown", scored wrong) and that a short run through the real loop, SDK and simulator compacts,
asks its questions after the compaction and scores every answer.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from teamrt.sim import SimRequest
from teamrt.sim.plays import longrun

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("longrun_bench", ROOT / "benchmarks" / "longrun.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _request(messages: list[Any]) -> SimRequest:
    return SimRequest({"model": "sim", "max_tokens": 100, "messages": messages})


def test_checklist_plants_every_fact_before_asking_and_answers_each_question() -> None:
    steps = longrun.checklist(500)
    assert len(steps) == 499
    planted = [i for i, s in enumerate(steps) if s.fact is not None]
    asked = [i for i, s in enumerate(steps) if s.tool == "answer"]
    assert sorted(steps[i].fact or 0 for i in planted) == list(range(len(longrun.FACTS)))
    assert {steps[i].question for i in asked} == set(range(len(longrun.FACTS)))  # each fact asked about
    assert max(planted) < min(asked)
    assert all(steps[i - 1].question == steps[i].question is not None for i in asked)
    sizes = [s.tokens for s in steps if s.tool != "answer"]
    assert min(sizes) >= 500 and max(sizes) <= 8000


def test_the_play_answers_only_from_what_the_request_shows() -> None:
    bench = longrun.Workbench(longrun.checklist(60))
    ask = next(i for i, s in enumerate(bench.steps) if s.question is not None and s.tool != "answer")
    subject, value = longrun.FACTS[bench.steps[ask].question or 0]
    bench.at = ask
    question = bench.call(bench.steps[ask].tool, bench.steps[ask].input).text
    call = {"type": "tool_use", "id": "t1", "name": bench.steps[ask].tool, "input": bench.steps[ask].input}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": question}
    bare = [{"role": "user", "content": "go"}, {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]}]  # fmt: skip
    forgot = longrun.play(_request(bare)).content[-1]
    assert forgot["name"] == "answer" and forgot["input"]["answer"] == "unknown"
    noted = [{"role": "user", "content": f"go\n# NOTE: {subject} is {value}."}, *bare[1:]]
    remembered = longrun.play(_request(noted)).content[-1]
    assert remembered["input"]["answer"] == value
    assert bench.call("answer", remembered["input"]).is_error is False
    bench.answers.clear()
    bench.at = ask + 1
    bench.call("answer", forgot["input"])
    assert bench.recall == 0.0  # a lost fact is scored wrong, not assumed


def test_a_compaction_block_counts_as_what_the_model_sees() -> None:
    text = longrun.visible_text(_request([
        {"role": "user", "content": [{"type": "compaction", "content": "Noted: the deploy port is 8431."}]},
    ]))  # fmt: skip
    assert longrun.recall(text, "the deploy port") == "8431"
    assert longrun.recall(
        "the staging database host is db-7.staging.internal.", "the staging database host"
    ) == ("db-7.staging.internal")


def test_a_call_off_the_checklist_is_refused_and_counted() -> None:
    bench = longrun.Workbench(longrun.checklist(40))
    result = bench.call("grep", {"pattern": "nothing"})
    assert result.is_error and longrun.NEXT in result.text and bench.off_script == 1 and bench.at == 0


def test_a_short_run_compacts_asks_after_it_and_scores_every_answer(tmp_path: Path) -> None:
    bench = _bench()
    config = bench.Config("sonnet", bench.MODELS["sonnet"], "new", True, ("sonnet",))
    figures = asyncio.run(bench.run_one(config, 30, tmp_path))
    assert (figures.status, figures.turns, figures.off_script) == ("done", 30, 0), figures.reason
    assert figures.api_errors == 0
    assert figures.peak_prompt_tokens > 0 and figures.priced["sonnet"].cost_usd > 0
    priced = figures.priced["sonnet"]
    assert sum(priced.parts.values()) == pytest.approx(priced.cost_usd)
    assert len(figures.answers) >= 3 and figures.recall is not None
    assert figures.asked_after_compaction >= 1  # the context was compacted before some questions


def test_an_error_the_simulator_answers_is_counted() -> None:
    from teamrt.models import ModelBadRequest, ModelRequest, lookup

    bench = _bench()

    class Refusing:
        name = "sim:claude-sonnet-5-5"

        async def complete(self, request: ModelRequest, **kw: Any) -> Any:
            raise ModelBadRequest("prefix mismatch", status=400)

    config = bench.Config("sonnet", bench.MODELS["sonnet"], "new", True, ("sonnet",))
    figures = bench.Figures(config)
    metered = bench.Metered(Refusing(), {"sonnet": lookup(config.model)}, figures)
    request = ModelRequest(model=config.model, messages=[{"role": "user", "content": "go"}], max_tokens=10)
    with pytest.raises(ModelBadRequest):
        asyncio.run(metered.complete(request))
    assert figures.statuses == [400]
