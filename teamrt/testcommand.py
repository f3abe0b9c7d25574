"""The project's test command, told from its files without running anything.

``teamrt init`` writes what this finds into the team file (an allow rule and the merge gate), and the
built-in team allows it (``teamrt.runtime.teamrun``), so that an agent asked to "fix it and test it" may
run the tests. It looks, in this order, for:

- pytest: ``[tool.pytest.ini_options]`` (or ``[tool.pytest]``) in ``pyproject.toml``, ``pytest.ini``,
  ``[pytest]`` in ``tox.ini``, ``[tool:pytest]`` in ``setup.cfg``, a ``conftest.py``, or test files that
  import pytest (or hold bare ``test_`` functions and no unittest);
- unittest: test files (``test_*.py``, ``*_test.py``) that use unittest and show no sign of pytest;
- ``cargo test`` (``Cargo.toml``), ``go test ./...`` (``go.mod``);
- ``npm test``, ``pnpm test`` or ``yarn test`` (``package.json`` with a ``test`` script that is not npm
  init's placeholder; the lock file names the manager);
- ``make test`` (a ``Makefile`` with a ``test:`` target), ``tox`` (``tox.ini``), ``nox`` (``noxfile.py``).

The first found is the project's; the others are named, not used. Every command and rule is one of the
fixed texts below: nothing a project's file says (a script's text, a target's name) becomes part of a
command or a rule, so a crafted file cannot widen what is allowed. What a file says is only quoted in
``Found.source`` (made inert by whoever prints it). Files are read only when they are regular files of
bounded size, never through a symlink, and the walk for test files is bounded.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 1024 * 1024
"""A project file larger than this is not read."""
MAX_TEST_FILES = 200
"""Test files read at most, looking for pytest or unittest."""
MAX_ENTRIES = 20_000
"""Directory entries looked at, at most, finding test files."""
_SKIPPED_DIRS = frozenset(
    {"node_modules", "venv", "env", "build", "dist", "target", "vendor", "site-packages", "__pycache__"}
)
_PYTEST_IMPORT = re.compile(rb"^\s*(?:import\s+pytest\b|from\s+pytest\b|@pytest\.)", re.MULTILINE)
_UNITTEST = re.compile(rb"^\s*(?:import\s+unittest\b|from\s+unittest\b)", re.MULTILINE)
_TEST_FUNCTION = re.compile(rb"^(?:async\s+)?def\s+test_?\w*\s*\(", re.MULTILINE)
_MAKE_TEST = re.compile(rb"^test\s*:(?!=)", re.MULTILINE)
_NPM_PLACEHOLDER = "no test specified"


@dataclass(frozen=True)
class Runner:
    """A test command teamrt knows: what it is called, the gate it runs, the rule that allows it."""

    name: str
    gate: str
    rule: str


PYTEST = Runner("pytest", "python3 -m pytest -q", "Bash(python3 -m pytest:*)")
UNITTEST = Runner("unittest", "python3 -m unittest", "Bash(python3 -m unittest:*)")
CARGO = Runner("cargo test", "cargo test", "Bash(cargo test:*)")
GO = Runner("go test", "go test ./...", "Bash(go test:*)")
NPM = Runner("npm test", "npm test", "Bash(npm test:*)")
PNPM = Runner("pnpm test", "pnpm test", "Bash(pnpm test:*)")
YARN = Runner("yarn test", "yarn test", "Bash(yarn test:*)")
MAKE = Runner("make test", "make test", "Bash(make test)")
TOX = Runner("tox", "tox", "Bash(tox:*)")
NOX = Runner("nox", "nox", "Bash(nox:*)")
RUNNERS = (PYTEST, UNITTEST, CARGO, GO, NPM, PNPM, YARN, MAKE, TOX, NOX)
"""Every command this can find; nothing else is ever written."""


@dataclass(frozen=True)
class Found:
    runner: Runner
    source: str
    """Where it was seen: a file, and what in it (project text: make it inert before printing it)."""


def find_test_commands(project: Path) -> list[Found]:
    """Every test command ``project``'s files point to, the one to use first; none when nothing does."""
    files = _Files(project)
    found = [*_python(files)]
    if files.read("Cargo.toml") is not None:
        found.append(Found(CARGO, "Cargo.toml"))
    if files.read("go.mod") is not None:
        found.append(Found(GO, "go.mod"))
    node = _node(files)
    if node is not None:
        found.append(node)
    for name in ("GNUmakefile", "makefile", "Makefile"):
        text = files.read(name)
        if text is not None and _MAKE_TEST.search(text):
            found.append(Found(MAKE, f"{name} has a test: target"))
            break
    tox = files.sections("tox.ini")
    if "tox" in tox or any(section.startswith("testenv") for section in tox):
        found.append(Found(TOX, "tox.ini"))
    if files.read("noxfile.py") is not None:
        found.append(Found(NOX, "noxfile.py"))
    return found


