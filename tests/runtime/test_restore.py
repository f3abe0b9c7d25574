"""Every reconciliation step of a resume, driven from a store built to the state a crash leaves.

No kill: each test writes the run's store with the real store API (turns with their tool calls journaled
``pending`` or ``running``, mail, tasks, merges, events), real git worktrees and a real maildir, leaves
the run as a dead owner does (status ``running``, an owner process that is gone, the lock free), then
resumes it through ``resume_run``, the code path of ``teamrt resume``. Only the model is scripted.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections import deque
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from teamrt import faults, home
from teamrt.mailbox import Mailbox
from teamrt.mailbox.maildir import peek
from teamrt.models import ModelRequest, ModelResponse, Reply, ScriptedModel
from teamrt.models.scripted import Step
from teamrt.models.types import OnRestart, OnText
from teamrt.procs import is_running, process_start_time
from teamrt.runtime import teamrun
from teamrt.runtime.asking import NOT_ASKED_AGAIN
from teamrt.runtime.restore import INTERRUPTED
from teamrt.runtime.spawning import FORK_PLACEHOLDER
from teamrt.runtime.teamrun import RunSummary, resume_run
from teamrt.store import FinishedCall, Store, ToolUse, create_store, open_reader, owner_alive
from teamrt.store import tables as t
from teamrt.store.engine import store_url, writer_engine
from teamrt.team import load_team, team_to_json
from teamrt.worktree import GitRepo, Worktrees
from teamrt.worktree.checkout import ship
from tests.helpers.git import git, make_repo

pytestmark = pytest.mark.usefixtures("store_db")

RUN = "20261125-000000-built"
LEAD_TEAM = """
[team]
name = "t"
model = "sim"
on_ask = "deny"
max_agents = 6
[roles.mate]
agent = "reviewer"
[permissions]
allow = ["Write", "Bash(echo:*)"]
"""
ASKING_TEAM = """
[team]
name = "t"
model = "sim"
on_ask = "allow"
ask_wait = 0
"""
CODER_TEAM = """
[team]
name = "t"
model = "sim"
[roles.coder]
"""
GATED_TEAM = CODER_TEAM + '[merge]\ngates = ["true"]\n'
"""Its gate never runs here: a merge recorded on resume had passed it before the crash."""
APP = "def add(a, b):\n    return a - b\n"


@dataclass
class Scene:
    """A run being built: its project, directory and store, and the lead's conversation so far."""

    project: Path
    run_dir: Path
    store: Store
    epoch: int = 0

    def call(self, coro: Awaitable[Any]) -> Any:
        return asyncio.run(_awaited(coro))


async def _awaited(coro: Awaitable[Any]) -> Any:
    return await coro


@pytest.fixture
def runs_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv(home.HOME_ENV, str(path))
    return path


def begin(tmp_path: Path, project: Path, team_text: str, base: str | None = None) -> Scene:
    """A new run of the team ``team_text`` in ``project`` (kept as ``teamrt run`` keeps it, from commit
    ``base`` in git), its lead added and given the task."""
    team_file = tmp_path / "team.toml"
    team_file.write_text(team_text)
    team = load_team(team_file, project=project)
    kept: dict[str, Any] = {"team": team_to_json(team)}
    if base is not None:
        kept |= {"integration_branch": f"teamrt/{RUN}", "gates": list(team.gates)}
    run_dir = home.run_dir(RUN)
    store = create_store(run_dir, RUN, task="go", workdir=str(project), base_head=base, settings=kept)
    scene = Scene(project, run_dir, store)

    async def lead() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
        scene.epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=scene.epoch, role="user", content=[text("go")])

    scene.call(lead())
    return scene


def text(said: str) -> dict[str, Any]:
    return {"type": "text", "text": said}


