"""A person's working day with a team, driven through a real pseudo-terminal as they would type it.

On a pytest repository with no team file: ``teamrt init`` finds the test command; ``teamrt run`` on sim
(through the real SDK) asks inline before a coder's ``pytest -q``, and the person answers "allow always",
which lands in ``.claude/settings.local.json``; the tests run and the fix merges through the gate; the run
ends ``done``. ``teamrt continue`` adds a follow-up that fixes another file without asking again;
``teamrt diff`` and ``teamrt transcript`` show the work; ``teamrt apply --squash`` lands it as one commit
with a message drafted from the run. Then a day that goes wrong: a run whose every call is refused ends
``blocked``, exit non-zero, saying why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.sim.test_default_team_play import FOLLOW_UP, REPO, TASK

BIN = Path(sys.executable).parent
"""The environment's commands first on PATH, as in a shell where the project's virtualenv is active: its
``teamrt``, and the ``pytest`` the coders' check command names."""
RUN_ID = re.compile(r"run (\d{8}-\d{6}-[a-z0-9]+) started")

pytestmark = pytest.mark.slow


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "TEAMRT_"))}
    return {**env, "PATH": f"{BIN}:{env['PATH']}", "TEAMRT_HOME": str(home), "TERM": "dumb",
            "GIT_AUTHOR_NAME": "Pat", "GIT_AUTHOR_EMAIL": "pat@example.invalid",
            "GIT_COMMITTER_NAME": "Pat", "GIT_COMMITTER_EMAIL": "pat@example.invalid"}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small pytest project, two test files failing, one commit, no team file."""
    top = tmp_path / "calc"
    for name, text in REPO.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(text)
    (top / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(top, "-c", "init.defaultBranch=main", "init", "-q")
    git(top, "add", "-A")
    git(top, "-c", "user.name=Pat", "-c", "user.email=pat@example.invalid", "commit", "-qm", "calc")
    return top


def teamrt(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "teamrt"), *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=180)  # fmt: skip


def at_a_terminal(repo: Path, env: dict[str, str], *args: str) -> pexpect.spawn[str]:
    return pexpect.spawn(str(BIN / "teamrt"), list(args), cwd=str(repo), env=env, encoding="utf-8",
                         timeout=120, dimensions=(50, 160))  # fmt: skip


def ended(child: pexpect.spawn[str]) -> str:
    """What the child printed until it exited; it must exit 0."""
    child.expect(pexpect.EOF, timeout=180)
    child.close()
    said = str(child.before)
    assert child.exitstatus == 0, said
    return said


def test_a_working_day_init_ask_always_continue_review_and_squash(repo: Path, tmp_path: Path) -> None:
    env = environment(tmp_path / "home")
    base = git(repo, "rev-parse", "HEAD").strip()

    init = teamrt(repo, env, "init")
    assert init.returncode == 0, init.stderr
    assert "pytest" in init.stdout + init.stderr, "init says what it found"
    team = (repo / ".teamrt" / "team.toml").read_text()
    assert '"python3 -m pytest -q"' in team, "the test command is the merge gate"
    assert "Bash(python3 -m pytest:*)" in team, "and an allow rule"

    child = at_a_terminal(repo, env, "run", "--model", "sim", "--prompt", TASK)
    child.expect(RUN_ID)
    assert isinstance(child.match, re.Match)
    run_id = child.match.group(1)
    child.expect(r"asks to use Bash: pytest -q tests/test_stats\.py")
    child.expect(r"2/a\s+allow always: add Bash\(pytest:\*\) to \.claude/settings\.local\.json")
    child.send("a")
    child.expect(r"added Bash\(pytest:\*\) to \.claude/settings\.local\.json")
    first = ended(child)
    assert f"run {run_id}: done" in first
    local = json.loads((repo / ".claude" / "settings.local.json").read_text())
    assert local["permissions"]["allow"] == ["Bash(pytest:*)"]
    assert git(repo, "status", "--porcelain", "--", ".claude") == "", "git ignores the person's own rules"
    assert git(repo, "diff", "--name-only", base, f"teamrt/{run_id}").split() == ["calc/stats.py"]

    child = at_a_terminal(repo, env, "continue", run_id, "--prompt", FOLLOW_UP)
    second = ended(child)
    assert "asks to use" not in second, "allowed always: not asked again"
    assert f"run {run_id}: done" in second
    both = ["calc/stats.py", "calc/text.py"]
    assert git(repo, "diff", "--name-only", base, f"teamrt/{run_id}").split() == both

    shown = teamrt(repo, env, "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert FOLLOW_UP in shown.stdout, "show lists the rounds"

    diff = teamrt(repo, env, "diff", run_id)
    assert diff.returncode == 0, diff.stderr
    assert "--- a/calc/stats.py" in diff.stdout and "--- a/calc/text.py" in diff.stdout
    transcript = teamrt(repo, env, "transcript", run_id, "coder")
    assert transcript.returncode == 0, transcript.stderr
    assert "pytest -q tests/test_stats.py" in transcript.stdout, "the coder's call, folded to a line"

    child = at_a_terminal(repo, env, "apply", run_id, "--squash")
    ended(child)
    assert git(repo, "rev-list", "--count", f"{base}..HEAD").strip() == "1", "one commit"
    message = git(repo, "log", "-1", "--format=%B")
    subject, _, body = message.partition("\n\n")
    assert subject == TASK, message
    assert f"Run: {run_id}" in body and "coder" in body, message
    assert f"Follow-ups:\n- round 2: {FOLLOW_UP}\n" in body, message
    tests = subprocess.run([str(BIN / "python"), "-m", "pytest", "-q"], cwd=repo, capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert tests.returncode == 0, tests.stdout


def test_a_run_whose_every_call_is_refused_ends_blocked_and_says_why(repo: Path, tmp_path: Path) -> None:
    """A team locked down too far, and no terminal to ask: it could only look, so the run is ``blocked``."""
    env = environment(tmp_path / "home")
    assert teamrt(repo, env, "init").returncode == 0
    team = repo / ".teamrt" / "team.toml"
    locked = '"Read(.env)", "Edit", "Write", "Bash(python3:*)", "Bash(pytest:*)"'
    team.write_text(team.read_text().replace('"Read(.env)"', locked, 1))
    run = teamrt(repo, env, "run", "--model", "sim", "--prompt", TASK)
    assert run.returncode != 0, run.stderr
    assert re.search(r"run \S+: blocked", run.stderr), run.stderr
    assert "nothing was done" in run.stderr and "refused" in run.stderr, run.stderr
    assert git(repo, "status", "--porcelain") == "?? .teamrt/\n", "nothing changed"
