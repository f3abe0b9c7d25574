"""The example teams (``examples/``) on ``sim``: real tools on real files, real mail, real merges.

The simulator's policies decide from what the tools return, so a changed
repository (another failing test) changes what the team does; these tests
check the outcome, not a script.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teamrt.agents import scan_definitions
from teamrt.demos import webpages
from teamrt.demos.examples import coding_repo, team_file
from teamrt.demos.teams import reading_from
from teamrt.runtime.teamrun import Choices, RunSummary, run_team, run_team_file, team_from_file
from teamrt.store import StoreReader, open_reader
from tests.helpers.git import git

SURVEYED_TREE = {
    "engine/__init__.py": '"""The engine: turns requests into answers."""\n',
    "engine/core.py": '"""The core loop."""\n\n\ndef run(request):\n    return request\n\n\nclass Engine:\n'
    "    pass\n",
    "storage/__init__.py": '"""Where answers are kept."""\n',
    "storage/disk.py": "def save(path, data):\n    # TODO: write atomically\n    open(path, 'w')\n",
    "web/app.js": "// The browser front end.\nfunction start() {\n  return 1;\n}\n",
    "cli.py": '"""The command line."""\n\n\ndef main():\n    pass\n',
    "README.md": "# A tree to survey\n",
}


def run_example(team: str, project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunSummary, StoreReader]:
    monkeypatch.setenv("TEAMRT_HOME", str(project.parent / "home"))
    summary = asyncio.run(
        run_team_file(team_file(team), prompt=None, project=project, choices=Choices(model="sim"))
    )
    run_dir = project.parent / "home" / "runs" / summary.run_id
    return summary, open_reader(run_dir, summary.run_id)


def run_research_with_the_web(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RunSummary, str]:
    """The research example as ``teamrt demo`` runs it: its pages served on loopback, the sim's search
    finding them, the team allowed to fetch from that host; and the host."""
    monkeypatch.setenv("TEAMRT_HOME", str(project.parent / "home"))
    scan = scan_definitions(project)
    team, task = team_from_file(
        team_file("research"), prompt=None, project=project, choices=Choices(model="sim"), scan=scan
    )
    with webpages.serving() as host:
        work = run_team(reading_from(team, host), task, project=project, definitions=scan.definitions)
        return asyncio.run(work), host


def unittest_in(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip


def integration_tests(repo: Path, summary: RunSummary, where: Path) -> subprocess.CompletedProcess[str]:
    """The test suite run on a checkout of the run's integration branch."""
    git(repo, "worktree", "add", "-q", "--detach", str(where), f"teamrt/{summary.run_id}")
    return unittest_in(where)


def test_research_team_surveys_every_part_of_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    for name, text in SURVEYED_TREE.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    summary, host = run_research_with_the_web(tree, monkeypatch)
    reader = open_reader(tmp_path / "home" / "runs" / summary.run_id, summary.run_id)
    assert summary.outcome.status == "done", summary.outcome
    report = (tree / "REPORT.md").read_text()
    assert (
        f"http://{host}/module-size.html advises: a file over 400 lines usually does more than one job"
        in (report)
    ), "the lead searched, fetched the page found first over HTTP, and quoted it"
    searched = [
        b for t in reader.turns("lead") for b in t.content if b.get("type") == "web_search_tool_result"
    ]
    assert searched and all(r["url"].startswith(f"http://{host}/") for r in searched[0]["content"])
    for part in ("engine/", "storage/", "web/", "cli.py", "README.md"):
        assert f"### {part}" in report, f"{part} is not in the report"
    assert "Purpose: The engine: turns requests into answers." in report, "a fork read the part's docstring"
    assert "storage/disk.py:2" in report, "the reviewer's grep found the TODO, and the lead answered it"
    kinds = [a.kind for a in reader.agents()]
    assert kinds.count("fork") >= 2 and kinds.count("team") == 1
    forks = [a for a in reader.agents() if a.kind == "fork"]
    assert all(a.usage.cache_read_tokens > 0 for a in forks), "forks read their parent's prefix from cache"
    reviewer = next(a.name for a in reader.agents() if a.kind == "team")
    assert any(m.sender == reviewer and "CHALLENGES" in m.message["body"] for m in reader.mail("lead"))
    streams = tmp_path / "home" / "runs" / summary.run_id / "stream"
    said = (streams / "lead").read_text().splitlines()
    assert said[0].startswith("First, what reviewers advise") and said[-1].startswith("Wrote REPORT.md"), said
    assert (streams / forks[0].name).read_text().startswith("Counting lines and definitions in ")
    assert any(m.sender == "lead" and "ANSWERS" in m.message["body"] for m in reader.mail(reviewer))


def test_research_team_on_a_different_tree_reports_that_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "other"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "guide.md").write_text("# The guide\n")
    (tree / "main.go").write_text("package main\n\nfunc main() {}\n")
    summary, _ = run_example("research", tree, monkeypatch)
    report = (tree / "REPORT.md").read_text()
    assert summary.outcome.status == "done"
    assert "### docs/" in report and "### main.go" in report and "engine/" not in report
    assert "2 parts" in report
    guidance = report.split("## Guidance from the web\n\n")[1].splitlines()[0]
    assert guidance.startswith("I could not read https://") and "permission denied" in guidance, (
        "without the demo's pages the sim's own search finds pages no rule lets it fetch: asked, denied"
    )


