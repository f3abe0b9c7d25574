"""Faults of a run's owner and lease, on real processes, real git and both databases (issue 33's "Also
found"): a stopped owner is "not responding", not "crashed"; the merge queue of an owner taken over from
moves no branch and charges no attempt, and a lost race on the branch is retried; Ctrl-C with an idle
teammate ends in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from teamrt import faults
from teamrt.agents import load_definitions
from teamrt.models.reply import Reply
from teamrt.procs import own_identity
from teamrt.runs import query as runs
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.sim import SimServer
from teamrt.sim.plays.conversation import first_text
from teamrt.sim.policy import SimRequest
from teamrt.store import MergeRecord, RunNotFound, RunTakenOver, Store, create_store, open_reader, open_store
from teamrt.store.engine import store_url
from teamrt.store.errors import SchemaTooOld
from teamrt.store.ownership import HOST_ENV, host_identity
from teamrt.store.records import Owner
from teamrt.team import load_team
from teamrt.tui.app import TeamApp
from teamrt.tui.widgets import KeyTable
from teamrt.worktree import GitRepo, Worktrees
from teamrt.worktree.queue import MOVED_RETRIES, RETRIED, IntegrationMoved, MergeQueue, Verdict
from tests.helpers.git import git, make_repo, run_worktree_team
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import FAST

DEADLINE_S = 60.0
STAND_BY = "Stand by for review requests."


def run_env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "TEAMRT_HOME": str(home), **extra}


def _ctrl_c_as_at_a_terminal() -> None:
    """The child gets Ctrl-C's default disposition, as a terminal's foreground job has (a suite run in
    the background would leave SIGINT ignored; see tests/cli/test_first_run.py)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def lead_then_ask(request: SimRequest) -> Reply:
    """The lead starts a teammate and then waits on a person's approval of a command; the teammate
    answers once and idles."""
    if first_text(request) == STAND_BY:
        return Reply().say("ready")
    if not request.calls("spawn_agent"):
        return Reply().call(
            "spawn_agent", {"kind": "team", "role": "reviewer", "directives": [STAND_BY], "wait": False}
        )
    return Reply().call("Bash", {"command": "echo waiting for a person"})


def _until(check: object, what: str, child: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():  # type: ignore[operator]
        assert child.poll() is None, f"teamrt run ended before {what}"
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.1)


def _agent_status(home: Path, run_id: str, agent: str) -> str | None:
    try:
        reader = open_reader(home / "runs" / run_id, run_id)
    except (RunNotFound, SchemaTooOld):  # still being created (its schema is made step by step)
        return None
    try:
        return next((a.status for a in reader.agents() if a.name == agent), None)
    finally:
        reader.close()


@pytest.mark.usefixtures("store_db")
def test_ctrl_c_with_an_idle_teammate_ends_in_one_line(tmp_path: Path) -> None:
    """The teammate idles on its inbox when Ctrl-C comes; it is cancelled only at the interpreter's
    shutdown, after the run's end closed the mailbox. It reported "failed" to the lead through that closed
    mailbox: ``OSError: Bad file descriptor: 'lead'``. On PostgreSQL the CLI also said "interrupted before
    the run started" (it looked for run.db). Now: the usual line, and the teammate is still live in the
    store for the resume to go on with."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    team = project / "team.toml"
    team.write_text('[team]\nask_wait = 300\n[lead]\npermission_mode = "default"\n[roles.reviewer]\n')
    with SimServer(default=lead_then_ask) as sim:
        env = run_env(home, ANTHROPIC_BASE_URL=sim.url, ANTHROPIC_API_KEY="sk-test")
        child = subprocess.Popen(
            [sys.executable, "-m", "teamrt", "run", str(team), "--prompt", "Review the plan."],
            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_ctrl_c_as_at_a_terminal,
        )  # fmt: skip
        try:
            runs = home / "runs"
            _until(lambda: runs.is_dir() and any(runs.iterdir()), "the run's directory", child)
            [run_id] = [p.name for p in runs.iterdir()]
            _until(lambda: _agent_status(home, run_id, "reviewer") == "idle", "the idle teammate", child)
            _until(lambda: _agent_status(home, run_id, "lead") == "running" and len(sim.calls) >= 3,
                   "the lead's ask", child)  # fmt: skip
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=DEADLINE_S)
        finally:
            child.kill()
    assert child.returncode == 130, err
    assert "Traceback" not in err and "Bad file descriptor" not in err, err
    assert err.rstrip().splitlines()[-1] == (
        f"teamrt: run {run_id} interrupted; resume it with: teamrt resume {run_id}"
    ), err
    assert out == ""
    assert _agent_status(home, run_id, "reviewer") == "idle", "the teammate is left for the resume"


# -- a stopped owner: not responding, not crashed --------------------------------------------------------

STOPPED_OWNER = """
import asyncio, sys
from pathlib import Path
from sqlalchemy import update
import teamrt.store.store as store_module
from teamrt.store import open_store, tables as t
store_module.HEARTBEAT_S = 3600.0  # no heartbeat transaction of its own: the test stops it between none
store = open_store(Path(sys.argv[1]), "r1")
def age(conn):  # its last heartbeat an hour old, as if it had been stopped that long
    conn.execute(update(t.runs).values(heartbeat_at=t.runs.c.heartbeat_at - 3600))
