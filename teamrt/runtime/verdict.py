"""A run's end told honestly: ``blocked`` when the team did nothing because it was refused, and the tasks
nobody finished marked ``abandoned``.

A lead whose every call was refused still ends its loop with an answer ("I could not run the tests"), so
its outcome reads ``done``. The supervisor asks ``judged`` before it records the run's status: a run in
which every call that would have done something was refused (by a permission rule, or an ask denied or
not answered) and no branch merged — no file written, no command run beyond looking (``ls``, ``cat``,
``git status`` ...) — ends ``blocked``, with the first refusal and what to do about it, and ``teamrt
run`` exits non-zero. Reads, commands that only look and calls that only coordinate (spawning, mail, the
task and todo lists) count neither way: a refused fetch is no blocked run, nor is a read a done one.

``abandon_unfinished`` then marks every task still ``open`` or ``in_progress`` ``abandoned``: its owner
has stopped with the run, and ``show`` and the TUI must not say someone is on it.
"""

from __future__ import annotations

import dataclasses
import json

from teamrt.events import SUPERVISOR
from teamrt.runtime.agent import Outcome
from teamrt.store import Store, ToolCallRecord
from teamrt.tools.shell.programs import read

REFUSED = "permission denied: "
"""How the result of a refused call begins (``teamrt.runtime.loop``)."""
COORDINATION = frozenset(
    {"spawn_agent", "Task", "send_message", "broadcast", "task_create", "task_claim", "task_update",
     "task_list", "request_shutdown", "respond_shutdown", "TodoWrite"}
)  # fmt: skip
"""Tools that organise the work without doing any."""
LOOKING = frozenset({"ls", "cat", "head", "tail", "wc", "rg", "grep", "find", "pwd", "echo", "stat", "file"})
"""Programs that change nothing (their options aside)."""
LOOKING_GIT = frozenset({"status", "diff", "log", "show"})


async def judged(store: Store, outcome: Outcome) -> Outcome:
    """``outcome``, or ``blocked`` with the reason when the team was refused and did nothing else."""
    if outcome.status != "done" or store.failure is not None:
        return outcome
    reader = store.reader
    if any(merge.status == "merged" for merge in reader.merges()):
        return outcome
    acting = [call for call in reader.tool_calls() if acts(call)]
    refused = [call for call in acting if refusal(call) is not None]
    if not refused or len(refused) < len(acting):
        return outcome
    first = refused[0]
    said = (
        f"nothing was done: {len(refused)} call{'' if len(refused) == 1 else 's'} refused, and the team could"
        f" only look; the first: {first.agent}'s {_called(first)}: {refusal(first)}. Allow what the team"
        " needs ([permissions] allow in .teamrt/team.toml, or answer its asks), then run it again"
    )
    return dataclasses.replace(outcome, status="blocked", reason=said)


async def abandon_unfinished(store: Store) -> int:
    """Mark every task not done ``abandoned``; how many were."""
    if store.failure is not None:
        return 0
    unfinished = [task for task in store.reader.tasks() if task.status in ("open", "in_progress")]
    for task in unfinished:
        await store.update_task(task.id, "abandoned", by=SUPERVISOR)
    return len(unfinished)


def refusal(call: ToolCallRecord) -> str | None:
    """Why the call was refused (its result after ``permission denied:``), or None when it ran."""
    if not call.is_error:
        return None
    for block in call.result or ():
        content = block.get("content") if isinstance(block, dict) else None
        text = content if isinstance(content, str) else json.dumps(content)
        if text.startswith(REFUSED):
            return text.removeprefix(REFUSED)
    return None


def acts(call: ToolCallRecord) -> bool:
    """Whether a call would do something, run or refused: not a read, not coordination, not a command that
    only looks."""
    if call.read_only or call.name in COORDINATION:
        return False
    if call.name != "Bash":
        return True
    command = call.input.get("command")
    reading = read(command) if isinstance(command, str) else None
    if reading is None or reading.hidden or reading.substitution or not reading.commands:
        return True
    return not all(_looks(program.program, program.args) for program in reading.commands)


def _looks(program: str, args: tuple[str, ...]) -> bool:
    if program == "git":
        return bool(args) and args[0] in LOOKING_GIT
    return program in LOOKING


def _called(call: ToolCallRecord) -> str:
    """The call in a few words: ``Bash `python3 -m pytest```, ``Edit src/app.py``."""
    what = call.input.get("command") or call.input.get("file_path") or call.input.get("path") or ""
    text = " ".join(str(what).split())
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{call.name} `{text}`" if text else call.name
