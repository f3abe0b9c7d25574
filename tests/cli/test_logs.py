"""``teamrt run --detach`` and ``teamrt logs``: real processes, real stores, the simulator as the model."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.mailbox import is_name
from teamrt.models.reply import Reply
from teamrt.runs import follow as logs
from teamrt.runs.follow import describe_event, follow, format_event
from teamrt.runs.query import RunsError
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest, echo
from teamrt.store import EventRecord, Store, create_store, open_reader
from teamrt.terminal import clean
from tests.cli.test_run import lead_answer, teamrt
from tests.helpers.events import marker

TIMEOUT_S = 60


def detach(*args: str, project: Path, **env: str) -> str:
    """Start a run with --detach; return its id, checking that the command said only that."""
    result = teamrt("run", *args, "--detach", project=project, **env)
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.removesuffix("\n")
    assert is_name(run_id) and "\n" not in run_id, result.stdout
    assert f"teamrt logs {run_id} -f" in result.stderr
    return run_id


def runs_dir(project: Path) -> Path:
    return project / ".teamrt" / "runs"


class Lines:
    """The stdout of a ``teamrt`` process, line by line as it comes, read by a thread."""

    def __init__(self, *args: str, project: Path, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "teamrt", *args],
            env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt"), **env},
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, text: str) -> None:
        """Wait for a line holding ``text``."""
        deadline = time.monotonic() + TIMEOUT_S
        while not any(text in line for line in self.seen):
            line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"ended before a line with {text!r}: {self.seen}"
            self.seen.append(line)

    def to_the_end(self) -> int:
        while (line := self._queue.get(timeout=TIMEOUT_S)) is not None:
            self.seen.append(line)
        return self.proc.wait(timeout=TIMEOUT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Gate:
    """A simulator whose every answer waits until the test opens the gate: a run that stays live."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.asked = threading.Event()
        self.server = SimServer(default=self._answer)

    def _answer(self, request: SimRequest) -> Reply:
        self.asked.set()
        self.open.wait(timeout=TIMEOUT_S)
        return echo(request)

    @property
    def env(self) -> dict[str, str]:
        """A Claude model name served by this simulator (loopback, so allowed in tests)."""
        return {"ANTHROPIC_BASE_URL": self.server.url, "ANTHROPIC_API_KEY": "test-key"}


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    try:
        yield g
    finally:
        g.open.set()
        g.server.close()


@pytest.fixture
def lines() -> Iterator[list[Lines]]:
    """Every ``Lines`` a test starts, killed at its end if still running."""
    started: list[Lines] = []
    yield started
    for each in started:
        each.close()


def kinds(output: list[str]) -> list[str]:
    return [line.split()[2] for line in output if line.startswith(" ") and line.split()[0].startswith("+")]


# -- run --detach --------------------------------------------------------------------


def test_detach_prints_the_run_id_and_logs_follow_it_to_the_end(tmp_path: Path) -> None:
    run_id = detach("--prompt", "Say hello.", "--model", "sim", project=tmp_path)
    followed = teamrt("logs", run_id, "-f", project=tmp_path)
    assert followed.returncode == 0, followed.stderr
    out = followed.stdout.splitlines()
    assert kinds(out)[0] == "run.created" and "task: Say hello." in out[0]
    assert {"agent.started", "agent.done", "run.status"} <= set(kinds(out))
    assert out[-1] == f"run {run_id} ended: done"
    assert all(len(line) <= logs.LINE_CHARS for line in out)
    shown = teamrt("show", run_id, project=tmp_path)
    assert shown.stdout.startswith(f"run {run_id}: done"), shown.stdout
    output = (runs_dir(tmp_path) / run_id / logs.OUTPUT_LOG).read_text()
    answer = lead_answer(runs_dir(tmp_path) / run_id)
    assert answer.startswith("2 of 2 roles reported.") and clean(answer) in output, "the answer, in its log"
    assert f"run {run_id}: done" in output


