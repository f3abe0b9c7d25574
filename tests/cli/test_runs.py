"""``teamrt ls``, ``show``, ``send`` and ``stop`` over real run stores and mailboxes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from teamrt.home import existing_run_dir
from teamrt.mailbox import Mailbox, Message
from teamrt.runs.render import age_text, duration_text
from teamrt.store import Store, Usage, create_store
from tests.helpers.cli import cli

CRASHER = """
import asyncio, sys, time
from pathlib import Path
from teamrt.store import create_store

async def build() -> None:
    store = create_store(Path(sys.argv[1]), sys.argv[2], task="crash me\\nsecond line", workdir="/w")
    await store.add_agent("lead", kind="lead", model="sim")
    await store.begin_epoch("lead")

asyncio.run(build())
print("ready", flush=True)
time.sleep(120)
"""


SIM_TEAM = {"team": {"model": "sim", "lead": {}, "roles": {"reviewer": {"model": "sim:claude-opus-5"}}}}
"""A run's settings when every model of its team is the simulator."""


def new_store(
    runs: Path,
    run: str,
    task: str = "a task",
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    settings: dict[str, Any] | None = None,
) -> Store:
    (runs / run).mkdir()
    return create_store(
        runs / run, run, task=task, workdir="/work/proj", budget_usd=budget_usd, budget_tokens=budget_tokens,
        settings=settings,
    )  # fmt: skip


async def add(
    store: Store, name: str, kind: str, parent: str | None = None, answer: str | None = None
) -> None:
    """An agent with a mailbox, started, with one assistant turn (text ``answer``, or a tool call)."""
    await store.add_agent(name, kind=kind, model="sim", parent=parent, role=f"{name}-role")
    epoch = await store.begin_epoch(name)
    await store.append_turn(name, epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])
    content = (
        [{"type": "text", "text": answer}]
        if answer is not None
        else [{"type": "tool_use", "id": f"t-{name}", "name": "read", "input": {}}]
    )
    usage = Usage(input_tokens=100, output_tokens=50, cache_read_tokens=300, cost_usd=0.0125)
    await store.append_turn(name, epoch=epoch, role="assistant", content=content, model="sim", usage=usage)
    with Mailbox(existing_run_dir(store.run_id) / "mailbox", store.run_id) as mailbox:
        mailbox.register(name)


def finished_run(runs: Path, run: str, status: str = "done", **store_args: Any) -> None:
    async def build() -> None:
        with new_store(runs, run, task=f"finish as {status}", **store_args) as store:
            await add(store, "lead", "lead", answer="all done")
            await store.set_agent_status("lead", status)
            await store.set_run_status(status)

    asyncio.run(build())


def crashed_run(runs: Path, run: str) -> None:
    """A run whose owner process was SIGKILLed while it and its lead were running."""
    (runs / run).mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHER, str(runs / run), run], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def mail_files(runs: Path) -> list[Path]:
    return sorted(p for p in runs.rglob("mailbox/*/*/*") if p.is_file())


def one_error_line(code: int, out: str, err: str) -> str:
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("teamrt: ") and "Traceback" not in err
    return err


