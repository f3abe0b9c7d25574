"""A run of one agent file (``teamrt run --agent test-runner``) shows that agent and its file in the start
line, ``show``, ``ls``, ``logs`` and the TUI, not "lead, role lead"; a team's roles show the agent file
each runs when it is not the role's namesake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import teamrt
from teamrt.runs.identity import shown_role
from teamrt.tui.state import RunFollower
from tests.helpers.cli import cli_ok as cli

AGENT_FILE = """---
name: test-runner
description: Runs the project's tests and reports what failed.
tools: Read
---
You run the tests.
"""


def run_alone(project: Path, by: str, file: str = "test-runner.md") -> tuple[str, str]:
    """``teamrt run --agent BY`` on sim, in-process, with the agent file ``test-runner`` kept in
    ``.claude/agents/FILE``; the run's id and what it said as it started."""
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / file).write_text(AGENT_FILE)
    notices: list[str] = []
    result = teamrt.run("run the tests", agent=by, project=project, model="sim", on_notice=notices.append)
    assert result.status == "done", notices
    return result.run_id, "\n".join(notices)


def test_a_run_of_one_agent_file_says_which_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    run_id, said = run_alone(tmp_path, "test-runner")
    assert f"run {run_id} started: agent test-runner alone on sim in {tmp_path}" in said

    shown = cli(capsys, "show", run_id)
    assert "agent    test-runner (agent file .claude/agents/test-runner.md), alone: no team" in shown
    row = next(line.split() for line in shown.splitlines() if line.startswith("  lead "))
    assert row[:4] == ["lead", "lead", "test-runner", "sim"]
    listed = cli(capsys, "ls").splitlines()[1].split()
    assert listed[3:5] == ["1", "(test-runner)"]
    assert "lead, agent test-runner, model sim" in cli(capsys, "logs", run_id)

    data = json.loads(cli(capsys, "show", run_id, "--json"))
    assert data["alone"] == "test-runner"
    [lead] = data["agents"]
    assert (lead["name"], lead["role"], lead["definition"]) == ("lead", "lead", "test-runner")
    assert lead["agent_file"] == str(tmp_path / ".claude" / "agents" / "test-runner.md")
    assert json.loads(cli(capsys, "ls", "--json"))[0]["alone"] == "test-runner"

    follower = RunFollower(tmp_path / ".teamrt" / "runs" / run_id, run_id)
    try:
        [agent] = follower.read(None).agents
    finally:
        follower.close()
    assert (agent.name, agent.kind, agent.role) == ("lead", "lead", "test-runner")


def test_a_team_says_the_agent_file_a_role_runs_when_it_is_not_the_roles_namesake() -> None:
    assert shown_role("worktree", "coder", "coder") == "coder"
    assert shown_role("team", "code-reviewer", "Code.Reviewer") == "code-reviewer"
    assert shown_role("team", "tester", "test-runner") == "tester (test-runner)"
    assert shown_role("lead", "lead", "lead") == "lead"
    assert shown_role("lead", "lead", "architect") == "architect"
    assert shown_role("fork", "lead", "architect") == "lead (architect)"
    assert shown_role("lead", "lead", None) == "lead"  # a run from before the definition was said
    assert shown_role("task", None, "coder") == "-"


@pytest.mark.hostile
def test_an_agent_files_path_with_escape_sequences_reaches_no_terminal_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent file's name is the repository's: it may carry a terminal's control sequences, which
    ``show`` and the JSON say of the file the agent runs."""
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / ".teamrt"))
    run_id, _ = run_alone(tmp_path, "test-runner", file="t\x1b]0;pwned\a\x1b[2J.md")
    outputs = [cli(capsys, "show", run_id), cli(capsys, "show", run_id, "--json"), cli(capsys, "ls")]
    for out in outputs:
        assert "\x1b" not in out and "\a" not in out
    assert "agent file .claude/agents/t" in outputs[0] and "pwned" in outputs[0]
