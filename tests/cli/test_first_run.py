"""A new user's first run on a repository of their own, on the Claude path.

The model is the simulator behind ``ANTHROPIC_BASE_URL``: teamrt takes it for
Claude, through the real SDK, with no labels telling it which team or role
calls (the ``sim`` provider's headers are not sent).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from teamrt.models.catalog import DEFAULT_MODEL
from teamrt.models.reply import Reply
from teamrt.sim import SimServer
from teamrt.sim.faults import Fault
from teamrt.sim.policy import SimRequest
from teamrt.store import open_reader

CHECKOUT = Path(__file__).resolve().parents[2]
IDENTITY = {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@example.invalid",
            "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@example.invalid"}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **IDENTITY}, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A user's repository of one commit, with a subdirectory."""
    top = tmp_path / "myproject"
    (top / "src" / "deep").mkdir(parents=True)
    (top / "src" / "app.py").write_text("print('hello')\n")
    (top / "README.md").write_text("# my project\n")
    git(top, "-c", "init.defaultBranch=main", "init", "-q")
    git(top, "add", "-A")
    git(top, "commit", "-q", "-m", "first")
    return top


def claude_env(sim: SimServer, **extra: str) -> dict[str, str]:
    """The environment of a user who points teamrt at an Anthropic-compatible server."""
    env = {k: v for k, v in os.environ.items() if k != "TEAMRT_HOME"}
    return {**env, "ANTHROPIC_BASE_URL": sim.url, "ANTHROPIC_API_KEY": "sk-test", **extra}


