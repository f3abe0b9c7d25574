"""The failing tests a test runner's output names: unittest's ``FAIL:``/``ERROR:`` headers and
pytest's ``FAILED``/``ERROR`` summary lines.

The merge queue uses them to let a gate that already fails on the integration
branch accept a merge that fails no test it did not fail before (see ``queue``).
"""

from __future__ import annotations

import re

_UNITTEST = re.compile(r"^(?:FAIL|ERROR): (\S+ \(\S+\))\s*$", re.MULTILINE)
_PYTEST = re.compile(r"^(?:FAILED|ERROR) (\S+::\S+|\S+\.py)(?: - .*)?$", re.MULTILINE)


def failing_tests(output: str) -> frozenset[str]:
    """The tests ``output`` reports as failed or in error; empty when it names none."""
    return frozenset(_UNITTEST.findall(output)) | frozenset(_PYTEST.findall(output))
