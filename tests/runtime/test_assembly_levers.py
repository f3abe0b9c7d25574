"""A role's effort, thinking, compaction trigger and cache made into its agent's spec: defaults by kind,
budgets sized into max_tokens, and settings a model turned out not to take left out, never sent."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from teamrt.agents.definitions import builtin_definitions
from teamrt.models import ScriptedModel
from teamrt.models.catalog import lookup
from teamrt.models.levers import thinking_request
from teamrt.runtime.agent import DEFAULT_MAX_TOKENS, AgentSpec
from teamrt.runtime.assembly import fork_spec, role_levers
from teamrt.team import Role, Team
from teamrt.tools.permissions import Permissions

DEFINITIONS = builtin_definitions()


def levers(role: Role, model: str = "sim", **team: object) -> dict[str, object]:
    settings = Team(path=Path("team.toml"), name="t", lead=Role("lead", "lead"), model=model, **team)  # type: ignore[arg-type]
    return role_levers(settings, role, DEFINITIONS[role.agent], model, lookup(model))


def test_reviewers_get_medium_effort_and_leads_and_coders_the_model_s() -> None:
    assert levers(Role("critic", "reviewer"))["effort"] == "medium"
    assert levers(Role("lead", "lead"))["effort"] is None
    assert levers(Role("coder", "coder"))["effort"] is None
    assert levers(Role("critic", "reviewer", effort="high"))["effort"] == "high", "a setting wins"
    assert levers(Role("coder", "coder"), effort="low")["effort"] == "low", "[team]'s, for every role"
    assert levers(Role("critic", "reviewer"), "claude-haiku-4-5")["effort"] is None, "a model with none"


def test_defaults_leave_the_request_as_the_model_would_have_it() -> None:
    got = levers(Role("lead", "lead"))
    assert got == {
        "effort": None, "thinking": None, "max_tokens": DEFAULT_MAX_TOKENS, "compact_at": None,
        "cache": "auto",
    }  # fmt: skip
    got = levers(Role("lead", "lead", compact_at=90_000, cache="1h"))
    assert (got["compact_at"], got["cache"]) == (90_000, "1h")


def test_a_budget_is_added_to_the_reply_s_allowance() -> None:
    got = levers(Role("lead", "lead", thinking=4096), "claude-haiku-4-5")
    assert got["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert got["max_tokens"] == DEFAULT_MAX_TOKENS + 4096


def test_a_budget_past_the_output_limit_shrinks_to_fit(caplog: pytest.LogCaptureFixture) -> None:
    info = lookup("claude-haiku-4-5")
    assert info is not None and info.max_output_tokens == 64_000
    with caplog.at_level(logging.WARNING):
        thinking, max_tokens = thinking_request(60_000, info, DEFAULT_MAX_TOKENS, agent="coder")
    assert max_tokens == 64_000 and thinking == {
        "type": "enabled",
        "budget_tokens": 64_000 - DEFAULT_MAX_TOKENS,
    }
    assert "thinking budget 55808" in caplog.text
    thinking, max_tokens = thinking_request(60_000, info, 63_500)  # the reply gives way to the minimum budget
    assert (
        thinking is not None and thinking["budget_tokens"] >= 1024 and thinking["budget_tokens"] < max_tokens
    )


def test_off_disables_an_adaptive_model_and_leaves_the_others_alone() -> None:
    assert levers(Role("lead", "lead", thinking="off"), "sim:claude-opus-5-5")["thinking"] == {
        "type": "disabled"
    }
    # Sonnet 5.5 answers "disabled" with a 400: its way to turn up-front thinking off is between_tools
    assert levers(Role("lead", "lead", thinking="off"))["thinking"] == {"type": "between_tools"}
    assert levers(Role("lead", "lead", thinking="off"), "claude-haiku-4-5")["thinking"] is None
    assert levers(Role("lead", "lead", thinking="adaptive"))["thinking"] == {"type": "adaptive"}


def test_a_setting_the_model_does_not_take_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The team file named a model that takes them; the command line chose one that does not."""
    with caplog.at_level(logging.WARNING):
        got = levers(Role("lead", "lead", effort="xhigh", thinking="adaptive"), "claude-opus-4-5")
    assert got["effort"] is None and got["thinking"] is None
    assert "claude-opus-4-5 takes low, medium, high, not 'xhigh'" in caplog.text


def spec(model: str, **fields: object) -> AgentSpec:
    return AgentSpec(
        name="lead", model=ScriptedModel([]), model_name=model, system="s", tools={},
        permissions=Permissions("default"), info=lookup(model), **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_fork_keeps_everything_its_parent_s_cached_prefix_depends_on() -> None:
    """Top-level effort and thinking are part of the cached prefix: a fork at a cheaper effort would
    write its parent's history again instead of reading it."""
    parent = spec("sim", effort="high", thinking={"type": "adaptive"}, persistent=True, cache="1h")
    fork = fork_spec(parent, "lead-fork", "fork")
    assert (fork.name, fork.role, fork.persistent) == ("lead-fork", "fork", False)
    assert (fork.effort, fork.thinking, fork.system, fork.cache) == (
        "high",
        parent.thinking,
        parent.system,
        "1h",
    )