def teamrt(*args: str, cwd: Path, env: dict[str, str], command: list[str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [*(command or [sys.executable, "-m", "teamrt"]), *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``teamrt`` installed into a fresh virtual environment from a copy of the checkout, as the
    README's ``pipx install`` does (a non-editable install). Offline: the dependencies come from the
    environment running the tests, by a ``.pth`` file, rather than from the package index."""
    base = tmp_path_factory.mktemp("install")
    source = base / "teamrt-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    shutil.copytree(CHECKOUT / "teamrt", source / "teamrt", ignore=shutil.ignore_patterns("__pycache__"))
    venv = base / "venv"
    subprocess.run(  # pip and setuptools too come from the tests' environment, by the .pth file
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", str(source)],
        capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    return venv / "bin" / "teamrt"


@pytest.mark.slow
def test_the_installed_command_runs_the_default_team_on_claude_from_a_subdirectory(
    installed: Path, repo: Path
) -> None:
    assert not str(installed).startswith(str(CHECKOUT)), "the command comes from the fresh environment"
    with SimServer() as sim:
        env = claude_env(sim)
        result = teamrt(
            "run", "--prompt", "Add a --version flag.", cwd=repo / "src", env=env, command=[str(installed)]
        )
        calls = list(sim.calls)
    assert result.returncode == 0, result.stderr
    run_id = result.stderr.split("run ", 1)[1].split(" ", 1)[0]
    assert (
        f"run {run_id} started: team default (lead, coder, reviewer) on {DEFAULT_MODEL} in {repo};"
        " budget $5.00" in result.stderr
    )
    assert "agent.added" in result.stderr and "agent.status" in result.stderr, "progress lines"
    assert result.stdout.startswith("[sim] agent received: Add a --version flag."), result.stdout
    assert calls and {(c.model, c.role, c.agent) for c in calls} == {(DEFAULT_MODEL, "", "")}, (
        "the Claude path: the real SDK, the default model, none of the simulator's labels"
    )
    assert (repo / ".teamrt" / "runs" / run_id).is_dir(), "runs live at the repository's top"
    assert not (repo / "src" / ".teamrt").exists()

    for where in (repo, repo / "src" / "deep"):
        listed = json.loads(teamrt("ls", "--json", cwd=where, env=env, command=[str(installed)]).stdout)
        assert [r["id"] for r in listed] == [run_id]
        assert listed[0]["status"] == "done" and listed[0]["simulated"] is False
    shown = json.loads(teamrt("show", run_id, "--json", cwd=repo / "src" / "deep", env=env).stdout)
    assert shown["status"] == "done" and shown["budget_usd"] == 5.0

    (repo / ".teamrt" / "agents").mkdir()
    (repo / ".teamrt" / "agents" / "helper.md").write_text("---\nname: helper\ndescription: d\n---\nHelp.\n")
    untracked = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert untracked == ["?? .teamrt/agents/helper.md"], "agent files can be committed, runs cannot"


def test_init_writes_the_default_team_at_the_top_and_run_uses_it(repo: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TEAMRT_HOME"}
    made = teamrt("init", cwd=repo / "src", env=env)
    assert made.returncode == 0, made.stderr
    team = repo / ".teamrt" / "team.toml"
    assert f"wrote {team}" in made.stdout
    again = teamrt("init", cwd=repo, env=env)
    assert again.returncode == 1 and again.stderr.count("\n") == 1 and "--force" in again.stderr
    team.write_text(team.read_text().replace('name = "default"', 'name = "mine"'))
    result = teamrt("run", "--prompt", "hi", "--model", "sim", cwd=repo / "src", env=env)
    assert result.returncode == 0, result.stderr
    assert "team mine (lead, coder, reviewer) on sim" in result.stderr
    assert "sim plays this team's lead, coder, reviewer generically" in result.stderr, "a rehearsal, it says"
    assert git(repo, "status", "--porcelain") == "?? .teamrt/\n", "the team file can be committed"
    for kept_out in (".teamrt/runs/x/run.db", ".teamrt/demo"):
        assert git(repo, "check-ignore", "-q", kept_out) == ""


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("sonet", "unknown model 'sonet'; did you mean sonnet?"),
        ("claude-sonet-5-5", "unknown model 'claude-sonet-5-5'; did you mean claude-sonnet-5-5?"),
        ("gpt-4o", "unknown model 'gpt-4o'"),
        ("sim:opuss", "unknown model 'sim:opuss'; did you mean opus?"),
    ],
)
def test_an_unknown_model_gets_the_nearest_known_one(repo: Path, model: str, said: str) -> None:
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test", "TEAMRT_HOME": str(repo.parent / "home")}
    result = teamrt("run", "--prompt", "x", "--model", model, cwd=repo, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert said in result.stderr
    assert not (repo.parent / "home" / "runs").exists() or not any((repo.parent / "home" / "runs").iterdir())


def test_no_key_and_no_model_says_what_to_do_in_one_line(repo: Path) -> None:
    env = {**os.environ, "TEAMRT_HOME": str(repo.parent / "home")}
    result = teamrt("run", "--prompt", "x", cwd=repo, env=env)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "export ANTHROPIC_API_KEY" in result.stderr and "--model sim" in result.stderr


def test_the_default_budget_stops_a_run_and_says_how_to_raise_it(repo: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"  # a dollar a token: the first call's worst case is over $5
    settings.write_text(
        f'[prices."{DEFAULT_MODEL}"]\ninput = 1e6\noutput = 1e6\ncache_write_5m = 1e6\n'
        "cache_write_1h = 1e6\ncache_read = 1e6\n"
    )
    with SimServer() as sim:
        env = claude_env(sim, TEAMRT_SETTINGS=str(settings))
        stopped = teamrt("run", "--prompt", "x", "--json", cwd=repo, env=env)
        assert not sim.calls, "the budget refuses the call before it is made"
        raised = teamrt("run", "--prompt", "x", "--json", "--budget-usd", "1000000", cwd=repo, env=env)
    assert stopped.returncode == 1
    result = json.loads(stopped.stdout)
    assert (result["status"], result["budget_usd"], result["simulated"]) == ("stopped", 5.0, False)
    assert result["reason"].startswith("budget exhausted: run dollar budget")
    assert "--budget-usd" in stopped.stderr
    assert raised.returncode == 0, raised.stderr
    assert json.loads(raised.stdout)["budget_usd"] == 1_000_000
    run_dir = repo / ".teamrt" / "runs" / result["run"]
    assert open_reader(run_dir, result["run"]).run().budget_usd == 5.0


def _lines_until(stream: Any, needle: str, deadline: float) -> list[str]:
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"{needle!r} never came; got {lines}")


@pytest.fixture
def stalled() -> Iterator[SimServer]:
    with SimServer() as sim:
        sim.faults.add(Fault("stall", after_events=2, seconds=120))
        yield sim


def _ctrl_c_as_at_a_terminal() -> None:
    """A shell starts a background job with SIGINT ignored, its children inherit that, and Python then
    leaves Ctrl-C ignored: when the suite runs in the background, ``teamrt run`` would never see it. Give
    the child the default, as a terminal's foreground job has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_says_how_to_resume_and_resume_answers_once(repo: Path, stalled: SimServer) -> None:
    env = {**claude_env(stalled), "PYTHONFAULTHANDLER": "1"}
    child = subprocess.Popen(
        [sys.executable, "-m", "teamrt", "run", "--prompt", "Tell me about this project."],
        cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    try:
        said = _lines_until(child.stderr, "agent.added", time.monotonic() + 60)
        deadline = time.monotonic() + 60
        while not stalled.calls and time.monotonic() < deadline:  # the lead's call is in flight
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # keep its stacks, to say where it hung
            child.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack, then it dies
            stacks = child.communicate()[1]
            pytest.fail(f"teamrt run did not end within 60 s of Ctrl-C; its stderr:\n{stacks}")
    finally:
        child.kill()
    run_id = "".join(said).split("run ", 1)[1].split(" ", 1)[0]
    assert child.returncode == 130, err
    assert f"resume it with: teamrt resume {run_id}" in err
    assert "Traceback" not in err and out == ""
    stalled.faults.clear()
    listed = json.loads(teamrt("ls", "--json", cwd=repo, env=env).stdout)
    assert [(r["id"], r["status"]) for r in listed] == [(run_id, "crashed")]
    resumed = teamrt("resume", run_id, cwd=repo, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "[sim] agent received: Tell me about this project.\n", "the answer, once"
    assert f"run {run_id}: done" in resumed.stderr


def test_an_ask_that_waits_says_how_to_answer_it(repo: Path) -> None:
    def writes_once(request: SimRequest) -> Reply:
        if request.turns == 0:
            return Reply().call("Write", {"file_path": "NOTES.md", "content": "notes\n"})
        return Reply().say(f"wrote it: {request.tool_outcomes[0].output}")

    team = repo / "team.toml"
    team.write_text('[team]\nask_wait = 60\n[lead]\nagent = "coder"\npermission_mode = "default"\n')
    with SimServer(default=writes_once) as sim:
        env = claude_env(sim)
        child = subprocess.Popen(
            [sys.executable, "-m", "teamrt", "run", str(team), "--prompt", "write notes"],
            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            said = _lines_until(child.stderr, "answer it: teamrt answer", time.monotonic() + 60)
            command = said[-1].split("answer it: ", 1)[1].split()
            assert command[-1] == "allow|deny"
            answered = teamrt(*command[1:-1], "allow", cwd=repo, env=env)
            assert answered.returncode == 0, answered.stderr
            out, err = child.communicate(timeout=60)
        finally:
            child.kill()
    assert child.returncode == 0, err
    assert (repo / "NOTES.md").read_text() == "notes\n"
    assert out.startswith("wrote it:")
