"""Permission asks a person answers: recorded, waited for, answered by mail, by the policy, on a stop, on
resume; ``steer.answer``, ``runs.pending_asks`` and ``teamrt answer`` over real stores and mailboxes, the
model scripted."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.cli import main
from teamrt.mailbox import Mailbox
from teamrt.models import Reply, ScriptedModel
from teamrt.models.scripted import Step
from teamrt.runs import follow as logs
from teamrt.runs import query as runs
from teamrt.runs import steer
from teamrt.runtime.agent import Outcome
from teamrt.runtime.supervisor import Supervisor
from teamrt.runtime.teamrun import Choices, single_team, team_from_file
from teamrt.store import EventRecord, StoreReader, create_store, open_store
from teamrt.team import (
    Role,
    Team,
    TeamFileError,
    load_team,
    team_from_json,
    team_to_json,
)
from tests.helpers.cli import cli
from tests.helpers.teams import FAST

RUN = "r1"
WRITE = Reply().call("Write", {"file_path": "note.txt", "content": "hello\n"})  # asks: default mode


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def team(project: Path, *, ask_wait: float, on_ask: str = "deny") -> Team:
    lead = Role("lead", "lead", None, None, None, None, None)
    return Team(path=project / "team.toml", name="t", lead=lead, on_ask=on_ask, ask_wait=ask_wait)


During = Callable[[Path], Awaitable[None]]


def run(
    home: Path, project: Path, steps: list[Step], *, ask_wait: float, on_ask: str = "deny",
    during: During | None = None,
) -> tuple[Outcome, ScriptedModel, list[EventRecord]]:  # fmt: skip
    """Run a lead on the scripted ``steps``, with ``during(run_dir)`` alongside; the outcome, the model and
    the run's ask events."""
    run_dir = home / "runs" / RUN
    run_dir.mkdir(parents=True)
    model = ScriptedModel(steps)
    the_team = team(project, ask_wait=ask_wait, on_ask=on_ask)
    store = create_store(
        run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(the_team)}
    )

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=the_team, definitions=load_definitions(project),
            project=project, settings=FAST, models={"sim": model},
        )  # fmt: skip
        work = asyncio.create_task(supervisor.run("go"))
        if during is not None:
            await during(run_dir)
        return await asyncio.wait_for(work, 30)

    try:
        outcome = asyncio.run(go())
        return outcome, model, ask_events(store.reader)
    finally:
        store.close()


def ask_events(reader: StoreReader) -> list[EventRecord]:
    return reader.events(kinds=("ask", "ask.answered"))


def answered(events: list[EventRecord]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == "ask.answered"]


def tool_result(model: ScriptedModel) -> dict[str, Any]:
    """The result of the call the model made last, as its next request carried it."""
    block = model.requests[-1].messages[-1]["content"][0]
    assert block["type"] == "tool_result"
    return dict(block)


async def waiting(run_dir: Path, count: int = 1) -> list[runs.PendingAsk]:
    """Once ``count`` asks wait, those asks (from a fresh reader, as an onlooker sees them)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with runs.reading(run_dir, RUN) as reader:
            asks = runs.pending_asks(reader)
        if len(asks) >= count:
            return asks
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {count} asks waited within 30 s")


async def controls(run_dir: Path, count: int) -> None:
    """Until the supervisor has recorded ``count`` control messages."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with runs.reading(run_dir, RUN) as reader:
            if len(reader.events(kinds=("control",))) >= count:
                return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the supervisor did not record {count} control messages within 30 s")


# -- a person answers ------------------------------------------------------------------------------


