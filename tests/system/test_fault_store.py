"""Fault tests: a store behind what its run directory shows is refused in one line, never replayed.

Each test breaks the store for real: a run built by the real store in a process SIGKILLed mid-run, its
``run.db-wal`` then emptied or cut in half; a few bytes of ``run.db`` overwritten; an older copy of the
store put back (a SQLite file, a PostgreSQL database made again from a backup copy); a real tmpfs filled
to the last byte. A resume must refuse in one line that names what is missing (``StoreBehind``); with
``accept_loss`` it goes on, records a ``store.behind`` event, and each message the store never recorded
as read is read once. An ordinary crash (the WAL intact) must find nothing. Only the model is scripted.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from teamrt import home
from teamrt.models import Reply, ScriptedModel
from teamrt.runs.query import list_runs
from teamrt.runs.report import render_ls, render_show
from teamrt.runtime import teamrun
from teamrt.runtime.losses import STORE_BEHIND
from teamrt.runtime.teamrun import RunSummary, resume_run
from teamrt.runtime.verify import verify
from teamrt.store import StoreReader, create_store, open_reader, open_store
from teamrt.store.integrity import StoreBehind, read_sidecar
from teamrt.team import load_team, team_to_json
from tests.helpers.events import marker
from tests.helpers.machine import mounted_tmpfs

RUN = "20261128-000000-fault"
TEAM = '[team]\nname = "t"\nmodel = "sim"\n'
PAD = 30
"""Events of 3 KB committed before the mail: the WAL's first half, so a cut in half loses the mail's turn."""

CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from teamrt import home
from teamrt.mailbox import Mailbox
from teamrt.team import load_team, team_to_json
from teamrt.store import IngestedMail, create_store

run, project, team_file, pad = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])


def text(said):
    return {"type": "text", "text": said}


async def main():
    team = load_team(team_file, project=project)
    run_dir = home.run_dir(run)
    store = create_store(run_dir, run, task="go", workdir=str(project), settings={"team": team_to_json(team)})
    await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
    epoch = await store.begin_epoch("lead")
    await store.append_turn("lead", epoch=epoch, role="user", content=[text("go")])
    for i in range(pad):
        await store.append_event("pad", {"i": i, "text": "x" * 3000})
    mailbox = Mailbox(run_dir / "mailbox", run, spill_dir=run_dir / "spill")
    mailbox.register("supervisor")
    mailbox.register("lead")
    sent = [mailbox.post(sender="user", recipient="lead", body=f"note {i}") for i in range(3)]
    ingested = [IngestedMail(m.id, m.sender, m.kind, m.to_dict()) for m in sent]
    blocks = [text(f'<mail id="{m.id}">{m.body}</mail>') for m in sent]
    await store.append_turn("lead", epoch=epoch, role="user", content=blocks, ingested=ingested)
    with mailbox.open_maildir("lead") as maildir:  # acknowledged only once the turn is committed
        for m in sent:
            maildir.ack(f"{m.id}.json", m.id)
    print(" ".join(m.id for m in sent), store.commits, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


asyncio.run(main())
"""
"""A run's owner, SIGKILLed: it added the lead, committed ``pad`` events, then read three messages
(an ingest turn, then each acknowledged into ``cur/``). Prints the messages' ids and its commits."""


@dataclass(frozen=True)
class Killed:
    project: Path
    run_dir: Path
    ids: list[str]
    commits: int

    @property
    def wal(self) -> Path:
        return self.run_dir / "run.db-wal"

    @property
    def cur(self) -> Path:
        return self.run_dir / "mailbox" / "lead" / "cur"

    @property
    def new(self) -> Path:
        return self.run_dir / "mailbox" / "lead" / "new"


@pytest.fixture
def runs_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv(home.HOME_ENV, str(path))
    return path


