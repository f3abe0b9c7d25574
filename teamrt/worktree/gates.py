"""What decides a merge gate: the runner's exit status and a test report teamrt asks for, never the text
the tests print.

A gate runs code the agent wrote: its tests, a ``conftest.py``, a ``sitecustomize``. Whatever it prints
is the agent's to choose (``FAILED test_x`` lines included), so the verdict rests on two things teamrt
asks for itself:

- the exit status of the command;
- a JUnit XML report written to a directory of the gate's own outside the workspace (the only place the
  sandbox lets it write besides the workspace): pytest is asked for one through ``PYTEST_ADDOPTS``
  (``--junitxml``), and ``python -m unittest`` runs under teamrt's ``unittest_report`` runner, which
  writes one. A command teamrt does not recognise as either is judged by its exit status alone.

For a gate with a report, the tests that ran (skipped ones do not count) must be at least as many as on
the integration branch's tip, so a ``conftest.py`` that deselects or skips the suite does not pass; a
missing or unreadable report does not pass either. Such a gate may fail on the tip already (a team
fixing a failing suite in parallel): then a merge passes when the report names no failing test the tip
did not fail.

What this cannot prove: the report and the exit status come from a process running the agent's code,
which may edit the tests, or forge the report and exit 0. A gate shows that the suite as the branch
leaves it passes; it is no review of the tests themselves (docs/security.md).
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

from teamrt.errors import TeamrtError

REPORT_NAME = "report.xml"
RUNNER_NAME = "teamrt_unittest.py"
REPORT_ENV = "TEAMRT_GATE_REPORT"
MAX_REPORT_BYTES = 64 * 1024 * 1024
"""A report larger than this is not read (a gate's report is the agent's to bloat)."""

_PYTEST = re.compile(r"(?:^|[\s/;&|(`'\"])(?:pytest|py\.test)(?=$|[\s;&|)`'\"])|-m\s*pytest\b")
_UNITTEST = re.compile(r"(?<![\w.-])-m\s*unittest(?![\w.])")


class ReportError(TeamrtError):
    """The report is missing, too large or not JUnit XML; the message says which, in one line."""


@dataclass(frozen=True)
class Report:
    ran: int
    """Tests that ran: passed, failed or in error (not skipped)."""
    skipped: int
    failing: frozenset[str]
    """The tests that failed or erred, by name."""


def runner_of(command: str) -> str | None:
    """``pytest`` or ``unittest`` when ``command`` runs that test runner (so a report must appear),
    else None (the exit status alone decides)."""
    if _UNITTEST.search(command):
        return "unittest"
    if _PYTEST.search(command):
        return "pytest"
    return None


def prepare(command: str, report_dir: Path) -> tuple[str, dict[str, str]]:
    """``command`` as it runs to write its report into ``report_dir`` (made fresh, empty but for the
    unittest runner), and the variables it runs with."""
    shutil.rmtree(report_dir, ignore_errors=True)
    report_dir.mkdir(parents=True)
    report = report_dir / REPORT_NAME
    env = {
        REPORT_ENV: str(report),
        "PYTEST_ADDOPTS": " ".join(
            shlex.quote(arg) for arg in (f"--junitxml={report}", "-o", "junit_family=xunit2")
        ),
    }
    if runner_of(command) == "unittest":
        runner = report_dir / RUNNER_NAME
        shutil.copyfile(Path(__file__).with_name("unittest_report.py"), runner)
        command = _UNITTEST.sub(lambda _: shlex.quote(str(runner)), command)
    return command, env


def read_report(report_dir: Path) -> Report:
    """The report a gate wrote in ``report_dir``; raises ReportError."""
    path = report_dir / REPORT_NAME
    try:
        with path.open("rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        raise ReportError("the test report teamrt asked for was not written") from None
    except OSError as e:
        raise ReportError(f"the test report could not be read ({e.strerror or e})") from None
    if len(data) > MAX_REPORT_BYTES:
        raise ReportError(f"the test report is larger than {MAX_REPORT_BYTES // 2**20} MiB")
    return _parse(data)


def _parse(data: bytes) -> Report:
    """JUnit XML (pytest's or teamrt's unittest runner's) as a Report. A document type or an entity
    declaration is refused: nothing in a report needs one, and expanding them costs memory."""
    outcomes: dict[str, str] = {}
    current: list[str] = []  # the open testcase's name, if any

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag == "testcase":
            classname, name = attrs.get("classname", ""), attrs.get("name", "")
            key = f"{classname}::{name}" if classname else name
            current[:] = [key]
            outcomes.setdefault(key, "passed")
        elif current and tag in ("failure", "error"):
            outcomes[current[0]] = "failed"
        elif current and tag == "skipped" and outcomes[current[0]] != "failed":
            outcomes[current[0]] = "skipped"

    def end(tag: str) -> None:
        if tag == "testcase":
            current.clear()

    def refuse(*_: object) -> None:
        raise ReportError("the test report declares a document type or entities; it is not read")

    parser = expat.ParserCreate()
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ReportError(f"the test report is not well-formed XML ({e})") from None
    states = list(outcomes.values())
    return Report(
        ran=sum(s != "skipped" for s in states),
        skipped=states.count("skipped"),
        failing=frozenset(k for k, s in outcomes.items() if s == "failed"),
    )


@dataclass(frozen=True)
class Run:
    """One run of a gate: its exit status (None when killed), output, why it was killed, and its
    report (None with ``report_error`` when there is none to use)."""

    code: int | None
    output: str
    killed: str
    report: Report | None
    report_error: str | None
    runner: str | None
    """``pytest``, ``unittest`` or None (exit status only)."""


@dataclass(frozen=True)
class Judgement:
    passed: bool
    note: str
    """teamrt's own words on the gate, in brackets after its output; '' for a plain pass."""


TOLERATED = "but every failing test failed before this merge too"
"""In a passed gate's note when the tip failed too (``landing.gates_said`` looks for it)."""


def judge(now: Run, tip: Run | None) -> Judgement:
    """Whether a gate passed a merge, from ``now`` (its run on the merge) and ``tip`` (its run on the
    integration branch's tip; needed when ``now`` has a report)."""
    why = now.killed if now.code is None else f"exit code {now.code}"
    if now.code is None:
        return Judgement(False, f"[{why}]")
    if now.report is None:
        if now.runner is not None:
            said = f"{now.report_error}: a {now.runner} gate without it does not pass"
            return Judgement(False, f"[{why}; {said}]")
        if now.code == 0:
            return Judgement(True, "")
        return Judgement(False, f"[{why}]")
    report = now.report
    before = tip.report if tip is not None and tip.report is not None else Report(0, 0, frozenset())
    if report.ran < before.ran:
        return Judgement(
            False,
            f"[{why}; {report.ran} test(s) ran, {before.ran} on the integration branch's tip"
            f" ({report.skipped} skipped now): a gate must run at least the tests it ran before]",
        )
    if now.code == 0:
        if report.failing:
            said = f"the report names failing tests: {_names(report.failing)}"
            return Judgement(False, f"[exit code 0, but {said}]")
        return Judgement(True, "")
    if not report.failing:
        return Judgement(False, f"[{why}, and the test report names no failing test]")
    broken = report.failing - before.failing
    if broken:
        said = "; failing now but not before the merge: " if before.failing else "; failing: "
        return Judgement(False, f"[{why}{said}{_names(broken)}]")
    fixed = _names(before.failing - report.failing) or "none"
    return Judgement(True, f"[{why}, {TOLERATED}; fixed by it: {fixed}]")


def _names(tests: frozenset[str]) -> str:
    return ", ".join(sorted(tests))
