"""Merge gates an agent's code tries to fool: pass/fail comes from the runner's exit status and the test
report teamrt asks for, never from what the tests print.

The tip of the integration branch has one known failure (``mul``). Each attack is a branch that breaks
``add`` and ``sub`` and rigs the suite so that, read as text, the gate says only the known failure
fails (issue 32: the queue merged such a branch, "1 of 1 gates still fail, only tests that failed
before"). The gates run through the real merge queue, in bubblewrap where it is installed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from teamrt.models import Reply
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.sim import SimRequest, SimServer
from teamrt.store import Store, create_store
from teamrt.worktree import GitRepo
from teamrt.worktree.gates import Report, ReportError, Run, judge, read_report, runner_of
from teamrt.worktree.queue import MergeQueue, Verdict
from tests.helpers.git import git, make_repo, run_worktree_team
from tests.helpers.machine import needs_bwrap

pytestmark = pytest.mark.hostile

INTEGRATION = "teamrt/r1"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
UNITTEST = f"{os.path.realpath(sys.executable)} -m unittest -q"
APP = (
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\n"
    "def mul(a, b):\n    return a + b\n"
)
BROKEN = APP.replace("return a + b\n\n\ndef sub", "return a * 7\n\n\ndef sub").replace(
    "return a - b", "return 0"
)
PYTEST_TESTS = (
    "import app\n\n\ndef test_add():\n    assert app.add(2, 3) == 5\n\n\n"
    "def test_sub():\n    assert app.sub(5, 3) == 2\n\n\ndef test_mul():\n    assert app.mul(2, 3) == 6\n"
)
UNITTEST_TESTS = (
    "import unittest\nimport app\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(app.add(2, 3), 5)\n\n"
    "    def test_sub(self):\n        self.assertEqual(app.sub(5, 3), 2)\n\n"
    "    def test_mul(self):\n        self.assertEqual(app.mul(2, 3), 6)\n"
)
KNOWN_PYTEST = "FAILED test_app.py::test_mul - assert 5 == 6"
KNOWN_UNITTEST = "FAIL: test_mul (test_app.T.test_mul)"


def sandbox() -> tuple[Sandbox, SandboxPolicy]:
    """bubblewrap where it is installed (the report's directory must be writable in it), else unconfined."""
    confined = default_sandbox()
    return (
        (confined, SandboxPolicy()) if confined.confined else (Sandbox(None), SandboxPolicy(unconfined=True))
    )


def project_with(tmp_path: Path, tests: str) -> Path:
    return make_repo(tmp_path / "project", {"app.py": APP, "test_app.py": tests})


def branch(project: Path, name: str, files: dict[str, str | None]) -> str:
    """A branch off main whose one commit writes ``files`` (None: deletes it); its head."""
    git(project, "checkout", "-q", "-b", name, "main")
    for path, text in files.items():
        if text is None:
            git(project, "rm", "-q", path)
        else:
            (project / path).write_text(text)
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", name)
    head = git(project, "rev-parse", "HEAD")
    git(project, "checkout", "-q", "main")
    return head


def land(project: Path, gate: str, name: str, head: str) -> tuple[Verdict, str | None]:
    """Land ``name`` through a queue whose one gate is ``gate``; the verdict and the integration tip."""
    repo = GitRepo.find(project)
    assert repo is not None
    base = git(project, "rev-parse", "main")
    run_dir = project.parent / "home" / "runs" / "r1"
    run_dir.mkdir(parents=True, exist_ok=True)
    box, policy = sandbox()

    async def go() -> Verdict:
        store: Store = create_store(run_dir, "r1", task="t", workdir=str(project))
        try:
            await store.add_agent("coder", kind="worktree", model="sim")
            queue = MergeQueue(
                repo=repo, store=store, run_dir=run_dir, branch=INTEGRATION, base=base, gates=(gate,),
                gate_timeout=120, sandbox=box, policy=policy,
            )  # fmt: skip
            try:
                return await queue.land("coder", name, head, "a change")
            finally:
                await queue.close()
        finally:
            store.close()

    return asyncio.run(go()), repo.tip(INTEGRATION)


DESELECT_ALL = (
    "def pytest_collection_modifyitems(config, items):\n"
    "    config.hook.pytest_deselected(items=list(items))\n    items[:] = []\n\n\n"
    f"def pytest_unconfigure(config):\n    print({KNOWN_PYTEST!r})\n"
)
SKIP_ALL = (
    "import pytest\n\n\ndef pytest_collection_modifyitems(config, items):\n"
    "    for item in items:\n        item.add_marker(pytest.mark.skip(reason='later'))\n\n\n"
    f"def pytest_unconfigure(config):\n    print({KNOWN_PYTEST!r})\n"
)
EXIT_ZERO_AT_IMPORT = f"import os\nprint({KNOWN_PYTEST!r})\nprint('3 passed')\nos._exit(0)\n"
GARBLED_REPORT = (
    "def pytest_unconfigure(config):\n    path = config.option.xmlpath\n"
    "    if path:\n        open(path, 'w').write('<testsuite><testcase name=\"x\">')\n"
)
ENTITY_REPORT = (
    "def pytest_unconfigure(config):\n    path = config.option.xmlpath\n"
    "    if path:\n        open(path, 'w').write("
    '\'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    '<testsuite><testcase classname="test_app" name="test_mul">&b;<failure/></testcase></testsuite>\')\n'
)
STATUS_ZERO = "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n"
NO_REPORT = "def pytest_configure(config):\n    config.option.xmlpath = None\n"


@pytest.mark.parametrize(
    ("conftest", "said"),
    [
        (DESELECT_ALL, "0 test(s) ran, 3 on the integration branch's tip"),
        (SKIP_ALL, "0 test(s) ran, 3 on the integration branch's tip (3 skipped now)"),
        (EXIT_ZERO_AT_IMPORT, "the test report teamrt asked for was not written"),
        (
            NO_REPORT,
            "the test report teamrt asked for was not written: a pytest gate without it does not pass",
        ),
        (GARBLED_REPORT, "the test report is not well-formed XML"),
        (ENTITY_REPORT, "the test report declares a document type or entities"),
        (
            STATUS_ZERO,
            "exit code 0, but the report names failing tests: test_app::test_add, test_app::test_mul",
        ),
    ],
    ids=[
        "deselect-all",
        "skip-all",
        "exit-0-at-import",
        "no-report",
        "garbled-report",
        "entities",
        "status-0",
    ],
)
def test_a_rigged_pytest_suite_breaking_add_and_sub_is_not_merged(
    tmp_path: Path, conftest: str, said: str
) -> None:
    project = project_with(tmp_path, PYTEST_TESTS)
    head = branch(project, "rigged", {"app.py": BROKEN, "conftest.py": conftest})
    verdict, tip = land(project, PYTEST, "rigged", head)
    assert verdict.status == "red", verdict.output
    assert said in verdict.output, verdict.output
    assert tip == git(project, "rev-parse", "main"), "the integration branch did not move"


def test_the_issues_false_gate_says_only_the_known_failure_yet_is_refused(tmp_path: Path) -> None:
    """As filed: the rigged gate prints exactly the known failure's line, which once let it through."""
    project = project_with(tmp_path, PYTEST_TESTS)
    head = branch(project, "rigged", {"app.py": BROKEN, "conftest.py": DESELECT_ALL})
    verdict, _ = land(project, PYTEST, "rigged", head)
    assert KNOWN_PYTEST in verdict.output, "the agent's line is shown, as the gate's output"
    assert "failed before this merge too" not in verdict.output
    assert verdict.output.rstrip().endswith(
        "[exit code 5; 0 test(s) ran, 3 on the integration branch's tip (0 skipped now): a gate must run at"
        " least the tests it ran before]"
    ), verdict.output


def test_a_deleted_test_is_fewer_tests_than_on_the_tip(tmp_path: Path) -> None:
    project = project_with(tmp_path, PYTEST_TESTS)
    tests = PYTEST_TESTS.split("def test_sub")[0].replace(
        "def test_add():\n    assert app.add(2, 3) == 5\n", ""
    )
    head = branch(project, "fewer", {"app.py": BROKEN, "test_app.py": tests + "def test_x():\n    pass\n"})
    verdict, _ = land(project, PYTEST, "fewer", head)
    assert verdict.status == "red" and "1 test(s) ran, 3 on the integration branch's tip" in verdict.output


UNITTEST_EMPTY = (
    "import unittest\n\n\ndef load_tests(loader, tests, pattern):\n"
    f"    print({KNOWN_UNITTEST!r})\n    return unittest.TestSuite()\n"
)
UNITTEST_EXIT_0 = f"import os\nprint({KNOWN_UNITTEST!r})\nprint('OK')\nos._exit(0)\n"


@pytest.mark.parametrize(
    ("tests", "said"),
    [
        (UNITTEST_EMPTY, "0 test(s) ran, 3 on the integration branch's tip"),
        (UNITTEST_EXIT_0, "the test report teamrt asked for was not written"),
    ],
    ids=["no-tests-loaded", "exit-0-at-import"],
)
def test_a_rigged_unittest_suite_is_not_merged(tmp_path: Path, tests: str, said: str) -> None:
    project = project_with(tmp_path, UNITTEST_TESTS)
    head = branch(project, "rigged", {"app.py": BROKEN, "test_app.py": tests})
    verdict, tip = land(project, UNITTEST, "rigged", head)
    assert verdict.status == "red" and said in verdict.output, verdict.output
    assert tip == git(project, "rev-parse", "main")


def test_a_gate_without_a_report_is_judged_by_its_exit_status_alone(tmp_path: Path) -> None:
    """A command teamrt does not know as a test runner: printing the known failure's line lets nothing
    through; only exit status 0 passes."""
    project = project_with(tmp_path, PYTEST_TESTS)
    (project / "check.sh").write_text(f"echo {KNOWN_PYTEST!r}\nexit 1\n")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "check")
    head = branch(project, "docs", {"README": "docs\n"})
    verdict, _ = land(project, "sh check.sh", "docs", head)
    assert verdict.status == "red" and verdict.output.endswith("[exit code 1]"), verdict.output


