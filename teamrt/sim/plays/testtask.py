"""What a person's task says about tests: whether it is about them, which test files it names, and the
command it asks the work to be checked with.

A lead on ``sim`` reads these from the task alone (the person's prompt, or a
follow-up's), never from a file or a tool's output, so nothing a repository holds
can choose what an agent runs. A command counts only when the task quotes it in
backquotes, runs the suite's own test runner and is plain words (no shell
operators, substitutions or redirections): a lead appends a test file to it and
hands it to its coders, who try it as Claude would, the team's rules deciding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from teamrt.sim.plays.pytest_output import is_test_file

_TESTS = re.compile(r"\b(tests?|pytest|unittest|suite)\b", re.IGNORECASE)
_FAILING = re.compile(r"\b(fail\w*|broken|red|pass(es|ing)?|fix\w*|repair\w*)\b", re.IGNORECASE)
_TEST_PATH = re.compile(
    r"(?<![\w./-])((?:\./)?(?:[\w-][\w.-]*/)*(?:test_[\w-]*|[\w-]*_test)\.py)(?:::[\w:\[\]-]*)?(?![\w/-])"
)
_TEST_MODULE = re.compile(r"(?<![\w./:-])((?:[a-z_]\w*\.)*test_\w+)(?![\w/-]|\.\w)")
_QUOTED = re.compile(r"`([^`\n]{1,200})`")
_PLAIN_WORDS = re.compile(r"[\w./=:@+%,-]+(?: +[\w./=:@+%,-]+)*")
_RUNNER = {
    "pytest": re.compile(r"(?<![\w-])pytest(?![\w-])"),
    "unittest": re.compile(r"(?<![\w-])unittest(?![\w-])"),
}
MAX_NAMED = 12
"""Test files a task names that a lead takes."""


def about_tests(task: str) -> bool:
    """Whether the task is about failing tests: it speaks of tests (or names a test file) and of their
    failing, or of fixing them or making them pass. "Add a flag and test it" is not."""
    return (_TESTS.search(task) is not None or bool(named_tests(task))) and _FAILING.search(task) is not None


def named_tests(task: str) -> list[str]:
    """The test files (``tests/test_stats.py``, a pytest node's file) and unittest modules
    (``tests.test_dates``) the task names, in order; none absolute or leading out of the tree."""
    found = [m.group(1) for m in _TEST_PATH.finditer(task) if is_test_file(m.group(1))]
    found += [m.group(1) for m in _TEST_MODULE.finditer(task)]
    kept = [name.removeprefix("./") for name in found if ".." not in name.split("/")]
    return list(dict.fromkeys(kept))[:MAX_NAMED]


def names(module: str, named: Iterable[str]) -> bool:
    """Whether a failing test module (pytest: its file; unittest: its dotted name) is one ``named``
    names, as a path or as a dotted module, whole or by its last parts."""
    dotted_module = module.removesuffix(".py").replace("/", ".")
    for name in named:
        dotted = name.removesuffix(".py").replace("/", ".")
        if dotted_module == dotted or dotted_module.endswith(f".{dotted}"):
            return True
    return False


def check_command(task: str, runner: str, named: Iterable[str] = ()) -> str | None:
    """The command the task asks the work to be checked with: the first it quotes in backquotes that
    runs ``runner`` (``pytest`` or ``unittest``) and is plain words, without the test files it names
    (the lead appends each coder's own). None when it quotes none."""
    pattern = _RUNNER.get(runner)
    if pattern is None:
        return None
    files = set(named)
    for quoted in _QUOTED.findall(task):
        command = " ".join(quoted.split())
        if not command or not _PLAIN_WORDS.fullmatch(command) or not pattern.search(command):
            continue
        words = [w for w in command.split() if w.partition("::")[0] not in files]
        return " ".join(words) or None
    return None
