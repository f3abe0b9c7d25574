"""Core handles on the schema's tables, and their rows turned into records."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import fields
from typing import Any, TypeVar

from sqlalchemy import Row, Table

from teamrt.store.records import (
    AgentRecord,
    EventRecord,
    MailRecord,
    MergeRecord,
    Owner,
    ProcessRecord,
    RunRecord,
    SteeringRecord,
    TaskRecord,
    ToolCallRecord,
    TurnRecord,
    Usage,
)
from teamrt.store.schema import Base

runs: Table = Base.metadata.tables["runs"]
agents: Table = Base.metadata.tables["agents"]
turns: Table = Base.metadata.tables["turns"]
tool_calls: Table = Base.metadata.tables["tool_calls"]
tool_processes: Table = Base.metadata.tables["tool_processes"]
mail: Table = Base.metadata.tables["mail"]
tasks: Table = Base.metadata.tables["tasks"]
task_blockers: Table = Base.metadata.tables["task_blockers"]
events: Table = Base.metadata.tables["events"]
merge_queue: Table = Base.metadata.tables["merge_queue"]
steering: Table = Base.metadata.tables["steering"]

USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens", "cost_usd")


R = TypeVar("R")


def _record(cls: type[R], row: Row[Any], **computed: Any) -> R:
    """Build a record from a row: each field from the column of its name, unless given."""
    m = row._mapping
    return cls(**{name: computed[name] if name in computed else m[name] for name in _names(cls)})  # type: ignore[arg-type]


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def usage_of(row: Row[Any]) -> Usage:
    return _record(Usage, row)


def usage_values(usage: Usage) -> dict[str, int | float]:
    return {name: getattr(usage, name) for name in USAGE_COLUMNS}


def run_record(row: Row[Any]) -> RunRecord:
    m = row._mapping
    owner = None
    if m["owner_pid"] is not None:
        owner = Owner(m["owner_host"], m["owner_pid"], m["owner_start_time"], m["owner_since"])
    return _record(RunRecord, row, usage=usage_of(row), owner=owner)


def agent_record(row: Row[Any]) -> AgentRecord:
    return _record(AgentRecord, row, usage=usage_of(row))


def turn_record(row: Row[Any]) -> TurnRecord:
    return _record(TurnRecord, row, usage=usage_of(row))


def tool_call_record(row: Row[Any], processes: Iterable[Row[Any]] = ()) -> ToolCallRecord:
    return _record(ToolCallRecord, row, processes=tuple(_record(ProcessRecord, p) for p in processes))


def mail_record(row: Row[Any]) -> MailRecord:
    return _record(MailRecord, row)


def task_record(row: Row[Any], blocked_by: Iterable[int]) -> TaskRecord:
    """A task as its run knows it: by its number, blocked by the numbers of ``blocked_by``."""
    return _record(TaskRecord, row, id=row._mapping["number"], blocked_by=tuple(sorted(blocked_by)))


def event_record(row: Row[Any]) -> EventRecord:
    return _record(EventRecord, row)


def merge_record(row: Row[Any]) -> MergeRecord:
    return _record(MergeRecord, row)


def steering_record(row: Row[Any]) -> SteeringRecord:
    return _record(SteeringRecord, row)
