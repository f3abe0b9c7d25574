"""The coding play on a pytest repository: it runs pytest, reads its failures, and fixes the file in the
failing traceback's frame, not the first file grep finds.

The fixture repository's bug is two frames below its test (``summary`` calls ``median``, which indexes
past the list's end), and ``calc/legacy.py``, which sorts before ``calc/stats.py``, defines a
``median`` of its own that nothing calls: a coder that fixed the first definition grep finds would
edit the wrong file.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrt.sim.plays import coding, pytest_output
from teamrt.sim.plays.suites import PYTEST, PYTEST_SIGNS
from teamrt.store import open_reader
from teamrt.testing import run_on_sim
from tests.helpers.teams import FAST
from tests.sim.test_honesty import drive

LONG = """\
.F.                                                                      [100%]
=================================== FAILURES ===================================
__________________________________ test_pair ___________________________________

    def test_pair():
>       assert summary([2, 1]) == "median 1.5"
               ^^^^^^^^^^^^^^^

tests/test_report.py:11:<SPACE>
<SEP>
calc/report.py:7: in summary
    return f"median {median(values)}"
                     ^^^^^^^^^^^^^^
<SEP>

values = [2, 1]

    def median(values):
        ordered = sorted(values)
        middle = len(ordered) // 2
        if len(ordered) % 2 == 1:
            return ordered[middle]
>       return (ordered[middle - 1] + ordered[middle + 1]) / 2
                                      ^^^^^^^^^^^^^^^^^^^
E       IndexError: list index out of range

calc/stats.py:9: IndexError
=========================== short test summary info ============================
FAILED tests/test_report.py::test_pair - IndexError: list index out of range
1 failed, 2 passed in 0.78s
[exit code 1]""".replace("<SEP>", "_ " * 40).replace("<SPACE>", " ")
"""pytest -q's report of the fixture's failure (the long traceback style, its default)."""
SHORT = """\
=================================== FAILURES ===================================
__________________________________ test_pair ___________________________________
tests/test_report.py:11: in test_pair
    assert summary([2, 1]) == "median 1.5"
calc/report.py:7: in summary
    return f"median {median(values)}"
calc/stats.py:9: in median
    return (ordered[middle - 1] + ordered[middle + 1]) / 2
