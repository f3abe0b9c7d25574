"""Core handles on the schema's tables, and their rows turned into records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Row, Table

from .records import (
    AgentRecord,
    EventRecord,
    MailRecord,
    Owner,
    ProcessRecord,
    RunRecord,
    TaskRecord,
    ToolCallRecord,
    TurnRecord,
    Usage,
)
from .schema import Base

runs: Table = Base.metadata.tables["runs"]
agents: Table = Base.metadata.tables["agents"]
turns: Table = Base.metadata.tables["turns"]
tool_calls: Table = Base.metadata.tables["tool_calls"]
tool_processes: Table = Base.metadata.tables["tool_processes"]
mail: Table = Base.metadata.tables["mail"]
tasks: Table = Base.metadata.tables["tasks"]
task_blockers: Table = Base.metadata.tables["task_blockers"]
events: Table = Base.metadata.tables["events"]

USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens", "cost_usd")


def usage_of(row: Row[Any]) -> Usage:
    m = row._mapping
    return Usage(
        m["input_tokens"],
        m["output_tokens"],
        m["cache_creation_tokens"],
        m["cache_read_tokens"],
        m["cost_usd"],
    )


def usage_values(usage: Usage) -> dict[str, int | float]:
    return {name: getattr(usage, name) for name in USAGE_COLUMNS}


def run_record(row: Row[Any]) -> RunRecord:
    m = row._mapping
    owner = None
    if m["owner_pid"] is not None:
        owner = Owner(m["owner_host"], m["owner_pid"], m["owner_start_time"], m["owner_since"])
    return RunRecord(
        id=m["id"],
        created_at=m["created_at"],
        task=m["task"],
        status=m["status"],
        status_reason=m["status_reason"],
        finished_at=m["finished_at"],
        workdir=m["workdir"],
        base_head=m["base_head"],
        settings=m["settings"],
        budget_tokens=m["budget_tokens"],
        budget_usd=m["budget_usd"],
        usage=usage_of(row),
        owner=owner,
        heartbeat_at=m["heartbeat_at"],
    )


def agent_record(row: Row[Any]) -> AgentRecord:
    m = row._mapping
    return AgentRecord(
        name=m["name"],
        kind=m["kind"],
        parent=m["parent"],
        depth=m["depth"],
        role=m["role"],
        definition=m["definition"],
        model=m["model"],
        status=m["status"],
        status_reason=m["status_reason"],
        epoch=m["epoch"],
        workspace=m["workspace"],
        branch=m["branch"],
        budget_tokens=m["budget_tokens"],
        budget_usd=m["budget_usd"],
        usage=usage_of(row),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


def turn_record(row: Row[Any]) -> TurnRecord:
    m = row._mapping
    return TurnRecord(
        id=m["id"],
        agent=m["agent"],
        seq=m["seq"],
        epoch=m["epoch"],
        role=m["role"],
        content=m["content"],
        stop_reason=m["stop_reason"],
        model=m["model"],
        usage=usage_of(row),
        created_at=m["created_at"],
    )


def tool_call_record(row: Row[Any], processes: Iterable[Row[Any]] = ()) -> ToolCallRecord:
    m = row._mapping
    return ToolCallRecord(
        id=m["id"],
        agent=m["agent"],
        turn_id=m["turn_id"],
        epoch=m["epoch"],
        name=m["name"],
        input=m["input"],
        read_only=m["read_only"],
        status=m["status"],
        result=m["result"],
        is_error=m["is_error"],
        created_at=m["created_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        processes=tuple(
            ProcessRecord(p._mapping["pid"], p._mapping["start_time"], p._mapping["started_at"])
            for p in processes
        ),
    )


def mail_record(row: Row[Any]) -> MailRecord:
    m = row._mapping
    return MailRecord(
        id=m["id"],
        agent=m["agent"],
        sender=m["sender"],
        kind=m["kind"],
        turn_id=m["turn_id"],
        message=m["message"],
        ingested_at=m["ingested_at"],
    )


def task_record(row: Row[Any], blocked_by: Iterable[int]) -> TaskRecord:
    m = row._mapping
    return TaskRecord(
        id=m["id"],
        subject=m["subject"],
        description=m["description"],
        status=m["status"],
        owner=m["owner"],
        created_by=m["created_by"],
        blocked_by=tuple(sorted(blocked_by)),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


def event_record(row: Row[Any]) -> EventRecord:
    m = row._mapping
    return EventRecord(id=m["id"], at=m["at"], agent=m["agent"], kind=m["kind"], data=m["data"])