def test_an_ask_allowed_by_a_person_runs_the_tool(home: Path, project: Path) -> None:
    seen: list[runs.PendingAsk] = []

    async def allow(run_dir: Path) -> None:
        seen.extend(await waiting(run_dir))
        await asyncio.to_thread(steer.answer, run_dir, RUN, seen[0].id, True)

    outcome, model, events = run(home, project, [WRITE, Reply().say("done")], ask_wait=60, during=allow)
    assert outcome.status == "done"
    assert events[1].at - events[0].at < 60, "the answer ended the wait, not its 60 s"
    assert (project / "note.txt").read_text() == "hello\n"
    assert not tool_result(model).get("is_error")
    [ask] = seen
    assert (ask.agent, ask.tool, ask.input, ask.wait_s) == (
        "lead", "Write", {"file_path": "note.txt", "content": "hello\n"}, 60.0,
    )  # fmt: skip
    assert ask.id.startswith("ask-") and len(ask.id) == 12 and "needs approval" in ask.reason
    assert [e.kind for e in events] == ["ask", "ask.answered"]
    assert events[0].agent == events[1].agent == "lead"
    call = model.requests[1].messages[-1]["content"][0]["tool_use_id"]
    assert events[0].data == {
        "id": ask.id, "tool": "Write", "input": ask.input, "reason": ask.reason, "wait_s": 60.0,
        "call": call, "rule": "Edit(/note.txt)",
    }  # fmt: skip
    assert answered(events) == [{"id": ask.id, "allowed": True, "by": "user", "reason": "allowed by user"}]


def test_a_denial_tells_the_model_who_denied_it_and_why(home: Path, project: Path) -> None:
    async def deny(run_dir: Path) -> None:
        [ask] = await waiting(run_dir)
        await asyncio.to_thread(steer.answer, run_dir, RUN, ask.id, False, "not on a Friday")

    outcome, model, events = run(home, project, [WRITE, Reply().say("ok")], ask_wait=60, during=deny)
    assert outcome.status == "blocked", "its one call that would act was denied"
    assert not (project / "note.txt").exists()
    result = tool_result(model)
    assert result["is_error"] is True
    assert result["content"].startswith("permission denied: denied by user: not on a Friday.")
    [verdict] = answered(events)
    assert (verdict["allowed"], verdict["by"]) == (False, "user")
    assert "denied by user: not on a Friday" in verdict["reason"]


@pytest.mark.parametrize("policy", ["deny", "allow"])
def test_without_an_answer_in_time_the_policy_answers(home: Path, project: Path, policy: str) -> None:
    outcome, model, events = run(home, project, [WRITE, Reply().say("ok")], ask_wait=0.3, on_ask=policy)
    assert outcome.status == ("done" if policy == "allow" else "blocked")
    assert events[1].at - events[0].at >= 0.3, "the policy answered once the wait was out, not before"
    [verdict] = answered(events)
    assert (verdict["allowed"], verdict["by"]) == (policy == "allow", "policy")
    assert (project / "note.txt").exists() == (policy == "allow")
    if policy == "deny":
        assert "no one answered within 0.3s and the run's policy is to deny" in tool_result(model)["content"]


def test_ask_wait_zero_answers_at_once_and_still_records_the_ask(home: Path, project: Path) -> None:
    outcome, model, events = run(home, project, [WRITE, Reply().say("ok")], ask_wait=0)
    assert outcome.status == "blocked"  # (run() gives the run 30 s: an ask waiting for ever fails it)
    assert [e.kind for e in events] == ["ask", "ask.answered"]
    assert events[0].data["wait_s"] == 0 and events[1].data["id"] == events[0].data["id"]
    assert (events[1].data["allowed"], events[1].data["by"]) == (False, "policy")
    assert "nobody was asked to approve it" in tool_result(model)["content"]
    assert not (project / "note.txt").exists()


def test_a_stop_while_an_ask_waits_ends_the_agent_at_once(home: Path, project: Path) -> None:
    async def stop(run_dir: Path) -> None:
        await waiting(run_dir)
        await asyncio.to_thread(steer.stop, run_dir, RUN, None)

    outcome, _, events = run(home, project, [WRITE], ask_wait=60, during=stop)
    assert (outcome.status, outcome.reason) == ("stopped", "stopped by user")
    assert events[1].at - events[0].at < 60, "the stop ended the wait, not its 60 s"
    [verdict] = answered(events)
    assert (verdict["allowed"], verdict["by"]) == (False, "stop")
    with runs.reading(home / "runs" / RUN, RUN) as reader:
        assert runs.pending_asks(reader) == [], "a stopped agent's ask does not stay pending"
        assert [c.status for c in reader.tool_calls("lead")] == ["interrupted"]
    assert not (project / "note.txt").exists()


