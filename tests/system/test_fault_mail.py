"""Faults in the mail (issue 33): a message file damaged on disk is named, told and delivered again; a team
left waiting for mail that will never come is woken, then ended with a reason, never left to hang.

The damage is done to the real file in the recipient's ``new/`` at the ``mail.delivered`` fault point,
before the recipient can read it; the runs are real teams on ``sim``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from teamrt import faults
from teamrt.agents import load_definitions
from teamrt.demos.examples import team_file
from teamrt.mailbox import Inbox, Mailbox, Message, open_watcher
from teamrt.mailbox.maildir import peek
from teamrt.models import Reply
from teamrt.runtime.losses import MAIL_QUARANTINED, RUN_STALLED
from teamrt.runtime.lostmail import LostMail, found_in_bad
from teamrt.runtime.stall import STALLED
from teamrt.runtime.supervisor import Supervisor
from teamrt.runtime.teamrun import run_team as run_team_file
from teamrt.runtime.teamrun import team_from_file
from teamrt.sim import SimRequest, SimServer
from teamrt.store import FinishedCall, Store, StoreWriteFailed, ToolUse, create_store, open_reader
from teamrt.testing import chaos
from teamrt.tools.base import ToolContext, ToolResult
from teamrt.tui.state import EVENT_TAIL
from teamrt.tui.widgets import EventLog, Totals
from tests.helpers.events import marker
from tests.helpers.teams import Kept
from tests.helpers.tuidata import coding_run, freeze
from tests.runtime.test_restore import (
    LEAD_TEAM,
    RUN,
    begin,
    crash,
    resume,
    runs_home,  # noqa: F401  (a fixture)
    scripted,
    text,
    use,
)
from tests.runtime.test_team import reviewer, run_supervised, run_team, team_lead
from tests.tui.test_app import app_on, drive, loaded, run_screen, shown, until

TEAM = """
[team]
model = "sim"
max_concurrent = 8
[roles.reviewer]
[roles.researcher]
"""
REVIEWED = "Reviewed and shut down."


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "team.toml").write_text(TEAM)
    return path


def teamrt(*args: str, project: Path) -> subprocess.CompletedProcess[str]:
    """The CLI on the project's runs, in a process of its own."""
    env = {**os.environ, "TEAMRT_HOME": str(project / ".teamrt")}
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def at_delivery(
    project: Path, sender: str, recipient: str, act: Callable[[Path, bytes, str], None]
) -> tuple[Callable[[str], None], list[str]]:
    """A ``mail.delivered`` hook that acts (``act(path, bytes, id)``) on the first message from ``sender`` to
    ``recipient`` as it lands in ``new/``, before the recipient can read it; and the list of its id."""
    hit: list[str] = []

    def hook(msg_id: str) -> None:
        path = project / ".teamrt" / "runs" / "r1" / "mailbox" / recipient / "new" / f"{msg_id}.json"
        if hit or not path.exists():
            return
        raw = path.read_bytes()
        if json.loads(raw)["from"] != sender:
            return
        hit.append(msg_id)
        act(path, raw, msg_id)

    return hook, hit


def damaging(damage: Callable[[bytes, str], bytes]) -> Callable[[Path, bytes, str], None]:
    def act(path: Path, raw: bytes, msg_id: str) -> None:
        path.write_bytes(damage(raw, msg_id))  # the file keeps its mode, 0600

    return act


