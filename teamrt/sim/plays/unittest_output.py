"""What ``python3 -m unittest`` printed: which tests failed, where, and on which line (``Failure``,
which ``pytest_output`` fills too)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"^(?:FAIL|ERROR): (\S+) \((\S+)\)$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)$')
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")
_NOT_UNDER_TEST = {"self", "assertEqual", "assertTrue", "assertFalse", "assertRaises", "len", "list",
                   "dict", "set", "str", "int", "float", "sorted", "range", "print"}  # fmt: skip


@dataclass(frozen=True)
class Failure:
    test: str
    """As unittest names it: ``test_x (tests.test_text.TruncateTest.test_x)``."""
    module: str
    """The test module: ``tests.test_text``."""
    line: str
    """The test's source line that failed (the last frame in a test file)."""
    error: str
    """The last line of the report: ``AssertionError: 'hel...' != 'hello'``."""
    frames: tuple[tuple[str, str], ...] = ()
    """(path, function) of the traceback's frames in the repository that are not tests, innermost
    first: where the failure happened (pytest's frames; unittest's are not read)."""

    @property
    def called(self) -> list[str]:
        """The functions the failing line calls, the likely suspects, in order."""
        names = [
            n for n in _CALLED.findall(self.line) if n not in _NOT_UNDER_TEST and not n.startswith("assert")
        ]
        return list(dict.fromkeys(names))


def failures(output: str) -> list[Failure]:
    found = []
    for block in re.split(r"^={20,}$", output, flags=re.MULTILINE)[1:]:
        lines = block.strip("\n").splitlines()
        header = _HEADER.match(lines[0]) if lines else None
        if header is None:
            continue
        name, qualified = header.groups()
        module = qualified.rsplit(".", 2)[0] if name.startswith("test") else name
        line = ""
        for i, text in enumerate(lines):
            frame = _FRAME.match(text)
            if frame and re.search(r"(^|/)test[^/]*\.py$", frame.group(1)) and i + 1 < len(lines):
                line = lines[i + 1].strip()
        body = [text for text in lines if text.strip() and not text.startswith("-" * 20)]
        found.append(Failure(f"{name} ({qualified})", module, line, body[-1].strip() if body else ""))
    return found


def summary(output: str) -> str:
    """unittest's closing lines: ``Ran 9 tests in 0.001s; OK`` or ``...; FAILED (failures=2)``."""
    ran = re.search(r"^Ran .*$", output, re.MULTILINE)
    verdict = re.search(r"^(OK.*|FAILED.*)$", output, re.MULTILINE)
    return "; ".join(m.group(0) for m in (ran, verdict) if m) or "no unittest summary in the output"