def test_answers_to_unknown_or_answered_asks_are_refused_and_ignored_if_mailed(
    home: Path, project: Path
) -> None:
    second = Reply().call("Write", {"file_path": "two.txt", "content": "2\n"})
    refusals: list[str] = []

    async def answer_twice(run_dir: Path) -> None:
        [first] = await waiting(run_dir)
        with pytest.raises(runs.RunsError) as caught:
            steer.answer(run_dir, RUN, "ask-00000000", True)
        refusals.append(str(caught.value))
        await asyncio.to_thread(steer.answer, run_dir, RUN, first.id, True)
        while (asks := await waiting(run_dir))[0].id == first.id:  # until it is answered, the second asked
            await asyncio.sleep(0.02)
        [later] = asks
        with pytest.raises(runs.RunsError) as caught:
            steer.answer(run_dir, RUN, first.id, False)
        refusals.append(str(caught.value))
        with Mailbox(run_dir / "mailbox", RUN) as mailbox:  # past steer.answer's checks: ignored
            for ask_id in (first.id, "ask-00000000"):
                data = {"action": "answer", "ask": ask_id, "allow": False}
                mailbox.post(sender="user", recipient="supervisor", body="no", kind="control", data=data)
        await controls(run_dir, 3)
        assert [a.id for a in await waiting(run_dir)] == [later.id], "a stray answer answered nothing"
        await asyncio.to_thread(steer.answer, run_dir, RUN, later.id, False)

    steps: list[Step] = [WRITE, second, Reply().say("ok")]
    outcome, model, events = run(home, project, steps, ask_wait=60, during=answer_twice)
    assert outcome.status == "done"
    assert refusals[0].startswith("no ask 'ask-00000000' in run 'r1' (asks waiting: ask-")
    assert refusals[1].endswith("was already answered: allowed by user")
    verdicts = answered(events)
    assert [(v["allowed"], v["by"]) for v in verdicts] == [(True, "user"), (False, "user")]
    assert len({v["id"] for v in verdicts}) == 2 and len(events) == 4, "one answer per ask"
    assert (project / "note.txt").exists() and not (project / "two.txt").exists()
    assert "denied by user" in tool_result(model)["content"]


# -- teamrt answer and show ------------------------------------------------------------------------


