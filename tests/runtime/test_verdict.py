"""A run's end told honestly (``teamrt.runtime.verdict``): ``blocked`` when every call that would have
done something was refused, ``abandoned`` for the tasks nobody finished; the model scripted."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from teamrt.agents import load_definitions
from teamrt.cli.output import EXIT_FAILED
from teamrt.cli.run import _report
from teamrt.models import Reply, ScriptedModel
from teamrt.models.scripted import Step
from teamrt.runtime.agent import Outcome
from teamrt.runtime.supervisor import Supervisor
from teamrt.runtime.teamrun import RunSummary
from teamrt.store import StoreReader, create_store
from teamrt.team import Role, Team, team_to_json
from tests.helpers.teams import FAST

RUN = "r1"
PYTEST = Reply().call("Bash", {"command": "python3 -m pytest -q"})
WRITE = Reply().call("Write", {"file_path": "fix.py", "content": "x = 1\n"})
LOOK = Reply().call("Bash", {"command": "ls && git status"})
LOOKING = ("Bash(ls:*)", "Bash(git status)")


def run(
    tmp_path: Path, steps: list[Step], *, allow: tuple[str, ...] = (), check: bool = True
) -> tuple[Outcome, StoreReader]:
    """A lead on the scripted ``steps``, every ask denied at once (``on_ask = "deny"``); its outcome and
    a reader of its store."""
    project, run_dir = tmp_path / "project", tmp_path / "home" / "runs" / RUN
    project.mkdir(exist_ok=True)
    run_dir.mkdir(parents=True)
    lead = Role("lead", "lead", None, None, None, None, None)
    team = Team(path=project / "team.toml", name="t", lead=lead, on_ask="deny", ask_wait=0, allow=allow)
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(team)})

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project), project=project,
            settings=FAST, models={"sim": ScriptedModel(steps)},
        )  # fmt: skip
        return await asyncio.wait_for(supervisor.run("go"), 30)

    try:
        return asyncio.run(go()), store.reader
    finally:
        store.close()


def test_a_run_whose_every_call_was_refused_ends_blocked_saying_why(tmp_path: Path) -> None:
    steps: list[Step] = [LOOK, PYTEST, WRITE, Reply().say("I could not run the tests.")]
    outcome, _ = run(tmp_path, steps, allow=LOOKING)  # it may look, and does: that is no work
    assert outcome.status == "blocked"
    assert outcome.reason is not None and outcome.reason.startswith(
        "nothing was done: 2 calls refused, and the team could only look; the first: lead's Bash"
        " `python3 -m pytest -q`: "
    )
    assert "[permissions] allow" in outcome.reason
    assert outcome.answer == "I could not run the tests.", "the lead's answer is kept"


@pytest.mark.parametrize(
    ("steps", "allow"),
    [
        ([PYTEST, WRITE, Reply().say("wrote the fix")], ("Write",)),  # a refusal, but a file was written
        ([PYTEST, Reply().call("Bash", {"command": "touch x"}), Reply().say("ok")], ("Bash(touch:*)",)),
        ([LOOK, Reply().say("it is a git repository")], LOOKING),  # nothing refused: a question answered
        ([Reply().call("WebFetch", {"url": "https://example.org/", "prompt": "x"}), Reply().say("no")], ()),
    ],
    ids=["wrote-a-file", "ran-a-command", "nothing-refused", "a-read-refused"],
)
def test_a_run_that_did_something_or_was_refused_nothing_ends_done(
    tmp_path: Path, steps: list[Step], allow: tuple[str, ...]
) -> None:
    outcome, _ = run(tmp_path, steps, allow=allow)
    assert (outcome.status, outcome.reason) == ("done", None)


def test_teamrt_run_exits_non_zero_on_a_blocked_run_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome, reader = run(tmp_path, [PYTEST, Reply().say("no")])
    assert reader.run().status == "blocked" and reader.run().status_reason == outcome.reason
    summary = RunSummary(RUN, outcome, 0, 0, 0, 0.0, 1, True, None, None, 0, tmp_path)
    assert _report(summary, argparse.Namespace(json=False, quiet=False)) == EXIT_FAILED
    said = capsys.readouterr()
    assert said.out == "no\n" and "run r1: blocked;" in said.err
    assert "teamrt: the run is blocked: nothing was done: 1 call refused" in said.err
    assert _report(summary, argparse.Namespace(json=True, quiet=False)) == EXIT_FAILED
    assert json.loads(capsys.readouterr().out)["status"] == "blocked"


def test_tasks_not_done_when_the_run_ends_are_abandoned(tmp_path: Path) -> None:
    steps: list[Step] = [
        Reply().call("task_create", {"subject": "fix the parser"}),
        Reply().call("task_create", {"subject": "write the docs"}),
        Reply().call("task_create", {"subject": "ship"}),
        Reply().call("task_claim", {"task_id": 1}),
        Reply().call("task_claim", {"task_id": 3}),
        Reply().call("task_update", {"task_id": 3, "status": "done"}),
        Reply().say("stopping here"),
    ]
    outcome, reader = run(tmp_path, steps)
    assert outcome.status == "done"
    assert [(t.subject, t.status) for t in reader.tasks()] == [
        ("fix the parser", "abandoned"),
        ("write the docs", "abandoned"),
        ("ship", "done"),
    ]
    updates = [e.data for e in reader.events(kinds=("task.updated",)) if e.agent == "supervisor"]
    assert updates == [{"task": 1, "status": "abandoned"}, {"task": 2, "status": "abandoned"}]