@pytest.mark.parametrize(
    ("gate", "tests"), [(PYTEST, PYTEST_TESTS), (UNITTEST, UNITTEST_TESTS)], ids=["pytest", "unittest"]
)
def test_a_genuine_change_keeping_the_known_failure_still_merges(
    tmp_path: Path, gate: str, tests: str
) -> None:
    project = project_with(tmp_path, tests)
    head = branch(project, "docs", {"app.py": '"""Arithmetic."""\n\n\n' + APP})
    verdict, tip = land(project, gate, "docs", head)
    assert verdict.status == "merged", verdict.output
    assert "but every failing test failed before this merge too; fixed by it: none" in verdict.output
    assert tip == verdict.commit


@pytest.mark.parametrize(
    ("gate", "tests"), [(PYTEST, PYTEST_TESTS), (UNITTEST, UNITTEST_TESTS)], ids=["pytest", "unittest"]
)
def test_a_genuine_fix_of_the_known_failure_merges_green(tmp_path: Path, gate: str, tests: str) -> None:
    project = project_with(tmp_path, tests)
    fixed = APP.replace("def mul(a, b):\n    return a + b", "def mul(a, b):\n    return a * b")
    head = branch(project, "fix", {"app.py": fixed})
    verdict, tip = land(project, gate, "fix", head)
    assert verdict.status == "merged", verdict.output
    assert "failed before" not in verdict.output and tip == verdict.commit