DAMAGE: dict[str, Callable[[bytes, str], bytes]] = {
    "truncated JSON": lambda raw, msg_id: raw[: len(raw) // 2],
    "garbage bytes": lambda raw, msg_id: b"\x8f\x00\xfegarbage" * 16,
    "invalid UTF-8": lambda raw, msg_id: raw.replace(b"LGTM", b"LG\xff\xfeM"),
    "a wrong id": lambda raw, msg_id: raw.replace(f'"id":"{msg_id}"'.encode(), b'"id":"not-a-message-id"'),
}


def run_with(
    project: Path,
    sim: SimServer,
    hook: Callable[[str], None],
    setup: Callable[[Supervisor], None] | None = None,
) -> tuple[Any, Kept]:
    with faults.inject("mail.delivered", hook):
        if setup is not None:
            return run_supervised(project, sim, "Get the plan reviewed.", setup, hang=60)
        return run_team(project, sim, "Get the plan reviewed.", hang=60)


# -- a damaged message is named, and delivered again ------------------------------------


@pytest.mark.hostile
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_message_is_named_once_and_delivered_again_from_the_runs_record(
    kind: str, project: Path, sim: SimServer
) -> None:
    """The reviewer's "LGTM" to the lead is damaged before the lead reads it: before, the lead waited for
    it for ever; now it is delivered again under its own id and the lead's answer is the undamaged run's."""
    sim.policies.update({"lead": team_lead, "reviewer": reviewer})
    hook, damaged = at_delivery(project, "reviewer", "lead", damaging(DAMAGE[kind]))
    outcome, store = run_with(project, sim, hook)
    assert (outcome.status, outcome.answer) == ("done", REVIEWED), outcome
    [msg_id] = damaged
    reader = store.reader
    [event] = reader.events(kinds=(MAIL_QUARANTINED,))
    assert event.agent == "lead"
    assert {k: event.data[k] for k in ("id", "sender", "redelivered", "told")} == {
        "id": msg_id,
        "sender": "reviewer",
        "redelivered": True,
        "told": [],
    }
    assert f"mail to lead (id {msg_id}, from reviewer) was damaged on disk" in event.data["note"]
    assert f"set aside: delivered again from the run's record ({event.data['reason']})" in event.data["note"]
    bad = project / ".teamrt" / "runs" / "r1" / "mailbox" / "lead" / "bad" / event.data["file"]
    assert bad.exists(), "the damaged file is kept in bad/"
    lgtm = [m for m in reader.mail("lead") if m.message["body"] == "LGTM"]
    assert [m.id for m in lgtm] == [msg_id], "read once, under the id its sender was told"
    assert not any("damaged on disk" in m.message["body"] for m in reader.mail()), "nothing lost: no tell"

    logs = teamrt("logs", "r1", project=project)
    assert logs.returncode == 0, logs.stderr
    [line] = [x for x in logs.stdout.splitlines() if MAIL_QUARANTINED in x]
    assert line.split()[1:3] == ["lead", MAIL_QUARANTINED], line
    assert f"mail to lead (id {msg_id}, from reviewer) was damaged on disk and set aside: delivered" in line
    show = teamrt("show", "r1", project=project)
    assert show.returncode == 0, show.stderr
    said = show.stdout.split("mail set aside (damaged on disk; teamrt logs r1 has when)\n", 1)
    assert len(said) == 2 and said[1].startswith(f"  mail to lead (id {msg_id}, from reviewer)"), show.stdout
    as_json = json.loads(teamrt("show", "r1", "--json", project=project).stdout)["mail_set_aside"]
    assert [(m["agent"], m["id"], m["sender"], m["redelivered"]) for m in as_json] == [
        ("lead", msg_id, "reviewer", True)
    ]


# -- no record: the recipient and the sender are told, once -------------------------------


def a_store(tmp_path: Path) -> tuple[Store, Mailbox]:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r1", task="t", workdir=str(tmp_path))
    mailbox = Mailbox(run_dir / "mailbox", "r1")
    for name in ("lead", "reviewer", "supervisor"):
        mailbox.register(name)
    return store, mailbox


def set_aside(mailbox: Mailbox, msg: Message, damage: Callable[[bytes, str], bytes]) -> None:
    """Deliver ``msg``, damage its file, and let an inbox with no one to tell set it aside (a run that
    crashed right after)."""
    mailbox.deliver(msg)
    path = mailbox.root / msg.recipient / "new" / f"{msg.id}.json"
    path.write_bytes(damage(path.read_bytes(), msg.id))

    async def drain() -> None:
        watcher = open_watcher()
        try:
            async with Inbox(mailbox, msg.recipient, watcher=watcher) as inbox:
                while (other := inbox.poll()) is not None:  # mail read before (a tell): not this one
                    assert other.id != msg.id
                    inbox.ack(other)
                assert inbox.quarantined == 1
        finally:
            watcher.close()

    asyncio.run(drain())


def handle_all(store: Store, mailbox: Mailbox, alive: set[str], record: Message | None = None) -> list[Any]:
    """What a (resumed) run does with the files in every ``bad/``: a process of its own each call."""

    async def go() -> list[Any]:
        lost = LostMail(
            store, mailbox, tell_from="supervisor", alive=alive.__contains__, busy=lambda name: None
        )
        if record is not None:
            lost.remember(record)
        said = []
        watcher = open_watcher()
        try:
            for name in ("lead", "reviewer"):
                async with Inbox(mailbox, name, watcher=watcher) as inbox:
                    said += await lost.scan(found_in_bad(inbox))
        finally:
            watcher.close()
        return said

    return asyncio.run(go())


@pytest.mark.hostile
@pytest.mark.usefixtures("store_db")
def test_mail_with_no_record_is_told_to_recipient_and_sender_exactly_once(tmp_path: Path) -> None:
    store, mailbox = a_store(tmp_path)
    try:
        msg = Message.compose(run="r1", sender="reviewer", recipient="lead", body="LGTM")
        set_aside(mailbox, msg, DAMAGE["truncated JSON"])
        [said] = handle_all(store, mailbox, {"lead", "reviewer"})
        assert (said.sender, said.redelivered, said.told) == ("reviewer", False, ["lead", "reviewer"])
        assert handle_all(store, mailbox, {"lead", "reviewer"}) == [], "a second look (a resume) tells no one"
        [event] = store.reader.events(kinds=(MAIL_QUARANTINED,))
        assert event.data["note"].startswith(f"mail to lead (id {msg.id}, from reviewer) was damaged on disk")
        assert f"set aside: told lead and reviewer; it is lost ({event.data['reason']})" in event.data["note"]
        to_lead = [m for m in peek_all(mailbox, "lead") if m["from"] == "supervisor"]
        to_reviewer = [m for m in peek_all(mailbox, "reviewer") if m["from"] == "supervisor"]
        assert [m["body"] for m in to_lead] == [
            f"A message to you (id {msg.id}, from reviewer) was damaged on disk and set aside"
            f" ({event.data['reason']}); ask reviewer to send it again."
        ]
        assert len(to_reviewer) == 1 and to_reviewer[0]["body"].startswith(f"Your message {msg.id} to lead")

        garbage = Message.compose(run="r1", sender="reviewer", recipient="lead", body="x")
        set_aside(mailbox, garbage, DAMAGE["garbage bytes"])
        [said] = handle_all(store, mailbox, {"lead"})  # the sender cannot be read: only the recipient is told
        assert (said.sender, said.told) == (None, ["lead"])
        assert "from unknown sender" in store.reader.events(kinds=(MAIL_QUARANTINED,))[-1].data["note"]
    finally:
        mailbox.close()
        store.close()


def peek_all(mailbox: Mailbox, name: str) -> list[dict[str, Any]]:
    return list(peek(mailbox.root, name))


async def sent_by_tool(store: Store, msg: Message) -> None:
    """The store's record of ``msg``: the reviewer's send_message call, done, its result naming the id."""
    await store.add_agent("reviewer", kind="team", model="sim", parent=None, role="reviewer", definition={},
                          workspace=None, branch=None, budget_tokens=None, budget_usd=None)  # fmt: skip
    epoch = await store.begin_epoch("reviewer")
    call = ToolUse("call-1", "send_message", {"to": "lead", "body": msg.body, "summary": "approved"}, False)
    content = [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input}]
    await store.append_turn("reviewer", epoch=epoch, role="assistant", content=content, tool_uses=[call])
    await store.move_tool_call(call.id, "running")
    result = [{"type": "tool_result", "tool_use_id": call.id, "content": f"delivered {msg.id} to lead"}]
    await store.append_turn("reviewer", epoch=epoch, role="user", content=result,
                            finished=[FinishedCall(call.id, "done", result)])  # fmt: skip