def test_teamrt_answer_and_show(home: Path, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said: dict[str, tuple[int, str, str]] = {}

    async def answer_by_cli(run_dir: Path) -> None:
        [ask] = await waiting(run_dir)
        capsys.readouterr()
        for name, argv in {
            "show": ["show", RUN],
            "unknown ask": ["answer", RUN, "ask-12345678", "allow"],
            "allow": ["answer", RUN, ask.id, "allow", "--reason", "fine by me"],
        }.items():
            code = await asyncio.to_thread(main, argv)
            out, err = capsys.readouterr()
            said[name] = (code, out, err)
        said["id"] = (0, ask.id, "")

    outcome, _, events = run(home, project, [WRITE, Reply().say("ok")], ask_wait=60, during=answer_by_cli)
    assert outcome.status == "done" and (project / "note.txt").exists()
    ask_id = said["id"][1]
    code, out, err = said["show"]
    assert code == 0 and err == ""
    shown = out.splitlines()
    at = shown.index("asks waiting (answer with: teamrt answer r1 ASK allow|deny)")
    assert shown[at + 2].split() == [ask_id, "lead", "Write:", "note.txt"]
    code, out, err = said["unknown ask"]
    assert (code, out) == (1, "")
    assert err == f"teamrt: no ask 'ask-12345678' in run 'r1' (asks waiting: {ask_id})\n"
    code, out, err = said["allow"]
    assert code == 0 and err == "" and out.count("\n") == 1
    assert out.startswith(f"sent allow for {ask_id} to the supervisor of run r1 (message ")
    assert answered(events)[0] == {
        "id": ask_id, "allowed": True, "by": "user", "reason": "allowed by user: fine by me",
    }  # fmt: skip
    code, out, err = cli(capsys, "show", RUN)
    assert code == 0 and "asks waiting" not in out
    code, out, err = cli(capsys, "logs", RUN)
    said_by = [" ".join(line.split()[1:]) for line in out.splitlines()]  # agent, kind and summary
    assert (
        f"lead ask {ask_id} Write: note.txt (Write needs approval in default mode); waits 60s for an answer"
        in said_by
    )
    assert f"lead ask.answered {ask_id} allowed by user" in said_by
    assert f"run control user: allow {ask_id}: fine by me" in said_by


def test_teamrt_answer_mistakes_are_one_line(
    home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "runs").mkdir(parents=True)
    code, out, err = cli(capsys, "answer", "nosuchrun", "ask-12345678", "allow")
    assert (
        (code, out) == (1, "") and err.count("\n") == 1 and err.startswith("teamrt: no run named 'nosuchrun'")
    )
    code, out, err = cli(capsys, "answer", RUN, "ask-12345678", "maybe")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "argument verdict: invalid choice: 'maybe' (choose from 'allow', 'deny')" in err
    outcome, _, _ = run(home, project, [WRITE, Reply().say("ok")], ask_wait=0)  # a finished run
    assert outcome.status == "blocked"
    code, out, err = cli(capsys, "answer", RUN, "ask-12345678", "deny")
    assert (code, out, err) == (1, "", "teamrt: run 'r1' is blocked; no ask waits for an answer\n")
    assert "Traceback" not in err


# -- the team file and teamrt run ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "shown"), [("-1", "-1"), ('"5"', "'5'"), ("true", "True"), ("inf", "inf"), ("[]", "[]")]
)
def test_ask_wait_must_be_seconds(project: Path, value: str, shown: str) -> None:
    path = project / "team.toml"
    path.write_text(f"[team]\nask_wait = {value}\n")
    with pytest.raises(TeamFileError) as caught:
        load_team(path, project=project)
    assert str(caught.value) == f"{path}: [team] ask_wait must be a number of seconds, 0 or more, not {shown}"


def test_ask_wait_is_kept_with_the_run_and_run_overrides_it(project: Path) -> None:
    path = project / "team.toml"
    path.write_text('[team]\nask_wait = 90\nprompt = "go"\n')
    loaded = load_team(path, project=project)
    assert loaded.ask_wait == 90.0
    assert team_from_json(team_to_json(loaded)) == loaded
    old = {k: v for k, v in team_to_json(loaded).items() if k != "ask_wait"}  # kept by an older teamrt
    assert team_from_json(old) == dataclasses.replace(loaded, ask_wait=0.0)
    sim = Choices(model="sim")
    assert team_from_file(path, prompt=None, project=project, choices=sim)[0].ask_wait == 90.0
    no_wait = Choices(model="sim", ask_wait=0)
    assert team_from_file(path, prompt=None, project=project, choices=no_wait)[0].ask_wait == 0.0
    waits = Choices(model="sim", ask_wait=2.5)
    assert single_team("lead", project=project, choices=waits)[0].ask_wait == 2.5


def test_run_refuses_a_bad_ask_wait_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", "--prompt", "x", "--ask-wait", "-1")
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "argument --ask-wait: expected a number of seconds, 0 or more, got '-1'" in err


# -- a crash ------------------------------------------------------------------------------------------

OWNER = """
import sys
from pathlib import Path
from teamrt.models import Reply, ScriptedModel
from teamrt.team import Role, Team
from teamrt.settings import Settings
from teamrt.testing import run_on_sim

run_dir, project = Path(sys.argv[1]), Path(sys.argv[2])
lead = Role("lead", "lead", None, None, None, None, None)
team = Team(path=project / "team.toml", name="t", lead=lead, ask_wait=600)
model = ScriptedModel([Reply().call("Write", {"file_path": "note.txt", "content": "hello\\n"})])
run_on_sim(team, "go", project=project, run_dir=run_dir, settings=Settings(), models={"sim": model})
"""


