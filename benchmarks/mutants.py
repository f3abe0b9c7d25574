"""The mutation gate: break each promised behaviour one line at a time and check that a test notices.

``benchmarks/mutants.toml`` lists curated mutants: a file, an exact piece of text in it, what that text
becomes (a plausible one-line bug), the promise it breaks and the focused tests that must catch it. For
each, this script writes the mutated file into a private copy of the tree, runs those tests there, and
restores the file. A mutant is *caught* when the tests fail (pytest exit 1) or hang past the per-mutant
time limit; it *survives* when they pass, which names a promise no test holds; it is *invalid* when the
entry is malformed (a missing field, a duplicate name, a ``find`` that is not in the file exactly once, a
mutated file that does not compile) or pytest could not run the tests at all (exit 2-5: a usage or
collection error). A mutant whose tests were all skipped here (no bubblewrap, no cgroup) is reported as
*skipped*, not judged. Before any mutant, the union of all listed tests runs on the unmutated copy and must
pass: a test failing anyway would make every mutant it covers look caught.

Why a curated list rather than mutmut or cosmic-ray: both generate every mutation their operators allow
at every site of every module (mutmut 3 mutates inside each function of ``paths_to_mutate`` and runs, per
mutant, the tests it saw calling that function; cosmic-ray runs the configured test command for each
mutant of each module). For teamrt's ~24k lines that is thousands of mutants, most on messages and
formatting, each costing seconds to minutes of tests, with many equivalent mutants to triage by hand.
mutmut's test-to-function map is also gathered in the pytest process, while much of teamrt runs in agent
subprocesses that it never sees. A curated list names the promises (mailbox durability, store atomicity,
permission precedence, ...), picks for each a bug that someone could plausibly write, ties it to the
tests that are meant to hold it, and fits in 15 minutes on 2 cores.

    .venv/bin/python benchmarks/mutants.py [--only NAME]... [--promise AREA]... [--jobs N] [--json]

Prints a row per mutant as it finishes, then a summary; with ``--json`` one JSON object as the last line.
Exits non-zero if any mutant survived or was invalid, or if the baseline failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROMISES = (
    "mailbox durability and replay",
    "store atomicity",
    "store ownership",
    "permission precedence",
    "sandbox options",
    "fork prefixes",
    "budgets",
    "epochs",
    "resume reconciliation",
    "merge queue gates",
    "protected paths",
    "chaos checker",
    "web and MCP",
    "hosts and the lease",
    "trust boundary",
    "nothing lost in silence",
    "a working day",
    "long runs on Claude",
    "Claude Code set-ups",
    "many runs, many machines",
)
FIELDS = ("name", "promise", "file", "find", "replace", "tests")
# Not copied: environments, caches and run data; none of it is needed to run the tests.
IGNORED = shutil.ignore_patterns(
    ".venv",
    ".git",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "__pycache__",
    ".teamrt",
    ".teamrt-migrations.db",
    "*.egg-info",
    "build",
    "dist",
)
PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-o", "addopts=", "--timeout=120"]
DEFAULT_JOBS = 2
DEFAULT_TIMEOUT = 300.0
BASELINE_TIMEOUTS = 4  # the baseline runs every listed test: it may take this many mutants' time
CAUGHT, SURVIVED, INVALID, SKIPPED = "caught", "survived", "invalid", "skipped"


@dataclass
class Mutant:
    """One entry of the list; ``problem`` is set when it cannot be run."""

    index: int
    name: str
    promise: str
    file: str
    find: str
    replace: str
    tests: list[str]
    problem: str | None = None


@dataclass
class Result:
    mutant: Mutant
    verdict: str
    seconds: float = 0.0
    note: str = ""


@dataclass
class Report:
    results: list[Result] = field(default_factory=list)
    baseline_s: float = 0.0
    baseline_failed: list[str] = field(default_factory=list)
    seconds: float = 0.0


# -- the list ------------------------------------------------------------------


def load(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        entries = tomllib.load(f).get("mutant", [])
    if not isinstance(entries, list):
        raise SystemExit(f"{path}: [[mutant]] entries expected")
    return [e if isinstance(e, dict) else {} for e in entries]


def parse(index: int, entry: dict[str, Any]) -> Mutant:
    """The entry as a Mutant; a missing or mistyped field becomes its ``problem``."""
    missing = [f for f in FIELDS if f not in entry]
    tests = entry.get("tests")
    mutant = Mutant(
        index=index,
        name=str(entry.get("name", f"#{index + 1}")),
        promise=str(entry.get("promise", "")),
        file=str(entry.get("file", "")),
        find=str(entry.get("find", "")),
        replace=str(entry.get("replace", "")),
        tests=[str(t) for t in tests] if isinstance(tests, list) else [],
    )
    if missing:
        mutant.problem = f"missing {', '.join(missing)}"
    elif not all(isinstance(entry[f], str) and entry[f] for f in FIELDS if f not in ("tests", "replace")):
        mutant.problem = "name, promise, file and find must be non-empty strings"
    elif not isinstance(entry["replace"], str):
        mutant.problem = "replace must be a string"
    elif not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t for t in tests):
        mutant.problem = "tests must be a non-empty list of pytest node ids"
    return mutant


def validate(mutant: Mutant, root: Path, names: dict[str, int]) -> None:
    """Set ``mutant.problem`` if it cannot be applied as written, or its tests do not exist."""
    if mutant.problem:
        return
    if names[mutant.name] > 1:
        mutant.problem = f"name {mutant.name!r} is used {names[mutant.name]} times"
    elif mutant.promise not in PROMISES:
        mutant.problem = f"unknown promise {mutant.promise!r}"
    elif mutant.find == mutant.replace:
        mutant.problem = "replace is the same as find"
    elif not (root / mutant.file).is_file():
        mutant.problem = f"no file {mutant.file}"
    elif missing := [t for t in mutant.tests if not (root / t.split("::")[0]).exists()]:
        mutant.problem = f"no test file {', '.join(missing)}"
    else:
        source = (root / mutant.file).read_text()
        count = source.count(mutant.find)
        if count != 1:
            mutant.problem = f"find occurs {count} times in {mutant.file}, not once"
            return
        try:
            compile(source.replace(mutant.find, mutant.replace), mutant.file, "exec")
        except SyntaxError as e:
            mutant.problem = f"the mutated file does not compile: {e.msg} (line {e.lineno})"


def union(tests: Sequence[str]) -> list[str]:
    """Every listed test once; a node id is dropped when its whole file is listed too."""
    files = {t for t in tests if "::" not in t}
    return list(dict.fromkeys(t for t in tests if "::" not in t or t.split("::")[0] not in files))


# -- running -------------------------------------------------------------------


def copy_tree(root: Path, into: Path) -> Path:
    dst = into / "tree"
    shutil.copytree(root, dst, ignore=IGNORED, symlinks=True)
    return dst


def run_pytest(copy: Path, args: Sequence[str], timeout: float) -> tuple[int | None, str]:
    """Exit code (None on timeout) and output of pytest run in ``copy`` on its own code.

    Its temporary files go beside the copy, so that what a killed run leaves is removed with it.
    """
    temp = copy.parent / "tmp"
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(copy), "TMPDIR": str(temp)}
    with subprocess.Popen(
        [sys.executable, *PYTEST, *args],
        cwd=copy,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a timeout kills the whole group: agents the tests started too
    ) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            return None, ""
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()


def drop_bytecode(path: Path) -> None:
    """Forget ``path``'s compiled module, so an import never pairs old bytecode with new source."""
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def try_mutant(mutant: Mutant, copy: Path, timeout: float) -> Result:
    path = copy / mutant.file
    original = path.read_bytes()
    if original.decode().count(mutant.find) != 1:  # the file changed between validation and the copy
        return Result(mutant, INVALID, note=f"find is no longer once in {mutant.file}")
    times = os.stat(path)
    started = time.monotonic()
    try:
        path.write_text(original.decode().replace(mutant.find, mutant.replace))
        drop_bytecode(path)
        code, out = run_pytest(copy, ["-x", *mutant.tests], timeout)
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
        drop_bytecode(path)
    seconds = time.monotonic() - started
    if code is None:
        return Result(mutant, CAUGHT, seconds, f"timed out after {timeout:.0f} s")
    if code == 1:
        return Result(mutant, CAUGHT, seconds, first_failure(out))
    if code == 0 and not re.search(r"\b\d+ passed\b", out):
        return Result(mutant, SKIPPED, seconds, "every test was skipped here: not judged")
    if code == 0:
        return Result(mutant, SURVIVED, seconds, "the tests passed")
    return Result(mutant, INVALID, seconds, f"pytest exit {code}: {last_line(out)}")