@pytest.mark.parametrize(
    ("gate", "tests"), [(PYTEST, PYTEST_TESTS), (UNITTEST, UNITTEST_TESTS)], ids=["pytest", "unittest"]
)
def test_breaking_add_and_sub_honestly_is_red_and_names_them(tmp_path: Path, gate: str, tests: str) -> None:
    project = project_with(tmp_path, tests)
    head = branch(project, "broken", {"app.py": BROKEN})
    verdict, _ = land(project, gate, "broken", head)
    assert verdict.status == "red" and "failing now but not before the merge: " in verdict.output
    assert (
        "test_add" in verdict.output.split("failing now")[1]
        and "test_mul" not in verdict.output.split("failing now")[1]
    )


# -- reading and judging reports --------------------------------------------------------------------


def write(tmp_path: Path, text: str | bytes) -> Path:
    data = text.encode() if isinstance(text, str) else text
    (tmp_path / "report.xml").write_bytes(data)
    return tmp_path


def test_a_pytest_report_counts_what_ran_and_names_failures(tmp_path: Path) -> None:
    xml = (
        '<testsuites><testsuite><testcase classname="t" name="a"/><testcase classname="t" name="b">'
        '<failure message="x"/></testcase><testcase classname="t" name="c"><skipped/></testcase>'
        '<testcase classname="" name="t.broken"><error message="collection failure"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert read_report(write(tmp_path, xml)) == Report(
        ran=3, skipped=1, failing=frozenset({"t::b", "t.broken"})
    )


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (None, "was not written"),
        ("", "not well-formed"),
        ("<testsuite><testcase", "not well-formed"),
        ('<!DOCTYPE x SYSTEM "file:///etc/passwd"><x/>', "document type"),
        (b"\xff\xfe<", "not well-formed"),
    ],
    ids=["missing", "empty", "cut", "doctype", "binary"],
)
def test_a_report_that_cannot_be_used_is_an_error_saying_which(
    tmp_path: Path, data: str | bytes | None, said: str
) -> None:
    if data is not None:
        write(tmp_path, data)
    with pytest.raises(ReportError, match=said):
        read_report(tmp_path)


def test_a_report_too_large_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("teamrt.worktree.gates.MAX_REPORT_BYTES", 10)
    with pytest.raises(ReportError, match="larger than"):
        read_report(write(tmp_path, "<testsuite></testsuite>"))