def test_ls_lists_every_run_newest_first_and_the_unreadable_with_their_problem(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(runs, "r-done")
    crashed_run(runs, "r-crashed")
    live = new_store(runs, "r-live", task="x" * 80 + "\nnot shown")
    asyncio.run(add(live, "lead", "lead"))
    finished_run(runs, "r-newer")
    with sqlite3.connect(runs / "r-newer" / "run.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099'")
    (runs / "r-empty" / "mailbox").mkdir(parents=True)  # a mailbox demo's directory, say
    for run, age in (("r-newer", 3600), ("r-empty", 7200)):  # an unreadable run's age is its directory's
        os.utime(runs / run, (time.time() - age, time.time() - age))
    (runs / "r-corrupt").mkdir()
    (runs / "r-corrupt" / "run.db").write_bytes(b"not a database at all" * 100)
    newest = live.reader.run().created_at + 0.01  # file times move by kernel ticks: set r-corrupt's
    os.utime(runs / "r-corrupt", (newest, newest))
    try:
        code, out, err = cli(capsys, "ls")
    finally:
        live.close()
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "AGE", "AGENTS", "COST", "TOKENS", "TASK"]
    rows = {line.split()[0]: line for line in lines[1:]}
    cells = {run: [re.sub(r"^\d+s$", "Ns", c) for c in line.split()] for run, line in rows.items()}
    assert list(rows) == [
        "r-corrupt",
        "r-live",
        "r-crashed",
        "r-done",
        "r-newer",
        "r-empty",
    ]
    assert cells["r-done"][1:] == ["done", "Ns", "1", "$0.0125", "450", "finish", "as", "done"]
    assert cells["r-crashed"][1:4] == ["crashed", "Ns", "1"]  # its lead was running, but no more
    assert rows["r-crashed"].endswith("crash me")
    assert cells["r-live"][1:10] == [
        "running",
        "(pid",
        f"{os.getpid()})",
        "Ns",
        "1,",
        "1",
        "running",
        "$0.0125",
        "450",
    ]
    assert rows["r-live"].endswith(" " + "x" * 47 + "...")
    assert cells["r-newer"][1:3] == ["?", "1h"]
    assert "written by a newer teamrt (schema 0099" in rows["r-newer"]
    assert cells["r-empty"][1:3] == ["?", "2h"]
    assert rows["r-empty"].endswith("no run store here (run.db missing or empty)")
    assert rows["r-corrupt"].endswith("cannot read the store of run 'r-corrupt': file is not a database")


LS_KEYS = {
    "id", "status", "started", "task", "agents", "running", "cost_usd", "simulated", "tokens", "budget_usd",
    "owner_pid", "store_behind", "problem", "alone",
}  # fmt: skip


