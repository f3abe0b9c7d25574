"""Runs past one machine, on a real PostgreSQL server: two hosts fight over one run and the stale one's
writes are refused; a person on a host that cannot see the run's directory steers it through the
database; a resume where the directory is not reachable is refused naming the owner. "Hosts" are
processes with different ``TEAMRT_HOST`` and, where they must not share the run's directory, different
``TEAMRT_HOME``; the model is the simulator on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from teamrt.agents import load_definitions
from teamrt.mailbox import Mailbox, Message
from teamrt.models import Reply, ScriptedModel
from teamrt.runs.query import pending_asks, reading
from teamrt.runtime.agent import Outcome
from teamrt.runtime.relay import SteeringRelay
from teamrt.runtime.supervisor import Supervisor
from teamrt.sim import SimServer
from teamrt.store import create_store
from teamrt.store import steering as st
from teamrt.store.ownership import HOST_ENV
from teamrt.team import Role, Team, team_to_json
from teamrt.testing.pgserver import PgServer
from tests.helpers.pg import PG_TEMPLATE
from tests.helpers.teams import FAST

RUN = "r1"
_databases = iter(range(1, 1_000_000))


@pytest.fixture
def database(pg_server: PgServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh database at the newest schema, as ``TEAMRT_DB`` for this process and its children."""
    name = f"x{next(_databases)}"
    url = pg_server.create_database(name, PG_TEMPLATE)
    monkeypatch.setenv("TEAMRT_DB", url)
    yield url
    pg_server.drop_database(name)


def sql(url: str, statement: str, **params: object) -> list[Any]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