E   IndexError: list index out of range
=========================== short test summary info ============================
FAILED tests/test_report.py::test_pair - IndexError: list index out of range
1 failed, 2 passed in 0.93s"""

REPO = {
    "calc/__init__.py": "",
    "calc/legacy.py": '"""The old report, kept for the archive; nothing calls it."""\n\n\n'
    "def median(values):\n    ordered = sorted(values)\n    return ordered[len(ordered) // 2]\n",
    "calc/stats.py": '"""Statistics over a list of numbers."""\n\n\ndef median(values):\n'
    "    ordered = sorted(values)\n    middle = len(ordered) // 2\n    if len(ordered) % 2:\n"
    "        return ordered[middle]\n    return (ordered[middle] + ordered[middle + 1]) / 2\n",
    "calc/report.py": '"""A one-line summary of some numbers."""\n\nfrom calc.stats import median\n\n\n'
    'def summary(values):\n    return f"median {median(values)}"\n',
    "tests/test_report.py": "import pytest\n\nfrom calc.report import summary\n\n\ndef test_odd():\n"
    '    assert summary([3, 1, 2]) == "median 2"\n\n\ndef test_pair():\n'
    '    assert summary([2, 1]) == "median 1.5"\n\n\n@pytest.mark.parametrize("values", [[1]])\n'
    'def test_one(values):\n    assert summary(values) == "median 1"\n',
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
}


def python_with_pytest() -> str:
    """The interpreter the gate runs pytest with: ``python3`` on PATH (what the sandbox's commands find)
    when it has pytest, else this test run's own, by its path."""
    found = shutil.which("python3")
    if found and subprocess.run([found, "-c", "import pytest"], capture_output=True).returncode == 0:
        return "python3"
    return sys.executable


@pytest.mark.parametrize("output", [LONG, SHORT], ids=["long", "short"])
def test_pytests_failures_name_the_test_and_the_frames_where_it_failed(output: str) -> None:
    [failure] = pytest_output.failures(output)
    assert failure.test == "tests/test_report.py::test_pair"
    assert failure.module == "tests/test_report.py"
    assert failure.line == 'assert summary([2, 1]) == "median 1.5"'
    assert failure.error == "IndexError: list index out of range"
    assert failure.frames == (("calc/stats.py", "median"), ("calc/report.py", "summary")), "innermost first"
    assert failure.called == ["summary"]
    assert pytest_output.ran(output) and not pytest_output.green(output)
    assert pytest_output.summary(output).startswith("1 failed, 2 passed in ")


def test_pytests_counts_say_whether_it_ran_and_passed() -> None:
    assert pytest_output.green("...\n3 passed in 0.01s\n")
    assert not pytest_output.ran("ERROR: file or directory not found: tests/x.py\n\nno tests ran in 0.01s")
    assert not pytest_output.green("===== 1 passed, 1 error in 0.20s =====")
    assert pytest_output.failures("3 passed in 0.01s") == []


def test_the_lead_finds_pytest_and_does_not_call_a_red_suite_nothing_to_fix() -> None:
    refused = "worktree agents need a git repository with a commit; /w is not in one"

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "Grep":
            return "pyproject.toml\ntests/test_report.py", False
        if name == "Bash" and args["command"] == PYTEST:
            return LONG, True
        if name == "task_create":
            return f"created task 1: {args['subject']}", False
        if name == "spawn_agent" and args["kind"] == "team":
            return "started reviewer; each result will arrive as mail", False
        if name == "spawn_agent":
            return refused, True
        if name == "task_list":
            return '{"id": 1, "subject": "Make tests/test_report.py pass", "status": "open"}', False
        return "delivered m1 to reviewer", False

    answer, calls = drive(coding.lead, world, role="lead", team="coding")
    assert calls[0] == ("Grep", {"pattern": PYTEST_SIGNS, "output_mode": "files_with_matches"})
    assert calls[1] == ("Bash", {"command": PYTEST}), "a pytest repository: pytest, not unittest"
    assert ("task_create", {"subject": "Make tests/test_report.py pass", "description": (
        "tests/test_report.py::test_pair: IndexError: list index out of range\n"
        "Check with: python3 -m pytest -q tests/test_report.py"
    )}) in calls  # fmt: skip
    assert f"Nothing was fixed: {PYTEST} said 1 failed, 2 passed in 0.78s before" in answer, answer
    assert "Nothing to fix" not in answer and "Ran 0 tests" not in answer


@pytest.mark.slow
def test_the_coding_team_fixes_the_file_of_the_failing_frame_and_the_gate_passes(tmp_path: Path) -> None:
    repo = tmp_path / "calc-repo"
    for name, text in REPO.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    python = python_with_pytest()
    gate = f"{python} -m pytest -q"
    (repo / "team.toml").write_text(
        '[team]\nname = "coding"\nmodel = "sim"\non_ask = "deny"\n[roles.coder]\n[roles.reviewer]\n'
        f'[permissions]\nallow = ["Bash({python} -m pytest:*)", "Bash(git diff:*)", "Bash(git log:*)"]\n'
        f'[merge]\ngates = ["{gate}"]\n'
    )
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "go"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    result = run_on_sim(repo / "team.toml", "Make the failing tests pass.", project=repo,
                        run_dir=tmp_path / "run", run_id="r1", settings=FAST, timeout=150)  # fmt: skip
    assert result.status == "done", result
    assert "passes at its tip" in result.answer and f"gates passed: `{gate}`" in result.answer, result.answer
    branch = result.integration_branch
    assert branch is not None
    changed = subprocess.run(["git", "diff", "--name-only", "HEAD", branch], cwd=repo, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    assert changed == ["calc/stats.py"], "the traceback's file, not legacy.py (the first grep hit)"
    reader = open_reader(result.run_dir, result.run_id)
    try:
        made = [(b["name"], b["input"]) for t in reader.turns("coder") if t.role == "assistant"
                for b in t.content if b.get("type") == "tool_use"]  # fmt: skip
    finally:
        reader.close()
    assert ("Read", {"file_path": "calc/stats.py"}) in made and not any(n == "Grep" for n, _ in made)
    assert not any(i.get("file_path") == "calc/legacy.py" for _, i in made)
    assert ("Bash", {"command": f"{gate} tests/test_report.py"}) in made, "its task's tests, by pytest"