@pytest.mark.usefixtures("store_db")
def test_ls_shows_the_owner_pid_budget_and_simulated_costs_and_says_it_all_as_json(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(runs, "r-plain")
    finished_run(runs, "r-budget", budget_usd=5.0)
    finished_run(runs, "r-sim", settings=SIM_TEAM)
    (runs / "r-empty").mkdir()
    live = new_store(runs, "r-live", task="live\nsecond line", budget_usd=0.5)
    asyncio.run(add(live, "lead", "lead"))
    try:
        code, out, err = cli(capsys, "ls")
        assert code == 0 and err == ""
        rows = {line.split()[0]: line for line in out.splitlines()[1:]}
        assert f" running (pid {os.getpid()}) " in rows["r-live"], "this process owns the live run"
        assert " $0.0125/$0.50 " in rows["r-live"] and " $0.0125/$5.00 " in rows["r-budget"]
        assert " $0.0125 (sim) " in rows["r-sim"] and " $0.0125 " in rows["r-plain"]
        assert "(pid" not in rows["r-plain"]
        code, out, err = cli(capsys, "ls", "--json")
    finally:
        live.close()
    assert code == 0 and err == ""
    listed = json.loads(out)
    assert isinstance(listed, list) and all(set(r) == LS_KEYS for r in listed)
    by_id = {r["id"]: r for r in listed}
    assert listed[0]["id"] == "r-live", "newest first, as ls lists them"
    assert by_id["r-live"] == {
        "id": "r-live", "status": "running", "started": by_id["r-live"]["started"],
        "task": "live\nsecond line", "agents": 1, "running": 1, "cost_usd": 0.0125, "simulated": False,
        "tokens": 450, "budget_usd": 0.5, "owner_pid": os.getpid(), "store_behind": 0, "problem": None,
        "alone": None,
    }  # fmt: skip
    started = datetime.fromisoformat(by_id["r-live"]["started"])
    assert by_id["r-live"]["started"].endswith("Z") and started.utcoffset() == timedelta(0)
    assert abs(started.timestamp() - time.time()) < 60
    assert (by_id["r-plain"]["status"], by_id["r-plain"]["owner_pid"], by_id["r-plain"]["running"]) == (
        "done", None, 0,
    )  # fmt: skip
    assert by_id["r-sim"]["simulated"] is True and by_id["r-budget"]["budget_usd"] == 5.0
    assert by_id["r-empty"]["problem"] == "no run store here " + (
        "(not in the database)" if os.environ.get("TEAMRT_DB") else "(run.db missing or empty)"
    )
    assert by_id["r-empty"]["status"] is None and by_id["r-empty"]["cost_usd"] is None


def test_ls_json_without_runs_is_an_empty_array(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, "ls", "--json") == (0, "[]\n", "")


def test_ls_without_runs_says_so_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "nowhere"
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "ls"],
        env={**os.environ, "TEAMRT_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == f"no runs yet in {home / 'runs'}; start one with: teamrt run --prompt '...'\n"
    assert not home.exists()


@pytest.mark.usefixtures("store_db")
def test_show_prints_header_tree_answers_and_tasks(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_answer = "\n".join(f"finding {i}" for i in range(1, 10))

    async def build() -> None:
        store = new_store(
            runs, "r1", task="Survey the code\nthen report", budget_usd=2.0, budget_tokens=10**6
        )
        with store:
            await add(store, "lead", "lead")  # its last turn is a tool call: no answer yet
            await add(store, "researcher", "team", parent="lead", answer=long_answer)
            await add(store, "scout", "fork", parent="researcher", answer="the parser is in src/parse.py")
            await add(store, "fixer", "worktree", parent="lead", answer="fixed")
            await store.set_agent_status("scout", "done")
            await store.set_agent_status("fixer", "failed", "budget exceeded")
            first = await store.create_task("Survey", "read it all", created_by="lead")
            await store.claim_task(first.id, "researcher")
            await store.create_task("Report", "write it", created_by="lead", blocked_by=[first.id])
            await store.set_run_status("done")

    asyncio.run(build())
    code, out, err = cli(capsys, "show", "r1")
    assert code == 0 and err == ""
    head, agents, answers, tasks = out.split("\n\n")
    assert head.splitlines()[0] == "run r1: done"
    assert "task     Survey the code\n         then report\nworkdir  /work/proj\nstarted  " in head
    assert "tokens   1,600 in (75% read from cache), 200 out" in head
    assert "cost     $0.0500; budget $2.00, 1,000,000 tokens" in head
    header, *lines = agents.splitlines()[1:]
    rows = [line.split() for line in lines]
    tree = [line[2 : header.index("KIND")].rstrip() for line in lines]
    assert tree == ["lead", "  researcher", "    scout", "  fixer"]
    assert rows[0][1:] == ["lead", "lead-role", "sim", "1", "1", "450", "$0.0125", "(sim)", "running"]
    assert rows[2][1:] == ["fork", "scout-role", "sim", "1", "1", "450", "$0.0125", "(sim)", "done"]
    assert rows[3][-3:] == ["failed:", "budget", "exceeded"]
    assert answers.splitlines()[:2] == ["answers", "  lead: (no answer)"], "the run is over: no 'yet'"
    assert "  researcher:\n    finding 1\n" in answers
    more = "    ... (3 more lines: teamrt show r1 --full)\n"
    assert f"    finding 6\n{more}  scout:\n    the parser is in src/parse.py" in answers
    assert "  fixer:\n    fixed" in answers
    assert "finding 7" not in answers
    assert [line.split() for line in tasks.splitlines()] == [
        ["tasks"],
        ["ID", "STATUS", "OWNER", "SUBJECT", "BLOCKED", "BY"],
        ["#1", "in_progress", "researcher", "Survey"],
        ["#2", "open", "-", "Report", "#1"],
    ]


async def _show_scene(store: Store) -> None:
    """A live run: a lead still at work, a finished researcher with a long answer, a reviewer that
    failed with no answer, a worktree agent whose worktree is kept, tasks, a waiting ask, a merge."""
    long_answer = "\n".join(f"finding {i}" for i in range(1, 10))
    await add(store, "lead", "lead")
    await add(store, "researcher", "team", parent="lead", answer=long_answer)
    await store.set_agent_status("researcher", "done")
    await store.add_agent("reviewer", kind="team", model="sim", parent="lead", role="reviewer")
    await store.set_agent_status("reviewer", "failed", "model error:\noverloaded")
    workspace = existing_run_dir(store.run_id) / "worktrees" / "coder"
    workspace.mkdir(parents=True)
    await store.add_agent(
        "coder", kind="worktree", model="claude-sonnet-5-5", parent="lead", workspace=str(workspace),
        branch=f"teamrt/{store.run_id}-coder",
    )  # fmt: skip
    await store.queue_merge("coder", f"teamrt/{store.run_id}-coder", "a" * 40)
    await store.set_merge_status("coder", "red", output="1 failed")
    first = await store.create_task(
        "Survey " + "everything " * 10, "read it all\nthen more", created_by="lead"
    )
    await store.create_task("Report", "write it", created_by="lead", blocked_by=[first.id])
    ask = {
        "id": "ask-1",
        "tool": "bash",
        "input": {"command": "make test"},
        "reason": "ask rule",
        "wait_s": 30,
    }
    await store.append_event("ask", ask, agent="researcher")


@pytest.mark.usefixtures("store_db")
def test_show_json_says_the_whole_run_in_one_object(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = new_store(runs, "r1", task="Survey the code\nthen report", budget_usd=2.0, budget_tokens=10**6)
    try:
        asyncio.run(_show_scene(store))
        code, out, err = cli(capsys, "show", "r1", "--json")
    finally:
        store.close()
    assert code == 0 and err == ""
    shown = json.loads(out)
    assert {k: shown[k] for k in ("id", "status", "status_reason", "task", "workdir", "owner_pid")} == {
        "id": "r1", "status": "running", "status_reason": None, "task": "Survey the code\nthen report",
        "workdir": "/work/proj", "owner_pid": os.getpid(),
    }  # fmt: skip
    assert (shown["budget_usd"], shown["budget_tokens"], shown["simulated"]) == (2.0, 10**6, False)
    assert (shown["cost_usd"], shown["tokens"]) == (0.025, 900)
    assert shown["usage"] == {
        "input_tokens": 200, "output_tokens": 100, "cache_creation_tokens": 0, "cache_read_tokens": 600
    }  # fmt: skip
    assert shown["finished"] is None and datetime.fromisoformat(shown["started"]).timestamp() > 0
    agents = {a["name"]: a for a in shown["agents"]}
    assert [a["name"] for a in shown["agents"]] == ["lead", "researcher", "reviewer", "coder"]
    assert agents["researcher"]["answer"] == "\n".join(f"finding {i}" for i in range(1, 10)), "whole"
    assert agents["researcher"]["simulated"] is True and agents["coder"]["simulated"] is False
    assert (agents["lead"]["answer"], agents["reviewer"]["answer"]) == (None, None)
    assert (agents["reviewer"]["status"], agents["reviewer"]["status_reason"]) == (
        "failed", "model error:\noverloaded",
    )  # fmt: skip
    assert {k: agents["researcher"][k] for k in ("kind", "parent", "depth", "turns", "tokens")} == {
        "kind": "team", "parent": "lead", "depth": 1, "turns": 1, "tokens": 450,
    }  # fmt: skip
    assert shown["tasks"][0]["subject"] == "Survey " + "everything " * 10
    assert shown["tasks"][0]["description"] == "read it all\nthen more"
    assert shown["tasks"][1]["blocked_by"] == [shown["tasks"][0]["id"]]
    [ask] = shown["asks"]
    assert {k: ask[k] for k in ("id", "agent", "tool", "input", "wait_s")} == {
        "id": "ask-1", "agent": "researcher", "tool": "bash", "input": {"command": "make test"}, "wait_s": 30,
    }  # fmt: skip
    [merge] = shown["merges"]
    assert (merge["agent"], merge["status"], merge["attempts"]) == ("coder", "red", 1)
    assert shown["worktrees_kept"] == [
        {"agent": "coder", "path": str(runs / "r1" / "worktrees" / "coder"), "branch": "teamrt/r1-coder"}
    ]


def test_show_cuts_long_answers_and_tasks_unless_full(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = new_store(runs, "r1", task="\n".join(f"step {i}" for i in range(1, 10)), settings=SIM_TEAM)
    try:
        asyncio.run(_show_scene(store))
        code, out, err = cli(capsys, "show", "r1")
        code_full, full, _ = cli(capsys, "show", "r1", "--full")
    finally:
        store.close()
    assert code == code_full == 0 and err == ""
    assert out.startswith(f"run r1: running (pid {os.getpid()})\n"), out
    assert "cost     $0.0250 (sim); no budget\n" in out
    assert "         step 6\n         ... (3 more lines: teamrt show r1 --full)\n" in out
    assert "    finding 6\n    ... (3 more lines: teamrt show r1 --full)\n" in out
    assert "  lead: (no answer yet)\n" in out, "the lead of a live run is still at work"
    assert "  reviewer: (no answer; failed: model error: overloaded)\n" in out, "it ended without one"
    assert "Survey everything everything" in out and "read it all" not in out
    assert "step 9" in full and "finding 9" in full and "more lines" not in full
    assert "Survey " + "everything " * 9 + "everything" in full
    assert "\n      read it all\n      then more\n" in full, "each task's description under its row"
    assert "  reviewer: (no answer; failed: model error: overloaded)\n" in full


def test_show_of_a_crashed_run_says_why_an_agent_has_no_answer(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crashed_run(runs, "r1")
    code, out, _ = cli(capsys, "show", "r1")
    assert code == 0 and "  lead: (no answer; running when the run crashed)\n" in out
    assert "(pid" not in out, "no owner pid for a run whose owner is gone"
    code, out, _ = cli(capsys, "show", "r1", "--json")
    shown = json.loads(out)
    assert (shown["status"], shown["owner_pid"]) == ("crashed", None)


def test_unknown_run_is_one_line_and_creates_nothing(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "show", "nope"], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"teamrt: no run named 'nope' in {runs}\n"
    for args in (
        ["send", "nope", "lead", "hi"], ["stop", "nope"], ["show", "../x"], ["show", "nope", "--json"],
        ["show", "nope", "--full"], ["logs", "nope", "--json"], ["answer", "nope", "ask-1", "allow"],
    ):  # fmt: skip
        err = one_error_line(*cli(capsys, *args))
        assert err == f"teamrt: no run named {args[1]!r} in {runs}\n"
    assert list(runs.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [["show"], ["logs", "--json"], ["send", "r1"], ["answer", "r1", "ask-1", "maybe"], ["gc", "--force=1"]],
)
def test_a_usage_error_is_one_line_pointing_to_the_commands_help(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"teamrt {args[0]}: ") and err.endswith(f" (see 'teamrt {args[0]} --help')\n"), err


def test_models_json_is_the_price_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "models", "--json")
    assert code == 0 and err == ""
    table = {m["model"]: m for m in json.loads(out)}
    sonnet = table["claude-sonnet-4-5"]
    assert {k: sonnet[k] for k in ("input", "output", "cache_read", "min_cache_tokens", "from_settings")} == {
        "input": 3, "output": 15, "cache_read": 0.3, "min_cache_tokens": 1024, "from_settings": False,
    }  # fmt: skip
    assert sonnet["long_context"]["over_tokens"] == 200_000 and sonnet["long_context"]["input"] == 6
    assert table["claude-opus-4-1"]["long_context"] is None


def test_send_to_an_unknown_agent_or_one_without_a_mailbox_writes_nothing(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_run(runs, "r1")
    asyncio.run(_add_agent_without_mailbox(runs, "r1", "ghost"))
    (runs / "r2").mkdir()  # a directory without a store
    before = mail_files(runs)
    err = one_error_line(*cli(capsys, "send", "r1", "bob", "hello"))
    assert err == "teamrt: no agent named 'bob' in run 'r1' (its agents: ghost, lead)\n"
    err = one_error_line(*cli(capsys, "send", "r1", "ghost", "hello"))
    assert err.startswith("teamrt: agent 'ghost' of run 'r1' has no mailbox at ")
    err = one_error_line(*cli(capsys, "send", "r1", "lead", "  "))
    assert "the message is empty" in err
    err = one_error_line(*cli(capsys, "send", "r2", "lead", "hello"))
    assert err == f"teamrt: no run named 'r2' in {runs}\n"
    assert mail_files(runs) == before
    assert not (runs / "r1" / "mailbox" / "ghost").exists() and not (runs / "r2" / "mailbox").exists()


async def _add_agent_without_mailbox(runs: Path, run: str, name: str) -> None:
    from teamrt.store import open_store

    with open_store(runs / run, run) as store:
        await store.add_agent(name, kind="team", model="sim", parent="lead")


@pytest.mark.usefixtures("store_db")
def test_send_lands_a_parseable_message_in_new(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crashed_run(runs, "r1")  # a crashed run takes mail too: it waits for the resume
    with Mailbox(runs / "r1" / "mailbox", "r1") as mailbox:
        mailbox.register("lead")
    text = "Please also check the tests. " * 10
    code, out, err = cli(capsys, "send", "r1", "lead", text)
    assert code == 0 and err == ""
    [path] = (runs / "r1" / "mailbox" / "lead" / "new").iterdir()
    msg = Message.decode(path.read_bytes())
    assert out == (
        f"sent {msg.id} to lead; delivered (in lead's inbox)\n"
        "run r1 crashed: lead reads it once the run is resumed (teamrt resume r1)\n"
    )
    assert path.name.startswith(msg.id)
    assert (msg.sender, msg.recipient, msg.kind, msg.run, msg.body) == ("user", "lead", "message", "r1", text)
    assert len(msg.summary) == 80 and msg.summary.startswith("Please also check the tests.")


@pytest.mark.usefixtures("store_db")
def test_stop_refuses_a_finished_or_crashed_run(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    finished_run(runs, "r-done", "failed")
    crashed_run(runs, "r-crashed")
    err = one_error_line(*cli(capsys, "stop", "r-done"))
    assert err == "teamrt: run 'r-done' is failed; there is nothing to stop\n"
    err = one_error_line(*cli(capsys, "stop", "r-crashed", "lead"))
    assert err == "teamrt: run 'r-crashed' crashed; resume it with teamrt resume r-crashed\n"
    assert mail_files(runs) == []
    assert not (runs / "r-crashed" / "mailbox").exists()
    code, out, _ = cli(capsys, "show", "r-crashed")
    assert code == 0 and out.startswith("run r-crashed: crashed (last heartbeat ")
    assert "); resume it with teamrt resume r-crashed\n" in out
    assert out.splitlines()[10].endswith("  running when the run crashed")


@pytest.mark.usefixtures("store_db")
def test_stop_asks_the_supervisor_of_a_live_run(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = new_store(runs, "r1")
    try:
        asyncio.run(add(store, "lead", "lead"))
        asyncio.run(add(store, "helper", "team", parent="lead", answer="done"))
        asyncio.run(store.set_agent_status("helper", "done"))
        code, out, err = cli(capsys, "stop", "r1")
        assert code == 0
        assert err == "teamrt: note: this run had no supervisor mailbox yet; the request waits there\n"
        [path] = (runs / "r1" / "mailbox" / "supervisor" / "new").iterdir()
        run_stop = Message.decode(path.read_bytes())
        assert out == f"asked the supervisor of run r1 to stop the run (message {run_stop.id})\n"
        assert (run_stop.sender, run_stop.kind, run_stop.data) == (
            "user",
            "control",
            {"action": "stop", "agent": None},
        )
        code, out, err = cli(capsys, "stop", "r1", "lead")
        assert code == 0 and err == "" and "to stop agent lead (message " in out
        agent_stop = next(
            m for m in map(Message.decode, (p.read_bytes() for p in path.parent.iterdir())) if m != run_stop
        )
        assert agent_stop.data == {"action": "stop", "agent": "lead"}
        err = one_error_line(*cli(capsys, "stop", "r1", "helper"))
        assert err == "teamrt: agent 'helper' of run 'r1' is done; there is nothing to stop\n"
        err = one_error_line(*cli(capsys, "stop", "r1", "nobody"))
        assert err == "teamrt: no agent named 'nobody' in run 'r1' (its agents: helper, lead)\n"
        assert len(list(path.parent.iterdir())) == 2
    finally:
        store.close()


def test_help_imports_neither_the_store_nor_sqlalchemy() -> None:
    code = (
        "import sys, teamrt.cli;"
        " print(sorted(m for m in sys.modules if m.startswith(('sqlalchemy', 'teamrt.store'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout == "[]\n", result.stderr


def test_ages_and_durations_read_at_a_glance() -> None:
    assert [age_text(s) for s in (-1, 42, 180, 7200, 4 * 86400 + 5)] == ["0s", "42s", "3m", "2h", "4d"]
    assert [duration_text(s) for s in (9, 192, 7500, 97200)] == ["9s", "3m 12s", "2h 05m", "1d 3h"]