def test_coding_team_fixes_the_failing_tests_on_a_green_integration_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = coding_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    assert unittest_in(repo).returncode != 0, "the example starts with failing tests"
    summary, reader = run_example("coding", repo, monkeypatch)
    assert summary.outcome.status == "done", summary.outcome
    checked = integration_tests(repo, summary, tmp_path / "integration")
    assert checked.returncode == 0 and checked.stderr.rstrip().endswith("OK"), checked.stderr
    assert git(repo, "rev-parse", "HEAD") == head, "the user's branch waits for teamrt apply"
    assert sorted(t.subject for t in reader.tasks()) == [
        "Make tests.test_dates pass", "Make tests.test_stats pass", "Make tests.test_text pass",
    ]  # fmt: skip
    assert all(t.status == "done" for t in reader.tasks())
    coders = [a for a in reader.agents() if a.kind == "worktree"]
    assert len(coders) == 3 and {t.owner for t in reader.tasks()} == {a.name for a in coders}
    assert [m.status for m in reader.merges()] == ["merged"] * 3
    reviews = [m for m in reader.mail("lead") if m.sender == "reviewer" and "APPROVED" in m.message["body"]]
    assert len(reviews) == 3, "the reviewer commented on every fix by mail"
    assert "covered by" in reviews[0].message["body"]


def test_coding_team_fixes_what_fails_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fix one of the example's bugs and add another failing test: the team follows the repository."""
    repo = coding_repo(tmp_path / "repo")
    text = repo / "kit" / "text.py"
    text.write_text(text.read_text().replace("if len(text) < width:", "if len(text) <= width:"))
    (repo / "kit" / "numbers.py").write_text(
        '"""Numbers."""\n\n\ndef percent(part: int, whole: int) -> int:\n'
        '    """``part`` as a whole percentage of ``whole``, rounded down."""\n'
        "    return part * 100 // (whole + 1)\n"
    )
    (repo / "tests" / "test_numbers.py").write_text(
        "import unittest\n\nfrom kit.numbers import percent\n\n\nclass PercentTest(unittest.TestCase):\n"
        "    def test_quarter(self) -> None:\n        self.assertEqual(percent(1, 4), 25)\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "truncate fixed; percent added")
    summary, reader = run_example("coding", repo, monkeypatch)
    assert summary.outcome.status == "done", summary.outcome
    assert sorted(t.subject for t in reader.tasks()) == [
        "Make tests.test_dates pass", "Make tests.test_numbers pass", "Make tests.test_stats pass",
    ]  # fmt: skip
    checked = integration_tests(repo, summary, tmp_path / "integration")
    assert checked.returncode == 0 and "Ran 10 tests" in checked.stderr, checked.stderr
    fixed = (tmp_path / "integration" / "kit" / "numbers.py").read_text()
    assert "return part * 100 // (whole)" in fixed, "the coder found the off-by-one by trying changes"


def test_teamrt_demo_runs_both_teams_offline_and_ends_with_tables(tmp_path: Path) -> None:
    """``make demo``'s command, with an API key set: it must stay on sim (the key would fail the suite)."""
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "demo"],
        env={**os.environ, "TEAMRT_HOME": str(tmp_path / "home"), "ANTHROPIC_API_KEY": "sk-never-used"},
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "offline; no API key is used" in out
    assert out.count("AGENT ") == 2 and out.count("CACHE READ") == 2, "a table per run"
    assert "forks" in out and "worktree agents" in out and "teammate" in out
    assert "of the input read from cache); cost $" in out and "3 merged commits" in out
    assert "merge.merged" in out and "task.claimed" in out, "progress lines came as the runs went"
    assert "$ teamrt apply" in out and "fast-forwarded main" in out
    assert "  after: Ran 9 tests" in out and out.split("  after: ")[1].splitlines()[0].endswith("OK")
    report = next((tmp_path / "home" / "demo").glob("*/research/REPORT.md"))
    for part in ("cli/", "mailbox/", "runtime/", "worktree/"):
        assert f"### {part}" in report.read_text(), "teamrt's own tree, every part"
    assert "the web it searches and reads: pages served at http://127.0.0.1:" in out
    assert "/module-size.html advises: a file over 400 lines usually does more" in report.read_text()


def test_both_examples_complete_with_model_faults_at_ten_percent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """429, 529, 500, stalls, cut and broken streams on one request in ten, seeded: both teams end
    as they do without them, the SDK's and teamrt's own retries absorbing every fault."""
    from teamrt.settings import SETTINGS_ENV
    from teamrt.sim import Fault, shared_server

    settings = tmp_path / "settings.toml"
    settings.write_text(
        "[model]\nstall_seconds = 0.5\nstream_retries = 6\nstream_retry_delay = 0.01\nsdk_retries = 6\n"
    )
    monkeypatch.setenv(SETTINGS_ENV, str(settings))
    faults = shared_server().faults
    kinds = ("rate_limit", "overloaded", "server_error", "stall", "cut", "stream_error")
    faults.at_random(0.1, seed=7, kinds=kinds, like=Fault("cut", retry_after=0.01, seconds=2.0))
    try:
        repo = coding_repo(tmp_path / "repo")
        coding, reader = run_example("coding", repo, monkeypatch)
        tree = tmp_path / "tree"
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "__init__.py").write_text('"""A package."""\n')
        (tree / "main.py").write_text('"""The entry point."""\n')
        research, _ = run_example("research", tree, monkeypatch)
    finally:
        faults.clear()
    assert coding.outcome.status == "done" and research.outcome.status == "done"
    assert "3 of 3 coders merged their fixes" in coding.outcome.answer
    assert "### pkg/" in (tree / "REPORT.md").read_text()
    taken = [c for c in shared_server().calls if c.fault]
    assert len({c.fault for c in taken}) >= 4 and len(taken) >= 10, f"{len(taken)} faults were injected"
    assert all(a.status == "done" for a in reader.agents())
