"""Notifications from the run's process: the ``[notify] command`` on an ask waiting, on the run's end and
on its budget near; a command that hangs or fails; and the words every surface shares (``notices``).

Runs go through the real supervisor and store on the scripted model; the command is a real program that
writes its arguments and its stdin to a file.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.models import Reply, ScriptedModel
from teamrt.runtime import notify
from teamrt.runtime.agent import Outcome
from teamrt.runtime.budget import Budget, run_budget
from teamrt.runtime.hooks import RunHooks
from teamrt.runtime.notices import BUDGET_NEAR, NOTIFY_FAILED, budget_near, notice_of, plain
from teamrt.runtime.notify import RunNotifier, run_command
from teamrt.runtime.supervisor import Supervisor
from teamrt.settings import NotifySettings, SettingsError, load_settings
from teamrt.store import EventRecord, Store, create_store
from teamrt.team import Role, Team, TeamFileError, load_team, team_to_json
from tests.helpers.teams import FAST
from tests.helpers.waiting import within

DEADLINE = 60.0
"""Bounds a hang only."""
HOSTILE = "rm -rf x\x1b]52;c;cHduZWQ=\x07\x9c\x1b\\; echo\nowned\u202e\x00\x7f"
"""An agent's command that would end an OSC early, write the clipboard and reverse the text after it."""


@pytest.fixture(autouse=True)
def _quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(notify, "POLL_S", 0.02)


def recorder(tmp_path: Path, *, exit_code: int = 0, stderr: str = "") -> tuple[tuple[str, ...], Path]:
    """A command that appends ``{"argv", "stdin"}`` to a file per call (then exits ``exit_code``, saying
    ``stderr``); the command and the file."""
    out = tmp_path / "notified.jsonl"
    script = tmp_path / "notify.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "data = json.loads(sys.stdin.read())\n"
        f"with open({str(out)!r}, 'a') as f:\n"
        "    f.write(json.dumps({'argv': sys.argv[1:], 'stdin': data}) + '\\n')\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    return (str(script), "--from", "teamrt"), out


def calls(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def wait_for(predicate: Any) -> None:
    def poll() -> None:
        while not predicate():
            time.sleep(0.01)

    within(DEADLINE, poll)


# -- the words ----------------------------------------------------------------------------------------


@pytest.mark.hostile
def test_attack_plain_text_holds_nothing_a_terminal_or_an_osc_acts_on() -> None:
    said = plain(HOSTILE + " more" * 100, 80)
    assert len(said) == 80 and said.endswith("...")
    assert not [c for c in said if unicodedata.category(c)[0] == "C" or c == ";"], said
    assert said.startswith("rm -rf x]52,c,cHduZWQ=\\, echo owned")


def test_an_ask_waiting_the_runs_end_and_its_budget_make_notices() -> None:
    ask = {"id": "ask-1", "tool": "Bash", "input": {"command": "pytest -q"}, "reason": "r", "wait_s": 30}
    notice = notice_of("ask", ask, "coder-1", "r1")
    assert notice is not None and (notice.what, notice.notification_type) == ("ask", "permission_prompt")
    assert notice.title == "teamrt r1: permission needed"
    assert notice.message == "coder-1 asks to use Bash: pytest -q (teamrt answer r1 ask-1 allow|deny)"
    assert notice_of("ask", {**ask, "wait_s": 0}, "coder-1", "r1") is None, "the policy answered it at once"
    attended = {**ask, "wait_s": None, "attended": True}  # put to the person at the run's terminal
    assert notice_of("ask", attended, "coder-1", "r1") == notice
    end = notice_of("run.status", {"status": "failed", "reason": "out of budget"}, None, "r1")
    assert end is not None and (end.what, end.notification_type) == ("end", "idle_prompt")
    assert end.title == "teamrt r1: failed"
    assert end.message == "the run failed: out of budget"
    assert notice_of("run.status", {"status": "running"}, None, "r1") is None
    assert notice_of("agent.done", {}, "lead", "r1") is None


def test_the_budget_is_near_at_its_share_of_a_limit() -> None:
    budget = run_budget(None, 2.0)
    budget.spent_usd = 1.59
    assert budget_near(budget, 0.8) is None
    budget.spent_usd = 1.6
    data = budget_near(budget, 0.8)
    assert data is not None and (data["limit"], data["max"], data["share"]) == ("usd", 2.0, 0.8)
    assert data["note"] == "80% of the run's dollar budget spent: $1.60 of $2.00"
    tokens = Budget("run", max_tokens=1000, spent_tokens=950)
    said = budget_near(tokens, 0.8)
    assert said is not None and said["note"] == "95% of the run's token budget spent: 950 of 1,000 tokens"
    assert budget_near(Budget("run"), 0.8) is None, "no limit, never near"


# -- the settings -------------------------------------------------------------------------------------


def test_the_notify_settings_are_read_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "settings.toml"
    monkeypatch.setenv("TEAMRT_SETTINGS", str(path))
    path.write_text('[notify]\ncommand = "notify-send -a \'team rt\'"\nterminal = false\nevents = ["end"]\n')
    got = load_settings().notify
    assert (got.command, got.terminal, got.events) == (("notify-send", "-a", "team rt"), "off", ("end",))
    assert load_settings().notify.timeout == 10.0
    for bad, why in [
        ('terminal = "loud"', "terminal must be"),
        ("command = [1]", "command must be"),
        ('command = "a \'b"', "cannot be split"),
        ('events = ["never"]', "events must be"),
        ("budget_share = 1.5", "budget_share must be"),
        ("timeout = 0", "timeout must be"),
        ("colour = 1", "has no setting 'colour'"),
    ]:
        path.write_text(f"[notify]\n{bad}\n")
        with pytest.raises(SettingsError, match=why):
            load_settings()


@pytest.mark.hostile
def test_attack_a_repository_cannot_set_the_notify_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command runs unconfined as the person's own: only their settings file sets it. A team file
    (the repository's) naming it is refused, and a settings file in the repository is never read."""
    project = tmp_path / "project"
    (project / ".teamrt").mkdir(parents=True)
    team_file = project / ".teamrt" / "team.toml"
    team_file.write_text('[team]\nname = "t"\n\n[notify]\ncommand = ["touch", "pwned"]\n')
    with pytest.raises(TeamFileError, match="unknown section 'notify'"):
        load_team(team_file, project=project)
    (project / ".teamrt" / "settings.toml").write_text('[notify]\ncommand = ["touch", "pwned"]\n')
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps({"notify": {"command": "touch pwned"}}))
    monkeypatch.chdir(project)
    assert load_settings().notify.command == ()


# -- the command --------------------------------------------------------------------------------------


def run_lead(
    project: Path, steps: list[Reply], notify_settings: NotifySettings, answer: Any = None, **team: Any
) -> tuple[Outcome, list[EventRecord]]:
    """The lead alone on ``steps``; ``answer(supervisor)``, if given, runs beside it (to answer asks)."""
    lead = Role("lead", "lead", None, None, None, None, "default")
    spec = Team(path=project / "team.toml", name="notified", lead=lead, **team)
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    store = create_store(
        run_dir, "r1", task="go", workdir=str(project), settings={"team": team_to_json(spec)}
    )

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=spec, definitions=load_definitions(project), project=project,
            settings=dataclasses.replace(FAST, notify=notify_settings), models={"sim": ScriptedModel(steps)},
            hooks=RunHooks(),
        )  # fmt: skip
        beside = asyncio.create_task(answer(supervisor)) if answer is not None else None
        try:
            return await asyncio.wait_for(supervisor.run("go"), DEADLINE)
        finally:
            if beside is not None:
                beside.cancel()

    try:
        return asyncio.run(go()), store.reader.events()
    finally:
        store.close()


