"""``teamrt logs``: a run's event log, one line per event, and following a live run to its end.

Reads only, through the store's reader, like ``teamrt show``. ``follow`` and
``format_event`` are public: a command that starts a run shows its progress
with them. ``logs --json`` prints ``event_json`` instead: one JSON object a line.
An event holds agent data (a reason, a task's subject, a hook's command): both
are made safe for a terminal here (``terminal.clean_line``, ``clean_json``).
"""

from __future__ import annotations

import functools
import heapq
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from teamrt.mcp.shown import KINDS as MCP_KINDS
from teamrt.mcp.shown import summary as mcp_summary
from teamrt.runs import query as runs
from teamrt.runs.identity import shown_role
from teamrt.runs.personmail import MailLine, Tracker
from teamrt.runs.query import RunsError
from teamrt.runs.render import describe_call, iso_time
from teamrt.runs.rounds import continued_summary
from teamrt.runtime.losses import KINDS as LOSSES
from teamrt.store import EventRecord, RunNotFound, StoreError
from teamrt.store.engine import is_postgres, server_url
from teamrt.store.notify import COMMITS, Listener
from teamrt.store.records import MERGE_STATUSES
from teamrt.terminal import clean_json, clean_line
from teamrt.tools.todo import TODOS_EVENT

LINE_CHARS = 160
AGENT_WIDTH = 12
KIND_WIDTH = 16
STORE_WAIT_S = 5.0  # how long ``follow`` waits for the store of a run that has just started
STORE_POLL_S = 0.05
OUTPUT_LOG = "output.log"  # a detached run's stdout and stderr, in its run directory


def format_event(event: EventRecord, started: float) -> str:
    """``+12.3s  lead          agent.status     failed: out of budget``, at most ``LINE_CHARS``, safe for
    a terminal."""
    head = (
        f"{f'+{max(0.0, event.at - started):.1f}s':>8}  {clean_line(event.agent or 'run'):<{AGENT_WIDTH}}"
        f"  {clean_line(event.kind):<{KIND_WIDTH}}"
    )
    line = clean_line(f"{head}  {describe_event(event)}").rstrip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def event_json(event: EventRecord, started: float) -> str:
    """The event as one line of JSON: ``{"id", "at", "elapsed_s", "agent", "kind", "data", "summary"}``
    (``at`` ISO 8601 UTC; ``agent`` null for the run's own; ``summary`` what ``format_event`` says), with
    nothing a terminal would act on (``clean_json``: the same values, escaped)."""
    said = {
        "id": event.id,
        "at": iso_time(event.at),
        "elapsed_s": round(max(0.0, event.at - started), 3),
        "agent": event.agent,
        "kind": event.kind,
        "data": event.data,
        "summary": describe_event(event),
    }
    return clean_json(json.dumps(said, ensure_ascii=False, default=str))


def follow(
    run_dir: Path,
    run_id: str,
    out: Callable[[str], None],
    *,
    follow: bool = True,
    poll_s: float = 0.2,
    after_id: int = 0,
    until: Callable[[], bool] | None = None,
    render: Callable[[EventRecord, float], str] = format_event,
    mail: Callable[[MailLine, float], str] | None = None,
) -> str:
    """Pass each event after ``after_id`` to ``out`` as a line (``render``'s, given the event and the
    run's start); return the run's status as a user sees it.

    With ``follow``, keep going (polling every ``poll_s``) until the run is no
    longer live or ``until()`` returns True, then print what came last; the
    status returned is then ``running`` only when ``until`` ended it. A store
    not there yet (a run just started in the background) is waited for up to
    ``STORE_WAIT_S``; then RunsError. With ``mail``, the person's messages to
    the run's agents (sent, and read: ``personmail``) come as lines too,
    rendered by it, among the events by time. A server database that restarts or
    stops for less than the grace (``engine.grace_s``) is waited for: the
    reader reads again and the listener connects again; past it, RunsError.
    """
    _wait_for_store(run_dir, run_id)
    url = server_url()
    commits = Listener(url, COMMITS, run_id) if follow and url is not None and is_postgres(url) else None
    try:
        with runs.reading(run_dir, run_id) as reader:
            started = reader.run().created_at
            last = after_id
            stop = not follow
            tracker = Tracker(run_dir) if mail is not None else None
            while True:
                # the status before the events, so that no event written before the end is missed
                status = runs.run_status(reader.run())
                events = reader.events(last)
                lines = [(e.at, render(e, started)) for e in events]
                if tracker is not None and mail is not None:
                    said = [(m.at, mail(m, started)) for m in tracker.new(reader)]
                    lines = list(heapq.merge(lines, said, key=lambda line: line[0]))
                for _, line in lines:
                    out(line)
                last = events[-1].id if events else last
                if stop or status not in runs.OWNED:  # a not responding owner may go on (SIGCONT)
                    return status
                stop = until is not None and until()  # then one more pass for the last events
                if stop:
                    continue
                if commits is None:
                    time.sleep(poll_s)
                else:  # woken by the owner's commit; the status is read again each second all the same
                    commits.wait(1.0)
    except RunNotFound:
        log = run_dir / OUTPUT_LOG
        see = f"; see {log}" if log.exists() else ""
        raise RunsError(f"run {run_id!r} has no store in {run_dir} (it did not start){see}") from None
    except StoreError as e:
        raise RunsError(str(e)) from None
    finally:
        if commits is not None:
            commits.close()


