"""The test runner a coding play drives: unittest or pytest, its command and how to read its output.

The coding lead picks it from what it was told and what it found: a merge gate or
allow rule naming pytest or unittest (``commands_brief``), else the repository's
own signs of pytest (a ``[tool.pytest...]`` or ``[pytest]`` section, tests that
import pytest or define bare ``test_`` functions), else unittest. The coders get
the commands in their directives and read them back from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamrt.sim.plays import pytest_output, unittest_output
from teamrt.sim.plays.unittest_output import Failure
from teamrt.tools.commands_brief import CommandsBrief

UNITTEST = "python3 -m unittest"
PYTEST = "python3 -m pytest -q"
PYTEST_SIGNS = r"^\[tool\.pytest|^\[(tool:)?pytest\]|^\s*(import pytest|from pytest import)|^def test_"
"""What a Grep for a repository that uses pytest looks for (``output_mode: files_with_matches``)."""


@dataclass(frozen=True)
class Suite:
    command: str
    """The whole suite: ``python3 -m unittest``, ``python3 -m pytest -q`` or the gate that runs pytest."""

    @property
    def pytest(self) -> bool:
        return "pytest" in self.command

    def check(self, target: str) -> str:
        """The command that runs one test module (unittest) or file (pytest)."""
        return f"{self.command} {target}"

    def failures(self, output: str) -> list[Failure]:
        return pytest_output.failures(output) if self.pytest else unittest_output.failures(output)

    def summary(self, output: str) -> str:
        return pytest_output.summary(output) if self.pytest else unittest_output.summary(output)

    def ran(self, output: str) -> bool:
        """Whether the tests ran at all (the runner's closing count is in the output)."""
        if self.pytest:
            return pytest_output.ran(output)
        return re.search(r"^Ran \d+ tests?", output, re.MULTILINE) is not None

    def green(self, output: str) -> bool:
        if self.pytest:
            return pytest_output.green(output)
        return self.ran(output) and re.search(r"^OK\b", output, re.MULTILINE) is not None


def told(brief: CommandsBrief) -> Suite | None:
    """The suite a gate or an allow rule names (a gate that runs pytest is run as it is), or None."""
    for gate in brief.gates:
        if re.search(r"\bpytest\b", gate):
            return Suite(gate)
        if re.search(r"\bunittest\b", gate):
            return Suite(UNITTEST)
    for rule in brief.allow:
        if re.search(r"\bpytest\b", rule):
            return Suite(PYTEST)
        if re.search(r"\bunittest\b", rule):
            return Suite(UNITTEST)
    return None


def found(grep_output: str, is_error: bool) -> Suite:
    """The suite a Grep for ``PYTEST_SIGNS`` points to: pytest when a file matched."""
    matched = not is_error and not grep_output.startswith("no matches") and grep_output.strip() != ""
    return Suite(PYTEST if matched else UNITTEST)
