"""A fleet on one machine for the queue's tests and benchmark: workers, one database, one home, one remote.

    fleet = Fleet.create(tmp / "fleet", url)        # url: a PostgreSQL database at the newest schema
    fleet.start_worker("w1"); fleet.start_worker("w2")
    runs = [fleet.submit() for _ in range(4)]
    assert set(fleet.wait_ended(runs).values()) == {"done"}
    fleet.close()

Each worker is a ``teamrt worker`` process of its own with a distinct ``TEAMRT_HOST``
and the fleet's shared ``TEAMRT_HOME``, its output in ``worker-<host>.log``. The
remote is a bare git repository on disk holding a small project with one failing
test; ``TEAM`` (on ``sim``) has its lead start one coder in a worktree, whose fix
merges onto the run's integration branch once the tests pass: a run of a few
seconds whose product is a branch pushed to the remote.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from teamrt.home import new_run_id
from teamrt.procs import python_module

TEAM = """\
[team]
name = "small"
model = "sim"
on_ask = "deny"
max_agents = 3

[roles.coder]
max_turns = 20

[permissions]
allow = ["Bash(python3 -m unittest:*)", "Bash(git diff:*)", "Bash(git log:*)"]

[merge]
gates = ["python3 -m unittest -q"]
"""
PROMPT = (
    "Make the failing tests of this repository pass: run python3 -m unittest, then one coder per failing"
    " test module in its own worktree."
)
SOURCE = '''"""Text helpers."""


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """``text`` cut to at most ``width`` characters, ending in ``ellipsis`` when it was cut."""
    if len(text) < width:
        return text
    return text[: width - len(ellipsis)] + ellipsis
'''
TEST = """import unittest

from kit.text import truncate


class TruncateTest(unittest.TestCase):
    def test_long_text_is_cut(self) -> None:
        self.assertEqual(truncate("hello world", 8), "hello...")

    def test_text_of_exactly_the_width_is_kept(self) -> None:
        self.assertEqual(truncate("hello", 5), "hello")
"""
IDENTITY = {
    "GIT_AUTHOR_NAME": "fleet", "GIT_AUTHOR_EMAIL": "fleet@teamrt.invalid",
    "GIT_COMMITTER_NAME": "fleet", "GIT_COMMITTER_EMAIL": "fleet@teamrt.invalid",
}  # fmt: skip
WAIT_S = 300.0
STOP_WAIT_S = 15.0


def small_project(target: Path) -> Path:
    """The project the fleet's runs fix, a git repository of one commit on ``main``."""
    (target / "kit").mkdir(parents=True)
    (target / "tests").mkdir()
    (target / "kit" / "__init__.py").write_text("")
    (target / "kit" / "text.py").write_text(SOURCE)
    (target / "tests" / "__init__.py").write_text("")
    (target / "tests" / "test_text.py").write_text(TEST)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "text helpers"]):
        _git(*args, cwd=target)
    return target


def bare_remote(target: Path, project: Path) -> Path:
    """A bare clone of ``project`` at ``target``: the fleet's remote."""
    _git("clone", "-q", "--bare", str(project), str(target), cwd=project.parent)
    return target


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", *args], cwd=cwd, env=env, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip


@dataclass
class Fleet:
    root: Path
    url: str
    home: Path
    remote: Path
    environ: dict[str, str | None] = field(default_factory=dict)
    """Over this process's environment in every fleet process (None: left out)."""
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path, url: str, environ: dict[str, str | None] | None = None) -> Fleet:
        """A fleet under ``root`` on the database ``url`` (at the newest schema): its home and its remote."""
        root.mkdir(parents=True, exist_ok=True)
        home = root / "home"
        home.mkdir(mode=0o700)
        remote = bare_remote(root / "remote.git", small_project(root / "seed"))
        return cls(root, url, home, remote, dict(environ or {}))

    def env(self, host: str | None = None) -> dict[str, str]:
        """The environment of a fleet process (a worker on ``host``, or a command such as ``teamrt ls``)."""
        env = {**os.environ, "TEAMRT_DB": self.url, "TEAMRT_HOME": str(self.home), "PYTHONUNBUFFERED": "1"}
        if host is not None:
            env["TEAMRT_HOST"] = host
        for name, value in self.environ.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        return env

    def start_worker(self, host: str, slots: int = 2, *args: str) -> subprocess.Popen[bytes]:
        """``teamrt worker --slots slots`` as host ``host``, its output in ``worker-<host>.log``."""
        with open(self.root / f"worker-{host}.log", "ab") as log:
            worker = subprocess.Popen(
                python_module("teamrt", "worker", "--slots", str(slots), *args), cwd=self.root,
                env=self.env(host), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        self.workers[host] = worker
        return worker

    def signal_worker(self, host: str, signum: int) -> None:
        self.workers[host].send_signal(signum)

    def stop_worker(self, host: str) -> None:
        """SIGTERM (SIGCONT first, in case it is stopped); SIGKILL if it has not ended in ``STOP_WAIT_S``."""
        worker = self.workers.pop(host)
        if worker.poll() is None:
            worker.send_signal(signal.SIGCONT)
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    def close(self) -> None:
        for host in list(self.workers):
            self.stop_worker(host)

    def submit(
        self, prompt: str = PROMPT, *, team: str | None = TEAM, submitter: str = "fleet",
        repo: str | None = None, ref: str | None = "main", key: str | None = None, run_id: str | None = None,
    ) -> str:  # fmt: skip
        """Submit a run of ``team`` (the fleet's by default) on the fleet's remote; its id."""
        from teamrt.queue.admission import Request, submit

        run_id = run_id or new_run_id()
        url = str(self.remote) if repo is None else repo
        request = Request(submitter, prompt, team, "fleet", repo_url=url, repo_ref=ref, idem_key=key)
        return submit(self.url, run_id, request).run_id

    def ended(self, run_ids: Iterable[str]) -> dict[str, str]:
        """The queue's end status of each run of ``run_ids`` that has ended."""
        from teamrt.queue.connect import queue_engine
        from teamrt.store import queue_tables as q

        engine = queue_engine(self.url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    select(q.queue_runs.c.run_id, q.queue_runs.c.end_status).where(
                        q.queue_runs.c.run_id.in_(list(run_ids)), q.queue_runs.c.ended_at.is_not(None)
                    )
                ).all()
        finally:
            engine.dispose()
        return {row.run_id: row.end_status for row in rows}

    def wait_ended(self, run_ids: Iterable[str], timeout: float = WAIT_S) -> dict[str, str]:
        """Wait until every run of ``run_ids`` has ended; their end status. Fails after ``timeout``."""
        wanted = list(run_ids)
        deadline = time.monotonic() + timeout
        while True:
            ended = self.ended(wanted)
            if len(ended) == len(wanted):
                return ended
            if time.monotonic() > deadline:
                missing = sorted(set(wanted) - set(ended))
                raise TimeoutError(f"{len(missing)} run(s) did not end within {timeout:.0f} s: {missing[:5]}")
            time.sleep(0.2)

    def branch(self, run_id: str, name: str | None = None) -> str | None:
        """The commit the remote's branch ``name`` (default: the run's integration branch) names, if any."""
        ref = f"refs/heads/{name or 'teamrt/' + run_id}"
        found = subprocess.run(
            ["git", "--git-dir", str(self.remote), "rev-parse", "-q", "--verify", ref],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        return found or None

    def log(self, host: str) -> str:
        path = self.root / f"worker-{host}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