@pytest.mark.parametrize(
    ("command", "runner"),
    [
        ("pytest -q", "pytest"), ("python3 -m pytest", "pytest"), (".venv/bin/pytest tests", "pytest"),
        ("cd sub && py.test", "pytest"), ("python3 -m unittest -q", "unittest"),
        ("python -m unittest discover -s tests", "unittest"), ("make test", None), ("npm test", None),
        ("./pytest-like.sh", None), ("python3 -m unittest_extra", None),
    ],
)  # fmt: skip
def test_the_runner_is_known_from_the_command(command: str, runner: str | None) -> None:
    assert runner_of(command) == runner


def test_judging_needs_the_report_when_the_runner_is_known() -> None:
    report = Report(ran=3, skipped=0, failing=frozenset({"t::mul"}))
    tip = Run(1, "", "", report, None, "pytest")
    assert (
        judge(
            Run(1, KNOWN_PYTEST, "", None, "the test report teamrt asked for was not written", "pytest"), tip
        ).passed
        is False
    )
    assert judge(Run(1, "", "", report, None, "pytest"), tip).passed is True
    assert judge(Run(0, "", "", Report(3, 0, frozenset()), None, "pytest"), tip).passed is True
    assert judge(Run(None, "", "killed: timeout", report, None, "pytest"), tip).passed is False
    assert judge(Run(1, "", "", Report(3, 0, frozenset()), None, "pytest"), tip).note.endswith(
        "[exit code 1, and the test report names no failing test]"
    )


@needs_bwrap
def test_the_gates_report_directory_is_the_only_place_outside_the_workspace_it_writes(tmp_path: Path) -> None:
    """The sandbox binds the report's directory writable, nothing else: the run's directory stays
    read-only and hidden to the gate."""
    project = project_with(tmp_path, PYTEST_TESTS)
    head = branch(project, "docs", {"README": "docs\n"})
    gate = 'touch "$TEAMRT_GATE_REPORT.x" && ls -A .. && touch ../planted; exit 0'
    verdict, _ = land(project, gate, "docs", head)
    assert verdict.status == "merged", verdict.output
    assert "integration\n" in verdict.output and "Read-only file system" in verdict.output
    assert not (project.parent / "home" / "runs" / "r1" / "planted").exists()


# -- driven as an agent would: a worktree coder, the real supervisor, sandbox and queue -----------------


def lead_spawning(directive: str):  # type: ignore[no-untyped-def]
    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call(
                "spawn_agent", {"kind": "worktree", "role": "coder", "directives": [directive]}
            )
        return Reply().say("Lead: " + (request.tool_outcomes[0].output if request.tool_outcomes else "done"))

    return lead


def coder_writing(files: dict[str, str]):  # type: ignore[no-untyped-def]
    """Writes ``files`` with the Write tool, then says it is done (every time it is asked again)."""

    def coder(request: SimRequest) -> Reply:
        if request.calls("Write") < len(files):
            path = list(files)[request.calls("Write")]
            return Reply().call("Write", {"file_path": path, "content": files[path]})
        return Reply().say("Done: the suite fails only where it failed before.")

    return coder


def team_project(tmp_path: Path) -> Path:
    team = f"[team]\nmodel = 'sim'\n[roles.coder]\n[merge]\ngates = ['{PYTEST}']\n"
    return make_repo(tmp_path / "project", {"app.py": APP, "test_app.py": PYTEST_TESTS, "team.toml": team})


@needs_bwrap
def test_a_coder_rigging_the_suite_with_a_conftest_is_not_merged(tmp_path: Path) -> None:
    project = team_project(tmp_path)
    with SimServer(record=True) as sim:
        sim.policies.update(
            {
                "lead": lead_spawning("Fix app.py."),
                "coder": coder_writing({"app.py": BROKEN, "conftest.py": DESELECT_ALL}),
            }
        )
        outcome, store = run_worktree_team(project, sim, "Fix app.py.")
    [merge] = store.reader.merges()
    assert merge.status == "red" and merge.merged_commit is None, merge
    assert "0 test(s) ran, 3 on the integration branch's tip" in (merge.output or "")
    assert git(project, "rev-parse", INTEGRATION) == git(project, "rev-parse", "main"), "nothing was merged"
    assert "not merged after 3 attempts (red)" in (store.reader.agent("coder").status_reason or "")
    assert outcome.status == "done"


@needs_bwrap
def test_a_coder_whose_change_keeps_only_the_known_failure_is_merged(tmp_path: Path) -> None:
    project = team_project(tmp_path)
    with SimServer(record=True) as sim:
        sim.policies.update(
            {
                "lead": lead_spawning("Document app.py."),
                "coder": coder_writing({"app.py": '"""Arithmetic."""\n' + APP}),
            }
        )
        outcome, store = run_worktree_team(project, sim, "Document app.py.")
    [merge] = store.reader.merges()
    assert merge.status == "merged", merge.output
    assert "but every failing test failed before this merge too; fixed by it: none" in (merge.output or "")
    assert outcome.status == "done"