@pytest.mark.hostile
def test_a_resumed_run_delivers_again_from_the_store_what_a_crashed_run_set_aside(tmp_path: Path) -> None:
    store, mailbox = a_store(tmp_path)
    try:
        msg = Message.compose(run="r1", sender="reviewer", recipient="lead", body="LGTM", summary="approved")
        asyncio.run(sent_by_tool(store, msg))
        set_aside(mailbox, msg, DAMAGE["invalid UTF-8"])
        [said] = handle_all(store, mailbox, {"lead", "reviewer"})
        assert (said.msg_id, said.sender, said.redelivered, said.told) == (msg.id, "reviewer", True, [])
        assert handle_all(store, mailbox, {"lead", "reviewer"}) == []
        assert len(store.reader.events(kinds=(MAIL_QUARANTINED,))) == 1

        async def read() -> list[Message]:
            watcher = open_watcher()
            try:
                async with Inbox(mailbox, "lead", watcher=watcher) as inbox:
                    got = []
                    while (m := inbox.poll()) is not None:
                        got.append(m)
                    return got
            finally:
                watcher.close()

        [again] = asyncio.run(read())
        assert (again.id, again.sender, again.kind, again.body, again.summary) == (
            msg.id, "reviewer", "message", "LGTM", "approved"
        )  # fmt: skip
    finally:
        mailbox.close()
        store.close()


