"""The chaos checker counts a loss nobody was told of as silent, and one a loss event names as named; and
every fault the chaos harness injects (``teamrt.testing.chaos.FAULTS``) does what it says to a real run.

The five silent losses of issue 33 are planted on copies of one finished coding run (its home and its
git project, real files and real SQLite): each is counted silent while the run records nothing, and
named once the run records the event that names it (or a resume refused). Then one short coding run
suffers every fault SQLite can (its damage checked on the real world as it is done), and one run on a
real PostgreSQL server has it stopped ``immediate`` and restarted ``fast`` under it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from teamrt.mailbox import new_id
from teamrt.mailbox.maildir import REASON_SUFFIX
from teamrt.runtime import losses
from teamrt.store.engine import DB_ENV
from teamrt.testing import chaos
from teamrt.testing.chaos import harness
from tests.helpers.pg import started_pg_server
from tests.system.conftest import Finished

EXAMPLE = "coding"


@dataclasses.dataclass(frozen=True)
class World:
    """A finished coding run (or a copy of it): its home, id and git project, and the reference."""

    home: Path
    run_id: str
    project: Path
    ref: chaos.Reference

    @property
    def run_dir(self) -> Path:
        return self.home / "runs" / self.run_id


@pytest.fixture(scope="module")
def ctx(chaos_ctx: Any) -> Any:
    return chaos_ctx


@pytest.fixture(scope="module")
def finished(uninterrupted: Callable[[str], Finished]) -> World:
    """The worker's uninterrupted coding run (conftest.py): copied before a loss is planted."""
    run = uninterrupted(EXAMPLE)
    return World(run.home, run.run_id, run.project, run.ref)


def copy(run: World, where: Path) -> World:
    """A copy of the finished run's home and project, to plant a loss in."""
    home = Path(shutil.copytree(run.home, where / "home", symlinks=True))
    project = Path(shutil.copytree(run.project, where / "project", symlinks=True))
    return dataclasses.replace(run, home=home, project=project)


def check(world: World) -> chaos.Result:
    return chaos.check(EXAMPLE, world.home, world.run_id, world.project, world.ref, kills=0)


def sql(world: World, statement: str, *params: object) -> int:
    """Run one statement on the world's store; how many rows it changed."""
    with closing(sqlite3.connect(world.run_dir / "run.db")) as db, db:
        return db.execute(statement, params).rowcount


def record(world: World, kind: str, note: str, agent: str | None = None, **data: object) -> None:
    """A loss event, as the runtime records one, in the world's store."""
    row = json.dumps({"note": note, **data})
    added = sql(world, "INSERT INTO events (run_id, at, agent, kind, data) VALUES (?, ?, ?, ?, ?)",
                world.run_id, time.time(), agent, kind, row)  # fmt: skip
    assert added == 1


