"""The mutation gate (benchmarks/mutants.py) on a tiny planted project: what it calls caught, survived,
invalid, and that it refuses to judge mutants when the unmutated tests fail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "mutants.py"
PLAIN_PYTEST = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_PLUGINS": "pytest_timeout"}

CALC = """\
def add(a: int, b: int) -> int:
    return a + b


def double(x: int) -> int:
    return x * 2


def twice(x: int) -> int:
    return x + x
"""

TEST_CALC = """\
from pkg.calc import add


def test_add() -> None:
    assert add(2, 3) == 5
"""

TEST_BROKEN = """\
def test_broken() -> None:
    assert 1 == 2
"""

TEST_SKIPPED = """\
import pytest


@pytest.mark.skip(reason="planted: a mutant whose tests all skip is reported skipped, not judged")
def test_double() -> None:
    pass
"""


def entry(
    name: str, find: str, replace: str, tests: str = "tests/test_calc.py", file: str = "pkg/calc.py"
) -> str:
    return (
        f"[[mutant]]\nname = {name!r}\npromise = 'store atomicity'\nfile = {file!r}\n"
        f"find = '''{find}'''\nreplace = '''{replace}'''\ntests = [{tests!r}]\n\n"
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(TEST_CALC)
    (root / "tests" / "test_broken.py").write_text(TEST_BROKEN)
    (root / "tests" / "test_skipped.py").write_text(TEST_SKIPPED)
    return root


def gate(root: Path, listing: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run the gate on ``root`` with the mutants in ``listing``; its exit code, JSON and output."""
    (root.parent / "mutants.toml").write_text(listing)
    temp = root.parent / "temp"
    temp.mkdir(exist_ok=True)
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--json",
            "--root",
            str(root),
            "--list",
            str(root.parent / "mutants.toml"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        # Only the plugin the gate needs: the planted tests need none, and each run starts faster.
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(temp)} | PLAIN_PYTEST,
    )
    assert not list(temp.iterdir()), "the gate left its copies behind"
    lines = proc.stdout.strip().splitlines()
    assert lines, proc.stderr
    return proc.returncode, json.loads(lines[-1]), proc.stdout


def test_mutants_are_judged_caught_survived_or_invalid(project: Path) -> None:
    """A broken ``add`` fails its test; a broken ``double`` has none; a hang is caught by the time limit;
    malformed entries are invalid without being run, and so is a mutant the tests cannot even import;
    the project itself is never touched."""
    listing = (
        entry("add-subtracts", "return a + b", "return a - b")
        + entry("double-adds", "return x * 2", "return x + 3")
        + entry("add-hangs", "return a + b", "while True:\n        pass")
        + entry("not-there", "return a * b", "return a - b")
        + entry("twice-over", "x: int", "y: int")
        + entry("no-compile", "return x + x", "return x +")
        + entry("no-test-file", "return x + x", "return x", tests="tests/test_gone.py")
        + entry("breaks-import", "def twice(x: int) -> int:", "oops()\n\n\ndef twice(x: int) -> int:")
        + "[[mutant]]\nname = 'half'\npromise = 'store atomicity'\n\n"
    )
    code, result, out = gate(project, listing, "--timeout", "8", "--jobs", "2")
    assert code == 1, out
    assert result["mutants"] == 9
    assert result["caught"] == 2
    assert result["survived"] == ["double-adds"]
    assert result["timed_out"] == ["add-hangs"]
    invalid = ["breaks-import", "half", "no-compile", "no-test-file", "not-there", "twice-over"]
    assert sorted(result["invalid"]) == invalid
    assert result["by_promise"]["store atomicity"] == {
        "mutants": 9, "caught": 2, "survived": 1, "invalid": 6, "skipped": 0,
    }  # fmt: skip
    assert result["baseline_failed"] == []
    assert "find occurs 0 times" in out and "find occurs 2 times" in out and "does not compile" in out
    assert "breaks-import: pytest exit 2" in out, "a collection error is no catch"
    assert (project / "pkg" / "calc.py").read_text() == CALC


def test_only_runs_the_named_mutants_and_a_mutant_whose_tests_skip_is_not_judged(project: Path) -> None:
    listing = (
        entry("add-subtracts", "return a + b", "return a - b")
        + entry("double-adds", "return x * 2", "return x + 3")
        + entry("double-unseen", "return x * 2", "return x + 3", tests="tests/test_skipped.py")
    )
    code, result, out = gate(project, listing, "--only", "add-subtracts", "--only", "double-unseen")
    assert code == 0, out
    assert (result["mutants"], result["caught"], result["survived"], result["invalid"]) == (2, 1, [], [])
    assert result["skipped"] == ["double-unseen"]


def test_a_failing_baseline_is_reported_and_no_mutant_is_tried(project: Path) -> None:
    """A test failing on the unmutated tree would make every mutant look caught."""
    listing = entry("add-subtracts", "return a + b", "return a - b") + entry(
        "double-adds", "return x * 2", "return x + 3", tests="tests/test_broken.py"
    )
    code, result, out = gate(project, listing, "--jobs", "1")
    assert code == 1, out
    assert result["baseline_failed"] == ["tests/test_broken.py::test_broken"]
    assert (result["caught"], result["survived"]) == (0, [])
    assert "baseline FAILED" in out


def test_every_curated_mutant_still_applies_to_the_code_as_it_is() -> None:
    """A change to the code can leave a mutant's ``find`` matching nothing, and the gate would call it
    invalid only when someone runs it: each must still apply, once, and compile."""
    import importlib.util
    from collections import Counter

    spec = importlib.util.spec_from_file_location("mutants_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    gate = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gate  # its dataclasses look their module up
    try:
        spec.loader.exec_module(gate)
    finally:
        del sys.modules[spec.name]
    root = SCRIPT.parent.parent
    mutants = [gate.parse(i, e) for i, e in enumerate(gate.load(root / "benchmarks" / "mutants.toml"))]
    names = Counter(m.name for m in mutants)
    for mutant in mutants:
        gate.validate(mutant, root, names)
    assert len(mutants) >= 100
    assert [(m.name, m.problem) for m in mutants if m.problem] == []