# -- no silent hang --------------------------------------------------------------------


def lead_after_ready(request: SimRequest) -> Reply:
    """``team_lead``, but spawning the reviewer waiting for its first answer: the reviewer has idled (its busy
    mark cleared) before the lead's "Please review" goes out and is lost, the order these tests are about,
    held by the spawn rather than left to which agent's call comes back first."""
    if not request.calls("spawn_agent"):
        return Reply().call(
            "spawn_agent",
            {"kind": "team", "role": "reviewer", "directives": ["Review plans when asked."], "wait": True},
        )
    return team_lead(request)


def quick_watchdog(supervisor: Supervisor) -> None:
    supervisor.watchdog.settle = 0.5


def removing(path: Path, raw: bytes, msg_id: str) -> None:
    path.unlink()


@pytest.mark.hostile
def test_a_lead_whose_awaited_mail_is_lost_is_woken_and_the_run_says_it_stalled(
    project: Path, sim: SimServer
) -> None:
    """The reviewer's "LGTM" file is removed: before, the lead waited for ever (busy for mail that never
    came); now it is woken once, answers, and the run's reason and events say the team stalled."""
    sim.policies.update({"lead": team_lead, "reviewer": reviewer})
    hook, removed = at_delivery(project, "reviewer", "lead", removing)
    outcome, store = run_with(project, sim, hook, setup=quick_watchdog)
    assert removed, "the reviewer's answer was removed"
    assert outcome.status == "done" and outcome.answer == "Waiting for the team."
    assert "the team stalled 1 time (every agent idle, no mail in flight)" in (outcome.reason or "")
    [event] = store.reader.events(kinds=(RUN_STALLED,))
    assert event.data["woke"] == "lead" and "every agent is idle" in event.data["note"]
    woken = [
        m
        for m in store.reader.mail("lead")
        if m.sender == "supervisor" and "every agent" in m.message["summary"]
    ]
    assert len(woken) == 1


@pytest.mark.hostile
@pytest.mark.usefixtures("store_db")
def test_a_team_that_stays_stalled_after_the_wake_ends_failed_with_the_reason(
    project: Path, sim: SimServer
) -> None:
    """The lead's "Please review" is removed: the reviewer stays marked busy, so the lead cannot end; woken,
    it idles again with nothing moving, and the run ends failed with the reason instead of hanging."""
    sim.policies.update({"lead": lead_after_ready, "reviewer": reviewer})
    hook, removed = at_delivery(project, "lead", "reviewer", removing)
    outcome, store = run_with(project, sim, hook, setup=quick_watchdog)
    assert removed
    assert (outcome.status, outcome.reason) == ("failed", STALLED)
    run = store.reader.run()
    assert (run.status, run.status_reason) == ("failed", STALLED)
    woke, failed = store.reader.events(kinds=(RUN_STALLED,))
    assert woke.data["woke"] == "lead"
    assert failed.data["note"].startswith(f"{STALLED}; the lead was woken 1 time and nothing moved")
    assert {a.name: a.status for a in store.reader.agents()} == {"lead": "stopped", "reviewer": "stopped"}
    logs = teamrt("logs", "r1", project=project)
    [_, line] = [x for x in logs.stdout.splitlines() if RUN_STALLED in x]
    assert f"{STALLED}; the lead was woken" in line, logs.stdout


@pytest.mark.usefixtures("store_db")
def test_a_store_that_stops_while_every_agent_idles_ends_the_run_in_its_failure(
    project: Path, sim: SimServer
) -> None:
    """The lead's request to the reviewer is lost, so both idle on their inboxes; then the store stops (its
    last write, then nothing: a full disk), and the stall watchdog is kept out of the way. Before, the
    team waited for ever for mail no agent could write any more; now every agent is stopped and the run
    ends with the store's failure."""
    sim.policies.update({"lead": lead_after_ready, "reviewer": reviewer})
    stopped = StoreWriteFailed("the run store", "no space left on device (a test)")
    running: list[Supervisor] = []
    hook, lost = at_delivery(project, "lead", "reviewer", removing)

    def setup(supervisor: Supervisor) -> None:
        supervisor.watchdog.settle = 3600.0  # no rescue by the stall watchdog
        running.append(supervisor)
        told = supervisor.watchdog.waiting

        def waiting(now: bool) -> None:
            told(now)
            if now and lost and supervisor.store.failure is None and supervisor.idling.all_waiting():
                supervisor.store.stop_after(lambda conn: None, stopped)

        supervisor.watchdog.waiting = waiting  # type: ignore[method-assign,assignment]

    with pytest.raises(StoreWriteFailed) as raised, faults.inject("mail.delivered", hook):
        run_supervised(project, sim, "Get the plan reviewed.", setup, hang=60)
    assert lost, "the request was lost, so every agent idled"
    assert raised.value is stopped, raised.value
    assert all(m.done.done() for m in running[0].members.values()), "no agent is left waiting"


