"""Follow-ups (``teamrt continue``): a run that ended goes on as a new round of the same run, its lead's
conversation kept byte for byte, through the real supervisor, store and mailbox, the model scripted; the
refusals, each one line with nothing changed; a SIGKILL in the middle of a round, finished by a resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import teamrt
from teamrt.api import RunResult, result_of
from teamrt.models import ModelRequest, ModelResponse, Reply, ScriptedModel, Usage
from teamrt.models.scripted import Step
from teamrt.runs import steer
from teamrt.runtime.continuing import STOPPED_CALL, NotContinued, continue_run
from teamrt.runtime.losses import STORE_BEHIND
from teamrt.runtime.teamrun import NoPrompt
from teamrt.store import (
    InvalidTransition,
    RunOwned,
    StoreError,
    StoreReader,
    create_store,
    integrity,
    open_reader,
)
from teamrt.store.integrity import StoreBehind
from teamrt.store.ownership import OwnerLock
from teamrt.store.rounds import CONTINUED, rounds_of
from teamrt.team import Role, Team, team_to_json
from teamrt.testing import run_on_sim
from tests.helpers.teams import FAST
from tests.helpers.waiting import within

RUN = "r1"
ROUNDS_PROC = "tests.helpers.procs.rounds"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "notes.txt").write_text("the notes\n")
    return path


def solo(project: Path, **kw: Any) -> Team:
    return Team(path=project, name="solo", lead=Role("lead", "lead"), model="sim", **kw)


def first_round(
    home: Path, team: Team, steps: list[Step], prompt: str = "go"
) -> tuple[RunResult, ScriptedModel]:
    model = ScriptedModel(steps)
    result = run_on_sim(
        team, prompt, project=team.path, run_dir=home / "runs" / RUN, models={"sim": model}, settings=FAST,
        timeout=60,
    )  # fmt: skip
    return result, model


def go_on(prompt: str, steps: list[Step], **kw: Any) -> tuple[RunResult, ScriptedModel]:
    model = ScriptedModel(steps)
    work = continue_run(RUN, prompt, models={"sim": model}, settings=FAST, **kw)
    return result_of(asyncio.run(asyncio.wait_for(work, 60))), model


def reading(home: Path) -> StoreReader:
    return open_reader(home / "runs" / RUN, RUN)


def dumped(messages: list[Any]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def costly(text: str, usd: float, *, call: dict[str, Any] | None = None) -> Step:
    """A turn that costs ``usd`` (the scripted model prices nothing): its text, or a call."""

    def step(request: ModelRequest) -> ModelResponse:
        block = (
            {"type": "tool_use", "id": "toolu_costly_read", "name": "Read", "input": call} if call else None
        )
        content = [block] if block else [{"type": "text", "text": text}]
        stop = "tool_use" if block else "end_turn"
        return ModelResponse("msg_costly", request.model, content, stop, Usage(1000, 20), cost_usd=usd)

    return step


def test_a_done_run_goes_on_with_the_prompt_as_a_new_user_turn_after_its_whole_history(
    home: Path, project: Path
) -> None:
    first, model1 = first_round(
        home, solo(project), [Reply().call("Read", {"file_path": "notes.txt"}), Reply().say("first answer")]
    )
    assert (first.status, first.answer) == ("done", "first answer")
    second, model2 = go_on("now the second part", [Reply().say("second answer")])
    assert (second.run_id, second.run_dir, second.status, second.answer) == (
        RUN, first.run_dir, "done", "second answer"
    )  # fmt: skip
    [before], [after] = model1.requests[-1:], model2.requests
    assert after.system == before.system and after.tools == before.tools, "the cached prefix is the same"
    kept = [*before.messages, {"role": "assistant", "content": [{"type": "text", "text": "first answer"}]}]
    assert dumped(after.messages[: len(kept)]) == dumped(kept), "earlier messages byte for byte"
    assert after.messages[len(kept) :] == [
        {"role": "user", "content": [{"type": "text", "text": "now the second part"}]}
    ]
    reader = reading(home)
    try:
        run = reader.run()
        [continued] = reader.events(kinds=(CONTINUED,))
        assert (continued.data["round"], continued.data["prompt"], continued.data["previous"]) == (
            2, "now the second part", "done"
        )  # fmt: skip
        rounds = rounds_of(run, reader.events())
        assert [(r.number, r.prompt, r.status) for r in rounds] == [
            (1, "go", "done"), (2, "now the second part", "done")
        ]  # fmt: skip
        assert run.status == "done" and reader.agent("lead").status == "done"
        assert not reader.events(kinds=("run.resumed",)), "a round is no crash's resume"
    finally:
        reader.close()


def test_a_stopped_lead_gets_results_for_the_calls_its_stop_cut_short_then_the_prompt(
    home: Path, project: Path
) -> None:
    """Round one's lead waits on an ask for a Write when the run is stopped: its call has no result. The
    round gives it one (not run, check its effects), then the prompt, in one user turn."""
    run_dir = home / "runs" / RUN

    def stop_once_asked() -> None:
        def asked() -> None:
            while True:
                try:
                    reader = open_reader(run_dir, RUN)
                except StoreError:  # not made yet
                    reader = None
                if reader is not None:
                    try:
                        if reader.events(kinds=("ask",)):
                            steer.stop(run_dir, RUN, None)
                            return
                    finally:
                        reader.close()
                threading.Event().wait(0.02)

        within(30, asked)

    stopper = threading.Thread(target=stop_once_asked, daemon=True)
    stopper.start()
    write = Reply().call("Write", {"file_path": "out.txt", "content": "x\n"}, id="toolu_write")
    first, _ = first_round(home, solo(project, ask_wait=60.0), [write])
    stopper.join(30)
    assert (first.status, first.reason) == ("stopped", "stopped by user")
    second, model = go_on("finish it another way", [Reply().say("done another way")])
    assert (second.status, second.answer) == ("done", "done another way")
    last = model.requests[0].messages[-1]
    assert last == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_write", "content": STOPPED_CALL, "is_error": True},
            {"type": "text", "text": "finish it another way"},
        ],
    }
    assert not (project / "out.txt").exists(), "the cut-short call was not run again"
    reader = reading(home)
    try:
        [call] = reader.tool_calls("lead")
        assert call.status == "interrupted"
    finally:
        reader.close()


def test_a_run_out_of_budget_goes_on_only_with_a_raised_budget_above_what_it_spent(
    home: Path, project: Path
) -> None:
    first, _ = first_round(
        home, solo(project, budget_usd=0.25), [costly("", 0.20, call={"file_path": "notes.txt"})]
    )
    assert first.status == "stopped", first.reason
    assert (first.reason or "").startswith("budget exhausted: run dollar budget")
    with pytest.raises(NotContinued, match=r"ran out of its budget \(\$0\.25, \$0\.2000 spent\); continue it"
                       r" with --budget-usd N, the run's new total \(above \$0\.2000\)$"):  # fmt: skip
        go_on("more", [])
    with pytest.raises(
        NotContinued, match=r"^--budget-usd 0\.05 is not above the \$0\.2000 run r1 has spent"
    ):
        go_on("more", [], budget_usd=0.05)
    reader = reading(home)
    try:
        assert reader.run().status == "stopped" and not reader.events(kinds=(CONTINUED,)), "nothing changed"
    finally:
        reader.close()
    second, _ = go_on("more", [costly("read it", 0.05)], budget_usd=1.0)
    assert (second.status, second.answer, second.budget_usd) == ("done", "read it", 1.0)
    assert second.cost_usd == pytest.approx(0.25)
    reader = reading(home)
    try:
        run = reader.run()
        assert (run.budget_usd, run.settings["team"]["budget_usd"]) == (1.0, 1.0), "kept for a resume"
    finally:
        reader.close()


def test_max_turns_bounds_the_lead_in_the_round(home: Path, project: Path) -> None:
    first_round(home, solo(project), [Reply().say("one")])
    read = Reply().call("Read", {"file_path": "notes.txt"})
    second, _ = go_on("keep reading", [read, read], max_turns=2)
    assert (second.status, second.reason) == ("stopped", "reached its limit of 2 turns")


def test_a_live_run_is_refused_pointing_to_send_and_a_crashed_one_to_resume(
    home: Path, project: Path
) -> None:
    run_dir = home / "runs" / RUN
    run_dir.mkdir(parents=True)
    settings = {"team": team_to_json(solo(project))}
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings=settings)
    try:
        with pytest.raises(
            NotContinued, match=r"^run r1 is still running: tell its lead with teamrt send r1"
        ):
            go_on("more", [])
    finally:
        store.close()  # gives its ownership up, as no crash does: the row is left as a crash leaves it below
    gone = subprocess.Popen(["true"])
    gone.wait()
    from sqlalchemy import update

    from teamrt.store import tables as t
    from teamrt.store.engine import store_url, writer_engine

    engine = writer_engine(store_url(run_dir))
    with engine.connect() as conn, conn.begin():
        owner = {"owner_host": os.uname().nodename, "owner_pid": gone.pid, "owner_start_time": 1}
        conn.execute(
            update(t.runs).where(t.runs.c.id == RUN).values(**owner, owner_since=0.0, heartbeat_at=0.0)
        )
    engine.dispose()
    with pytest.raises(NotContinued, match=r"^run r1 crashed .*: finish it first with teamrt resume r1"):
        go_on("more", [])


def test_no_prompt_and_an_unknown_run_are_one_line(home: Path, project: Path) -> None:
    first_round(home, solo(project), [Reply().say("one")])
    with pytest.raises(NoPrompt, match="continue run r1 with a prompt"):
        go_on("  ", [])
    with pytest.raises(teamrt.UserError, match="no run named 'r9'"):
        asyncio.run(continue_run("r9", "more"))


def test_a_finished_run_cannot_be_set_running_again_but_by_a_round(home: Path, project: Path) -> None:
    from teamrt.store import open_store

    first_round(home, solo(project), [Reply().say("one")])
    store = open_store(home / "runs" / RUN, RUN)
    try:
        with pytest.raises(InvalidTransition, match="'done' to 'running \\(continue it"):
            asyncio.run(store.set_run_status("running"))
    finally:
        store.close()


@pytest.mark.hostile
def test_a_done_run_whose_lock_a_process_holds_is_refused_and_left_as_it_was(
    home: Path, project: Path
) -> None:
    """The store says done, yet a process holds the run directory's lock (a tampered row, or an owner that
    wrote done and lives on): the round is refused by the lock, cleanly, before anything is written."""
    first_round(home, solo(project), [Reply().say("one")])
    run_dir = home / "runs" / RUN
    holder = OwnerLock(run_dir, RUN)
    holder.acquire()
    try:
        with pytest.raises(RunOwned):
            go_on("more", [])
    finally:
        holder.release()
    reader = reading(home)
    try:
        assert reader.run().status == "done" and not reader.events(kinds=(CONTINUED,))
        assert [t.role for t in reader.turns("lead")] == ["user", "assistant"]
    finally:
        reader.close()


def test_the_public_api_continues_a_run_with_a_follow_up(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.procs import rounds as play

    (project / "team.toml").write_text('[team]\nname = "rounds"\nmodel = "sim"\n\n[lead]\nagent = "lead"\n')
    with play.server(kill=False) as sim:
        monkeypatch.setattr("teamrt.sim._shared", sim)
        first = teamrt.run("round one", team=project / "team.toml", project=project, run_id=RUN)
        second = teamrt.continue_run(RUN, play.PROMPT, project=project)
    assert (first.answer, second.run_id, second.status, second.answer) == (
        play.ROUND_ONE, RUN, "done", play.ROUND_TWO
    )  # fmt: skip
    assert second.turns == 2, "the round's turns: its Glob, then its answer"


@pytest.mark.slow
def test_a_round_killed_in_the_middle_is_finished_once_by_teamrt_resume(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``teamrt continue`` process is SIGKILLed while its lead's second turn of round two is
    being answered (its Glob's result kept); ``teamrt.resume`` finishes the round: the prompt read once,
    the round's answer given once, the run done with it."""
    from tests.helpers.procs import rounds as play

    (project / "team.toml").write_text('[team]\nname = "rounds"\nmodel = "sim"\n\n[lead]\nagent = "lead"\n')
    with play.server(kill=False) as sim:
        monkeypatch.setattr("teamrt.sim._shared", sim)
        first = teamrt.run("round one", team=project / "team.toml", project=project, run_id=RUN)
        assert (first.status, first.answer) == ("done", play.ROUND_ONE)
        child = subprocess.run(
            [sys.executable, "-m", ROUNDS_PROC, RUN, play.PROMPT], cwd=REPO, env=dict(os.environ),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert child.returncode == -signal.SIGKILL, child.stderr
        reader = reading(home)
        try:
            assert reader.run().status == "running", "killed as a crash leaves it"
            assert len(reader.events(kinds=(CONTINUED,))) == 1
        finally:
            reader.close()
        result = teamrt.resume(RUN, project=project)
    assert (result.status, result.answer) == ("done", play.ROUND_TWO)
    reader = reading(home)
    try:
        turns = reader.turns("lead")
        texts = [b.get("text") for t in turns for b in t.content if b.get("type") == "text"]
        assert texts.count(play.PROMPT) == 1 and texts.count(play.ROUND_TWO) == 1, texts
        assert len(reader.events(kinds=(CONTINUED,))) == 1 and len(reader.events(kinds=("run.resumed",))) == 1
        rounds = rounds_of(reader.run(), reader.events())
        assert [(r.number, r.status) for r in rounds] == [(1, "done"), (2, "done")]
    finally:
        reader.close()


def test_a_store_behind_its_run_directory_is_refused_unless_the_loss_is_accepted(
    home: Path, project: Path
) -> None:
    """As ``teamrt resume`` does: the run directory counts commits the store does not have (a WAL lost, a
    database restored from an older backup), so a round would redo that work in silence."""
    first, _ = first_round(home, solo(project), [Reply().say("first answer")])
    assert first.status == "done"
    run_dir = home / "runs" / RUN
    sidecar = integrity.sidecar_path(run_dir)
    counted = integrity.read_sidecar(run_dir)
    assert counted is not None
    sidecar.write_text(str(counted + 3))  # the store now lacks three commits the directory saw
    with pytest.raises(StoreBehind) as refused:
        go_on("the second part", [Reply().say("never")])
    said = str(refused.value)
    assert said.startswith(f"run {RUN} was not continued: ") and "\n" not in said, said
    assert f"teamrt continue {RUN} --accept-loss goes on" in said, said
    reader = reading(home)
    try:
        assert reader.run().status == "done" and not reader.events(kinds=(CONTINUED,)), "nothing changed"
    finally:
        reader.close()
    second, _ = go_on("the second part", [Reply().say("second answer")], accept_loss=True)
    assert (second.status, second.answer) == ("done", "second answer")
    reader = reading(home)
    try:
        [behind] = reader.events(kinds=(STORE_BEHIND,))
        assert "3 commits behind" in str(behind.data.get("note")), behind.data
    finally:
        reader.close()