def crash_while_asking(run_dir: Path, project: Path) -> str:
    """A run whose owner was SIGKILLed while its lead's ask waited; the ask's id."""
    run_dir.mkdir(parents=True)
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER), str(run_dir), str(project)], env=dict(os.environ)
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and owner.poll() is None:
            if logs.store_ready(run_dir, RUN):
                with runs.reading(run_dir, RUN) as reader:
                    asks = runs.pending_asks(reader)
                if asks:
                    owner.send_signal(signal.SIGKILL)
                    owner.wait()
                    return asks[0].id
            time.sleep(0.02)
        raise AssertionError(f"the run never asked (exit {owner.poll()})")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_resume_asks_again_under_the_id_the_crash_left(
    home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The call a crash left waiting asks again as the resumed lead goes on, under the same ask id (an
    ``ask.again`` event); its one ``ask.answered`` comes from the resumed run's policy."""
    run_dir = home / "runs" / RUN
    stale = crash_while_asking(run_dir, project)
    with pytest.raises(runs.RunsError) as caught:
        steer.answer(run_dir, RUN, stale, True)
    assert str(caught.value) == "run 'r1' crashed; resume it with teamrt resume r1"
    code, out, _ = cli(capsys, "show", RUN)
    assert code == 0 and "asks unanswered when the run crashed (teamrt resume r1 asks them again)" in out

    model = ScriptedModel([Reply().say("done")])
    store = open_store(run_dir, RUN)
    try:
        the_team = team(project, ask_wait=0, on_ask="allow")

        async def resume() -> Outcome:
            supervisor = Supervisor(
                store=store, run_dir=run_dir, team=the_team, definitions=load_definitions(project),
                project=project, settings=FAST, models={"sim": model},
            )  # fmt: skip
            return await asyncio.wait_for(supervisor.resume(), 30)

        outcome = asyncio.run(resume())
        events = store.reader.events(kinds=("ask", "ask.again", "ask.answered"))
    finally:
        store.close()
    assert outcome.status == "done"
    assert (project / "note.txt").read_text() == "hello\n", "the call was asked again, and allowed"
    kinds = [(e.kind, e.data["id"], e.data.get("by")) for e in events]
    assert kinds == [("ask", stale, None), ("ask.again", stale, None), ("ask.answered", stale, "policy")]
    assert events[1].data == {"id": stale, "wait_s": 0.0}
    assert events[2].data["allowed"] is True
    with runs.reading(run_dir, RUN) as reader:
        assert runs.pending_asks(reader) == []


def test_stop_reaches_an_agent_whose_call_is_asked_again_after_a_resume(home: Path, project: Path) -> None:
    """The lead's call is asked again before its loop runs; ``teamrt stop`` must not wait for the answer."""
    run_dir = home / "runs" / RUN
    stale = crash_while_asking(run_dir, project)
    store = open_store(run_dir, RUN)
    try:

        async def resume_then_stop() -> Outcome:
            supervisor = Supervisor(
                store=store, run_dir=run_dir, team=team(project, ask_wait=600), project=project,
                definitions=load_definitions(project), settings=FAST, models={"sim": ScriptedModel([])},
            )  # fmt: skip
            work = asyncio.create_task(supervisor.resume())
            while not store.reader.events(kinds=("ask.again",)):  # until the call is asked again
                await asyncio.sleep(0.02)
            assert [a.id for a in await waiting(run_dir)] == [stale], "asked again under its old id"
            steer.stop(run_dir, RUN, None)
            return await asyncio.wait_for(work, 30)  # the ask alone would wait 600 s

        outcome = asyncio.run(resume_then_stop())
        calls = store.reader.tool_calls("lead")
    finally:
        store.close()
    assert outcome.status == "stopped" and outcome.reason == "stopped by user"
    assert [c.status for c in calls] == ["interrupted"]
    assert not (project / "note.txt").exists()
