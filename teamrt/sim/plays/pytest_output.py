"""What ``python3 -m pytest`` printed: which tests failed, and the frames of each failure's traceback.

pytest names a frame ``path:line: in func`` (the frames between the test and
the innermost), ``path:line: ExcType`` (the innermost, whose function is the
``def`` above the ``>`` line in the source it shows) or ``path:line:`` (the
test's own, in the long style); ``--tb=short`` names every frame ``in func``.
Its short test summary lists ``FAILED tests/x.py::test_y - ...`` and its last
line counts what happened: ``1 failed, 2 passed in 0.78s``.
"""

from __future__ import annotations

import re

from teamrt.sim.plays.unittest_output import Failure

_SECTION = re.compile(r"^={5,} (FAILURES|ERRORS) ={5,}$")
_END = re.compile(r"^={5,} .* ={5,}$")
_TEST = re.compile(r"^_{3,} (?:ERROR (?:at \w+ of |collecting ))?(.+?) _{3,}$")
_FRAME = re.compile(r"^(\S+\.py):(\d+):(?: in (\w+)| (\w[\w.]*))?\s*$")
_DEF = re.compile(r"^\s*(?:async\s+)?def (\w+)\(")
_SUMMARY = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - (.*))?$")
_COUNTS = re.compile(
    r"^=*\s*((?:\d+ (?:failed|passed|errors?|skipped|deselected|xfailed|xpassed|warnings?)(?:, )?)+)"
    r" in [\d.]+s"
)
_TEST_FILE = re.compile(r"(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def is_test_file(path: str) -> bool:
    """Whether ``path`` is a test: under ``tests/``, ``test_*.py``, ``*_test.py`` or a conftest."""
    return _TEST_FILE.search(path) is not None


def failures(output: str) -> list[Failure]:
    """Each failing test, with its file as the module, the test's failing line (its ``>`` line), the
    error (the summary's reason, else the last ``E`` line) and the frames of its traceback that are in
    the repository and not tests, innermost first."""
    reasons = {m.group(1): m.group(2) or "" for line in output.splitlines() if (m := _SUMMARY.match(line))}
    found = []
    for title, body in _sections(output):
        frames, test_line, errors = _frames(body)
        node = next((n for n in reasons if ".".join(n.split("::")[1:]) == title), None)
        if node is None:  # not in the short summary (-rN): named by its test file's frame
            where = next((path for path, _ in frames if is_test_file(path)), "")
            node = f"{where}::{title.replace('.', '::')}" if where else title
        module = node.split("::")[0]
        reason = reasons.get(node) or (errors[-1] if errors else "")
        inside = tuple(
            (path, func)
            for path, func in reversed(frames)
            if func and not path.startswith("/") and "site-packages" not in path and not is_test_file(path)
        )
        found.append(Failure(node, module, test_line, reason, frames=inside))
    return found


def _sections(output: str) -> list[tuple[str, list[str]]]:
    """(test title, its lines) for each test the FAILURES and ERRORS sections report."""
    sections: list[tuple[str, list[str]]] = []
    inside = False
    for line in output.splitlines():
        if _SECTION.match(line):
            inside = True
            continue
        if inside and _END.match(line):
            inside = False
            continue
        title = _TEST.match(line) if inside else None
        if title is not None:
            sections.append((title.group(1), []))
        elif inside and sections:
            sections[-1][1].append(line)
    return sections


def _frames(lines: list[str]) -> tuple[list[tuple[str, str]], str, list[str]]:
    """The frames of one failure, outermost first, as (path, function); the test's failing line; the
    ``E`` lines."""
    frames: list[tuple[str, str]] = []
    test_line = ""
    errors: list[str] = []
    defined = ""
    failing = ""
    source_next = False  # --tb=short: the source line follows its frame's line, with no ">"
    for line in lines:
        if source_next and line.strip():
            test_line, source_next = test_line or line.strip(), False
            continue
        if (found := _DEF.match(line)) is not None:
            defined = found.group(1)
        elif line.startswith(">"):
            failing = line[1:].strip()
        elif line.startswith("E "):
            errors.append(line[1:].strip())
        elif (frame := _FRAME.match(line)) is not None:
            path, function = frame.group(1), frame.group(3) or defined
            frames.append((path, function))
            if is_test_file(path) and failing:
                test_line = failing
            source_next = is_test_file(path) and not failing and not test_line
            defined = failing = ""
    return frames, test_line, [e for e in errors if e]


def summary(output: str) -> str:
    """pytest's closing count: ``1 failed, 2 passed in 0.78s``."""
    for line in reversed(output.splitlines()):
        found = _COUNTS.match(line.strip())
        if found is not None:
            return line.strip().strip("= ")
        if re.match(r"^=*\s*no tests ran in [\d.]+s", line.strip()):
            return line.strip().strip("= ")
    return "no pytest summary in the output"


def ran(output: str) -> bool:
    """Whether pytest ran tests (its closing line counts some)."""
    return any(_COUNTS.match(line.strip()) for line in output.splitlines())


def green(output: str) -> bool:
    """Whether it ran tests and none failed or erred."""
    counts = summary(output)
    return ran(output) and re.search(r"\d+ (failed|errors?)\b", counts) is None