def first_failure(out: str) -> str:
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", out, re.MULTILINE)
    return match.group(1) if match else ""


def failures(out: str) -> list[str]:
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.MULTILINE)


def last_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def baseline(copy: Path, tests: Sequence[str], jobs: int, timeout: float) -> tuple[float, list[str]]:
    """Seconds taken and the tests that failed, running ``tests`` on the unmutated copy."""
    started = time.monotonic()
    spread = ["-n", str(jobs)] if jobs > 1 and len(tests) > 1 and has_xdist() else []
    code, out = run_pytest(copy, [*spread, "-rfE", *tests], timeout * BASELINE_TIMEOUTS)
    seconds = time.monotonic() - started
    if code is None:
        return seconds, [f"(the baseline timed out after {timeout * BASELINE_TIMEOUTS:.0f} s)"]
    if code != 0:
        return seconds, failures(out) or [f"(pytest exit {code}: {last_line(out)})"]
    return seconds, []


def has_xdist() -> bool:
    """Whether pytest will load pytest-xdist (installed, and not left out of the plugins it loads)."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") and "xdist" not in os.environ.get(
        "PYTEST_PLUGINS", ""
    ):
        return False
    return importlib.util.find_spec("xdist") is not None


class Table:
    """Rows printed as results arrive, one lock for all workers."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.lock = threading.Lock()

    def header(self) -> None:
        print(f"{'mutant':<{self.width}}  {'promise':<29}  {'verdict':<8}  {'s':>6}  note", flush=True)

    def row(self, r: Result) -> None:
        with self.lock:
            print(
                f"{r.mutant.name:<{self.width}}  {r.mutant.promise:<29}  {r.verdict:<8}  "
                f"{r.seconds:6.1f}  {r.note}",
                flush=True,
            )