def store_ready(run_dir: Path, run_id: str) -> bool:
    """Whether the run's store exists, at the current schema, with its run in it (a store still being
    created is not ready; reading it leaves it to its creator)."""
    try:
        with runs.reading(run_dir, run_id) as reader:
            reader.run()
    except (StoreError, RunsError):
        return False
    return True


def _wait_for_store(run_dir: Path, run_id: str) -> None:
    deadline = time.monotonic() + STORE_WAIT_S
    while not store_ready(run_dir, run_id) and time.monotonic() < deadline:
        time.sleep(STORE_POLL_S)


# -- one event's summary -------------------------------------------------------------


def describe_event(event: EventRecord) -> str:
    """What the event says, on one line (without its time, agent and kind)."""
    return _SUMMARIES.get(event.kind, _pairs)(event.data)


def _status(data: dict[str, Any]) -> str:
    return _text(data.get("status", "?")) + (f": {_text(data['reason'])}" if data.get("reason") else "")


def _ended(data: dict[str, Any]) -> str:
    turns = data.get("turns")
    said = f"after {turns} turn{'' if turns == 1 else 's'}" if isinstance(turns, int) else ""
    reason = _text(data["reason"]) if data.get("reason") else ""
    return "; ".join(part for part in (said, reason) if part)


def _added(data: dict[str, Any]) -> str:
    kind = _text(data.get("kind", "?"))
    parts = [f"{kind} of {_text(data['parent'])}" if data.get("parent") else kind]
    role = _text(data["role"]) if data.get("role") else None
    agent = _text(data["agent"]) if isinstance(data.get("agent"), str) and data["agent"] else None
    if role or agent:  # "agent test-runner" for a lead that runs it (run --agent), not "role lead"
        shown = shown_role(kind, role, agent)
        parts.append(f"agent {shown}" if kind == "lead" and shown != (role or "-") else f"role {shown}")
    return ", ".join([*parts, f"model {_text(data.get('model', '?'))}"])


def _owner(data: dict[str, Any]) -> str:
    previous = data.get("previous")
    taken = f", taken over from {_owner(previous)}" if isinstance(previous, dict) else ""
    return f"pid {_text(data.get('pid', '?'))} on {_text(data.get('host', '?'))}{taken}"


def _spawn(data: dict[str, Any]) -> str:
    children = data.get("children")
    names = ", ".join(_text(c) for c in children) if isinstance(children, list) else "?"
    return f"{_text(data.get('kind', '?'))}: {names}"


def _merge(data: dict[str, Any]) -> str:
    said = f"attempt {_text(data.get('attempt', '?'))}, head {_text(data.get('head', '?'))[:12]}"
    return said + (f", commit {_text(data['commit'])[:12]}" if data.get("commit") else "")


def _control(data: dict[str, Any]) -> str:
    sender = _text(data.get("from", "?"))
    request = data.get("data")
    if isinstance(request, dict) and request.get("action") == "stop":
        what = f"agent {_text(request['agent'])}" if request.get("agent") else "the run"
        return f"{sender}: stop {what}"
    if isinstance(request, dict) and request.get("action") == "answer":
        verb = "allow" if request.get("allow") is True else "deny" if request.get("allow") is False else "?"
        said = f": {_text(request['reason'])}" if request.get("reason") else ""
        return f"{sender}: {verb} {_text(request.get('ask', '?'))}{said}"
    return f"{sender}: {_pairs(request) if isinstance(request, dict) else _text(request)}"


def _ask(data: dict[str, Any]) -> str:
    tool_input = data.get("input")
    call = describe_call(_text(data.get("tool", "?")), tool_input if isinstance(tool_input, dict) else {})
    return f"{_text(data.get('id', '?'))} {call} ({_text(data.get('reason', '?'))}){_waits(data)}"


def _waits(data: dict[str, Any]) -> str:
    """How an ask waits: for the person at the run's terminal, or some seconds for ``teamrt answer``."""
    if data.get("attended"):
        return "; waits for the person at the run's terminal"
    wait = data.get("wait_s")
    return f"; waits {wait:g}s for an answer" if isinstance(wait, int | float) and wait > 0 else ""