def use(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


async def last_turn(
    scene: Scene, agent: str, calls: list[dict[str, Any]], read_only: frozenset[str] = frozenset()
) -> None:
    """``agent``'s assistant turn calling ``calls``, each journaled ``pending`` (read-only as named)."""
    uses = [ToolUse(c["id"], c["name"], c["input"], c["id"] in read_only) for c in calls]
    await scene.store.append_turn(agent, epoch=scene.epoch, role="assistant", content=calls, tool_uses=uses)


def crash(scene: Scene) -> None:
    """Leave the run as a SIGKILLed owner does: still ``running``, its owner a process that is gone
    (its heartbeat recent), the lock free. The store's close gives up its ownership, so the dead owner is
    written after it, as the killed owner, which never closed, left the row."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = scene.store.owner
    scene.store.close()
    engine = writer_engine(store_url(scene.run_dir))
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(
                update(t.runs)
                .where(t.runs.c.id == RUN)
                .values(
                    owner_host=owner.host, owner_pid=gone.pid, owner_start_time=1,
                    owner_since=owner.since, heartbeat_at=time.time(),
                )
            )  # fmt: skip
    finally:
        engine.dispose()
    reader = open_reader(scene.run_dir, RUN)
    try:
        run = reader.run()
        assert run.status == "running" and run.owner is not None and run.owner.pid == gone.pid
        assert not owner_alive(run), "teamrt sees the run as crashed"
    finally:
        reader.close()


def scripted(scripts: dict[str, list[Step]]) -> ScriptedModel:
    """One model for the run's agents, answering each agent from its own script (their order between
    agents is not fixed); the requests are kept in ``model.requests``."""
    queues = {agent: deque(steps) for agent, steps in scripts.items()}

    def step(request: ModelRequest) -> Any:
        answer = queues[request.agent or ""].popleft()
        return answer(request) if callable(answer) else answer

    return ScriptedModel([step] * sum(len(q) for q in queues.values()))


def resume(monkeypatch: pytest.MonkeyPatch, model: ScriptedModel) -> RunSummary:
    """``teamrt resume RUN`` in this process, its model ``model``."""
    monkeypatch.setattr(teamrun, "open_model", lambda name, **_: model)
    return asyncio.run(asyncio.wait_for(resume_run(RUN), 60))


def requests_of(model: ScriptedModel, agent: str) -> list[ModelRequest]:
    return [r for r in model.requests if r.agent == agent]


def results(request: ModelRequest) -> dict[str, tuple[str, bool]]:
    """The tool results the request's last user turn carries: (text, is_error) by call id."""
    blocks = request.messages[-1]["content"]
    return {
        b["tool_use_id"]: (str(b["content"]), bool(b.get("is_error")))
        for b in blocks
        if b.get("type") == "tool_result"
    }


