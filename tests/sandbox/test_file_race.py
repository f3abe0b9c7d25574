"""The file tools against a sandboxed shell that swaps a directory for a symlink as fast as it can.

Write, Edit, MultiEdit, Read and LS run in teamrt's own process, outside the sandbox. The
shell (a real bwrap sandbox, through the bash tool) exchanges ``d/`` and a
symlink to a directory outside the workspace atomically (``renameat2`` with
RENAME_EXCHANGE), so ``d`` always exists and is, at any instant, one or the
other. However the tools' steps interleave with the swaps, nothing outside the
workspace may be created, changed or shown.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from teamrt.tools import Bash, ToolContext, ToolError, builtin_tools, legacy_tools
from tests.helpers.machine import needs_bwrap

pytestmark = pytest.mark.hostile

TOOLS = {**builtin_tools(), **legacy_tools()}  # MultiEdit: offered to older runs' agents only
CALLS = 2000
PYTHON = "/usr/bin/python3"
"""A Python the sandbox shows (the venv's may live in a hidden home directory)."""

SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.mkdir("d")
os.symlink(sys.argv[1], "link")
open("started", "w").close()
swaps = 0
while not os.path.exists("stop"):
    for _ in range(200):
        if libc.renameat2(-100, b"d", -100, b"link", 2) != 0:  # AT_FDCWD, RENAME_EXCHANGE
            sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
        swaps += 1
print(swaps)
"""

WORK: list[tuple[str, dict[str, Any]]] = [
    ("Write", {"file_path": "d/payload.txt", "content": "inside\n"}),
    ("Edit", {"file_path": "d/payload.txt", "old_string": "inside", "new_string": "edited"}),
    ("Read", {"file_path": "d/payload.txt"}),
    ("Write", {"file_path": "d/new/deeper.txt", "content": "deeper\n"}),
    ("Edit", {"file_path": "d/payload.txt", "old_string": "edited", "new_string": "inside"}),
    ("Read", {"file_path": "d/new/deeper.txt"}),
    ("MultiEdit", {"file_path": "d/payload.txt", "edits": [{"old_string": "in", "new_string": "IN"}]}),
    ("MultiEdit", {"file_path": "d/payload.txt", "edits": [{"old_string": "IN", "new_string": "in"}]}),
    ("MultiEdit", {"file_path": "d/made/new.txt", "edits": [{"old_string": "", "new_string": "made\n"}]}),
    ("LS", {"path": "d"}),
    ("LS", {}),
]


def snapshot(top: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file and directory under ``top``: contents (files), mode and modification time."""
    found = {}
    for path in [top, *top.rglob("*")]:
        st = path.lstat()
        found[str(path.relative_to(top))] = (
            path.read_bytes() if path.is_file() else b"",
            st.st_mode,
            st.st_mtime_ns,
        )
    return found


@needs_bwrap
@pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason=f"the swapping shell needs {PYTHON}")
def test_a_shell_swapping_a_directory_for_a_symlink_never_leads_a_file_tool_outside(tmp_path: Path) -> None:
    workspace, outside, run_dir = tmp_path / "ws", tmp_path / "outside", tmp_path / "home/runs/r1"
    for path in (workspace, outside / "new", run_dir):
        path.mkdir(parents=True)
    (outside / "payload.txt").write_text("outside secret\n")
    (outside / "outside-only.txt").write_text("")
    before = snapshot(outside)
    ctx = ToolContext(workspace=workspace, run_dir=run_dir)
    command = f"{PYTHON} -c {shlex.quote(SWAPPER)} {shlex.quote(str(outside))}"

    async def race() -> tuple[Counter[str], list[str], str]:
        shell = asyncio.create_task(Bash().run({"command": command, "timeout": 120_000}, ctx))
        while not (workspace / "started").exists():
            assert not shell.done(), shell.result().content
            await asyncio.sleep(0.01)
        outcomes: Counter[str] = Counter()
        shown: list[str] = []

        async def call(tool: str, input: dict[str, Any]) -> None:
            try:
                shown.append((await TOOLS[tool].run(input, ctx)).text)
                outcomes["done"] += 1
            except ToolError as e:
                outcomes["outside" if "outside the workspace" in str(e) else "other error"] += 1
                shown.append(str(e))

        for start in range(0, CALLS, 4):
            await asyncio.gather(*(call(*WORK[i % len(WORK)]) for i in range(start, start + 4)))
        (workspace / "stop").touch()
        done = await shell
        assert not done.is_error, done.content
        return outcomes, shown, done.text

    outcomes, shown, swaps = asyncio.run(race())
    assert snapshot(outside) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", "outside", "ws"]
    assert not any("outside secret" in text or "outside-only" in text for text in shown)
    assert sum(outcomes.values()) == CALLS
    # the race was run both ways: calls that found the directory, calls that found the symlink
    assert outcomes["done"] > 0 and outcomes["outside"] > 0, outcomes
    assert int(swaps) > 1000