async def answer_when_told(out: Path, supervisor: Supervisor) -> None:
    """Allow the ask the command was told of, once it was told: the ask waited for a person."""
    while not calls(out):
        await asyncio.sleep(0.01)
    told = calls(out)[0]["stdin"]
    assert supervisor.asker.answer(told["ask_id"], True, by="user")


def test_the_command_is_told_of_an_ask_waiting_and_of_the_runs_end(tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    steps = [Reply().call("Write", {"file_path": "notes.txt", "content": "x"}), Reply().say("all done")]
    outcome, events = run_lead(
        project, steps, NotifySettings(command=command, timeout=20),
        answer=lambda s: answer_when_told(out, s), ask_wait=DEADLINE,
    )  # fmt: skip
    assert outcome.status == "done" and (project / "notes.txt").read_text() == "x"
    ask, end = calls(out)
    ask_id = next(e.data["id"] for e in events if e.kind == "ask")
    asked = f"lead asks to use Write: notes.txt (teamrt answer r1 {ask_id} allow|deny)"
    assert ask["argv"] == ["--from", "teamrt", "teamrt r1: permission needed", asked]
    assert ask["stdin"] == {
        "run_id": "r1", "what": "ask", "title": ask["argv"][2], "message": ask["argv"][3],
        "notification_type": "permission_prompt", "cwd": str(project), "ask_id": ask_id, "agent": "lead",
        "tool": "Write",
    }  # fmt: skip
    assert end["argv"][2:] == ["teamrt r1: done", "the run done"]
    assert (end["stdin"]["what"], end["stdin"]["status"]) == ("end", "done")
    assert not [e for e in events if e.kind == NOTIFY_FAILED]


def test_an_ask_the_policy_answers_at_once_and_unwanted_events_tell_no_one(tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    steps = [Reply().call("Write", {"file_path": "notes.txt", "content": "x"}), Reply().say("refused")]
    outcome, _ = run_lead(project, steps, NotifySettings(command=command, events=("ask", "budget")))
    assert outcome.status != "running" and not (project / "notes.txt").exists()
    assert calls(out) == [], "nobody was waited for, and the end is not among the events wanted"


def notifier(store: Store, project: Path, settings: NotifySettings, budget: Budget) -> RunNotifier:
    return RunNotifier(store, project=project, hooks=RunHooks().hooks, settings=settings, budget=budget,
                       lead_context=lambda: None)  # fmt: skip


def test_the_budget_near_is_told_once_per_limit(tmp_path: Path) -> None:
    command, out = recorder(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store = create_store(run_dir, "r1", task="go", workdir=str(tmp_path))
    budget = run_budget(None, 1.0)
    budget.spent_usd = 0.5
    settings = NotifySettings(command=command)

    async def follow(n: RunNotifier, until: Any) -> None:
        task = asyncio.create_task(n.follow())
        while not until():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # a few more looks: nothing more is told
        task.cancel()
        await n.ended("done", None)

    def near() -> list[EventRecord]:
        return store.reader.events(kinds=(BUDGET_NEAR,))

    try:
        first = notifier(store, tmp_path, settings, budget)

        async def spend() -> None:
            await asyncio.sleep(0.1)
            budget.spent_usd = 0.85

        async def go() -> None:
            await asyncio.gather(spend(), follow(first, lambda: len(calls(out)) >= 1))

        asyncio.run(asyncio.wait_for(go(), DEADLINE))
        [event] = near()
        assert event.data["note"] == "85% of the run's dollar budget spent: $0.85 of $1.00"
        budget_call, end_call = calls(out)
        assert budget_call["argv"][2:] == ["teamrt r1: budget nearly spent", event.data["note"]]
        assert (budget_call["stdin"]["notification_type"], budget_call["stdin"]["limit"]) == (
            "budget_near",
            "usd",
        )
        assert end_call["stdin"]["what"] == "end"

        # a resume of the run does not tell it again; a budget raised (a follow-up round) may be near again
        again = notifier(store, tmp_path, settings, budget)
        asyncio.run(asyncio.wait_for(follow(again, lambda: True), DEADLINE))
        assert len(near()) == 1 and [c["stdin"]["what"] for c in calls(out)] == ["budget", "end", "end"]
        budget.max_usd, budget.spent_usd = 2.0, 1.7
        raised = notifier(store, tmp_path, settings, budget)
        asyncio.run(asyncio.wait_for(follow(raised, lambda: len(calls(out)) >= 4), DEADLINE))
        assert [e.data["max"] for e in near()] == [1.0, 2.0]
    finally:
        store.close()


def test_a_command_that_hangs_is_killed_at_its_timeout_with_all_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "hang.sh"
    script.write_text(f"#!/bin/bash\nsleep 600 &\necho $$ $! > {pids}\nwait\n")
    script.chmod(0o755)
    began = time.monotonic()
    # 2 s: long enough for the script to have started its child and said so even on a loaded machine
    failure = asyncio.run(run_command([str(script)], b"{}", 2.0, tmp_path))
    assert failure == "it did not end within 2 s and was killed"
    assert time.monotonic() - began < 20
    assert pids.exists(), "the script started its child before it was killed"
    deadline = time.monotonic() + 30
    for pid in map(int, pids.read_text().split()):  # killed: gone, or a zombie its new parent has yet to reap
        while not _dead(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _dead(pid), f"process {pid} outlived the command's timeout"


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_a_run_goes_on_past_a_hanging_command_with_one_warning(tmp_path: Path) -> None:
    script = tmp_path / "hang.sh"
    script.write_text("#!/bin/bash\nexec sleep 600\n")
    script.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    outcome, events = run_lead(
        project, [Reply().say("done")], NotifySettings(command=(str(script),), timeout=0.3)
    )
    assert outcome.status == "done"
    [failed] = [e for e in events if e.kind == NOTIFY_FAILED]
    shown = plain(str(script), 80)  # a long temporary path is shortened: the test must not hang on its length
    assert failed.data["note"] == (
        f"the [notify] command {shown} failed: it did not end within 0.3 s and was killed; the run goes on"
        " (later failures of it are not said again)"
    )


@pytest.mark.hostile
def test_attack_a_failing_commands_output_never_reaches_the_terminal_and_is_one_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    command, out = recorder(tmp_path, exit_code=3, stderr="boom\x1b]0;pwned\x07 here\nsecond line\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store = create_store(run_dir, "r1", task="go", workdir=str(tmp_path))
    try:
        n = notifier(store, tmp_path, NotifySettings(command=command), run_budget(None, None))
        ask = {"id": "ask-1", "tool": "Bash", "input": {"command": HOSTILE}, "reason": "r", "wait_s": 5}

        async def go() -> None:
            n._send(notice_of("ask", ask, "lead", "r1"))  # type: ignore[arg-type]
            await n.ended("failed", "boom")

        asyncio.run(asyncio.wait_for(go(), DEADLINE))
        failed = store.reader.events(kinds=(NOTIFY_FAILED,))
    finally:
        store.close()
    assert len(calls(out)) == 2, "both were tried"
    [warning] = failed
    assert "failed: exit code 3: boom]0,pwned here; the run goes on" in warning.data["note"]
    said = capfd.readouterr()
    assert (said.out, said.err) == ("", ""), "its output is read and dropped"
    told = calls(out)[0]
    assert not [c for c in "".join(told["argv"]) if unicodedata.category(c)[0] == "C"]
    assert told["stdin"]["message"] == told["argv"][-1]