@pytest.fixture
def leftover() -> Iterator[subprocess.Popen[bytes]]:
    """A process a crashed run's command left running, in a process group of its own."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


# -- the last turn's unfinished calls ---------------------------------------------------------------------


def test_unfinished_calls_are_run_rerun_or_reported_interrupted_and_leftover_processes_killed(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch, leftover: subprocess.Popen[bytes]
) -> None:
    """The crash came during the lead's last turn: a Bash call had appended to ran.log and left a process
    running, a read-only Read was running, a Read and a Write had not started. On resume the pending
    calls run, the running Read runs again, the Bash is not run again (ran.log keeps one line) but
    reported interrupted, and the process it left is killed."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("the notes\n")
    scene = begin(tmp_path, project, LEAD_TEAM)
    calls = [
        use("toolu_bash", "Bash", command="echo ran >> ran.log"),
        use("toolu_read_running", "Read", file_path="notes.txt"),
        use("toolu_read_pending", "Read", file_path="notes.txt"),
        use("toolu_write", "Write", file_path="new.txt", content="written once\n"),
    ]
    start = process_start_time(leftover.pid)
    assert start is not None

    async def build() -> None:
        await last_turn(
            scene, "lead", calls, read_only=frozenset({"toolu_read_running", "toolu_read_pending"})
        )
        await scene.store.move_tool_call("toolu_bash", "running")
        await scene.store.record_tool_process("toolu_bash", leftover.pid, start)
        (project / "ran.log").write_text("ran\n")  # the command's effect, before the crash
        await scene.store.move_tool_call("toolu_read_running", "running")

    scene.call(build())
    crash(scene)
    model = scripted({"lead": [Reply().say("went on")]})
    summary = resume(monkeypatch, model)

    assert not is_running(leftover.pid, start), "killed before the lead went on"
    assert summary.outcome.status == "done" and summary.outcome.answer == "went on"
    assert (project / "ran.log").read_text() == "ran\n", "the side-effecting call was not run again"
    said = results(model.requests[0])
    assert list(said) == [c["id"] for c in calls], "one result per call, in the turn's order"
    assert said["toolu_bash"] == (INTERRUPTED, True)
    assert said["toolu_read_running"] == ("     1\tthe notes", False), "a read-only call runs again"
    assert said["toolu_read_pending"] == ("     1\tthe notes", False), "a call never started runs"
    assert said["toolu_write"][1] is False and (project / "new.txt").read_text() == "written once\n"
    reader = open_reader(scene.run_dir, RUN)
    try:
        journal = {c.id: c.status for c in reader.tool_calls("lead")}
    finally:
        reader.close()
    assert journal == {
        "toolu_bash": "interrupted", "toolu_read_running": "done", "toolu_read_pending": "done",
        "toolu_write": "done",
    }  # fmt: skip