def _python(files: _Files) -> Iterator[Found]:
    """pytest or unittest, by the first sign of either."""
    pyproject = files.toml("pyproject.toml")
    tool = pyproject.get("tool")
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if isinstance(pytest_table, dict):
        key = "ini_options" if "ini_options" in pytest_table else None
        yield Found(PYTEST, f"pyproject.toml [tool.pytest{'.' + key if key else ''}]")
        return
    if files.read("pytest.ini") is not None:
        yield Found(PYTEST, "pytest.ini")
        return
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        if section in files.sections(name):
            yield Found(PYTEST, f"{name} [{section}]")
            return
    for name in ("conftest.py", "tests/conftest.py", "test/conftest.py"):
        if files.read(name) is not None:
            yield Found(PYTEST, name)
            return
    unittest: str | None = None
    functions: str | None = None
    for relative, text in files.test_files():
        if _PYTEST_IMPORT.search(text):
            yield Found(PYTEST, f"{relative} imports pytest")
            return
        if unittest is None and _UNITTEST.search(text):
            unittest = relative
        if functions is None and _TEST_FUNCTION.search(text):
            functions = relative
    if unittest is not None:
        yield Found(UNITTEST, f"{unittest} uses unittest")
    elif functions is not None:
        yield Found(PYTEST, f"{functions} has test functions and no unittest")


def _node(files: _Files) -> Found | None:
    """``npm test`` (or pnpm's, or yarn's) when ``package.json`` has a real ``test`` script."""
    text = files.read("package.json")
    if text is None:
        return None
    try:
        package = json.loads(text)
    except (ValueError, RecursionError):
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or _NPM_PLACEHOLDER in script:
        return None
    runner = NPM
    if files.read("pnpm-lock.yaml") is not None:
        runner = PNPM
    elif files.read("yarn.lock") is not None:
        runner = YARN
    return Found(runner, f"package.json scripts.test: {script.strip()}")


class _Files:
    """The project's files as this module reads them: regular files only, not through symlinks, bounded."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def read(self, relative: str, limit: int = MAX_FILE_BYTES, *, start: bool = False) -> bytes | None:
        """The file's bytes (``start``: its first ``limit`` bytes), or None when it is missing, not a regular
        file, a symlink, or (unless ``start``) larger than ``limit``."""
        path = self.project / relative
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or (info.st_size > limit and not start):
                return None
            with os.fdopen(os.dup(fd), "rb") as file:
                return file.read(limit + 1)[:limit]
        finally:
            os.close(fd)

    def toml(self, relative: str) -> dict[str, object]:
        text = self.read(relative)
        if text is None:
            return {}
        try:
            return tomllib.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
            return {}

    def sections(self, relative: str) -> list[str]:
        """The sections of an INI file (``tox.ini``, ``setup.cfg``); none when it does not parse."""
        text = self.read(relative)
        if text is None:
            return []
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text.decode("utf-8", errors="replace"))
        except configparser.Error:
            return []
        return parser.sections()

    def test_files(self) -> Iterator[tuple[str, bytes]]:
        """Python test files (``test_*.py``, ``*_test.py``) and their first bytes, in a bounded walk that
        skips hidden directories and installed packages."""
        seen = read = 0
        for top, dirs, names in os.walk(self.project):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
            seen += len(dirs) + len(names)
            for name in sorted(names):
                if not name.endswith(".py") or not (name.startswith("test_") or name.endswith("_test.py")):
                    continue
                relative = os.path.relpath(os.path.join(top, name), self.project)
                text = self.read(relative, limit=64 * 1024, start=True)
                if text is not None:
                    read += 1
                    yield relative, text
                if read >= MAX_TEST_FILES:
                    return
            if seen >= MAX_ENTRIES:
                return