@pytest.mark.hostile
def test_a_detached_run_never_imports_a_module_an_agent_left_at_the_top_of_the_repository(
    tmp_path: Path,
) -> None:
    """``python -m`` puts the working directory first on ``sys.path``: a ``queue.py`` or ``json/`` that an
    agent wrote at the top of the repository would be imported by the detached run in place of the
    standard library's, outside the sandbox. The run's process starts with ``-P``, so neither is."""
    marker = tmp_path / "imported"
    trap = f"import pathlib\npathlib.Path({str(marker)!r}).write_text(__name__)\n"
    (tmp_path / "queue.py").write_text(trap)
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "__init__.py").write_text(trap)
    run_id = detach("--prompt", "Say hello.", "--model", "sim", project=tmp_path)
    followed = teamrt("logs", run_id, "-f", project=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines()[-1] == f"run {run_id} ended: done"
    assert not marker.exists(), f"{marker.read_text()} was imported from the repository"


def test_a_detached_run_gets_every_argument(tmp_path: Path) -> None:
    prompt = "--detach -x: a task that looks like options"
    run_id = detach(
        f"--prompt={prompt}", "--model", "sim", "--max-turns", "3", "--budget-usd", "0.5",
        "--budget-tokens", "90000", "--quiet", "--agent", "lead", project=tmp_path,
    )  # fmt: skip
    assert teamrt("logs", run_id, "-f", project=tmp_path).returncode == 0
    reader = open_reader(runs_dir(tmp_path) / run_id, run_id)
    try:
        run = reader.run()
        assert (run.task, run.budget_usd, run.budget_tokens, run.status) == (prompt, 0.5, 90000, "done")
    finally:
        reader.close()


@pytest.mark.usefixtures("store_db")
def test_logs_follow_prints_events_while_the_run_lives(
    tmp_path: Path, gate: Gate, lines: list[Lines]
) -> None:
    run_id = detach(
        "--prompt", "Wait for the gate.", "--model", "claude-sonnet-5-5", project=tmp_path, **gate.env
    )
    assert gate.asked.wait(TIMEOUT_S), "the detached run called its model"
    live = Lines("logs", run_id, "-f", project=tmp_path)
    lines.append(live)
    live.until("agent.started")
    snapshot = teamrt("logs", run_id, project=tmp_path)
    assert snapshot.returncode == 0 and "agent.started" in snapshot.stdout and "ended" not in snapshot.stdout
    assert live.proc.poll() is None, "-f waits while the lead waits for its model"
    gate.open.set()
    assert live.to_the_end() == 0
    order = kinds(live.seen)
    assert order[:2] == ["run.created", "run.owner"] and order[-1] == "run.status"
    assert order.index("agent.started") < order.index("agent.done") < order.index("run.status")
    assert live.seen[-1] == f"run {run_id} ended: done"


def test_logs_follow_exits_1_when_the_run_does_not_end_done(tmp_path: Path) -> None:
    run_id = detach("--prompt", "x", "--model", "sim", "--budget-tokens", "1", project=tmp_path)
    followed = teamrt("logs", run_id, "-f", project=tmp_path)
    assert followed.returncode == 1
    assert "budget exhausted" in followed.stdout
    assert followed.stdout.splitlines()[-1] == f"run {run_id} ended: stopped"


@pytest.mark.usefixtures("store_db")
def test_logs_follow_ends_when_the_run_crashes(tmp_path: Path, gate: Gate, lines: list[Lines]) -> None:
    run_id = detach("--prompt", "x", "--model", "claude-sonnet-5-5", project=tmp_path, **gate.env)
    assert gate.asked.wait(TIMEOUT_S)
    live = Lines("logs", run_id, "-f", project=tmp_path)
    lines.append(live)
    live.until("agent.started")
    reader = open_reader(runs_dir(tmp_path) / run_id, run_id)
    try:
        owner = reader.run().owner
    finally:
        reader.close()
    assert owner is not None
    os.kill(owner.pid, signal.SIGKILL)
    assert live.to_the_end() == 1
    assert live.seen[-1] == f"run {run_id} ended: crashed"


def test_logs_prints_every_event_of_the_store_in_order(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text(
        '[team]\nmodel = "sim"\nprompt = "Plan the work."\n[roles.reviewer]\n'
    )
    assert teamrt("run", "team.toml", project=tmp_path).returncode == 0
    [run_dir] = runs_dir(tmp_path).iterdir()
    result = teamrt("logs", run_dir.name, project=tmp_path)
    assert result.returncode == 0, result.stderr
    reader = open_reader(run_dir, run_dir.name)
    try:
        started, events = reader.run().created_at, reader.events()
    finally:
        reader.close()
    assert len(events) > 5
    assert result.stdout.splitlines() == [format_event(e, started) for e in events]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("team.toml",), "modle"),
        (("absent.toml", "--prompt", "x"), "absent.toml"),
        (("empty.toml", "--model", "sim"), "no prompt"),
        (("--prompt", "x", "--agent", "nobody"), "no agent named 'nobody'"),
        (("--prompt", "x", "--model", "claude-sonnet-5-5"), "ANTHROPIC_API_KEY"),
        (("empty.toml", "--prompt", "x", "--model", "claude-sonnet-5-5"), "ANTHROPIC_API_KEY"),
    ],
)
def test_detach_refuses_a_mistake_in_one_line_and_creates_no_run(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    (tmp_path / "team.toml").write_text("[team]\nmodle = 'sim'\n")
    (tmp_path / "empty.toml").write_text("")
    result = teamrt("run", *args, "--detach", project=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and said in result.stderr, result.stderr
    assert result.stdout == ""
    assert not runs_dir(tmp_path).exists() or not any(runs_dir(tmp_path).iterdir())


def test_a_detached_run_that_cannot_start_shows_its_output(tmp_path: Path) -> None:
    """Every check passes, but the run's store cannot be created: the child's own words are the error."""
    unreachable = f"sqlite:///{tmp_path / 'missing' / 'runs.db'}"
    result = teamrt(
        "run", "--prompt", "x", "--model", "sim", "--detach", project=tmp_path, TEAMRT_DB=unreachable
    )
    assert result.returncode == 1 and result.stdout == ""
    *tail, last = result.stderr.splitlines()
    assert "unable to open database file" in "\n".join(tail)
    [run_dir] = runs_dir(tmp_path).iterdir()
    assert last.startswith(f"teamrt: run {run_dir.name} did not start (exit 1); its output is in {run_dir}")


def test_a_run_id_with_a_store_is_refused(tmp_path: Path) -> None:
    run_id = detach("--prompt", "x", "--model", "sim", project=tmp_path)
    assert teamrt("logs", run_id, "-f", project=tmp_path).returncode == 0
    output = runs_dir(tmp_path) / run_id / logs.OUTPUT_LOG
    before = output.read_text()
    for extra in ((), ("--detach",)):
        again = teamrt("run", "--prompt", "y", "--model", "sim", "--run-id", run_id, *extra, project=tmp_path)
        assert again.returncode == 1 and again.stdout == ""
        assert again.stderr == f"teamrt: run {run_id!r} exists already; leave out --run-id\n"
    assert output.read_text() == before, "no second process wrote to the run"
    bad = teamrt("run", "--prompt", "y", "--run-id", "../up", project=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a run name" in bad.stderr


# -- logs ----------------------------------------------------------------------------


def test_logs_of_an_unknown_run_is_one_line(tmp_path: Path) -> None:
    for args in (("nosuchrun",), ("nosuchrun", "-f")):
        result = teamrt("logs", *args, project=tmp_path)
        assert result.returncode == 1 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and "no run named 'nosuchrun'" in result.stderr


def test_logs_does_not_import_the_model_sdk(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "teamrt", "logs", "--help"],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0 and "teamrt logs" in result.stdout
    assert "anthropic" not in result.stderr and "teamrt.models" not in result.stderr


def test_follow_waits_for_a_store_being_created(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    created: list[Store] = []
    maker = threading.Timer(
        0.5, lambda: created.append(create_store(run_dir, "r1", task="late", workdir=str(tmp_path)))
    )
    maker.start()
    out: list[str] = []
    try:
        assert follow(run_dir, "r1", out.append, follow=False) == "running"
    finally:
        maker.join()
        for store in created:
            store.close()
    assert kinds(out) == ["run.created", "run.owner"] and "task: late" in out[0]


def test_follow_stops_when_told_and_skips_what_was_seen(tmp_path: Path) -> None:
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    store = create_store(run_dir, "r1", task="t", workdir="/w")
    try:
        asked: list[int] = []
        out: list[str] = []

        def until() -> bool:
            asked.append(1)
            return True

        first = store.reader.events()[0].id
        assert follow(run_dir, "r1", out.append, after_id=first, until=until, poll_s=0.01) == "running"
        assert asked == [1] and kinds(out) == ["run.owner"]
    finally:
        store.close()


def test_follow_without_a_store_fails_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "STORE_WAIT_S", 0.2)
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    (run_dir / logs.OUTPUT_LOG).write_text("Traceback ...\n")
    with pytest.raises(RunsError, match=r"has no store .* \(it did not start\); see .*output.log$"):
        follow(run_dir, "r1", print)


def test_logs_json_prints_each_event_as_one_json_object_a_line(tmp_path: Path) -> None:
    run_dir = runs_dir(tmp_path) / "r1"
    run_dir.mkdir(parents=True)
    with create_store(run_dir, "r1", task="Plan\nthe work", workdir=str(tmp_path)) as store:
        asyncio.run(store.add_agent("lead", kind="lead", model="sim"))
        asyncio.run(store.set_agent_status("lead", "failed", "model error:\noverloaded"))
        asyncio.run(store.set_run_status("failed", "the lead failed"))
        started, events = store.reader.run().created_at, store.reader.events()
    result = teamrt("logs", "r1", "--json", project=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    said = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["id"] for e in said] == [e.id for e in events] and len(said) > 3
    for shown, event in zip(said, events, strict=True):
        assert set(shown) == {"id", "at", "elapsed_s", "agent", "kind", "data", "summary"}
        assert (shown["agent"], shown["kind"], shown["data"]) == (event.agent, event.kind, event.data)
        assert shown["summary"] == describe_event(event)
        assert shown["at"].endswith("Z") and shown["elapsed_s"] == round(event.at - started, 3)
    failed = next(e for e in said if e["kind"] == "agent.status")
    assert failed["data"] == {"status": "failed", "reason": "model error:\noverloaded"}
    assert failed["summary"] == "failed: model error: overloaded"
    followed = teamrt("logs", "r1", "-f", "--json", project=tmp_path)
    assert followed.returncode == 1, "the run failed"
    assert [json.loads(line) for line in followed.stdout.splitlines()] == said
    assert followed.stderr == "run r1 ended: failed\n", "stdout stays JSON Lines"


def test_logs_follow_json_prints_events_as_they_come(tmp_path: Path, lines: list[Lines]) -> None:
    run_dir = runs_dir(tmp_path) / "r1"
    run_dir.mkdir(parents=True)
    with create_store(run_dir, "r1", task="t", workdir=str(tmp_path)) as store:
        live = Lines("logs", "r1", "-f", "--json", project=tmp_path)
        lines.append(live)
        live.until('"run.owner"')
        asyncio.run(store.append_event(marker("noted"), {"n": 1}, agent="lead"))
        live.until('"noted"')
        assert live.proc.poll() is None, "-f waits while the run lives"
        asyncio.run(store.set_run_status("done"))
    assert live.to_the_end() == 0
    assert [json.loads(line)["kind"] for line in live.seen] == [
        "run.created",
        "run.owner",
        "noted",
        "run.status",
    ]


# -- one line per event --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "data", "shown"),
    [
        ("run.status", {"status": "failed", "reason": "out of\nbudget"}, "failed: out of budget"),
        ("agent.status", {"status": "idle", "reason": None}, "idle"),
        ("agent.added", {"kind": "fork", "parent": "lead", "role": "r", "model": "sim"},
         "fork of lead, role r, model sim"),
        ("spawn", {"kind": "fork", "children": ["lead-r-1", "lead-r-2"]}, "fork: lead-r-1, lead-r-2"),
        ("task.created", {"task": 3, "subject": "Write the tests"}, "#3 Write the tests"),
        ("task.updated", {"task": 3, "status": "done"}, "#3 done"),
        ("merge.merged", {"head": "a" * 40, "attempt": 2, "commit": "b" * 40},
         f"attempt 2, head {'a' * 12}, commit {'b' * 12}"),
        ("control", {"from": "user", "data": {"action": "stop", "agent": "lead-r-1"}},
         "user: stop agent lead-r-1"),
        ("control", {"from": "user", "data": {"action": "stop", "agent": None}}, "user: stop the run"),
        ("agent.failed", {"turns": 1, "reason": "model error"}, "after 1 turn; model error"),
        ("agent.raised", {"error": "KeyError: 'x'", "attempt": 2}, "attempt 2: KeyError: 'x'"),
        ("agent.compacted", {"how": "summary", "messages": 4}, "summary, 4 messages kept"),
        ("something.new", {"a": 1, "b": "two words", "c": [1, 2]}, "a=1 b=two words c=[1,2]"),
        ("todos", {"todos": [{"content": "Run the tests", "status": "in_progress", "activeForm": "Running"},
                             {"content": "Fix it", "status": "pending"}, "not a todo"]},
         "2 todos: 1 in_progress, 1 pending; now: Running"),
        ("todos", {"todos": []}, "0 todos"),
    ],
)  # fmt: skip
def test_format_event(kind: str, data: dict[str, object], shown: str) -> None:
    line = format_event(EventRecord(7, 112.34, "lead-r-1", kind, dict(data)), started=100.0)
    assert line.split()[:3] == ["+12.3s", "lead-r-1", kind]
    assert line.endswith(f"  {shown}"), line


def test_format_event_keeps_to_one_short_line() -> None:
    line = format_event(EventRecord(1, 5.0, None, "run.created", {"task": "do it\n" * 100}), started=5.0)
    assert line.startswith("   +0.0s  run ") and "\n" not in line
    assert len(line) == logs.LINE_CHARS and line.endswith("...")
