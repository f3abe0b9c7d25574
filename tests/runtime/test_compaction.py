"""The context policy (trigger by cost, strategy by model), request sizes from the API's counts, and the
thinking blocks an edit must strip: pure functions, no model."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from teamrt.models.catalog import ModelInfo, Price, lookup
from teamrt.models.types import Usage
from teamrt.runtime import context
from teamrt.runtime.compaction import (
    CONTEXT_EDITING_BETA,
    MIN_HISTORY,
    MIN_TRIGGER,
    ON_DEMAND_BETA,
    ContextPolicy,
    cleared_tokens,
)
from teamrt.runtime.history import rebuild
from teamrt.runtime.sizing import ESTIMATE_MARGIN, RequestSizer
from teamrt.store import TurnRecord
from teamrt.store import Usage as StoreUsage


def info(name: str) -> ModelInfo:
    found = lookup(name)
    assert found is not None
    return found


def client_side(model: ModelInfo) -> ModelInfo:
    return replace(model, context_editing=False, server_compaction=False, compaction_on_demand=False)


# -- the trigger -----------------------------------------------------------------------------------


def test_the_trigger_is_chosen_by_cost_far_below_the_old_one() -> None:
    sonnet = info("claude-sonnet-5-5")
    policy = ContextPolicy.for_model(sonnet, 8192, None)
    legacy = ContextPolicy.legacy(sonnet, 8192)
    assert legacy.trigger == 1_000_000 - 8192 - 50_000, "today's: window - max_tokens - 5%"
    assert 70_000 < policy.trigger < 80_000 and policy.trigger < legacy.trigger / 10
    assert "cost" in policy.reason
    assert policy.limit == 1_000_000 - 8192 - 20_000


def test_a_price_band_keeps_the_trigger_under_its_edge_with_room_for_the_reply() -> None:
    band = replace(info("claude-haiku-5-5"), long_context_from=60_000)
    policy = ContextPolicy.for_model(band, 8192, None)
    assert policy.trigger == 60_000 - 8192 - 3_000 and "price band" in policy.reason
    assert policy.trigger + 8192 < 60_000


def test_a_prompt_near_the_band_s_edge_leaves_room_for_history_rather_than_compacting_every_turn() -> None:
    haiku = info("claude-haiku-5-5")  # the 100K band would put the trigger at 86,808
    policy = ContextPolicy.for_model(haiku, 8192, None, base=90_000)  # a 256 KiB CLAUDE.md, say
    assert policy.trigger == 90_000 + MIN_HISTORY and "history past the prefix" in policy.reason
    assert ContextPolicy.for_model(haiku, 8192, None).trigger < 90_000, (
        "a usual prompt keeps the cost trigger"
    )


def test_the_trigger_stays_within_its_floor_and_the_limit() -> None:
    sonnet = info("claude-sonnet-5-5")
    fast = ContextPolicy.for_model(sonnet, 8192, None, growth=200)  # a tiny g would compact every turn
    assert fast.trigger == MIN_TRIGGER
    small = replace(sonnet, context_window=50_000)
    assert ContextPolicy.for_model(small, 8192, None).trigger == 50_000 - 8192 - 1_000


def test_free_cache_reads_compact_only_at_the_limit() -> None:
    free = ModelInfo(Price(0, 0, 0, 0, 0), 1024, context_window=100_000)
    policy = ContextPolicy.for_model(free, 1000, None)
    assert policy.trigger == policy.limit


def test_a_role_sets_its_own_trigger_but_never_past_the_limit() -> None:
    sonnet = client_side(info("claude-sonnet-5-5"))
    assert ContextPolicy.for_model(sonnet, 8192, 30_000).trigger == 30_000
    assert ContextPolicy.for_model(sonnet, 8192, 5_000_000).trigger == 1_000_000 - 8192 - 20_000


# -- the strategy ------------------------------------------------------------------------------------


def test_on_demand_wherever_the_model_has_it_with_no_context_management() -> None:
    for name in ("claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5-5"):
        policy = ContextPolicy.for_model(info(name), 8192, None)
        assert policy.strategy == "on_demand" and policy.betas == (ON_DEMAND_BETA,), name
        assert policy.context_management is None, "the API refuses it beside a compaction request"
    compaction = ContextPolicy.for_model(info("claude-sonnet-5-5"), 8192, 7_000).compaction
    assert compaction["type"] == "summarize"
    assert all(w in compaction["instructions"] for w in ("task", "figures", "file paths", "promise", "left"))


def test_the_api_clears_tool_results_where_it_edits_context_but_cannot_compact_on_demand() -> None:
    policy = ContextPolicy.for_model(info("claude-haiku-4-5"), 8192, None)
    assert policy.strategy == "editing" and policy.betas == (CONTEXT_EDITING_BETA,)
    management = policy.context_management
    assert management is not None
    (clear,) = management["edits"]
    assert clear["type"] == "clear_tool_uses_20250919" and clear["keep"] == {"type": "tool_uses", "value": 3}
    assert clear["trigger"]["value"] < policy.trigger, "the cheap layer fires before teamrt's summary"
    threshold_only = replace(info("claude-haiku-4-5"), server_compaction=True)
    assert ContextPolicy.for_model(threshold_only, 8192, None).strategy == "editing", "one way: teamrt's"


def test_client_side_elsewhere_and_the_legacy_summary_forces_no_tool() -> None:
    model = client_side(info("claude-haiku-4-5"))
    policy = ContextPolicy.for_model(model, 8192, None)
    assert policy.strategy == "client" and policy.summary_tool_choice is None and policy.measured
    assert policy.betas == () and policy.context_management is None
    legacy = ContextPolicy.legacy(model, 8192)
    assert legacy.summary_tool_choice == {"type": "none"} and not legacy.measured


# -- sizes ---------------------------------------------------------------------------------------------


def text(role: str, words: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": words}]}


def test_the_size_is_the_api_count_plus_the_estimate_of_what_came_since() -> None:
    sizer = RequestSizer(100, [text("user", "x" * 400)])
    assert sizer.uncertain and sizer.size > 100  # no count yet: the estimate, with the margin
    sizer.added(text("assistant", "y" * 40))
    sizer.answered(Usage(input_tokens=900, output_tokens=20, cache_read_input_tokens=100))
    assert sizer.size == 1_020 and not sizer.uncertain
    result = text("user", "z" * 4_000)  # about 1,000 tokens by teamrt's count
    sizer.added(result)
    assert sizer.size > 1_020 + 1_000 and sizer.uncertain
    assert sizer.size <= 1_020 + int(1_010 * ESTIMATE_MARGIN) + 1
    sizer.counted(2_500)
    assert sizer.size == 2_500
    sizer.replaced([text("user", "short")])
    assert sizer.uncertain and sizer.size < 200


def test_the_legacy_size_is_the_bare_estimate() -> None:
    sizer = RequestSizer(100, [text("user", "x" * 400)], measured=False)
    before = sizer.size
    sizer.answered(Usage(input_tokens=5_000, output_tokens=5))
    assert sizer.size == before and not sizer.uncertain


# -- thinking blocks after an edit ----------------------------------------------------------------------


def think(n: int) -> dict[str, Any]:
    return {"type": "thinking", "thinking": f"thought {n}", "signature": f"sig{n}"}


def call(n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {"n": n}}


def result(n: int, body: str = "page") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": body}]}


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [text("user", "go")]
    for n in range(turns):
        messages += [{"role": "assistant", "content": [think(n), call(n)]}, result(n)]
    return messages


def thinking_of(messages: list[dict[str, Any]]) -> list[str]:
    return [b["thinking"] for m in messages if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "thinking"]  # fmt: skip


def test_an_edit_strips_the_thinking_after_it_and_keeps_the_thinking_before_it() -> None:
    before = conversation(4)
    after = [*before[:4], result(1, "cleared"), *before[5:]]  # the result of call 1 changed
    rebound = context.rebound(before, after)
    assert thinking_of(rebound) == ["thought 0", "thought 1"], "an unchanged prefix keeps its thinking"
    assert [b["type"] for b in rebound[5]["content"]] == ["tool_use"], "the rest exact, thinking gone"
    assert context.rebound(before, [*before, text("user", "more")]) == [*before, text("user", "more")]


def test_a_summary_strips_the_kept_turns_thinking() -> None:
    before = conversation(3)
    after = context.summarised(before, "S")
    assert thinking_of(after) == ["thought 2"], "summarised keeps the blocks; rebound decides"
    assert thinking_of(context.rebound(before, after)) == []


def test_an_on_demand_swap_keeps_the_last_reply_and_its_thinking() -> None:
    before = conversation(3)  # go, (think 0, call 0), result 0, ..., (think 2, call 2), result 2
    sent = context.compaction_split(before)
    assert sent == 5 and before[sent]["role"] == "assistant", "the last request: all before the last reply"
    block = {"type": "compaction", "content": "summary", "signature": "s"}
    after = context.swapped(before, sent, block)
    assert after == [{"role": "assistant", "content": [block]}, *before[5:]]
    assert context.rebound(before, after) == after, "the API wrote the summary: the kept thinking stays"
    again = [*after, {"role": "assistant", "content": [think(3), call(3)]}, result(3)]
    assert context.compaction_split(again) == 3, "the next compaction sends the swapped history's request"
    assert context.rebound(again, context.swapped(again, 3, {**block, "content": "newer"}))[1:] == again[3:]


def test_with_no_request_to_split_at_the_whole_history_is_compacted() -> None:
    block = {"type": "compaction", "content": "summary", "signature": "s"}
    alone = [text("user", "a long task")]
    assert context.compaction_split(alone) == 1
    assert context.swapped(alone, 1, block)[1]["content"][0]["text"] == context.CONTINUE
    one_turn = [
        {"role": "assistant", "content": [block]},
        {"role": "assistant", "content": [call(1)]},
        result(1),
    ]
    assert context.compaction_split(one_turn) == 3, "nothing before the block's reply to split at"
    assert context.summary_of([{**block, "content": None}]) is None and context.summary_of([block]) == block


def test_a_manual_thinking_summary_recaps_the_last_turn_in_words() -> None:
    before = conversation(2)
    after = context.summarised(before, "S", recap=True)
    assert len(after) == 1 and after[0]["role"] == "user"
    said = after[0]["content"][0]["text"]
    assert said.startswith("[Summary") and 'You called read {"n": 1}' in said and "It returned: page" in said


def test_a_resume_strips_the_thinking_an_old_compaction_kept() -> None:
    before = conversation(3)
    kept_by_an_older_teamrt = context.summarised(before, "S")  # its kept turn still has thought 2

    def turn(i: int, role: str, content: Any) -> TurnRecord:
        return TurnRecord(i, "a", i, 1, role, content, None, None, StoreUsage(0, 0, 0, 0, 0.0), 0.0)

    turns = [turn(i, m["role"], m["content"]) for i, m in enumerate(before)]
    turns.append(turn(len(turns), "compaction", kept_by_an_older_teamrt))
    binds = info("claude-sonnet-5-5")
    assert binds.binds_thinking
    assert thinking_of(rebuild(turns, binds)) == []
    assert thinking_of(rebuild(turns)) == ["thought 2"], "a model that does not bind keeps them"


def test_a_changed_turn_strips_every_thinking_block_after_it() -> None:
    before = conversation(2)
    after = [before[0], text("assistant", "other"), *before[2:]]
    assert thinking_of(context.rebound(before, after)) == []


@pytest.mark.hostile
def test_applied_edits_of_any_shape_are_summed_without_failing() -> None:
    edits: list[Any] = [
        {"type": "clear_tool_uses_20250919", "cleared_input_tokens": 1_200, "cleared_tool_uses": 2},
        {"cleared_input_tokens": "lots"},
        {"cleared_input_tokens": -5},
        {"cleared_input_tokens": True},
        {"cleared_input_tokens": 10**30},
        "not an edit",
        {},
    ]
    assert cleared_tokens(edits) == 1_200 + 2**31 - 1
