"""Progress lines of a run as its events are committed: what ``teamrt run`` and ``teamrt demo`` print.

A thread reads the run's event log through the store's reader (as ``teamrt
logs -f`` does) and passes the events that tell how the team is doing to
``out``: agents added and ending, spawns, tasks, merges, spawn failures and
the simulator's notice. A permission ask that waits for a person also says
how to answer it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from teamrt.runs import follow as logs
from teamrt.runs import query as runs
from teamrt.runtime.asking import ASK, ASKED_AGAIN
from teamrt.runtime.losses import KINDS as LOSSES
from teamrt.runtime.notices import BUDGET_NEAR, NOTIFY_FAILED
from teamrt.store import EventRecord
from teamrt.terminal import clean

KINDS = frozenset({
    "run.resumed", "agent.added", "agent.status", "spawn", "spawn.failed", "sim.unplayed", "task.created",
    "task.claimed", "task.updated", "merge.queued", "merge.merged", "merge.red", "merge.conflict",
    "run.continued", ASK, ASKED_AGAIN, "hook", "protected.quarantined", BUDGET_NEAR, NOTIFY_FAILED, *LOSSES,
})  # fmt: skip
"""The event kinds shown as progress; the whole log is ``teamrt logs RUN``."""
QUIET_STATUSES = frozenset({"running", "idle", "pending"})
"""``agent.status`` events left out: an agent going about its work."""
SHOWN_HOOKS = frozenset({"error", "timeout", "not run", "ignored"})
"""The outcomes of ``hook`` events shown: a hook that failed, or whose block was ignored."""
POLL_S = 0.2

Out = Callable[[str], None]


def shown(event: EventRecord) -> bool:
    if event.kind not in KINDS:
        return False
    if event.kind == "hook":
        return event.data.get("outcome") in SHOWN_HOOKS
    if event.kind in (ASK, ASKED_AGAIN) and event.data.get("attended"):
        return False  # the person at the terminal is shown it there (teamrt.cli.asking)
    return event.kind != "agent.status" or event.data.get("status") not in QUIET_STATUSES


def line(event: EventRecord, started: float, run_id: str) -> str:
    """The event as ``teamrt logs`` prints it; an ask that waits for a person adds how to answer it. Safe
    for a terminal (``terminal.clean``): an event holds agent data."""
    if event.kind == "sim.unplayed" and isinstance(event.data.get("note"), str):
        return clean(str(event.data["note"]))  # in full: it says what the run will not do
    said = logs.format_event(event, started)
    wait = event.data.get("wait_s")
    if event.kind in (ASK, ASKED_AGAIN) and isinstance(wait, int | float) and wait > 0:
        ask = " ".join(str(event.data.get("id", "?")).split())
        said += f"\n{'':>8}  answer it: teamrt answer {run_id} {ask} allow|deny"
    return clean(said)


@contextmanager
def watching(
    run_dir: Path,
    run_id: str,
    out: Out,
    *,
    after: int = 0,
    on_event: Callable[[EventRecord], object] | None = None,
) -> Iterator[None]:
    """Print the run's progress lines (of the events after ``after``) to ``out`` while the body runs (the
    body starts the run), and the last ones once it is over; ``on_event`` sees every event read, after its
    line (``alerts.Alerts.seen``: the bell when an ask waits or the run ends)."""
    done = threading.Event()
    thread = threading.Thread(
        target=_watch, args=(run_dir, run_id, out, done, after, on_event), name=f"progress {run_id}",
        daemon=True,
    )  # fmt: skip
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def _watch(
    run_dir: Path, run_id: str, out: Out, done: threading.Event, last: int,
    on_event: Callable[[EventRecord], object] | None,
) -> None:  # fmt: skip
    while not logs.store_ready(run_dir, run_id):  # the run's store is made once the run starts
        if done.wait(logs.STORE_POLL_S):
            if not logs.store_ready(run_dir, run_id):
                return
            break
    try:
        with runs.reading(run_dir, run_id) as reader:
            started = reader.run().created_at
            while True:
                finished = done.is_set()  # before the read, so that no event of the run's end is missed
                for event in reader.events(last):
                    last = event.id
                    if shown(event):
                        out(line(event, started, run_id))
                    if on_event is not None:
                        on_event(event)
                if finished:
                    return
                done.wait(POLL_S)
    except Exception as e:  # a progress line lost must not end the run it watches
        out(clean(f"teamrt: note: progress lines stopped: {e}"))