def test_team_calls_cut_short_are_completed_exactly_once(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the lead's team calls was running when the run crashed; half of them had done their work.
    The message delivered is not sent again and the one not delivered is sent; the task created is not
    created again and the other is; the task claimed is held, the other claimed now."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, LEAD_TEAM)
    calls = [
        use("toolu_sent", "send_message", to="mate", body="A: look at parse()"),
        use("toolu_unsent", "send_message", to="mate", body="B: and at render()"),
        use("toolu_created", "task_create", subject="write the docs"),
        use("toolu_uncreated", "task_create", subject="write the tests"),
        use("toolu_claimed", "task_claim", task_id=1),
        use("toolu_unclaimed", "task_claim", task_id=2),
    ]

    async def build() -> None:
        store = scene.store
        await store.add_agent("mate", kind="team", model="sim", parent="lead", role="mate")
        await store.begin_epoch("mate")
        await store.set_agent_status("mate", "done", "shut down")  # its mail stays in its mailbox
        await store.create_task("fix parse", "", created_by="lead")
        await store.create_task("review", "", created_by="lead")
        await last_turn(scene, "lead", calls)
        for call in calls:
            await store.move_tool_call(call["id"], "running")
        with Mailbox(scene.run_dir / "mailbox", RUN) as mailbox:  # what the cut-short calls had done
            for agent in ("lead", "mate"):
                mailbox.register(agent)
            mailbox.post(sender="lead", recipient="mate", body="A: look at parse()", kind="message",
                         summary="A", epoch=scene.epoch)  # fmt: skip
        await store.create_task("write the docs", "", created_by="lead")
        await store.claim_task(1, "lead")

    scene.call(build())
    crash(scene)
    model = scripted({"lead": [Reply().say("delegated")]})
    assert resume(monkeypatch, model).outcome.status == "done"

    reader = open_reader(scene.run_dir, RUN)
    try:
        tasks = [(task.id, task.subject, task.owner) for task in reader.tasks()]
    finally:
        reader.close()
    assert tasks == [
        (1, "fix parse", "lead"), (2, "review", "lead"), (3, "write the docs", None),
        (4, "write the tests", None),
    ], "each task created once, both claims held"  # fmt: skip
    bodies = sorted(m["body"] for m in peek(scene.run_dir / "mailbox", "mate") if m["from"] == "lead")
    assert bodies == ["A: look at parse()", "B: and at render()"], "each message delivered once"
    said = results(model.requests[0])
    assert all(not error for _, error in said.values()), said
    assert said["toolu_sent"][0].startswith("delivered ") and said["toolu_sent"][0].endswith(" to mate")
    assert said["toolu_unsent"][0].startswith("delivered ") and said["toolu_unsent"] != said["toolu_sent"]
    assert said["toolu_created"][0] == "created task 3: write the docs"
    assert said["toolu_uncreated"][0] == "created task 4: write the tests"
    assert said["toolu_claimed"][0].startswith("you hold task 1: fix parse")
    assert said["toolu_unclaimed"][0].startswith("you hold task 2: review")


class AfterMate(ScriptedModel):
    """A scripted model whose lead answers only once the teammate ``mate`` has ended, so the lead's end
    (which stops whoever is left) cannot race the teammate's own."""

    def __init__(self, run_dir: Path, steps: list[Step]) -> None:
        super().__init__(steps)
        self.run_dir = run_dir

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        deadline = asyncio.get_running_loop().time() + 30  # bounds a hang only
        while request.agent == "lead" and mate_status(self.run_dir) == "running":
            assert asyncio.get_running_loop().time() < deadline, "the teammate never ended"
            await asyncio.sleep(0.01)
        return await super().complete(request, on_text=on_text, on_restart=on_restart)


def mate_status(run_dir: Path) -> str:
    reader = open_reader(run_dir, RUN)
    try:
        return reader.agent("mate").status
    finally:
        reader.close()


def test_a_teammate_that_accepted_a_shutdown_and_kept_its_answer_finishes_without_another_turn(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crash came after the teammate's accepted shutdown was kept, before it finished: on resume it
    finishes at once, as it would have, and its model is not called again (a teammate that went on would
    idle until the run's end stopped it, its last result reaching a lead that had ended)."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, LEAD_TEAM)
    request = use("toolu_ask", "request_shutdown", agent="mate", reason="the review is done")
    accept = use("toolu_accept", "respond_shutdown", to="lead", accept=True, reason="all reviewed")

    async def build() -> None:
        store = scene.store
        await last_turn(scene, "lead", [request])
        sent = done(request, "sent")
        await store.append_turn("lead", epoch=scene.epoch, role="user", content=[sent],
                                finished=[FinishedCall(request["id"], "done", [sent])])  # fmt: skip
        await store.add_agent("mate", kind="team", model="sim", parent="lead", role="mate")
        epoch = await store.begin_epoch("mate")
        await store.append_turn("mate", epoch=epoch, role="user", content=[text("review the plan")])
        uses = [ToolUse(accept["id"], accept["name"], accept["input"], False)]
        await store.append_turn("mate", epoch=epoch, role="assistant", content=[accept], tool_uses=uses)
        said = done(accept, "delivered to lead; you finish after this turn")
        await store.append_turn("mate", epoch=epoch, role="user", content=[said],
                                finished=[FinishedCall(accept["id"], "done", [said])])  # fmt: skip
        await store.set_agent_status("mate", "running")

    scene.call(build())
    crash(scene)
    model = AfterMate(scene.run_dir, [Reply().say("the team is done")])
    assert resume(monkeypatch, model).outcome.status == "done"
    assert [r.agent for r in model.requests] == ["lead"], "the teammate's model was not called again"
    reader = open_reader(scene.run_dir, RUN)
    try:
        mate = reader.agent("mate")
    finally:
        reader.close()
    assert (mate.status, mate.status_reason) == ("done", "all reviewed")


def done(call: dict[str, Any], said: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call["id"], "content": said}


def test_a_spawn_cut_short_gets_the_answers_of_the_children_it_made_and_of_those_it_had_not(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lead's spawn of two forks was running: the first fork had been created and given its directive,
    the second not yet. On resume the first goes on from its kept turns (its directive not given twice),
    the second is created with its own directive, and the spawn's result is both their answers."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, LEAD_TEAM)
    spawn = use("toolu_spawn", "spawn_agent", kind="fork", directives=["look at A", "look at B"])

    async def build() -> None:
        store = scene.store
        await last_turn(scene, "lead", [spawn])
        await store.move_tool_call("toolu_spawn", "running")
        await store.add_agent("lead-fork", kind="fork", model="sim", parent="lead", role="fork",
                              workspace=str(project))  # fmt: skip
        epoch = await store.begin_epoch("lead-fork")
        copy = [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [spawn]}]
        await store.append_turn("lead-fork", epoch=epoch, role="compaction", content=copy)
        placeholder = {"type": "tool_result", "tool_use_id": "toolu_spawn", "content": FORK_PLACEHOLDER}
        first = [placeholder, text("look at A")]
        await store.append_turn("lead-fork", epoch=epoch, role="user", content=first)
        await store.append_event(
            "spawn", {"kind": "fork", "children": ["lead-fork"], "wait": True}, agent="lead"
        )  # the spawn had logged the child it made

    scene.call(build())
    crash(scene)
    model = scripted({
        "lead-fork": [Reply().say("A is fine")], "lead-fork-1": [Reply().say("B is broken")],
        "lead": [Reply().say("reviewed")],
    })  # fmt: skip
    summary = resume(monkeypatch, model)

    reader = open_reader(scene.run_dir, RUN)
    try:
        forks = sorted(a.name for a in reader.agents() if a.kind == "fork")
        spawns = [(e.agent, e.data["children"]) for e in reader.events(kinds=("spawn",))]
    finally:
        reader.close()
    assert forks == ["lead-fork", "lead-fork-1"], "no child made twice"
    assert spawns == [("lead", ["lead-fork"]), ("lead", ["lead-fork-1"])], "each spawn logged once"
    assert summary.outcome.status == "done"
    (went_on,) = requests_of(model, "lead-fork")
    directives = [b["text"] for m in went_on.messages for b in m["content"] if b.get("type") == "text"]
    assert directives == ["go", "look at A"], "the fork went on from its kept turns"
    (made,) = requests_of(model, "lead-fork-1")
    assert made.messages[-1]["content"][-1] == text("look at B"), "the missing fork got the second directive"
    (lead,) = requests_of(model, "lead")
    assert results(lead) == {
        "toolu_spawn": ("## lead-fork: done\nA is fine\n\n## lead-fork-1: done\nB is broken", False)
    }


# -- asks --------------------------------------------------------------------------------------------------


def test_an_ask_the_crash_left_unanswered_is_asked_again_under_its_id(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lead's Write (still pending: a call is asked about before it runs) was waiting for a person when
    the run crashed. The resume keeps that ask open and the call asks again under its id (``ask.again``);
    the run's policy allows it this time and the Write runs. One ask, one answer."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, ASKING_TEAM)
    write = use("toolu_write", "Write", file_path="note.txt", content="hello\n")
    stale = {"id": "ask-0000dead", "tool": "Write", "input": write["input"], "reason": "asks", "wait_s": 600,
             "call": "toolu_write"}  # fmt: skip

    async def build() -> None:
        await last_turn(scene, "lead", [write])
        await scene.store.append_event("ask", stale, agent="lead")

    scene.call(build())
    crash(scene)
    model = scripted({"lead": [Reply().say("noted")]})
    assert resume(monkeypatch, model).outcome.status == "done"

    reader = open_reader(scene.run_dir, RUN)
    try:
        asks = [(e.kind, e.data) for e in reader.events(kinds=("ask", "ask.again", "ask.answered"))]
    finally:
        reader.close()
    assert [(kind, data["id"]) for kind, data in asks] == [
        ("ask", stale["id"]), ("ask.again", stale["id"]), ("ask.answered", stale["id"]),
    ]  # fmt: skip
    assert (asks[2][1]["by"], asks[2][1]["allowed"]) == ("policy", True)
    assert (project / "note.txt").read_text() == "hello\n", "the call ran once allowed"
    assert results(model.requests[0])["toolu_write"][1] is False


def test_an_ask_whose_call_is_not_asked_again_is_closed_by_resume(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open ask of a call the resumed lead does not make again (its last turn has no such call) is
    closed ``by resume`` once the lead has settled its calls: no ask looks pending for ever."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, ASKING_TEAM)
    stale = {"id": "ask-0000beef", "tool": "Write", "input": {"file_path": "x"}, "reason": "asks",
             "wait_s": 600, "call": "toolu_gone"}  # fmt: skip

    async def build() -> None:
        await last_turn(scene, "lead", [use("toolu_write", "Write", file_path="note.txt", content="hi\n")])
        await scene.store.append_event("ask", stale, agent="lead")

    scene.call(build())
    crash(scene)
    model = scripted({"lead": [Reply().say("noted")]})
    assert resume(monkeypatch, model).outcome.status == "done"
    reader = open_reader(scene.run_dir, RUN)
    try:
        asks = [(e.kind, e.data) for e in reader.events(kinds=("ask", "ask.again", "ask.answered"))]
    finally:
        reader.close()
    closed = [data for kind, data in asks if kind == "ask.answered" and data["id"] == stale["id"]]
    assert [(c["by"], c["allowed"], c["reason"]) for c in closed] == [("resume", False, NOT_ASKED_AGAIN)]
    assert not any(kind == "ask.again" and data["id"] == stale["id"] for kind, data in asks)
    answered = [data["id"] for kind, data in asks if kind == "ask.answered"]
    assert sorted(answered) == sorted(data["id"] for kind, data in asks if kind == "ask"), "one answer each"


# -- git: merges and worktrees ------------------------------------------------------------------------------


@dataclass
class Coder:
    scene: Scene
    repo: GitRepo
    worktrees: Worktrees
    base: str
    integration: str
    epoch: int


def begin_coder(tmp_path: Path, team_text: str) -> Coder:
    """A run in a git repository whose lead's spawn of one worktree coder is running, the coder added with
    its checkout and given its directive."""
    project = make_repo(tmp_path / "project", {"app.py": APP})
    repo = GitRepo.find(project)
    assert repo is not None
    base = git(project, "rev-parse", "HEAD")
    integration = f"teamrt/{RUN}"
    scene = begin(tmp_path, project, team_text, base)
    worktrees = Worktrees(
        repo=repo, store=scene.store, run_dir=scene.run_dir, run_id=RUN, base=base, project=project,
        integration=integration, gates=(), gate_timeout=60,
    )  # fmt: skip  # the crashed owner's gates passed; the resumed run's are the team's
    spawn = use("toolu_spawn", "spawn_agent", kind="worktree", role="coder", directives=["fix add"])

    async def build() -> int:
        store = scene.store
        await last_turn(scene, "lead", [spawn])
        await store.move_tool_call("toolu_spawn", "running")
        checkout = await worktrees.create("coder", "lead")
        await store.add_agent("coder", kind="worktree", model="sim", parent="lead", role="coder",
                              workspace=str(checkout.workspace), branch=checkout.branch)  # fmt: skip
        await store.append_event("worktree.created", {"base": checkout.base}, agent="coder")
        epoch = await store.begin_epoch("coder")
        await store.append_turn("coder", epoch=epoch, role="user", content=[text("fix add")])
        return epoch

    epoch = scene.call(build())
    return Coder(scene, repo, worktrees, base, integration, epoch)


def fix(path: Path) -> None:
    """The coder's change, committed in its checkout as the agent would (its own identity and objects)."""
    (path / "app.py").write_text(APP.replace("a - b", "a + b"))
    git(path, "commit", "-qam", "fix add")


class Crashed(Exception):
    """Raised at a fault point: the owner stops there as if killed."""


def test_a_merge_made_but_not_recorded_is_recorded_on_resume_and_not_made_again(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue merged the coder's branch and moved the integration branch; the crash came before the
    merge was recorded (its row still ``merging``). The resume records it as merged, the integration
    branch keeps its tip (no second merge commit), and the lead hears the gates' results were lost."""
    coder = begin_coder(tmp_path, GATED_TEAM)
    scene = coder.scene

    def cut(_: str) -> None:
        raise Crashed

    async def build() -> None:
        checkout = coder.worktrees.checkouts["coder"]
        answer = [text("Fixed add.")]
        await scene.store.append_turn("coder", epoch=coder.epoch, role="assistant", content=answer)
        fix(checkout.path)
        await scene.store.set_agent_status("coder", "merging")
        with faults.inject("merge.after_ref", cut), pytest.raises(Crashed):
            await coder.worktrees.land("coder", "Fixed add.", 1)

    scene.call(build())
    reader = open_reader(scene.run_dir, RUN)
    (merge,) = reader.merges()
    reader.close()
    assert merge.status == "merging", "the crash came before the merge was recorded"
    tip = git(scene.project, "rev-parse", coder.integration)
    assert git(scene.project, "merge-base", "--is-ancestor", merge.head, tip) == ""
    crash(scene)
    model = scripted({"lead": [Reply().say("merged")]})
    summary = resume(monkeypatch, model)

    assert summary.outcome.status == "done" and summary.merged == 1
    assert git(scene.project, "rev-parse", coder.integration) == tip, "not merged again"
    merges = git(scene.project, "rev-list", "--merges", f"{coder.base}..{coder.integration}").splitlines()
    assert len(merges) == 1
    reader = open_reader(scene.run_dir, RUN)
    try:
        (merge,) = reader.merges()
        agent = reader.agent("coder")
    finally:
        reader.close()
    recorded = (merge.status, merge.output, merge.merged_commit, merge.attempts)
    assert recorded == ("merged", "recorded on resume", tip, 1), "recorded once, not queued again"
    assert agent.status == "done" and agent.status_reason is not None
    assert agent.status_reason.endswith("the gates' results were lost in a crash"), agent.status_reason
    said, error = results(model.requests[0])["toolu_spawn"]
    assert not error and said.startswith("## coder: done (merged onto") and "lost in a crash" in said


@pytest.mark.parametrize("landed", [True, False], ids=["from-its-branch", "from-its-base"])
def test_a_lost_worktree_is_made_again_from_its_branch_or_its_base(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    """The coder's worktree directory was lost with the crash. It is made again from the coder's branch
    when its work had landed there (its commit kept), else from the base it was cut from (what it had
    not committed to a branch is gone); the coder goes on in it, and its work is merged."""
    coder = begin_coder(tmp_path, CODER_TEAM)
    scene = coder.scene
    checkout = coder.worktrees.checkouts["coder"]
    fix(checkout.path)
    if landed:
        shipped = scene.call(asyncio.to_thread(ship, coder.repo, checkout))
        assert git(scene.project, "rev-parse", checkout.branch) == shipped
    shutil.rmtree(checkout.path)  # lost
    crash(scene)
    seen: dict[str, str] = {}

    def look(request: ModelRequest) -> Reply:
        seen["app"] = (checkout.path / "app.py").read_text()
        seen["head"] = git(checkout.path, "rev-parse", "HEAD")
        return Reply().say("Done.")

    model = scripted({"coder": [look], "lead": [Reply().say("finished")]})
    summary = resume(monkeypatch, model)

    assert summary.outcome.status == "done"
    reader = open_reader(scene.run_dir, RUN)
    try:
        status_reason = reader.agent("coder").status_reason or ""
    finally:
        reader.close()
    if landed:
        assert seen["app"] == APP.replace("a - b", "a + b") and seen["head"] == shipped, "its commit kept"
        merged = git(scene.project, "show", f"{coder.integration}:app.py")
        assert merged == APP.replace("a - b", "a + b").strip() and summary.merged == 1
    else:
        assert seen == {"app": APP, "head": coder.base}, "made again from its base"
        assert status_reason == "no changes to merge" and summary.merged == 0