def teamrt(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamrt", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def host(name: str, home: Path, **extra: str) -> dict[str, str]:
    """The environment of a person (or supervisor) on host ``name`` whose runs' home is ``home``."""
    return {**os.environ, HOST_ENV: name, "TEAMRT_HOME": str(home), **extra}


def on_host_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as host-a, and the directory of its run ``r1`` (under ``home-a``, made)."""
    monkeypatch.setenv(HOST_ENV, "host-a")
    run_dir = tmp_path / "home-a" / "runs" / RUN
    run_dir.mkdir(parents=True)
    return run_dir


# -- split brain ---------------------------------------------------------------------------------------


def _not_in_a_transaction(url: str, pid: int) -> bool:
    """Whether the stopped process ``pid`` holds no transaction open on the server (its writer idle)."""
    rows = sql(
        url,
        "SELECT state FROM pg_stat_activity WHERE application_name = 'teamrt writer'",
    )
    return all(state != "idle in transaction" for (state,) in rows) or pid <= 0


@pytest.mark.slow
@pytest.mark.hostile
def test_two_supervisors_on_two_hosts_fight_over_a_run_and_the_stale_one_writes_nothing(
    database: str, tmp_path: Path
) -> None:
    """host-a's supervisor is wedged (SIGSTOP) with its lead's model call in flight until its heartbeat is
    stale; host-b, sharing the run's directory but not its lock file, resumes the run to its end. When
    host-a wakes, its answer from the model is refused by the lease, it stops saying why, and the run holds
    host-b's work only: one answer, written once."""
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "shared-home"  # the shared storage both hosts see
    with SimServer() as sim:
        claude = {"ANTHROPIC_BASE_URL": sim.url, "ANTHROPIC_API_KEY": "sk-test"}
        sim.hold_responses()  # host-a's first model call waits, in flight
        a = subprocess.Popen(
            [sys.executable, "-m", "teamrt", "run", "--prompt", "Tell me about this project.", "--quiet"],
            cwd=project, env=host("host-a", home, **claude), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not sim.calls:
                assert time.monotonic() < deadline and a.poll() is None, a.stderr.read() if a.stderr else ""
                time.sleep(0.05)
            for _ in range(50):  # wedge it between transactions, so that no row lock outlives it
                a.send_signal(signal.SIGSTOP)
                time.sleep(0.05)
                if _not_in_a_transaction(database, a.pid):
                    break
                a.send_signal(signal.SIGCONT)
                time.sleep(0.05)
            [(run_id, token_a)] = sql(database, "SELECT id, owner_token FROM runs")
            sql(database, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")  # its lease ran out
            sim.release_responses()  # host-a's answer waits in its socket; host-b's calls go through
            listed = json.loads(
                teamrt("ls", "--json", env=host("host-b", home, **claude), cwd=project).stdout
            )
            assert [(r["id"], r["status"]) for r in listed] == [(run_id, "crashed")]

            b = teamrt("resume", run_id, env=host("host-b", home, **claude), cwd=project)
            assert b.returncode == 0, b.stderr
            assert b.stdout == "[sim] agent received: Tell me about this project.\n", "the answer, once"
        finally:
            a.send_signal(signal.SIGCONT)
        out, err = a.communicate(timeout=60)
    assert a.returncode != 0 and "Traceback" not in err, err
    assert f"run {run_id!r} was taken over by pid " in err and "on host-b" in err, err
    assert out == "", "host-a printed no answer"
    owners = sql(
        database,
        "SELECT data FROM events WHERE run_id = :run AND kind = 'run.owner' ORDER BY id", run=run_id,
    )  # fmt: skip
    assert [(json.loads(d) if isinstance(d, str) else d)["host"] for (d,) in owners] == ["host-a", "host-b"]
    [(status, token)] = sql(database, "SELECT status, owner_token FROM runs WHERE id = :run", run=run_id)
    assert (status, token) == ("done", token_a + 1)
    answers = sql(
        database,
        "SELECT content FROM turns WHERE run_id = :run AND role = 'assistant' AND agent = 'lead'", run=run_id,
    )  # fmt: skip
    assert len(answers) == 1, "the lead answered once, under host-b"
    statuses = sql(
        database, "SELECT kind FROM events WHERE run_id = :run AND kind = 'run.status'", run=run_id
    )
    assert statuses == [("run.status",)], "host-a wrote no end of its own after the takeover"


# -- steering from another host --------------------------------------------------------------------------

WRITE = Reply().call("Write", {"file_path": "note.txt", "content": "hello\n"})
WRITE_TWO = Reply().call("Write", {"file_path": "two.txt", "content": "two\n"})


def _team(project: Path) -> Team:
    lead = Role("lead", "lead", None, None, None, None, None)
    return Team(path=project / "team.toml", name="t", lead=lead, on_ask="deny", ask_wait=60)


async def _asks(run_dir: Path, count: int) -> list[Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with reading(run_dir, RUN) as reader:
            asks = pending_asks(reader)
        if len(asks) >= count:
            return asks
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} ask(s) never waited")


def test_send_answer_and_stop_from_a_host_that_cannot_see_the_run_reach_its_owner(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner (this process, host-a) runs a lead whose calls wait for approval; a second process on
    host-b, whose home holds no run directory, sends the lead a message, allows the first call and stops
    the run, each through the database, each acknowledged by the owner."""
    run_dir = on_host_a(tmp_path, monkeypatch)
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = host("host-b", tmp_path / "home-b")
    model = ScriptedModel([WRITE, WRITE_TWO])
    team = _team(project)
    store = create_store(run_dir, RUN, task="go", workdir=str(project), settings={"team": team_to_json(team)})
    said: dict[str, subprocess.CompletedProcess[str]] = {}

    async def from_host_b() -> None:
        [ask] = await _asks(run_dir, 1)
        said["send"] = await asyncio.to_thread(
            teamrt, "send", RUN, "lead", "hello from host-b", env=elsewhere, cwd=tmp_path
        )
        said["answer"] = await asyncio.to_thread(
            teamrt, "answer", RUN, ask.id, "allow", env=elsewhere, cwd=tmp_path
        )
        await _asks(run_dir, 1)  # the second call's ask (the first was answered)
        while (project / "two.txt").exists() or not (project / "note.txt").exists():
            await asyncio.sleep(0.02)
        said["stop"] = await asyncio.to_thread(teamrt, "stop", RUN, env=elsewhere, cwd=tmp_path)

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project), project=project,
            settings=FAST, models={"sim": model},
        )  # fmt: skip
        work = asyncio.create_task(supervisor.run("go"))
        await from_host_b()
        return await asyncio.wait_for(work, 60)

    try:
        outcome = asyncio.run(go())
        events = store.reader.events(kinds=("steering.delivered",))
        mail = store.reader.mail("lead", sender="user")
    finally:
        store.close()
    assert not (tmp_path / "home-b" / "runs").exists(), "host-b never had the run's directory"
    for name, done in said.items():
        assert done.returncode == 0, (name, done.stderr)
        said_by = done.stdout + done.stderr  # send says it on stdout, with its id; answer, stop on stderr
        assert "delivered through the database to its owner on host-a" in said_by, (name, said_by)
    assert outcome.status == "stopped" and outcome.reason == "stopped by user"
    assert (project / "note.txt").exists() and not (project / "two.txt").exists()
    second = json.dumps(model.requests[1].messages[-1]["content"])
    assert "hello from host-b" in second, "the message reached the lead with the allowed call's result"
    assert [(e.data["from_host"], e.data["outcome"], e.data["to"]) for e in events] == [
        ("host-b", "delivered", "lead"), ("host-b", "delivered", "supervisor"),
        ("host-b", "delivered", "supervisor"),
    ]  # fmt: skip
    assert [m.message["body"] for m in mail] == ["hello from host-b"], "ingested once"
    assert sql(database, "SELECT count(*) FROM steering WHERE outcome IS DISTINCT FROM 'delivered'") == [(0,)]


def test_a_resume_where_the_run_s_directory_is_not_reachable_names_the_owning_host(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = on_host_a(tmp_path, monkeypatch)
    team = _team(tmp_path)
    store = create_store(
        run_dir, RUN, task="go", workdir=str(tmp_path), settings={"team": team_to_json(team)}
    )
    store._writer.close()  # no more heartbeats: as a crash leaves it
    sql(database, "UPDATE runs SET heartbeat_at = heartbeat_at - 3600")
    try:
        said = [
            teamrt("resume", RUN, *detach, env=host("host-b", tmp_path / "home-b"), cwd=tmp_path)
            for detach in ([], ["--detach"])
        ]
    finally:
        store._lock.release()
        store.close()
    for done in said:
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr == (
            f"teamrt: run {RUN}'s directory {tmp_path / 'home-b' / 'runs' / RUN} is not reachable on host-b"
            f" (last owned by pid {os.getpid()} on host-a); resume it there, or on a host that shares the"
            " directory\n"
        )


# -- hostile steering --------------------------------------------------------------------------------------


@pytest.mark.hostile
def test_steering_rows_that_are_not_a_person_s_mail_for_this_run_are_refused_and_the_rest_delivered(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone who can write the steering table is trusted as a person, but what they write is checked as
    any mail is: a broken message, another run's, one claiming to come from an agent, one for an agent
    that does not exist, one whose id is a path and one reusing a delivered id with other words are each
    refused with the reason; the good one arrives."""
    run_dir = on_host_a(tmp_path, monkeypatch)
    good = Message.compose(run=RUN, sender="user", recipient="lead", body="the real one")
    hostile: list[dict[str, Any]] = [
        {"v": 1, "id": "x", "run": RUN},
        Message.compose(run="other", sender="user", recipient="lead", body="x").to_dict(),
        Message.compose(
            run=RUN,
            sender="lead",
            recipient="supervisor",
            body="stop",
            kind="control",
            data={"action": "stop", "agent": None},
        ).to_dict(),
        Message.compose(run=RUN, sender="user", recipient="ghost", body="boo").to_dict(),
        {**good.to_dict(), "id": "../../lead/new/x"},
    ]
    twin = {**good.to_dict(), "body": "the same id, other words"}  # after the good one: no overwrite

    async def scene() -> list[tuple[int, str | None]]:
        with (
            create_store(run_dir, RUN, task="go", workdir=str(tmp_path)) as store,
            Mailbox(run_dir / "mailbox", RUN) as mailbox,
        ):
            for name in ("lead", "supervisor"):
                mailbox.register(name)
            for raw in [*hostile, good.to_dict(), twin]:
                st.leave(database, RUN, raw, "host-b")
            relay = SteeringRelay(store, mailbox)
            assert await relay.deliver_waiting() == len(hostile) + 2
            assert await relay.deliver_waiting() == 0, "each is settled once"
            assert mailbox.open_maildir("lead").waiting() == [f"{good.id}.json"]
            assert mailbox.open_maildir("supervisor").waiting() == []
        return [(r, o) for r, o in sql(database, "SELECT id, outcome FROM steering ORDER BY id")]

    outcomes = [o for _, o in asyncio.run(scene())]
    assert outcomes[-2] == "delivered"
    assert outcomes[-1] == f"refused: message id {good.id} is already used by another message to 'lead'"
    assert [o.split(":")[0] if o else o for o in outcomes[:-2]] == ["refused"] * len(hostile)
    assert outcomes[1] == "refused: the message is for run 'other'"
    assert outcomes[2] == "refused: only 'user' steers a run from another host, not 'lead'"
    assert outcomes[3] == "refused: run 'r1' has no agent 'ghost'"
    assert outcomes[0] is not None and "not a valid message" in outcomes[0]
    assert outcomes[4] is not None and "not a valid message" in outcomes[4]


# -- watching from another host ----------------------------------------------------------------------------


def test_the_run_view_of_another_host_wakes_on_the_owner_s_commits_not_on_a_timer(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TUI's follower on host-b (no run directory there) reads the run from the database and learns of
    each commit by NOTIFY: nothing moved, nothing to read; a commit, one read."""
    from teamrt.tui.state import RunFollower

    run_dir = on_host_a(tmp_path, monkeypatch)

    async def scene() -> list[bool]:
        seen: list[bool] = []
        with create_store(run_dir, RUN, task="watch me", workdir=str(tmp_path)) as store:
            store._writer.close()  # no heartbeats: only the commits below move the run
            monkeypatch.setenv(HOST_ENV, "host-b")
            follower = RunFollower(tmp_path / "home-b" / "runs" / RUN, RUN)
            try:
                seen.append(follower.changed(None))  # a first look reads once
                assert follower.read(None).status == "running"
                seen.append(follower.changed(None))
                writer = create_engine(database, poolclass=NullPool)
                with writer.begin() as conn:  # a commit of the owner's, as its writer makes them
                    from teamrt.store.notify import COMMITS, notify

                    notify(conn, COMMITS, RUN)
                    conn.execute(text("UPDATE runs SET task = 'moved' WHERE id = :run"), {"run": RUN})
                writer.dispose()
                deadline = time.monotonic() + 10
                while not follower.changed(None):
                    assert time.monotonic() < deadline, "the commit's notification never came"
                    time.sleep(0.01)
                seen.append(True)
                seen.append(follower.changed(None))
            finally:
                follower.close()
        return seen

    assert asyncio.run(scene()) == [True, False, True, False]


def test_a_host_that_shares_the_run_s_directory_still_steers_through_the_database(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On shared storage host-b could write into the run's mailbox, but host-a's watcher would never see
    a write made on another machine: the message goes through the database, and arrives once."""
    monkeypatch.setenv(HOST_ENV, "host-a")
    home = tmp_path / "shared-home"
    run_dir = home / "runs" / RUN
    run_dir.mkdir(parents=True)

    async def scene() -> tuple[subprocess.CompletedProcess[str], list[str], list[Any]]:
        with (
            create_store(run_dir, RUN, task="go", workdir=str(tmp_path)) as store,
            Mailbox(run_dir / "mailbox", RUN) as mailbox,
        ):
            await store.add_agent("lead", kind="lead", model="sim")
            mailbox.register("lead")
            relay = asyncio.create_task(SteeringRelay(store, mailbox).run())
            try:
                sent = await asyncio.to_thread(
                    teamrt, "send", RUN, "lead", "over shared storage", env=host("host-b", home), cwd=tmp_path
                )
            finally:
                relay.cancel()
            waiting = mailbox.open_maildir("lead").waiting()
            rows = sql(database, "SELECT sent_from, outcome FROM steering")
        return sent, waiting, rows

    sent, waiting, rows = asyncio.run(scene())
    assert sent.returncode == 0, sent.stderr
    assert "; delivered through the database to its owner on host-a" in sent.stdout.splitlines()[0]
    assert waiting == [f"{sent.stdout.split()[1]}.json"], "one message, under the id the sender printed"
    assert rows == [("host-b", "delivered")]


def test_a_message_too_long_for_the_database_is_one_line_and_left_nowhere(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrt.runs import query as runs
    from teamrt.runs import steer

    run_dir = on_host_a(tmp_path, monkeypatch)

    async def scene() -> None:
        with create_store(run_dir, RUN, task="go", workdir=str(tmp_path)) as store:
            await store.add_agent("lead", kind="lead", model="sim")
            monkeypatch.setenv(HOST_ENV, "host-b")
            with pytest.raises(runs.RunsError) as refused:
                steer.send(tmp_path / "home-b" / "runs" / RUN, RUN, "lead", "x" * 2_000_000)
            assert str(refused.value).startswith("the message is 2,000,")
            assert str(refused.value).endswith(
                "bytes; one sent to a run on another host is at most 1,048,576"
            )

    asyncio.run(scene())
    assert sql(database, "SELECT count(*) FROM steering") == [(0,)]


def test_a_database_out_of_reach_is_one_line_for_ls_show_and_send(tmp_path: Path) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = host("host-b", tmp_path / "home", TEAMRT_DB=f"postgresql://teamrt:pw@127.0.0.1:{port}/teamrt")
    said = [
        teamrt(*argv, env=gone, cwd=tmp_path) for argv in (["ls"], ["show", RUN], ["send", RUN, "a", "x"])
    ]
    for done in said:
        assert done.returncode == 1 and done.stdout == "", done
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "Connection refused" in done.stderr and ":pw@" not in done.stderr, done.stderr
    assert said[0].stderr.startswith(
        f"teamrt: cannot read the runs in postgresql+psycopg://teamrt:***@127.0.0.1:{port}"
    )
    assert said[1].stderr.startswith(f"teamrt: no run named {RUN!r} in {tmp_path / 'home' / 'runs'} (")