def project_of(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    team_file = tmp_path / "team.toml"
    team_file.write_text(TEAM)
    return project, team_file


def killed_run(tmp_path: Path, pad: int = PAD) -> Killed:
    """A run whose owner was SIGKILLed after reading three messages, its WAL as the kill left it."""
    project, team_file = project_of(tmp_path)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, RUN, str(project), str(team_file), str(pad)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr
    *ids, commits = child.stdout.split()
    run_dir = home.runs_path() / RUN
    assert read_sidecar(run_dir) == int(commits), "each commit was counted in the run directory"
    killed = Killed(project, run_dir, ids, int(commits))
    assert killed.wal.stat().st_size > 0 and sorted(p.stem for p in killed.cur.iterdir()) == sorted(ids)
    return killed


def scripted(replies: int) -> ScriptedModel:
    return ScriptedModel([Reply().say("done")] * replies)


def resume(monkeypatch: pytest.MonkeyPatch, model: ScriptedModel, *, accept_loss: bool = False) -> RunSummary:
    """``teamrt resume RUN`` in this process (``--accept-loss`` as given), its model ``model``."""
    monkeypatch.setattr(teamrun, "open_model", lambda name, **_: model)
    return asyncio.run(asyncio.wait_for(resume_run(RUN, accept_loss=accept_loss), 60))


def cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``teamrt ARGS`` as a person runs it, in ``project``."""
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args], cwd=project, capture_output=True, text=True, timeout=120
    )


def state(run_dir: Path) -> dict[str, str]:
    """Every file of the run's directory, by its path, as a digest: what a refusal must leave as it was."""
    return {
        str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run_dir.rglob("*"))
        if p.is_file() and p.name != "run.db-shm"  # SQLite's index of the WAL, rebuilt by any reader
    }


@contextmanager
def reading(run_dir: Path) -> Iterator[StoreReader]:
    reader = open_reader(run_dir, RUN)
    try:
        yield reader
    finally:
        reader.close()


