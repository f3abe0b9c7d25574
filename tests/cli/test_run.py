"""``teamrt run``: one agent on the simulator end to end, and one clear line for each user mistake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from teamrt.store import open_reader


def teamrt(*args: str, project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``teamrt args`` in ``project``, as the installed command runs: ``-P`` keeps the working directory
    off ``sys.path``, as a console script does."""
    return subprocess.run(
        [sys.executable, "-P", "-m", "teamrt", *args],
        env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt"), **env},
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lead_answer(run_dir: Path) -> str:
    """The text of the lead's last turn: the run's answer, as the store keeps it."""
    reader = open_reader(run_dir, run_dir.name)
    try:
        [*_, last] = reader.turns("lead")
    finally:
        reader.close()
    return "".join(block["text"] for block in last.content if block.get("type") == "text")


def test_run_the_default_team_offline(tmp_path: Path) -> None:
    """On ``sim`` the built-in team is played generically: the lead starts its coder and reviewer, each
    reports what its tools returned, and the lead answers with their reports."""
    result = teamrt("run", "--prompt", "Say hello.", "--model", "sim", project=tmp_path)
    assert result.returncode == 0, result.stderr
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    answer = lead_answer(run_dir)
    assert result.stdout == answer + "\n", "stdout carries the answer alone"
    assert answer.startswith("2 of 2 roles reported.") and "## coder (coder)" in answer, answer
    assert "## reviewer (reviewer)" in answer
    assert ": done; 3 agent(s), " in result.stderr and "read from cache" in result.stderr
    assert "(sim)" in result.stderr, "a simulated cost says so"
    reader = open_reader(run_dir, run_dir.name)
    try:
        assert reader.run().status == "done"
        [first, *_, last] = reader.turns("lead")
        assert (first.role, last.role) == ("user", "assistant")
        assert "Say hello." in "".join(b.get("text", "") for b in first.content), (
            "the lead was given the task"
        )
        assert reader.run().usage.cost_usd > 0, "sim is priced like a Claude model"
    finally:
        reader.close()


def test_unknown_agent_is_one_line(tmp_path: Path) -> None:
    result = teamrt("run", "--prompt", "x", "--agent", "nobody", project=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no agent named 'nobody'" in result.stderr
    assert "lead" in result.stderr, "the known agents are listed"
    assert not (tmp_path / ".teamrt" / "runs").exists() or not any((tmp_path / ".teamrt" / "runs").iterdir())


def test_a_broken_agent_file_is_one_warning_and_the_run_goes_on(tmp_path: Path) -> None:
    agents = tmp_path / ".teamrt" / "agents"
    agents.mkdir(parents=True)
    (agents / "bad.md").write_text("---\nname: [unclosed\n---\nprompt\n")
    (agents / "helper.md").write_text(
        "---\nname: Helper.One\ndescription: Use it when: x\ntools: NotebookEdit\n---\nGo."
    )
    result = teamrt("run", "--prompt", "x", "--model", "sim", "--quiet", project=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        f"teamrt: warning: {agents / 'bad.md'}: line 2: YAML error: expected ',' or ']'"
    )
    helper = f"teamrt: warning: {agents / 'helper.md'}: "
    assert lines[1] == helper + "tools: 'NotebookEdit' is not available in teamrt yet; left out"
    assert lines[2] == helper + "none of the tools it names is available: it has only the team tools"
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    assert "helper-one" in open_reader(run_dir, run_dir.name).run().settings["team"]["roles"]


def test_missing_api_key_is_one_line(tmp_path: Path) -> None:
    result = teamrt("run", "--prompt", "x", "--model", "claude-sonnet-5-5", project=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "ANTHROPIC_API_KEY" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_a_team_file_offline(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text(
        '[team]\nmodel = "sim"\nprompt = "Plan the work."\n[roles.reviewer]\n'
    )
    result = teamrt("run", "team.toml", project=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 of 1 roles reported.") and "## reviewer (reviewer)" in result.stdout
    assert ": done; 2 agent(s)" in result.stderr, "the lead and the file's one role"
    [run_dir] = (tmp_path / ".teamrt" / "runs").iterdir()
    reader = open_reader(run_dir, run_dir.name)
    try:
        assert reader.run().task == "Plan the work.", "the prompt comes from the team file"
    finally:
        reader.close()


def test_a_broken_team_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text("[team]\nmodle = 'sim'\n")
    result = teamrt("run", "team.toml", "--prompt", "x", project=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "team.toml" in result.stderr and "modle" in result.stderr
    missing = teamrt("run", "absent.toml", "--prompt", "x", project=tmp_path)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "absent.toml" in missing.stderr


def test_huge_numbers_are_one_line_and_make_no_run(tmp_path: Path) -> None:
    for flag, value in (
        ("--budget-tokens", "9" * 23),
        ("--max-turns", str(2**64)),
        ("--budget-usd", "1e308"),
    ):
        result = teamrt("run", "--prompt", "x", flag, value, project=tmp_path)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"argument {flag}: expected" in result.stderr and "1_000_000_000_000" in result.stderr
    (tmp_path / "team.toml").write_text(f"[team]\nbudget_tokens = {10**30}\n")
    result = teamrt("run", "team.toml", project=tmp_path)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "[team] budget_tokens must be at most 1_000_000_000_000" in result.stderr
    assert not (tmp_path / ".teamrt" / "runs").exists() or not any((tmp_path / ".teamrt" / "runs").iterdir())