def _asked_again(data: dict[str, Any]) -> str:
    return f"{_text(data.get('id', '?'))} asked again after the resume{_waits(data)}"


def _answered(data: dict[str, Any]) -> str:
    how = "allowed" if data.get("allowed") else "denied"
    said = f"{_text(data.get('id', '?'))} {how} by {_text(data.get('by', '?'))}"
    if "always" in data:  # "allow always": the rule added, or why none was
        said += f" ({_text(data['always'])} added to the settings)" if data["always"] else " (once)"
    return said


def _task(data: dict[str, Any]) -> str:
    said = f"#{_text(data.get('task', '?'))}"
    for key in ("status", "subject"):
        if data.get(key):
            said += f" {_text(data[key])}"
    return said


def _hook(data: dict[str, Any]) -> str:
    """``PreToolUse blocked (exit 2, 41 ms) ./guard.sh: no rm -rf here``."""
    facts = [f"exit {_text(data['code'])}" if data.get("code") is not None else ""]
    facts.append(f"{_text(data['ms'])} ms" if data.get("ms") is not None else "")
    said = f"{_text(data.get('event', '?'))} {_text(data.get('outcome', '?'))}"
    said += f" ({', '.join(f for f in facts if f)})" if any(facts) else ""
    tail = [_text(data[key]) for key in ("command", "note") if data.get(key)]
    return f"{said} {': '.join(tail)}" if tail else said


def _todos(data: dict[str, Any]) -> str:
    """``3 todos: 1 in_progress (Running the tests), 2 pending``."""
    todos = [t for t in data.get("todos") or () if isinstance(t, dict)]
    counts = Counter(_text(t.get("status", "?")) for t in todos)
    said = f"{len(todos)} todo{'' if len(todos) == 1 else 's'}"
    said += ": " + ", ".join(f"{n} {status}" for status, n in counts.items()) if todos else ""
    doing = next((t for t in todos if t.get("status") == "in_progress"), None)
    if doing is not None:
        said += f"; now: {_text(doing.get('activeForm') or doing.get('content', ''))}"
    return said


def _forecast(data: dict[str, Any]) -> str:
    """``~$0.4000 for reviewer, reviewer-1 (2 × $0.20: ...)``: a spawn's forecast (``None``: no price)."""
    usd, agents = data.get("usd"), data.get("agents")
    priced = isinstance(usd, int | float) and not isinstance(usd, bool) and math.isfinite(usd)
    names = ", ".join(_text(name) for name in agents) if isinstance(agents, dict) else "?"
    return f"~{f'${usd:.4f}' if priced else '? (no price)'} for {names} ({_text(data.get('basis', '?'))})"


_SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "run.created": lambda d: f"task: {_text(d.get('task', ''))}",
    "run.continued": continued_summary,
    "run.owner": _owner,
    "run.status": _status,
    "agent.added": _added,
    "agent.started": lambda d: f"epoch {_text(d.get('epoch', '?'))}",
    "agent.status": _status,
    "agent.raised": lambda d: f"attempt {_text(d.get('attempt', '?'))}: {_text(d.get('error', '?'))}",
    "agent.compacted": lambda d: f"{_text(d.get('how', '?'))}, {_text(d.get('messages', '?'))} messages kept",
    "spawn": _spawn,
    "task.created": _task,
    "task.claimed": _task,
    "task.updated": _task,
    "control": _control,
    "ask": _ask,
    "ask.again": _asked_again,
    "sim.unplayed": lambda d: _text(d.get("note", "")),
    "protected.quarantined": lambda d: _text(d.get("note", "")),
    "budget.near": lambda d: _text(d.get("note", "")),
    "notify.failed": lambda d: _text(d.get("note", "")),
    **{kind: (lambda d: _text(d.get("note", ""))) for kind in LOSSES},
    "spawn.failed": lambda d: (
        f"{_text(d.get('kind', '?'))} {_text(d.get('role') or '')}".rstrip()
        + f": {_text(d.get('reason', '?'))}"
    ),
    "spawn.forecast": _forecast,
    "ask.answered": _answered,
    "hook": _hook,
    **{kind: functools.partial(mcp_summary, kind) for kind in MCP_KINDS},  # servers' progress, logs, asks
    TODOS_EVENT: _todos,
    **{f"agent.{end}": _ended for end in ("done", "failed", "stopped")},
    **{f"merge.{status}": _merge for status in MERGE_STATUSES},
}


def _pairs(data: dict[str, Any]) -> str:
    return " ".join(f"{key}={_text(value)}" for key, value in data.items())


def _text(value: object) -> str:
    """A value on one line: a string as it is, anything else as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return " ".join(text.split())