def events_of(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    with reading(run_dir) as reader:
        return [e.data for e in reader.events(kinds=(kind,))]


def assert_read_once(killed: Killed, model: ScriptedModel) -> None:
    """Each message the lead had read is, after the resume, read exactly once: one ingest row, one mention
    in the conversation the model saw last, its file in ``cur/`` and none left in ``new/``."""
    with reading(killed.run_dir) as reader:
        rows = [m.id for m in reader.mail("lead")]
        assert sorted(rows) == sorted(killed.ids)
        assert read_sidecar(killed.run_dir) == reader.run().commits, "the run directory follows the store"
    seen = str(model.requests[-1].messages)
    for msg_id in killed.ids:
        assert seen.count(f'<mail id="{msg_id}"') == 1, f"{msg_id} read once, not {seen.count(msg_id)} times"
    assert sorted(p.stem for p in killed.cur.iterdir()) == sorted(killed.ids)
    assert list(killed.new.iterdir()) == []


# -- an ordinary crash -------------------------------------------------------------------------------------


def test_an_ordinary_crash_finds_nothing_and_resumes(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL with the WAL intact: the store has every commit the run directory counted, every message in
    ``cur/`` has its row; the resume goes on with no finding and no loss recorded."""
    killed = killed_run(tmp_path, pad=3)
    with reading(killed.run_dir) as reader:
        assert reader.run().commits == killed.commits
        assert verify(killed.run_dir, RUN, reader) == []
    model = scripted(1)
    summary = resume(monkeypatch, model)
    assert summary.outcome.status == "done"
    assert events_of(killed.run_dir, STORE_BEHIND) == []
    assert_read_once(killed, model)


# -- the WAL emptied, or cut in half -----------------------------------------------------------------------


@pytest.mark.hostile
def test_an_emptied_wal_is_refused_in_one_line_and_accepted_loss_reads_the_mail_once(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL emptied after a SIGKILL: the store is back at the run's creation (no lead, no turn). Before,
    ``ls`` showed 0 agents and a resume redid the whole run in silence. Now ``teamrt resume`` refuses in
    one line naming the lost commits and each message read in them, changing nothing (nor does
    ``--detach``); ``ls`` and ``show`` mark the run. ``--accept-loss`` goes on: the loss is recorded, and
    the lead, started again, reads each message once."""
    killed = killed_run(tmp_path)
    os.truncate(killed.wal, 0)
    before = state(killed.run_dir)

    refused = cli(killed.project, "resume", RUN)
    assert refused.returncode == 1
    lines = refused.stderr.splitlines()
    assert len(lines) == 1, refused.stderr
    said = lines[0]
    assert said.startswith(f"teamrt: run {RUN} was not resumed: the store is {killed.commits} commits behind")
    assert "its WAL was lost or cut" in said and f"teamrt resume {RUN} --accept-loss" in said
    assert "3 acknowledged messages were never recorded as read" in said
    assert all(msg_id in said for msg_id in killed.ids)
    assert "mailboxes of agents the store does not know: lead" in said
    detached = cli(killed.project, "resume", RUN, "--detach")
    assert detached.returncode == 1 and detached.stderr.splitlines() == lines
    assert state(killed.run_dir) == before, "nothing replayed, nothing moved: the evidence stands"

    listed = "\n".join(render_ls(list_runs(home.runs_path()), home.runs_path()))
    assert "crashed, store behind" in listed
    shown = "\n".join(render_show(killed.run_dir, RUN))
    assert f"store    {killed.commits} commits behind its run directory" in shown

    model = scripted(1)
    summary = resume(monkeypatch, model, accept_loss=True)
    assert summary.outcome.status == "done"
    [loss] = events_of(killed.run_dir, STORE_BEHIND)
    assert f"the store is {killed.commits} commits behind its run directory" in loss["note"]
    assert loss["mail"] == {"lead": killed.ids}
    assert_read_once(killed, model)
    assert "store behind" not in "\n".join(render_ls(list_runs(home.runs_path()), home.runs_path()))


@pytest.mark.hostile
def test_a_wal_cut_in_half_is_refused_and_accepted_loss_reads_the_mail_once(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The WAL cut in half: SQLite rolls back to the last whole commit in the first half, without a word;
    the turn that read three messages is gone while the messages sit acknowledged in ``cur/``. Before, they
    were never read again. The resume refuses naming the lost commits and the three messages; the model
    is never called. Accepted, the lead goes on from its kept turn and reads each message once."""
    killed = killed_run(tmp_path)
    os.truncate(killed.wal, killed.wal.stat().st_size // 2)
    with reading(killed.run_dir) as reader:
        kept = reader.run().commits
        assert 0 < kept < killed.commits and reader.mail() == []
    model = scripted(1)
    with pytest.raises(StoreBehind) as refused:
        resume(monkeypatch, model)
    said = str(refused.value)
    assert "\n" not in said and model.requests == []
    assert f"the store is {killed.commits - kept} commits behind its run directory" in said
    assert all(msg_id in said for msg_id in killed.ids) and "does not know" not in said
    assert sorted(p.stem for p in killed.cur.iterdir()) == sorted(killed.ids), "nothing moved"

    summary = resume(monkeypatch, model, accept_loss=True)
    assert summary.outcome.status == "done"
    [loss] = events_of(killed.run_dir, STORE_BEHIND)
    assert loss["mail"] == {"lead": killed.ids}
    assert_read_once(killed, model)


# -- run.db damaged ----------------------------------------------------------------------------------------


def built_run(tmp_path: Path) -> tuple[Path, Path]:
    """A run as ``teamrt run`` keeps it, its lead given the task; left as a crash does (no owner)."""
    project, team_file = project_of(tmp_path)
    team = load_team(team_file, project=project)
    run_dir = home.run_dir(RUN)
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(team)})

    async def lead() -> None:
        await store.add_agent("lead", kind="lead", model="sim", role="lead", workspace=str(project))
        epoch = await store.begin_epoch("lead")
        await store.append_turn("lead", epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])

    try:
        asyncio.run(lead())
    finally:
        store.close()  # gives up ownership: the run is running with no owner, as after a crash
    return project, run_dir


@pytest.mark.hostile
def test_a_damaged_page_of_run_db_is_refused_in_one_line(tmp_path: Path, runs_home: Path) -> None:
    """A few bytes of run.db overwritten, in a page no resume reads before it starts (an index's): the
    run reads back, but SQLite's quick_check fails; the resume refuses in one line saying so."""
    project, run_dir = built_run(tmp_path)
    db = run_dir / "run.db"
    with sqlite3.connect(db) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        page = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'ix_steering_run_id_delivered_at'"
        ).fetchone()[0]
    conn.close()
    with db.open("r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\x00\xff\xff\xff\xff\xff\xff\xff")

    refused = cli(project, "resume", RUN)
    assert refused.returncode == 1
    [said] = refused.stderr.splitlines()
    assert f"run {RUN} was not resumed: run.db fails SQLite's quick_check (" in said
    assert f"Page {page}:" in said and "--accept-loss" in said


@pytest.fixture
def restore_point(store_db: str, request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """``save()`` keeps a copy of the run's store, ``put_back()`` makes the store that copy again: a
    SQLite file copied, a PostgreSQL database made from a backup database (``CREATE DATABASE ...
    TEMPLATE``)."""
    from sqlalchemy.engine import make_url

    if store_db == "sqlite":
        saved: dict[str, bytes] = {}

        def save() -> None:
            saved["db"] = (home.runs_path() / RUN / "run.db").read_bytes()

        def put_back() -> None:
            run_dir = home.runs_path() / RUN
            for leftover in ("run.db-wal", "run.db-shm"):
                (run_dir / leftover).unlink(missing_ok=True)
            (run_dir / "run.db").write_bytes(saved["db"])

        yield save, put_back
        return
    server = request.getfixturevalue("pg_server")
    name = make_url(os.environ["TEAMRT_DB"]).database
    backup = f"{name}_backup"

    def save_pg() -> None:
        server.create_database(backup, name)

    def put_back_pg() -> None:
        server.drop_database(name)
        server.create_database(name, backup)

    yield save_pg, put_back_pg
    server.drop_database(backup)


def test_a_store_put_back_from_an_older_copy_is_behind(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch, restore_point: tuple[Any, Any]
) -> None:
    """On SQLite and PostgreSQL alike: the store put back from a copy taken before the last owner's five
    commits (an older run.db, a server restored from an older backup) is five commits behind its run
    directory; the resume refuses saying so, ``ls`` marks it; accepted, the run goes on and says the loss."""
    save, put_back = restore_point
    _, run_dir = built_run(tmp_path)
    save()
    store = open_store(run_dir, RUN)

    async def more() -> None:
        for i in range(5):
            await store.append_event(marker("pad"), {"i": i})

    try:
        asyncio.run(more())
        done = store.commits
    finally:
        store.close()
    assert done >= 5 and read_sidecar(run_dir) is not None
    put_back()

    model = scripted(1)
    with pytest.raises(StoreBehind) as refused:
        resume(monkeypatch, model)
    said = str(refused.value)
    assert f"the store is {done} commit" in said and " behind its run directory: " in said
    assert model.requests == []
    [summary] = list_runs(home.runs_path())
    assert summary.status == "crashed" and summary.store_behind == done

    finished = resume(monkeypatch, model, accept_loss=True)
    assert finished.outcome.status == "done"
    [loss] = events_of(run_dir, STORE_BEHIND)
    assert f"the store is {done} commit" in loss["note"]
    assert len(model.requests) == 1


# -- the disk still full -----------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs of the test's own, unmounted afterwards (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with mounted_tmpfs(tmp_path / "disk", "4m", 4000) as mount:
        yield mount


def fill(disk: Path) -> Path:
    """Write a file until the filesystem has no byte left; returns it."""
    filler = disk / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as e:
            assert e.errno == 28  # ENOSPC
    return filler


def test_resume_while_the_disk_is_still_full_says_one_line(
    tmp_path: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed on a disk that then filled up: ``teamrt resume`` used to end in a traceback from
    ``open_store``; now one line and exit 1, and nothing is changed, so once space is back the resume
    goes on with no finding."""
    monkeypatch.setenv(home.HOME_ENV, str(small_disk / "home"))
    killed = killed_run(tmp_path, pad=3)
    filler = fill(small_disk)

    refused = cli(killed.project, "resume", RUN)
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    [said] = refused.stderr.splitlines()
    assert said.startswith("teamrt: cannot open the run store ") and "database or disk is full" in said

    filler.unlink()
    with reading(killed.run_dir) as reader:
        assert verify(killed.run_dir, RUN, reader) == []
    model = scripted(1)
    assert resume(monkeypatch, model).outcome.status == "done"
    assert_read_once(killed, model)


def test_a_new_run_starts_its_commit_count_afresh(tmp_path: Path, runs_home: Path) -> None:
    """A new run under the name of a run whose directory kept a count (a store removed by hand) starts the
    file again at 0: a stale count must never pass for lost commits."""
    run_dir = home.run_dir(RUN)
    (run_dir / "commits").write_text(f"{1000:>20}\n")
    project, _ = project_of(tmp_path)
    create_store(run_dir, RUN, task="go", workdir=str(project)).close()
    assert read_sidecar(run_dir) == 0
    with reading(run_dir) as reader:
        assert verify(run_dir, RUN, reader) == []