asyncio.run(store.write(age))
print("owning", flush=True)
sys.stdin.read()
"""


def _teamrt(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args],
        env=run_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _ls_status(home: Path) -> str:
    listed = _teamrt(home, "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    return str(run["status"])


@pytest.mark.usefixtures("store_db")
def test_a_stopped_owner_is_not_responding_and_a_killed_one_crashed(run_dir: Path) -> None:
    """The owner's process is SIGSTOPped with its heartbeat an hour stale: ``ls`` and ``show`` said
    "crashed" and offered a resume its lock would refuse. Now "not responding", with the pid; resume
    refuses in one line that says what to do. SIGKILLed, it is crashed."""
    home = run_dir.parent.parent
    create_store(run_dir, "r1", task="t", workdir=str(run_dir)).close()
    owner = subprocess.Popen(
        [sys.executable, "-c", STOPPED_OWNER, str(run_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert owner.stdout is not None and owner.stdout.readline() == "owning\n", owner.stderr
        owner.send_signal(signal.SIGSTOP)
        assert _ls_status(home) == "not responding"
        listed = _teamrt(home, "ls")
        assert f"not responding (pid {owner.pid}, heartbeat 36" in listed.stdout, listed.stdout
        shown = _teamrt(home, "show", "r1")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.splitlines()[0].startswith(
            f"run r1: not responding (pid {owner.pid}, last heartbeat 1h ago): it may be stopped (SIGSTOP)"
        ), shown.stdout
        resumed = _teamrt(home, "resume", "r1")
        assert resumed.returncode == 1 and "Traceback" not in resumed.stderr
        refused = re.fullmatch(
            rf"teamrt: run r1 is not responding \(pid {owner.pid} on this host, heartbeat (\d+) s old\):"
            r" it may be stopped \(SIGSTOP\) or overloaded; kill it or wait, then resume\n",
            resumed.stderr,
        )
        assert refused is not None and 3600 <= int(refused[1]) < 3600 + DEADLINE_S, resumed.stderr
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=DEADLINE_S)
        assert _ls_status(home) == "crashed"
        assert _teamrt(home, "show", "r1").stdout.startswith("run r1: crashed (last heartbeat 1h ago)")
    finally:
        owner.send_signal(signal.SIGCONT)
        owner.kill()
        owner.communicate(timeout=DEADLINE_S)


def test_a_stale_owner_on_another_host_stays_crashed(run_dir: Path) -> None:
    """What cannot be checked from here is not called alive: another host's owner with a stale heartbeat
    is crashed, whatever pid it had (this very process's, here)."""
    create_store(run_dir, "r1", task="t", workdir=str(run_dir)).close()
    reader = open_reader(run_dir, "r1")
    try:
        run = reader.run()
    finally:
        reader.close()
    me = Owner("elsewhere", os.getpid(), own_identity()[1], 0.0)
    stale = dataclasses.replace(run, owner=me, heartbeat_at=time.time() - 3600)
    assert runs.run_status(stale) == "crashed"
    here = dataclasses.replace(stale, owner=dataclasses.replace(me, host=host_identity()))
    assert runs.run_status(here) == "not responding"
    assert runs.run_status(dataclasses.replace(here, heartbeat_at=time.time())) == "running"


# -- the merge queue and the lease ---------------------------------------------------------------------

INTEGRATION = "teamrt/r1"


def _execute(run_dir: Path, sql: str) -> None:
    """A statement on the run's database from outside teamrt (the test playing the clock)."""
    engine = create_engine(store_url(run_dir), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    finally:
        engine.dispose()


def _project(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository, its base, and the head of a branch ``fix`` with one commit changing app.py."""
    project = make_repo(tmp_path / "project", {"app.py": "x = 1\n", "README.md": "readme\n"})
    base = git(project, "rev-parse", "main")
    git(project, "checkout", "-q", "-b", "fix", "main")
    (project / "app.py").write_text("x = 2\n")
    git(project, "commit", "-q", "-am", "fix: x = 2")
    head = git(project, "rev-parse", "HEAD")
    git(project, "checkout", "-q", "main")
    return project, base, head


def _queue(project: Path, run_dir: Path, store: Store, base: str, gates: tuple[str, ...]) -> MergeQueue:
    repo = GitRepo.find(project)
    assert repo is not None
    return MergeQueue(
        repo=repo, store=store, run_dir=run_dir, branch=INTEGRATION, base=base, gates=gates, gate_timeout=120,
        sandbox=Sandbox(None), policy=SandboxPolicy(unconfined=True),
    )  # fmt: skip


async def _appears(path: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        await asyncio.sleep(0.05)


@pytest.mark.usefixtures("store_db")
def test_the_queue_of_an_owner_taken_over_from_moves_no_branch(
    tmp_path: Path, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """host-a's merge is in its gate when host-b takes the run over (host-a was wedged past its lease).
    Its gate passes; the branch used to move all the same (the update-ref was not fenced) and the record
    was refused after it. Now the move runs inside a store transaction whose fence refuses it: the branch
    stays, and no verdict (no "a gate failed", no attempt) reaches the agent: the takeover ends host-a."""
    project, base, head = _project(tmp_path)
    started, go = tmp_path / "gate-started", tmp_path / "go"
    gate = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"
    monkeypatch.setenv(HOST_ENV, "host-a")

    async def scene() -> None:
        stale = create_store(run_dir, "r1", task="t", workdir=str(project))
        await stale.add_agent("coder", kind="worktree", model="sim")
        queue = _queue(project, run_dir, stale, base, (gate,))
        landing = asyncio.create_task(queue.land("coder", "fix", head, "a fix"))
        try:
            await _appears(started)
            stale._lock.release()  # another host: its lock file is not this one's
            _execute(run_dir, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")
            monkeypatch.setenv(HOST_ENV, "host-b")
            with open_store(run_dir, "r1") as fresh:
                go.touch()
                with pytest.raises(RunTakenOver, match=r"was taken over by pid \d+ on host-b"):
                    await asyncio.wait_for(landing, DEADLINE_S)
                [merge] = fresh.reader.merges()
                kinds = [e.kind for e in fresh.reader.events()]
            assert merge.status == "merging" and merge.output is None, "no verdict was recorded"
            assert merge.attempts == 1
            assert RETRIED not in kinds
        finally:
            landing.cancel()
            await queue.close()
            stale.close()

    asyncio.run(scene())
    assert git(project, "rev-parse", INTEGRATION) == base, "the integration branch did not move"


@pytest.mark.usefixtures("store_db")
def test_a_lost_race_on_the_branch_is_merged_again_not_a_gate_failure(tmp_path: Path, run_dir: Path) -> None:
    """Between the gates and the update, the integration branch moves (another commit lands on it). The
    compare-and-swap loses; that was "teamrt could not merge" as a red verdict, an attempt charged to the
    agent. Now the merge is made again on the new tip, said in a ``merge.retried`` event, and lands."""
    project, base, head = _project(tmp_path)
    (project / "NOTES.md").write_text("notes\n")
    git(project, "add", "NOTES.md")
    tree = git(project, "write-tree")
    git(project, "reset", "-q", "--", "NOTES.md")
    other = git(project, "commit-tree", tree, "-p", base, "-m", "someone else's commit")
    raced: list[str] = []

    def move_it(new: str) -> None:
        if not raced:
            git(project, "update-ref", f"refs/heads/{INTEGRATION}", other)
            raced.append(new)

    async def scene() -> tuple[Verdict, list[str], list[MergeRecord]]:
        with create_store(run_dir, "r1", task="t", workdir=str(project)) as store:
            await store.add_agent("coder", kind="worktree", model="sim")
            queue = _queue(project, run_dir, store, base, ("true",))
            try:
                with faults.inject("merge.before_ref", move_it):
                    verdict = await queue.land("coder", "fix", head, "a fix")
            finally:
                await queue.close()
            return verdict, [e.kind for e in store.reader.events()], store.reader.merges()

    verdict, kinds, merges = asyncio.run(scene())
    assert raced, "the branch was moved under the merge"
    assert verdict.status == "merged", verdict.output
    tip = git(project, "rev-parse", INTEGRATION)
    assert verdict.commit == tip
    for commit in (other, head):
        assert git(project, "merge-base", "--is-ancestor", commit, tip) == ""
    assert kinds.count(RETRIED) == 1
    [merge] = merges
    assert (merge.status, merge.attempts, merge.merged_commit) == ("merged", 1, tip)


def test_a_branch_that_keeps_moving_ends_the_merge_as_no_ones_failure(tmp_path: Path, run_dir: Path) -> None:
    """Moved under every try: the queue gives up after ``MOVED_RETRIES`` more, in one line that says why,
    with the merge queued again (not red, not a conflict): the agent's attempts are not its to lose."""
    project, base, head = _project(tmp_path)
    tips = iter(range(100))

    def move_it(new: str) -> None:
        tip = git(project, "rev-parse", INTEGRATION)
        tree = git(project, "rev-parse", f"{tip}^{{tree}}")
        moved = git(project, "commit-tree", tree, "-p", tip, "-m", f"outside {next(tips)}")
        git(project, "update-ref", f"refs/heads/{INTEGRATION}", moved)

    async def scene() -> tuple[IntegrationMoved, list[str], list[MergeRecord]]:
        with create_store(run_dir, "r1", task="t", workdir=str(project)) as store:
            await store.add_agent("coder", kind="worktree", model="sim")
            queue = _queue(project, run_dir, store, base, ("true",))
            try:
                with faults.inject("merge.before_ref", move_it), pytest.raises(IntegrationMoved) as moved:
                    await queue.land("coder", "fix", head, "a fix")
            finally:
                await queue.close()
            return moved.value, [e.kind for e in store.reader.events()], store.reader.merges()

    moved, kinds, merges = asyncio.run(scene())
    assert str(moved) == (
        f"the integration branch {INTEGRATION} moved under each of {MOVED_RETRIES + 1} merges of coder's work"
        " (something outside this run updates it); nothing of it was merged"
    )
    assert kinds.count(RETRIED) == MOVED_RETRIES + 1
    [merge] = merges
    assert merge.status == "queued" and merge.merged_commit is None
    tip = git(project, "rev-parse", INTEGRATION)
    ancestry = subprocess.run(["git", "merge-base", "--is-ancestor", head, tip], cwd=project, check=False)
    assert ancestry.returncode == 1, "nothing of it was merged"


def _lead(request: SimRequest) -> Reply:
    if not request.calls("spawn_agent"):
        return Reply().call(
            "spawn_agent", {"kind": "worktree", "role": "coder", "directives": ["Set x to 2 in app.py."]}
        )
    return Reply().say("Lead: " + (request.tool_outcomes[0].output if request.tool_outcomes else "done"))


def _coder(request: SimRequest) -> Reply:
    """Writes its fix once and finishes; told anything after (a gate failed), it says so and finishes."""
    if not request.calls("Write"):
        return Reply().call("Write", {"file_path": "app.py", "content": "x = 2\n"})
    return Reply().say(f"Set x to 2. Heard: {request.last_user_text[:200]}")


@needs_bwrap
def test_a_lost_race_costs_the_coder_no_attempt(tmp_path: Path) -> None:
    """A whole team on ``sim``: the branch moves under the coder's merge once. The coder is never told a
    gate failed, its one attempt lands, and the retry is in the run's events."""
    project = make_repo(
        tmp_path / "project",
        {
            "app.py": "x = 1\n",
            "team.toml": "[team]\nmodel = 'sim'\n[roles.coder]\n[merge]\ngates = ['true']\n",
        },
    )
    moved: list[str] = []

    def move_it(new: str) -> None:
        if not moved:
            tip = git(project, "rev-parse", "teamrt/r1")
            tree = git(project, "rev-parse", f"{tip}^{{tree}}")
            other = git(project, "commit-tree", tree, "-p", tip, "-m", "someone else's commit")
            git(project, "update-ref", "refs/heads/teamrt/r1", other)
            moved.append(other)

    with (
        SimServer(policies={"lead": _lead, "coder": _coder}) as sim,
        faults.inject("merge.before_ref", move_it),
    ):
        outcome, store = run_worktree_team(project, sim, "Set x to 2.")
    assert moved and outcome.status == "done", outcome
    [merge] = store.reader.merges()
    assert (merge.status, merge.attempts) == ("merged", 1)
    assert [e.kind for e in store.reader.events()].count(RETRIED) == 1
    coder = store.reader.agent("coder")
    assert coder.status == "done" and "a gate failed" not in str(store.reader.turns("coder"))
    tip = git(project, "rev-parse", "teamrt/r1")
    assert git(project, "show", "teamrt/r1:app.py") == "x = 2"
    assert git(project, "merge-base", "--is-ancestor", moved[0], tip) == ""


@needs_bwrap
@pytest.mark.usefixtures("store_db")
def test_a_team_taken_over_during_its_merge_ends_with_the_takeover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole team on ``sim``, host-a's: once the coder's branch is merged in the queue's worktree (gates
    not run yet), host-b takes the run over. host-a's queue does not move the branch, its coder is never
    told a gate failed, and its run ends raising the takeover (the CLI's one line), the lead stopped
    rather than left waiting."""
    team = "[team]\nmodel = 'sim'\n[roles.coder]\n[merge]\ngates = ['true']\n"
    project = make_repo(tmp_path / "project", {"app.py": "x = 1\n", "team.toml": team})
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    repo = GitRepo.find(project)
    assert repo is not None
    base = git(project, "rev-parse", "HEAD")
    loaded = load_team(project / "team.toml", project=project)
    monkeypatch.setenv(HOST_ENV, "host-a")
    stale = create_store(
        run_dir, "r1", task="t", workdir=str(project), base_head=base,
        settings={"integration_branch": "teamrt/r1", "gates": list(loaded.gates)},
    )  # fmt: skip
    taken: list[Store] = []

    def take_over(merged: str) -> None:  # another host, while host-a's merge waits for its gates
        stale._lock.release()  # another host: its lock file is not this one's
        _execute(run_dir, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")
        monkeypatch.setenv(HOST_ENV, "host-b")
        taken.append(open_store(run_dir, "r1"))

    async def run(sim: SimServer) -> None:
        worktrees = Worktrees(
            repo=repo, store=stale, run_dir=run_dir, run_id="r1", base=base, project=project,
            integration="teamrt/r1", gates=loaded.gates, gate_timeout=120, policy=loaded.sandbox,
            team_file=loaded.path,
        )  # fmt: skip
        supervisor = Supervisor(
            store=stale, run_dir=run_dir, team=loaded, definitions=load_definitions(project), project=project,
            settings=FAST, sim=sim, worktrees=worktrees,
        )  # fmt: skip
        await asyncio.wait_for(supervisor.run("Set x to 2."), DEADLINE_S)

    try:
        with (
            SimServer(policies={"lead": _lead, "coder": _coder}) as sim,
            faults.inject("merge.merged", take_over),
            pytest.raises(RunTakenOver, match=r"was taken over by pid \d+ on host-b"),
        ):
            asyncio.run(run(sim))
    finally:
        stale.close()
    [fresh] = taken
    try:
        [merge] = fresh.reader.merges()
        turns = str(fresh.reader.turns("coder"))
    finally:
        fresh.close()
    assert git(project, "rev-parse", "teamrt/r1") == base, "host-a's queue did not move the branch"
    assert merge.status == "merging" and merge.attempts == 1
    assert "a gate failed" not in turns


def test_the_tui_runs_list_says_not_responding_and_r_says_why_not(run_dir: Path) -> None:
    """The runs list shows a run whose owner (this very process, on this host) has a stale heartbeat as
    not responding; ``r`` on it says what ``teamrt resume`` would, and starts nothing."""
    create_store(run_dir, "r1", task="t", workdir=str(run_dir)).close()
    pid, start = own_identity()
    _execute(
        run_dir,
        f"UPDATE runs SET owner_host = '{host_identity()}', owner_pid = {pid}, owner_start_time = {start},"
        f" owner_since = {time.time() - 3600}, heartbeat_at = {time.time() - 3600}",
    )
    app = TeamApp(run_dir.parent, None, blink=False)
    said: list[str] = []
    app.notify = lambda message, **kw: said.append(message)  # type: ignore[method-assign]

    async def go() -> list[str]:
        async with app.run_test(size=(160, 40)) as pilot:
            table = app.screen.query_one("#runs", KeyTable)
            for _ in range(int(DEADLINE_S / 0.05)):
                if table.row_count == 1:
                    break
                await pilot.pause(0.05)
            row = [str(cell) for cell in table.get_row_at(0)]
            await pilot.press("r")
            await pilot.pause(0.2)
            return row

    row = asyncio.run(go())
    assert row[:2] == ["r1", "not responding"]
    assert said == [
        "run r1 is not responding: it may be stopped (SIGSTOP) or overloaded; kill it or wait, then resume"
    ]
