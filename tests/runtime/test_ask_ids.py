"""Asks keep their ids across a resume (``HumanAsker.carry``), and "allow always" by mail writes the rule
(``teamrt answer --always``, the TUI's ``A``): real stores, mailboxes and files, the model scripted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from teamrt.agents import load_definitions
from teamrt.models import Reply, ScriptedModel
from teamrt.runs import query as runs
from teamrt.runs import steer
from teamrt.runtime.asking import Ask, HumanAsker
from teamrt.runtime.supervisor import Supervisor
from teamrt.store import Store, create_store
from teamrt.team import Role, Team, team_to_json
from tests.helpers.teams import FAST

RUN = "r1"


def new_store(tmp_path: Path) -> Store:
    (tmp_path / "run").mkdir()
    return create_store(tmp_path / "run", RUN, task="go", workdir=str(tmp_path))


def lead_team(project: Path, **fields: object) -> Team:
    lead = Role("lead", "lead", None, None, None, None, None)
    return Team(path=project / "team.toml", name="t", lead=lead, **fields)  # type: ignore[arg-type]


def test_a_carried_ask_answered_by_its_old_id_before_its_call_asks_again(tmp_path: Path) -> None:
    """``teamrt answer RUN ask-old`` typed while the resume starts: kept, and it answers the call when
    the call asks again (``ask.again``, no new ask, one ``ask.answered``)."""
    store = new_store(tmp_path)
    ask = Ask("lead", "Write", {"file_path": "a.txt", "content": "x"}, "needs approval", "toolu_1")

    async def scene() -> bool:
        old = {"id": "ask-0000beef", "tool": "Write", "input": ask.input, "reason": ask.reason, "wait_s": 600,
               "call": "toolu_1"}  # fmt: skip
        other = {**old, "id": "ask-0000dead", "call": "toolu_9"}
        await store.append_event("ask", old, agent="lead")
        await store.append_event("ask", other, agent="coder")
        asker = HumanAsker(store, policy="deny", wait_s=0)
        closed = await asker.carry(store.reader.events(kinds=("ask", "ask.answered")), live={"lead"})
        assert closed == ["ask-0000dead"], "an ended agent's ask is closed at once"
        assert asker.answer("ask-0000beef", True, by="user", reason="fine")
        assert not asker.answer("ask-0000beef", False, by="user"), "one answer per ask"
        answer = await asker(ask)
        assert await asker.release() == []
        return answer.allowed

    try:
        assert asyncio.run(scene()) is True
        events = [(e.kind, e.data["id"], e.data.get("by")) for e in
                  store.reader.events(kinds=("ask", "ask.again", "ask.answered"))]  # fmt: skip
    finally:
        store.close()
    assert events == [
        ("ask", "ask-0000beef", None), ("ask", "ask-0000dead", None),
        ("ask.answered", "ask-0000dead", "resume"), ("ask.again", "ask-0000beef", None),
        ("ask.answered", "ask-0000beef", "user"),
    ]  # fmt: skip


def test_a_new_call_like_a_carried_one_but_of_another_call_id_gets_its_own_id(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    ask = Ask("lead", "Write", {"file_path": "a.txt"}, "needs approval", "toolu_2")

    async def scene() -> list[str]:
        old = {"id": "ask-0000beef", "tool": "Write", "input": ask.input, "reason": "r", "wait_s": 0,
               "call": "toolu_1"}  # fmt: skip
        await store.append_event("ask", old, agent="lead")
        asker = HumanAsker(store, policy="deny", wait_s=0)
        await asker.carry(store.reader.events(kinds=("ask",)), live={"lead"})
        await asker(ask)
        return await asker.release("lead")

    try:
        assert asyncio.run(scene()) == ["ask-0000beef"], "not asked again: closed by resume"
        ids = [e.data["id"] for e in store.reader.events(kinds=("ask",))]
    finally:
        store.close()
    assert len(ids) == 2 and ids[1] != "ask-0000beef"


def test_allow_always_by_mail_writes_the_rule_and_later_calls_are_not_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``teamrt answer RUN ASK allow --always`` while the lead's Write waits: the run writes
    ``Edit(/note.txt)`` to the project's .claude/settings.local.json (past its own guard, which keeps the
    file), the Write runs, and the lead's second Write of that file runs unasked."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    run_dir = tmp_path / "home" / "runs" / RUN
    run_dir.mkdir(parents=True)
    team = lead_team(project, ask_wait=60.0)
    first = Reply().call("Write", {"file_path": "note.txt", "content": "one\n"})
    second = Reply().call("Write", {"file_path": "note.txt", "content": "two\n"})
    model = ScriptedModel([first, second, Reply().say("done")])
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(team)})
    said: list[str] = []

    async def go() -> str:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project), project=project,
            settings=FAST, models={"sim": model},
        )  # fmt: skip
        work = asyncio.create_task(supervisor.run("go"))
        while not (asks := await asyncio.to_thread(pending, run_dir)):
            await asyncio.sleep(0.02)
        with pytest.raises(runs.RunsError) as caught:
            steer.answer(run_dir, RUN, asks[0].id, False, always=True)
        said.append(str(caught.value))
        await asyncio.to_thread(steer.answer, run_dir, RUN, asks[0].id, True, always=True)
        return (await asyncio.wait_for(work, 30)).status

    try:
        assert asyncio.run(go()) == "done"
        events = [(e.kind, e.data) for e in store.reader.events(kinds=("ask", "ask.answered"))]
        moved = store.reader.events(kinds=("protected.quarantined",))
    finally:
        store.close()
    assert said == ["allow always goes with allow, not deny"]
    assert [kind for kind, _ in events] == ["ask", "ask.answered"], "the second Write was not asked"
    assert events[0][1]["rule"] == "Edit(/note.txt)"
    answered = events[1][1]
    assert (answered["allowed"], answered["always"]) == (True, "Edit(/note.txt)")
    assert answered["said"] == "teamrt: added Edit(/note.txt) to .claude/settings.local.json"
    assert (project / "note.txt").read_text() == "two\n"
    settings = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert settings == {"permissions": {"allow": ["Edit(/note.txt)"]}}
    assert moved == [], "the run's guard kept the person's change, moving nothing"


def pending(run_dir: Path) -> list[runs.PendingAsk]:
    with runs.reading(run_dir, RUN) as reader:
        return runs.pending_asks(reader)