class Slow:
    """A tool that takes ``seconds`` (a build, a test run)."""

    name = "slow"
    description = "takes a while"
    input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    read_only = True

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(self.seconds)
        return ToolResult("finished")


def with_slow_tool(supervisor: Supervisor) -> None:
    quick_watchdog(supervisor)
    supervisor.tools["slow"] = Slow(2.0)  # four settle periods


def test_idle_teammates_while_the_lead_works_and_a_lead_idle_while_a_child_works_are_no_stall(
    project: Path, sim: SimServer
) -> None:
    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call("spawn_agent", {"kind": "team", "role": "researcher", "directives": ["idle"],
                                                "wait": False})  # fmt: skip
        if not request.calls("slow"):
            return Reply().call("slow", {})  # the teammate idles meanwhile
        if request.calls("spawn_agent") < 2:
            return Reply().call("spawn_agent", {"kind": "team", "role": "reviewer", "directives": ["work"],
                                                "wait": False})  # fmt: skip
        if 'kind="result"' in request.all_text() or "reviewer is idle" in request.all_text():
            return Reply().say("all done")
        return Reply().say("waiting for the reviewer")  # idles while the reviewer works

    def busy_reviewer(request: SimRequest) -> Reply:
        return Reply().call("slow", {}) if not request.calls("slow") else Reply().say("worked")

    sim.policies.update(
        {"lead": lead, "researcher": lambda request: Reply().say("idle now"), "reviewer": busy_reviewer}
    )
    outcome, store = run_supervised(project, sim, "go", with_slow_tool, hang=60)
    assert (outcome.status, outcome.answer, outcome.reason) == ("done", "all done", None)
    assert store.reader.events(kinds=(RUN_STALLED,)) == []


# -- the TUI ---------------------------------------------------------------------------


def test_the_run_view_keeps_a_loss_in_its_header_after_the_event_log_has_moved_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    runs = tmp_path / "home" / "runs"
    note = "mail to lead (id 01M8GWCGSW9M4JH0BAHJQTBRE2, from reviewer) was damaged on disk: told lead"

    async def make() -> Store:
        store = await coding_run(runs)
        await store.append_event(MAIL_QUARANTINED, {"note": note}, agent="lead")
        for i in range(EVENT_TAIL + 5):  # the event log's tail no longer holds it
            await store.append_event(marker("noted"), {"i": i})
        return store

    store = asyncio.run(make())
    freeze(runs / "run-demo")
    app, _ = app_on(runs)

    async def steps(pilot: Pilot[None]) -> None:
        await until(pilot, loaded(app))
        state = run_screen(app).state
        assert state is not None and [e.kind for e in state.losses] == [MAIL_QUARANTINED]
        assert MAIL_QUARANTINED not in shown(run_screen(app).query_one(EventLog))
        assert f"1 loss: {note}" in shown(run_screen(app).query_one(Totals))

    try:
        drive(app, steps, size=(240, 45))
    finally:
        store.close()


