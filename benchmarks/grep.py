"""Grep benchmark: the ``Grep`` tool against ``rg`` run alone, on a tree of 51,000 files.

The tree, made in a temporary directory (in ``/dev/shm`` when there is one: building 51,000
files on a shared virtual disk takes 6 to 30 s, removing them as long, and the searches read
from the page cache either way): 15,000 Python files of about 1.5 KB in
``src/`` (100 packages of 7 folders), 36,000 small JavaScript files in a
``node_modules/`` that ``.gitignore`` excludes, a git repository around them
and teamrt's home (``.teamrt/runs/...``) inside, as in a real project.

- **the Grep tool**: ``teamrt.tools.files.grep.Grep`` called as the agent loop calls it,
  on four searches a model makes: a rare name (files_with_matches), a
  common word (files_with_matches: thousands of files, sorted and cut to the
  200 shown), a definition in content mode, and a case-insensitive one with a
  glob and context lines. It runs ripgrep in bubblewrap when installed, sorts
  its output by path and checks every path it shows.
- **rg alone**: the same searches by the same ``rg`` binary, from Python, as a
  person would run it: plain output (``-l`` or ``-n``) to a pipe, hidden files
  searched and ``.git`` skipped as the tool does, no sandbox, nothing checked.

The two alternate search by search, after one untimed round that warms the
page cache. Target: the tool's p50 within 1.5x of rg's plus 20 ms.

Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from teamrt.sandbox.bwrap import default_sandbox
from teamrt.tools.base import ToolContext
from teamrt.tools.files import rg
from teamrt.tools.files.grep import Grep

SOURCES = 15_000
MODULES = 36_000
TARGET_RATIO = 1.5
TARGET_PLUS_MS = 20.0
BUDGET_S = 25.0
"""Timed rounds stop once the benchmark has run this long (and at least MIN_ROUNDS were done); removing the
tree takes some seconds more."""
MIN_ROUNDS = 5
WORDS = "alpha beta gamma delta request response handler config value index cache token user session error"

SEARCHES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("rare name, files", {"pattern": r"handle_1234\b"}, ["-l", r"handle_1234\b"]),
    ("common word, files", {"pattern": "session_2"}, ["-l", "session_2"]),
    (
        "definitions, content",
        {"pattern": r"def handle_12\d\d\(", "output_mode": "content"},
        ["-n", r"def handle_12\d\d\("],
    ),
    (
        "-i, glob, -C 2, content",
        {"pattern": "COMPUTE_GAMMA\\(77", "-i": True, "glob": "*.py", "-C": 2, "output_mode": "content"},
        ["-n", "-i", "--glob=*.py", "-C", "2", "COMPUTE_GAMMA\\(77"],
    ),
]


def make_tree(root: Path) -> int:
    """The project described above; the number of files in it."""
    words = WORDS.split()
    pick = random.Random(7).choice
    for i in range(SOURCES):
        folder = root / "src" / f"pkg{i % 100:02d}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        body = "\n".join(
            f"    {w}_{j} = compute_{v}({i}, {j})  # {w} {v}"
            for j in range(30)
            for w, v in [(pick(words), pick(words))]
        )
        (folder / f"mod{i:05d}.py").write_text(
            f'"""Module {i}."""\n\nimport os\n\n\ndef handle_{i}(x):\n{body}\n'
        )
    for i in range(MODULES):
        folder = root / "node_modules" / f"lib{i % 600:03d}" / "dist"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:05d}.js").write_text(
            f"module.exports = function handle_{i}(session_2) {{ return 1; }};\n"
        )
    (root / ".gitignore").write_text("node_modules/\n")
    (root / ".teamrt" / "runs" / "bench").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return SOURCES + MODULES + 1


def rg_alone(binary: str, root: Path, args: list[str]) -> float:
    """One search by ``rg`` alone, in ms."""
    start = time.perf_counter()
    done = subprocess.run(
        [binary, "--no-config", "--hidden", "--glob=!.git", *args],
        cwd=root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    took = (time.perf_counter() - start) * 1000
    assert done.returncode == 0 and done.stdout, done.stderr
    return took


async def tool(grep: Grep, ctx: ToolContext, input: dict[str, Any]) -> float:
    """One search by the Grep tool, in ms."""
    start = time.perf_counter()
    result = await grep.run(input, ctx)
    took = (time.perf_counter() - start) * 1000
    assert not result.is_error and not result.text.startswith("no matches"), result.text
    return took


async def measure(root: Path, started: float) -> dict[str, Any]:
    files = make_tree(root)
    built = time.monotonic() - started
    binary = rg.binary()
    assert binary is not None, "ripgrep is not installed"
    grep = Grep()
    ctx = ToolContext(workspace=root, run_dir=root / ".teamrt" / "runs" / "bench")
    times: dict[str, dict[str, list[float]]] = {name: {"tool": [], "rg": []} for name, _, _ in SEARCHES}
    rounds = 0
    while rounds <= MIN_ROUNDS or time.monotonic() - started < BUDGET_S:
        for name, input, args in SEARCHES:
            alone = rg_alone(binary, root, args)
            ours = await tool(grep, ctx, input)
            if rounds:  # the first round warms the page cache
                times[name]["rg"].append(alone)
                times[name]["tool"].append(ours)
        rounds += 1
    ours_all = [t for series in times.values() for t in series["tool"]]
    rg_all = [t for series in times.values() for t in series["rg"]]
    p50, rg_p50 = statistics.median(ours_all), statistics.median(rg_all)
    target = TARGET_RATIO * rg_p50 + TARGET_PLUS_MS
    return {
        "files": files,
        "files_gitignored": MODULES,
        "build_s": round(built, 1),
        "rounds": rounds - 1,
        "searches": {
            name: {
                "p50_ms": round(statistics.median(s["tool"]), 1),
                "rg_p50_ms": round(statistics.median(s["rg"]), 1),
            }
            for name, s in times.items()
        },
        "p50_ms": round(p50, 1),
        "rg_p50_ms": round(rg_p50, 1),
        "ratio": round(p50 / rg_p50, 2),
        "target_ms": round(target, 1),
        "target": f"p50 <= {TARGET_RATIO} x rg_p50 + {TARGET_PLUS_MS:g} ms",
        "ok": p50 <= target,
        "sandboxed": default_sandbox().confined,
        "tree_in": str(root.parent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument(
        "--dir", help="where to build the tree (default: /dev/shm if there is one, else $TMPDIR)"
    )
    args = parser.parse_args()
    shm = Path("/dev/shm")
    where = args.dir or (str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else os.environ.get("TMPDIR"))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-", dir=where) as tmp:
        result = asyncio.run(measure(Path(tmp), started))
    result["total_s"] = round(time.monotonic() - started, 1)
    print(
        f"tree of {result['files']:,} files ({result['files_gitignored']:,} in a .gitignored node_modules),"
        f" built in {result['tree_in']} in {result['build_s']} s; {result['rounds']} timed rounds;"
        f" ripgrep {'in bubblewrap' if result['sandboxed'] else 'unconfined (no bubblewrap)'}"
    )
    print(f"{'':28}{'Grep tool p50 ms':>18}{'rg alone p50 ms':>18}")
    for name, figures in result["searches"].items():
        print(f"{name:28}{figures['p50_ms']:>18}{figures['rg_p50_ms']:>18}")
    print(f"{'all searches':28}{result['p50_ms']:>18}{result['rg_p50_ms']:>18}")
    print(
        f"ratio {result['ratio']}; target {result['target']} = {result['target_ms']} ms:"
        f" {'met' if result['ok'] else 'NOT met'}; {result['total_s']} s in all"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
