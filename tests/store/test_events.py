"""The event kinds and statuses of teamrt.events: one list, and the events a status records spelled from
it, so the store records the same kinds as before they were typed."""

from __future__ import annotations

from typing import get_args

from teamrt.events import AGENT_ENDED, EVENT_KINDS, MERGE_EVENTS, AgentEnd, AgentStatus
from teamrt.store.records import AGENT_STATUSES, MERGE_STATUSES


def test_each_merge_status_records_merge_dot_status() -> None:
    assert {status: f"merge.{status}" for status in MERGE_STATUSES} == MERGE_EVENTS


def test_each_end_of_an_agent_records_agent_dot_status_and_is_an_agent_status() -> None:
    assert {status: f"agent.{status}" for status in get_args(AgentEnd)} == AGENT_ENDED
    assert set(get_args(AgentEnd)) <= set(get_args(AgentStatus)) == set(AGENT_STATUSES)


def test_the_kinds_are_each_named_once() -> None:
    assert len(set(EVENT_KINDS)) == len(EVENT_KINDS) == 62
    assert {*MERGE_EVENTS.values(), *AGENT_ENDED.values()} <= set(EVENT_KINDS)
