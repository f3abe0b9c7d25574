"""The public API: ``teamrt.run()`` and ``teamrt.resume()`` on ``sim``, the ``RunResult`` they return, the
names ``teamrt`` and ``teamrt.testing`` export (pinned), a light ``import teamrt``, and the README's Python
example run as it is written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import teamrt
import teamrt.testing
from teamrt.demos.examples import coding_repo, team_file
from teamrt.store import open_reader
from tests.helpers.git import git

README = Path(__file__).parents[1] / "README.md"

PUBLIC = [
    "Role",
    "RunResult",
    "Team",
    "TeamrtError",
    "UserError",
    "__version__",
    "continue_run",
    "resume",
    "run",
    "run_async",
]
TEST_KIT = ["Fault", "Reply", "ScriptedModel", "SimCall", "SimRequest", "SimServer", "run_on_sim"]


def test_the_public_names_are_pinned_and_each_loads() -> None:
    assert sorted(teamrt.__all__) == sorted(PUBLIC)
    assert sorted(teamrt.testing.__all__) == sorted(TEST_KIT)
    for module, names in ((teamrt, PUBLIC), (teamrt.testing, TEST_KIT)):
        for name in names:
            assert getattr(module, name) is not None, name
            assert name in dir(module), name
    assert issubclass(teamrt.UserError, teamrt.TeamrtError)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        teamrt.nothing  # noqa: B018


def test_import_teamrt_leaves_the_sdk_the_database_layer_and_the_tui_out() -> None:
    script = (
        "import sys, teamrt, teamrt.testing\n"
        "print(sorted(m for m in ('anthropic', 'textual', 'sqlalchemy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_team_file_run_through_teamrt_run_reports_its_answer_cost_agents_and_branches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    repo = coding_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    notices: list[str] = []
    result = teamrt.run(
        "", team=str(team_file("coding")), project=repo, model="sim", on_notice=notices.append
    )
    assert result.status == "done", result
    assert "3 of 3 coders merged their fixes" in result.answer and result.reason is None
    assert result.simulated and result.cost_usd > 0 and result.budget_usd == 3.0, "the team file's budget"
    assert result.run_dir == tmp_path / "home" / "runs" / result.run_id
    assert any(line.startswith(f"run {result.run_id} started: team coding") for line in notices), notices
    assert result.agents[0].name == "lead" and result.agents[0].kind == "lead"
    kinds = sorted(a.kind for a in result.agents)
    assert kinds == ["lead", "team", "worktree", "worktree", "worktree"], kinds
    assert all(a.status == "done" and a.cost_usd > 0 for a in result.agents)
    assert sum(a.cost_usd for a in result.agents) == pytest.approx(result.cost_usd)
    assert result.integration_branch == f"teamrt/{result.run_id}"
    coders = sorted(a.name for a in result.agents if a.kind == "worktree")
    assert sorted(b.agent for b in result.branches) == coders
    for branch in result.branches:
        assert branch.branch == f"teamrt/{result.run_id}-{branch.agent}"
        assert (branch.merge, branch.landed) == ("merged", True), branch
    assert git(repo, "rev-parse", "HEAD") == head, "the user's branch waits for teamrt apply"
    assert git(repo, "rev-list", "--count", f"{head}..{result.integration_branch}") != "0"
    with pytest.raises(teamrt.UserError, match="only a crashed run can be resumed"):
        teamrt.resume(result.run_id)


def test_a_team_built_in_code_runs_with_its_text_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TEAMRT_HOME", raising=False)  # the project's own home
    project = tmp_path / "project"
    project.mkdir()
    team = teamrt.Team(path=project, name="solo", lead=teamrt.Role("lead", "lead"), model="sim")
    said: list[str] = []
    result = teamrt.run("Say hello", team=team, project=project, run_id="solo-1", on_text=said.append)
    assert (result.run_id, result.status) == ("solo-1", "done")
    assert result.answer.startswith("Report of lead (lead), from my tools' results only.\n- LS . returned:")
    reader = open_reader(result.run_dir, "solo-1")
    try:
        written = [
            "".join(block["text"] for block in turn.content if block.get("type") == "text")
            for turn in reader.turns("lead")
            if turn.role == "assistant"
        ]
    finally:
        reader.close()
    assert len(written) > 1 and written[-1] == result.answer, "it looked first, then answered"
    assert "".join(said) == "".join(written), "the lead's text of every turn, streamed as it was written"
    assert result.run_dir == project / ".teamrt" / "runs" / "solo-1", "kept in the project's home"
    assert result.integration_branch is None and result.branches == (), "no git: no worktree agents"
    assert [(a.name, a.status) for a in result.agents] == [("lead", "done")]


@pytest.mark.hostile
def test_an_answer_made_to_act_on_the_terminal_is_shown_inert(tmp_path: Path) -> None:
    """A lead answering with escape sequences (a clipboard write, a title, a cursor move): ``answer`` keeps
    its words as written, ``shown()`` (what the README prints) carries no control character."""
    from teamrt.testing import Reply, SimServer, run_on_sim

    project = tmp_path / "project"
    project.mkdir()
    hostile = "done\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b[1A\rfake\x9b31m"
    team = teamrt.Team(path=project, name="solo", lead=teamrt.Role("lead", "lead"), model="sim")
    with SimServer({"lead": lambda request: Reply().say(hostile)}) as sim:
        result = run_on_sim(team, "go", project=project, sim=sim, run_dir=tmp_path / "home" / "runs" / "r1")
    assert result.answer == hostile, "the text is kept as the lead wrote it"
    shown = result.shown()
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown), repr(shown)
    assert shown.startswith("done") and "fake" in shown, "the words stay readable"


def test_a_call_that_cannot_start_is_one_user_error(tmp_path: Path) -> None:
    with pytest.raises(teamrt.UserError, match="a team or an agent, not both"):
        teamrt.run("go", team="team.toml", agent="lead", project=tmp_path)
    with pytest.raises(teamrt.UserError, match="is not a directory"):
        teamrt.run("go", project=tmp_path / "missing")
    with pytest.raises(teamrt.UserError, match="no agent named 'nobody'"):
        teamrt.run("go", agent="nobody", project=tmp_path, model="sim")
    with pytest.raises(teamrt.UserError, match="no run named 'r9'"):
        teamrt.resume("r9", project=tmp_path)


KILLED_RUN = """
import os, signal, sys
import teamrt
from teamrt import faults