def git(world: World, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=world.project, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def integration(world: World) -> str:
    return f"refs/heads/teamrt/{world.run_id}"


def base(world: World) -> str:
    """The commit the run started from: the integration branch's first parent chain's root."""
    return git(world, "rev-list", "--max-parents=0", integration(world))


def answer(world: World, old: str, new: str) -> None:
    """The lead's answer changed, as a run that believed otherwise would have ended."""
    changed = sql(world, "UPDATE turns SET content = replace(content, ?, ?) WHERE agent = 'lead'", old, new)
    assert changed > 0, f"{old!r} is not in the lead's answer"


def mailbox(world: World) -> Path:
    return world.run_dir / "mailbox"


def reviews(world: World) -> list[Path]:
    """The reviewer's messages the lead read (in its ``cur/``), oldest first."""
    read = sorted((mailbox(world) / "lead" / "cur").glob("*.json"))
    found = [p for p in read if json.loads(p.read_bytes())["from"] == "reviewer"]
    assert found, "the reviewer wrote to the lead"
    return found


# -- the five silent losses of issue 33 -----------------------------------------------------------


def stranded(world: World) -> None:
    """(1) Mail failed while the store worked: the coders' fixes stranded in their worktrees, nothing
    merged, the run ended saying so."""
    git(world, "update-ref", integration(world), base(world))
    assert sql(world, "UPDATE merge_queue SET status = 'failed', merged_commit = NULL") == 3
    answer(world, "3 of 3 coders merged their fixes", "nothing was merged: 0 of 3 coders merged their fixes")


def rolled_back(world: World) -> None:
    """(2) The store rolled back in silence: three acknowledged messages never ingested, and the
    reviews counted twice."""
    acknowledged = sorted((mailbox(world) / "reviewer" / "cur").glob("*.json"))[:3]
    assert len(acknowledged) == 3
    for path in acknowledged:
        assert sql(world, "DELETE FROM mail WHERE id = ?", path.stem) == 1
    answer(world, "(3 of 3 fixes)", "(6 of 3 fixes)")


def branch_from_base(world: World) -> None:
    """(3) The integration branch recreated from base; the answer still claims every merge."""
    git(world, "update-ref", integration(world), base(world))


def worktree_remade(world: World) -> None:
    """(4) A worktree remade from base and its fix lost: the last merge brought nothing (the agent
    said "no changes to merge"), the branch lacks the fix; the answer is the same."""
    tip = git(world, "rev-parse", integration(world))
    git(world, "update-ref", integration(world), f"{tip}^1")
    last = "SELECT agent FROM merge_queue WHERE merged_commit = ?"
    with closing(sqlite3.connect(world.run_dir / "run.db")) as db:
        [(agent,)] = db.execute(last, (tip,)).fetchall()
    assert sql(world, "UPDATE merge_queue SET output = 'no changes to merge' WHERE agent = ?", agent) == 1


def quarantined_while_done(world: World) -> None:
    """(5) A review's file, damaged, moved to the lead's ``bad/`` beside its reason note (as the inbox
    does) and never read; the lead ended waiting for it, the run ``done``."""
    path = reviews(world)[-1]
    bad = mailbox(world) / "lead" / "bad"
    name = new_id()
    note = {"reason": "not JSON", "name": path.name, "from": "cur", "at": time.time()}
    (bad / f"{name}{REASON_SUFFIX}").write_text(json.dumps(note))
    path.write_bytes(path.read_bytes()[:40])
    os.rename(path, bad / name)
    assert sql(world, "DELETE FROM mail WHERE id = ?", path.stem) == 1
    answer(world, "(3 of 3 fixes)", "(2 of 3 fixes are in; waiting for reviewer)")


def name_stranded(world: World) -> None:
    record(world, losses.MAIL_FAILED, "lead's task_assigned to coder was not delivered: no space left",
           agent="lead")  # fmt: skip


def name_rolled_back(world: World) -> None:
    record(world, losses.STORE_BEHIND, "resumed with --accept-loss: the store is 12 commits behind")


def name_branch(world: World) -> None:
    record(world, losses.BRANCH_LOST, f"teamrt/{world.run_id} lost 3 recorded merges")


def name_worktree(world: World) -> None:
    record(world, losses.WORKSPACE_REMADE, "coder's workspace was lost and remade from its base",
           agent="coder")  # fmt: skip


def name_quarantine(world: World) -> None:
    message = next((mailbox(world) / "lead" / "bad").glob(f"*{REASON_SUFFIX}"))
    original = json.loads(message.read_bytes())["name"].removesuffix(".json")
    record(world, losses.MAIL_QUARANTINED, f"mail to lead (id {original}) was damaged; it is lost",
           agent="lead", id=original)  # fmt: skip


Plant = Callable[[World], None]
LOSSES: dict[str, tuple[Plant, Plant]] = {
    "stranded": (stranded, name_stranded),
    "rolled-back": (rolled_back, name_rolled_back),
    "branch-from-base": (branch_from_base, name_branch),
    "worktree-remade": (worktree_remade, name_worktree),
    "quarantined-while-done": (quarantined_while_done, name_quarantine),
}


def test_a_copy_of_the_finished_run_has_no_loss(finished: World, tmp_path: Path) -> None:
    result = check(copy(finished, tmp_path))
    assert result.differences == [] and (result.lost, result.duplicated) == (0, 0), result
    assert (result.silent_losses, result.named_losses, result.silent) == (0, 0, []), result


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_each_silent_loss_of_the_issue_is_counted_silent_until_named(
    loss: str, finished: World, tmp_path: Path
) -> None:
    plant, name = LOSSES[loss]
    world = copy(finished, tmp_path)
    plant(world)
    silent = check(world)
    assert silent.silent_losses == 1 and silent.silent, silent
    assert (silent.named_losses, silent.losses) == (0, []), silent
    name(world)
    named = check(world)
    assert (named.silent_losses, named.silent) == (0, []), named
    assert named.named_losses == 1 and len(named.losses) == 1, named
    assert named.differences == silent.differences, "naming a loss does not undo it"


def test_a_store_rolled_back_loses_the_acknowledged_mail_and_a_refused_resume_names_it(
    finished: World, tmp_path: Path
) -> None:
    world = copy(finished, tmp_path)
    rolled_back(world)
    result = check(world)
    assert (result.lost, result.silent_losses) == (3, 1), result
    assert "3 message(s) lost" in result.silent
    (world.home / f"{world.run_id}.{chaos.REFUSED}").write_text("run X was not resumed: ... --accept-loss\n")
    refused = check(world)
    assert (refused.lost, refused.silent_losses, refused.named_losses) == (3, 0, 1), refused


def test_a_quarantined_message_named_is_no_loss_and_unnamed_is_lost(finished: World, tmp_path: Path) -> None:
    world = copy(finished, tmp_path)
    quarantined_while_done(world)
    unnamed = check(world)
    assert (unnamed.lost, unnamed.quarantined) == (1, 0), unnamed
    name_quarantine(world)
    named = check(world)
    assert (named.lost, named.quarantined, named.named_losses) == (0, 1, 1), named


def test_a_mail_loss_is_not_named_by_an_event_of_another_kind(finished: World, tmp_path: Path) -> None:
    """A remade workspace explains a different tree, not mail that vanished."""
    world = copy(finished, tmp_path)
    rolled_back(world)
    name_worktree(world)
    result = check(world)
    assert result.silent == ["3 message(s) lost"] and result.silent_losses == 1, result


def test_a_damaged_message_left_in_new_is_counted_lost_not_a_crash(finished: World, tmp_path: Path) -> None:
    world = copy(finished, tmp_path)
    path = reviews(world)[0]
    assert sql(world, "DELETE FROM mail WHERE id = ?", path.stem) == 1
    path.write_bytes(b'{"v": 1, "id": "')
    os.rename(path, mailbox(world) / "lead" / "new" / path.name)
    result = check(world)
    assert (result.lost, result.silent_losses) == (1, 1), result


def test_a_hang_is_counted_killed_and_resumed_never_raised(
    finished: World, tmp_path: Path, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first owner is stopped (SIGSTOP) once its run exists and never ends: past its deadline it is
    killed, the hang noted, and the run resumed to its end."""
    project = chaos.prepare(EXAMPLE, tmp_path)
    home = tmp_path / "home"
    original = chaos.incarnate
    owners: list[int] = []

    def first_stopped(*args: Any, **kwargs: Any) -> int:
        if not owners:
            owners.append(0)
            kwargs["deadline_s"] = 8.0
            threading.Thread(target=_stop_the_owner, args=(home, owners), daemon=True).start()
        return original(*args, **kwargs)

    monkeypatch.setattr(harness, "incarnate", first_stopped)  # where run_through_crashes looks it up
    run_id, fired = chaos.run_through_crashes(EXAMPLE, home, project, [], ctx, deadline_s=120.0)
    result = chaos.check(EXAMPLE, home, run_id, project, finished.ref, fired)
    assert owners[-1] > 0, "the first owner was stopped"
    assert result.hangs == 1 and fired == 0, result
    assert result.resumes >= 1 and "the run ended running" not in result.differences, result


def _stop_the_owner(home: Path, owners: list[int]) -> None:
    """SIGSTOP the first owner of the run under ``home`` once its store names it."""
    from teamrt.store import open_reader

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for run_dir in (home / "runs").glob("*"):
            try:
                reader = open_reader(run_dir, run_dir.name)
                try:
                    owner = reader.run().owner
                finally:
                    reader.close()
            except Exception:  # not there yet: the first owner is creating it
                continue
            if owner is not None:
                os.kill(owner.pid, signal.SIGSTOP)
                owners.append(owner.pid)
                return
        time.sleep(0.05)


# -- the harness ----------------------------------------------------------------------------------


def test_a_plan_puts_every_fault_among_the_kills_seeded(finished: World) -> None:
    kinds = chaos.applicable(chaos.FAULTS, EXAMPLE, "postgres")
    assert set(kinds) == set(chaos.FAULTS) - {chaos.KILL}
    assert chaos.PG_RESTART not in chaos.applicable(chaos.FAULTS, EXAMPLE, "sqlite")
    assert not set(chaos.applicable(chaos.FAULTS, "research", "sqlite")) & chaos.CODING_ONLY
    plan = chaos.plan_for(3, 5, finished.ref, kinds, "postgres")
    assert plan == chaos.plan_for(3, 5, finished.ref, kinds, "postgres"), "a seed makes the same plan"
    assert sorted(s.fault for s in plan if s.fault != chaos.KILL) == sorted(kinds)
    assert [s.fault for s in plan].count(chaos.KILL) == 5
    assert plan[-1].kill is None and plan[-1].restart_after_s is not None, "the restart has no kill"
    assert all(s.kill is not None for s in plan[:-1])
    with pytest.raises(ValueError, match="no such fault"):
        chaos.plan_for(3, 5, finished.ref, ["flood"])


def test_a_refused_resume_is_noted_and_resumed_accepting_the_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrt.runtime import teamrun

    said = "run r1 was not resumed: the store is 3 commits behind; teamrt resume r1 --accept-loss goes on"
    calls: list[dict[str, Any]] = []

    async def refusing(run_id: str, **options: Any) -> None:
        calls.append(options)
        if not options.get("accept_loss"):
            raise teamrun.NotResumable(said)

    monkeypatch.setattr(teamrun, "resume_run", refusing)
    chaos.resume(tmp_path, "r1")
    assert calls == [{}, {"accept_loss": True}]
    assert (tmp_path / f"r1.{chaos.REFUSED}").read_text() == said + "\n"
    monkeypatch.setattr(teamrun, "resume_run", _fails_with("the store is damaged\nsee the log"))
    with pytest.raises(teamrun.NotResumable):
        chaos.resume(tmp_path, "r1")  # not a one-line refusal saying how to go on: an error
    assert chaos.read_notes(tmp_path / f"r1.{chaos.REFUSED}") == [said]


def _fails_with(text: str) -> Any:
    from teamrt.runtime import teamrun

    async def failing(run_id: str, **options: Any) -> None:
        raise teamrun.NotResumable(text)

    return failing


SQLITE_FAULTS = [
    chaos.Step(chaos.Kill("tool.after", hit=1, only=chaos.CODER_WRITE), chaos.WORKTREE),
    chaos.Step(chaos.Kill("store.before_commit", hit=5, disk_full=True), chaos.DISK),
    chaos.Step(chaos.Kill("mail.written", hit=1, disk_full=True), chaos.INODES),
    chaos.Step(chaos.Kill("merge.after_ref", hit=1), chaos.BRANCH),
    chaos.Step(chaos.Kill("store.after_commit", hit=20), chaos.WAL, "half"),
    chaos.Step(chaos.Kill("mail.delivered", hit=1), chaos.MAIL),
]


@pytest.mark.slow
def test_every_fault_sqlite_can_suffer_is_injected_into_one_run(
    finished: World, tmp_path: Path, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each damage is looked at on the real world right after it is done: the coder's worktree gone, the
    integration branch gone, the WAL cut to half its bytes, the message no longer JSON."""
    seen: dict[str, bool] = {}
    original = chaos.damage

    def looked_at(step: chaos.Step, world: chaos.World) -> str | None:
        wal = world.run_dir / "run.db-wal"
        before = wal.stat().st_size if wal.exists() else 0
        done = original(step, world)
        if done is not None:
            seen[step.fault] = _damaged(step, world, done, before)
        return done

    monkeypatch.setattr(harness, "damage", looked_at)  # where run_through_crashes looks it up
    project = chaos.prepare(EXAMPLE, tmp_path)
    home = tmp_path / "home"
    run_id, fired = chaos.run_through_crashes(EXAMPLE, home, project, SQLITE_FAULTS, ctx, deadline_s=120.0,
                                              strict=False)  # fmt: skip
    injected = {line.split()[0] for line in chaos.read_notes(home / f"{run_id}.{chaos.INJECTED}")}
    assert injected == {s.fault for s in SQLITE_FAULTS}, chaos.read_notes(home / f"{run_id}.{chaos.INJECTED}")
    assert seen == {chaos.WORKTREE: True, chaos.BRANCH: True, chaos.WAL: True, chaos.MAIL: True}
    assert fired == 4, "a kill before each damage"
    result = chaos.check(EXAMPLE, home, run_id, project, finished.ref, fired)
    assert set(result.faults) == set(chaos.FAULTS) - {chaos.PG_RESTART}, result
    assert len(result.stops) == 2 and result.hangs == 0, "the full disk and the inodes stopped the run"
    assert result.errors == [], result.errors


def _damaged(step: chaos.Step, world: chaos.World, done: str, wal_before: int) -> bool:
    """Whether the damage ``done`` says is there."""
    if step.fault == chaos.WORKTREE:
        coder = done.split()[0].removeprefix("worktrees/")
        return not (world.run_dir / "worktrees" / coder).exists()
    if step.fault == chaos.BRANCH:
        ref = ["git", "rev-parse", "--verify", "-q", f"refs/heads/teamrt/{world.run_id}"]
        return subprocess.run(ref, cwd=world.project, capture_output=True, check=False).returncode != 0
    if step.fault == chaos.WAL:
        return wal_before > 0 and (world.run_dir / "run.db-wal").stat().st_size == wal_before // 2
    path = world.run_dir / "mailbox" / done.split()[0]
    try:
        json.loads(path.read_bytes())
    except ValueError:
        return True
    return False


def test_the_server_stopped_immediate_and_restarted_fast_under_a_run(
    tmp_path: Path, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a server of its own: a kill, the server stopped as ``pg_ctl stop -m immediate`` does and
    started (its own crash recovery), then restarted ``fast`` while the resumed owner works; the run
    ends."""
    server = started_pg_server()  # fails in CI without PostgreSQL, as every server test does
    try:
        monkeypatch.setenv(DB_ENV, server.create_database("chaos"))
        project = chaos.prepare("research", tmp_path)
        home = tmp_path / "home"
        postmasters = []
        original = server.launch

        def launch() -> None:
            original()
            assert server._proc is not None
            postmasters.append(server._proc.pid)

        monkeypatch.setattr(server, "launch", launch)
        plan = [
            chaos.Step(chaos.Kill("store.after_commit", hit=30), chaos.WAL, "empty"),
            chaos.Step(None, chaos.PG_RESTART, restart_after_s=0.3),
        ]
        run_id, fired = chaos.run_through_crashes("research", home, project, plan, ctx, server=server,
                                                  deadline_s=120.0, strict=False)  # fmt: skip
        injected = chaos.read_notes(home / f"{run_id}.{chaos.INJECTED}")
        assert [line.split()[0] for line in injected] == [chaos.WAL, chaos.PG_RESTART], injected
        assert len(set(postmasters)) == 2, "started twice more, each a new postmaster"
        assert fired == 1 and chaos.status_of(home, run_id) == "done"
        assert chaos.read_notes(home / f"{run_id}.{chaos.ERRORS}") == []
    finally:
        server.stop()