# -- the coding example ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.hostile
def test_the_coding_team_with_a_damaged_review_request_still_reports_every_review(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33's item 5 as it was found: a coder's diff to the reviewer damaged on disk. Before, the lead
    waited for the third review for ever; now the diff is delivered again and every review is in."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = chaos.prepare("coding", tmp_path)
    damaged: list[str] = []

    def hook(msg_id: str) -> None:
        [path] = (tmp_path / "home" / "runs").glob(f"*/mailbox/reviewer/new/{msg_id}.json") or [None]
        if damaged or path is None or b"REVIEW of task" not in path.read_bytes():
            return
        damaged.append(msg_id)
        path.write_bytes(path.read_bytes()[:200])

    team, task = team_from_file(team_file("coding"), prompt=None, project=project)

    async def go() -> Any:
        run = run_team_file(team, task, project=project, definitions=load_definitions(project), run_id="r1")
        return await asyncio.wait_for(run, 240)

    with faults.inject("mail.delivered", hook):
        summary = asyncio.run(go())
    assert damaged, "a review request was damaged"
    outcome = summary.outcome
    assert outcome.status == "done", outcome
    answer = outcome.answer
    assert "3 of 3 coders merged their fixes" in answer and "Reviews from reviewer (3 of 3 fixes):" in answer
    assert "waiting for" not in answer
    reader = open_reader(tmp_path / "home" / "runs" / "r1", "r1")
    try:
        [event] = reader.events(kinds=(MAIL_QUARANTINED,))
    finally:
        reader.close()
    assert (event.agent, event.data["id"], event.data["redelivered"]) == ("reviewer", damaged[0], True)
    assert event.data["sender"].startswith("coder")


# -- a resumed run -----------------------------------------------------------------------


@pytest.mark.hostile
@pytest.mark.usefixtures("runs_home")
def test_a_resumed_run_delivers_again_the_mail_it_finds_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run crashed with the teammate's "LGTM" to the lead unread, and the file was damaged meanwhile:
    the resume sets it aside as it restores the lead, then delivers it again from the teammate's call in
    the store, and the lead reads it."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, LEAD_TEAM)
    call = use("toolu_lgtm", "send_message", to="lead", body="LGTM", summary="approved")

    async def build() -> str:
        store = scene.store
        await store.add_agent("mate", kind="team", model="sim", parent="lead", role="mate")
        epoch = await store.begin_epoch("mate")
        await store.append_turn(
            "lead", epoch=scene.epoch, role="assistant", content=[text("waiting for mate")]
        )
        await store.append_turn("mate", epoch=epoch, role="user", content=[text("review the plan")])
        uses = [ToolUse(call["id"], call["name"], call["input"], False)]
        await store.append_turn("mate", epoch=epoch, role="assistant", content=[call], tool_uses=uses)
        await store.move_tool_call(call["id"], "running")
        with Mailbox(scene.run_dir / "mailbox", RUN) as mailbox:
            for agent in ("lead", "mate"):
                mailbox.register(agent)
            msg = mailbox.post(sender="mate", recipient="lead", body="LGTM", summary="approved", epoch=epoch)
        result = [
            {"type": "tool_result", "tool_use_id": call["id"], "content": f"delivered {msg.id} to lead"}
        ]
        await store.append_turn("mate", epoch=epoch, role="user", content=result,
                                finished=[FinishedCall(call["id"], "done", result)])  # fmt: skip
        await store.append_turn("mate", epoch=epoch, role="assistant", content=[text("sent")])
        await store.set_agent_status("mate", "idle")
        return msg.id

    msg_id = scene.call(build())
    path = scene.run_dir / "mailbox" / "lead" / "new" / f"{msg_id}.json"
    path.write_bytes(path.read_bytes()[:100])
    crash(scene)
    model = scripted({"lead": [Reply().say("mate approved")]})
    assert resume(monkeypatch, model).outcome.answer == "mate approved"
    [request] = model.requests
    assert f'<mail id="{msg_id}" from="mate"' in str(request.messages[-1]["content"]) and "LGTM" in str(
        request.messages[-1]["content"]
    )
    reader = open_reader(scene.run_dir, RUN)
    try:
        [event] = reader.events(kinds=(MAIL_QUARANTINED,))
        assert [m.id for m in reader.mail("lead")] == [msg_id]
    finally:
        reader.close()
    assert (event.agent, event.data["id"], event.data["sender"]) == ("lead", msg_id, "mate")
    assert (event.data["redelivered"], event.data["how"]) == (True, "delivered again from the run's record")


def test_an_inbox_says_when_its_reader_starts_and_stops_waiting_once_each_not_at_every_rescan(
    tmp_path: Path,
) -> None:
    """What the stall watchdog hears: no event per rescan (that would be polling), one per change."""
    said: list[bool] = []
    with Mailbox(tmp_path / "mailbox", "r1") as mailbox:
        for name in ("lead", "reviewer"):
            mailbox.register(name)

        async def go() -> Message:
            watcher = open_watcher()
            try:
                async with Inbox(mailbox, "lead", watcher=watcher, on_wait=said.append) as inbox:
                    reading = asyncio.create_task(inbox.next())
                    await asyncio.sleep(2.5)  # two rescans and more
                    assert said == [True] and inbox.waiting
                    mailbox.post(sender="reviewer", recipient="lead", body="LGTM")
                    got = await asyncio.wait_for(reading, 30)
                    assert not inbox.waiting
                    return got
            finally:
                watcher.close()

        assert asyncio.run(go()).body == "LGTM"
    assert said == [True, False]
