"""``teamrt tui`` (and ``teamrt run --tui``): the runs watched live in the terminal UI.

An unknown run is told in one line before the screen is taken. The TUI itself
(textual) is imported only once it opens, so that ``teamrt run`` without
``--tui`` never pays for it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from teamrt import home

TUI_TRACE_ENV = "TEAMRT_TUI_TRACE"


def handle(args: argparse.Namespace) -> int:
    return watch(args.run)


def watch(run_id: str | None) -> int:
    """Open the TUI, on ``run_id`` if given; an unknown run is one line, before the screen is taken."""
    runs_dir = home.runs_path()
    if run_id is not None:
        home.existing_run_dir(run_id)
    from teamrt.tui.app import TeamApp  # textual: only once the screen is taken

    trace = os.environ.get(TUI_TRACE_ENV)  # benchmarks/tui.py: when each agent's change was shown
    TeamApp(runs_dir, run_id, trace_path=Path(trace) if trace else None).run()
    if run_id is not None:
        print(
            f"teamrt: run {run_id}: watch it again with teamrt tui {run_id}; its events: teamrt logs {run_id}"
        )
    return 0
