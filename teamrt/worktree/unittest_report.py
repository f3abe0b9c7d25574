"""``python -m unittest`` for a merge gate, writing what ran to a JUnit XML report teamrt reads.

The merge queue runs a gate's ``python -m unittest ARGS`` as ``python <this file> ARGS`` (a copy of it,
in a directory of the gate's own outside the workspace) so that the verdict rests on the runner's
results, not on lines the tests print: a test may print ``FAIL: ...`` or ``OK`` as it likes. Standalone
(the project's own Python runs it, in the sandbox): the standard library only, no teamrt import.

It behaves as ``python -m unittest``: the current directory first on ``sys.path``, the same
arguments, the same exit status. The report goes to ``$TEAMRT_GATE_REPORT``; one ``testcase`` per test,
named as unittest names it (``test_x (module.Class.test_x)``), with a ``failure``, ``error`` or
``skipped`` child when it did not pass.
"""

from __future__ import annotations

import os
import sys
import unittest
from typing import Any
from xml.sax.saxutils import quoteattr

REPORT = "TEAMRT_GATE_REPORT"


class RecordingResult(unittest.TextTestResult):
    """unittest's own text result, which also notes every test's outcome by name."""

    outcomes: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _note(self, test: Any, outcome: str) -> None:
        name = str(test)
        if self.outcomes.get(name) not in ("failure", "error"):  # a failed subtest stays failed
            self.outcomes[name] = outcome

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self._note(test, "passed")

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._note(test, "failure")

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._note(test, "error")

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._note(test, "skipped")

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._note(test, "passed")

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self._note(test, "failure")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._note(test, "failure" if failed else "error")


class Runner(unittest.TextTestRunner):
    """unittest's text runner with ``RecordingResult``; unittest makes it with the command line's
    verbosity, failfast and buffer options."""

    resultclass = RecordingResult


def write_report(path: str, outcomes: dict[str, str]) -> None:
    """``outcomes`` as JUnit XML at ``path``."""
    cases = []
    for name, outcome in outcomes.items():
        child = "" if outcome == "passed" else f"<{outcome}/>"
        cases.append(f'  <testcase classname="" name={quoteattr(name)}>{child}</testcase>\n')
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite tests="{len(cases)}">\n')
        out.writelines(cases)
        out.write("</testsuite>\n")


def main() -> int:
    sys.path[0] = os.getcwd()  # as -m puts it: the tests import the project, not this directory
    argv = [f"{os.path.basename(sys.executable)} -m unittest", *sys.argv[1:]]
    program = unittest.main(module=None, argv=argv, testRunner=Runner, exit=False)
    result = program.result
    write_report(os.environ[REPORT], getattr(result, "outcomes", {}))
    if sys.version_info >= (3, 12) and result.testsRun == 0 and not result.skipped:
        return 5  # unittest's own status for "no tests ran", since Python 3.12
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