def run(root: Path, mutants: list[Mutant], jobs: int, timeout: float) -> Report:
    report = Report()
    started = time.monotonic()
    table = Table(max([len(m.name) for m in mutants] + [6]))
    table.header()
    for m in mutants:
        if m.problem:
            report.results.append(Result(m, INVALID, note=m.problem))
            table.row(report.results[-1])
    todo = [m for m in mutants if not m.problem]
    if not todo:
        report.seconds = time.monotonic() - started
        return report
    with tempfile.TemporaryDirectory(prefix="teamrt-mutants-") as tmp:
        workers = max(1, min(jobs, len(todo)))
        copies = [copy_tree(root, Path(tmp) / str(i)) for i in range(workers)]
        tests = union([t for m in todo for t in m.tests])
        report.baseline_s, report.baseline_failed = baseline(copies[0], tests, jobs, timeout)
        if report.baseline_failed:
            report.seconds = time.monotonic() - started
            return report
        pending: queue.SimpleQueue[Mutant] = queue.SimpleQueue()
        for m in todo:
            pending.put(m)
        lock = threading.Lock()

        def work(copy: Path) -> None:
            while True:
                try:
                    m = pending.get_nowait()
                except queue.Empty:
                    return
                result = try_mutant(m, copy, timeout)
                with lock:
                    report.results.append(result)
                table.row(result)

        threads = [threading.Thread(target=work, args=(c,)) for c in copies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    report.results.sort(key=lambda r: r.mutant.index)
    report.seconds = time.monotonic() - started
    return report


# -- reporting -----------------------------------------------------------------


def summary(report: Report) -> dict[str, Any]:
    by_promise: dict[str, dict[str, int]] = {}
    for r in report.results:
        counts = by_promise.setdefault(
            r.mutant.promise, {"mutants": 0, CAUGHT: 0, SURVIVED: 0, INVALID: 0, SKIPPED: 0}
        )
        counts["mutants"] += 1
        counts[r.verdict] += 1
    return {
        "mutants": len(report.results),
        "caught": sum(r.verdict == CAUGHT for r in report.results),
        "survived": [r.mutant.name for r in report.results if r.verdict == SURVIVED],
        "invalid": [r.mutant.name for r in report.results if r.verdict == INVALID],
        "skipped": [r.mutant.name for r in report.results if r.verdict == SKIPPED],
        "timed_out": [r.mutant.name for r in report.results if r.note.startswith("timed out")],
        "by_promise": dict(sorted(by_promise.items())),
        "baseline_failed": report.baseline_failed,
        "baseline_s": round(report.baseline_s, 1),
        "seconds": round(report.seconds, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run this mutant only")
    parser.add_argument("--promise", action="append", default=[], metavar="AREA", help="run this area only")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="mutants run at once (default 2)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per mutant")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to mutate (default: this repo)")
    parser.add_argument("--list", type=Path, help="the mutants (default: ROOT/benchmarks/mutants.toml)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    entries = load(args.list or root / "benchmarks" / "mutants.toml")
    mutants = [parse(i, e) for i, e in enumerate(entries)]
    names: dict[str, int] = {}
    for m in mutants:
        names[m.name] = names.get(m.name, 0) + 1
    if unknown := [n for n in args.only if n not in names]:
        parser.error(f"no mutant named {', '.join(unknown)}")
    if unknown := [p for p in args.promise if p not in PROMISES]:
        parser.error(f"no promise {', '.join(unknown)}; one of: {', '.join(PROMISES)}")
    chosen = [
        m
        for m in mutants
        if (not args.only or m.name in args.only) and (not args.promise or m.promise in args.promise)
    ]
    for m in chosen:
        validate(m, root, names)
    report = run(root, chosen, args.jobs, args.timeout)
    result = summary(report)
    print()
    if report.baseline_failed:
        print(f"baseline FAILED in {report.baseline_s:.1f} s, unmutated; no mutant was tried. Failing:")
        for name in report.baseline_failed:
            print(f"  {name}")
    else:
        print(
            f"{result['caught']}/{result['mutants']} caught, {len(result['survived'])} survived, "
            f"{len(result['invalid'])} invalid, {len(result['skipped'])} skipped; "
            f"baseline {report.baseline_s:.1f} s, "
            f"total {report.seconds:.1f} s"
        )
        for name in result["survived"]:
            print(f"  survived: {name}")
        for r in report.results:
            if r.verdict in (INVALID, SKIPPED):
                print(f"  {r.verdict}: {r.mutant.name}: {r.note}")
    if args.json:
        print(json.dumps(result))
    return 1 if report.baseline_failed or result["survived"] or result["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