with faults.inject("merge.merged", lambda detail: os.kill(os.getpid(), signal.SIGKILL)):
    teamrt.run("", team=sys.argv[1], project=sys.argv[2], model="sim", run_id="killed")
"""


def test_a_run_killed_mid_merge_is_resumed_through_teamrt_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child process runs the coding team through ``teamrt.run`` and is SIGKILLed as the first branch is
    merged in the queue, before its gates; ``teamrt.resume``, from another directory, finds the run by its
    project and goes on to every branch landed."""
    monkeypatch.delenv("TEAMRT_HOME", raising=False)  # the project's own home
    repo = coding_repo(tmp_path / "repo")
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_RUN, str(team_file("coding")), str(repo)],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    run_dir = repo / ".teamrt" / "runs" / "killed"
    reader = open_reader(run_dir, "killed")
    try:
        assert reader.run().status == "running", "the kill left the run as a crash does"
        statuses = [m.status for m in reader.merges()]
        assert statuses.count("merging") == 1 and "merged" not in statuses, statuses
    finally:
        reader.close()
    result = teamrt.resume("killed", project=repo)
    assert (result.run_id, result.status) == ("killed", "done"), result
    assert "3 of 3 coders merged their fixes" in result.answer
    assert len(result.branches) == 3 and all(b.landed and b.merge == "merged" for b in result.branches)
    reader = open_reader(run_dir, "killed")
    try:
        assert len(reader.events(kinds=("run.resumed",))) == 1
    finally:
        reader.close()


def readme_example() -> str:
    """The Python block of the README's "Use teamrt from Python" section, as written."""
    section = README.read_text().split("## Use teamrt from Python\n", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    [block] = blocks
    return block


def test_the_readmes_python_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMRT_HOME", raising=False)  # the project's own home
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    (project / "README.md").write_text("# a project\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "first")
    done = subprocess.run(
        [sys.executable, "-c", readme_example()], cwd=project, capture_output=True, text=True, timeout=120,
        env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown, cost, *agents = done.stdout.rsplit("\n$", 1)[0], *done.stdout.rsplit("\n$", 1)[1].splitlines()
    run_id = re.fullmatch(r"\d+\.\d{4} \(simulated\); its work is on teamrt/(\S+)", cost)
    assert run_id is not None, done.stdout
    run_dir = project / ".teamrt" / "runs" / run_id[1]
    assert run_dir.is_dir(), "kept in the project's home"
    reader = open_reader(run_dir, run_id[1])
    try:
        [*_, last] = reader.turns("lead")
    finally:
        reader.close()
    answer = "".join(block["text"] for block in last.content if block.get("type") == "text")
    assert shown == f"done {answer}", "the status, then the answer as the store keeps it"
    assert answer.startswith("2 of 2 roles reported.") and "## coder (coder)" in answer, answer
    assert [re.sub(r"\$\d+\.\d{4}$", "$", line) for line in agents] == [
        "lead lead done $",
        "coder team done $",
        "reviewer team done $",
    ], agents
