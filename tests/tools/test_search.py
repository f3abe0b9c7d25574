"""Grep and Glob on ripgrep: Claude Code's inputs, .gitignore, the order of results; and what a hostile
tree, pattern or .gitignore cannot make them show or do."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.tools import Tool, ToolContext, ToolError
from teamrt.tools.files import rg
from teamrt.tools.files.confine import FileRoots
from teamrt.tools.files.glob import Glob
from teamrt.tools.files.grep import GREP_FILES, GREP_LINES, Grep
from teamrt.tools.files.textfile import LINE_CHARS
from tests.helpers.machine import needs_bwrap

TOOLS: dict[str, Tool] = {"Grep": Grep(), "Glob": Glob()}


def run(ctx: ToolContext, tool: str, **input: Any) -> str:
    result = asyncio.run(TOOLS[tool].run(input, ctx))
    assert not result.is_error
    return result.text


def refused(ctx: ToolContext, tool: str, **input: Any) -> str:
    with pytest.raises(ToolError) as caught:
        run(ctx, tool, **input)
    message = str(caught.value)
    assert "\n" not in message
    return message


def files(root: Path, texts: dict[str, str]) -> None:
    """Write each file, its folders made."""
    for name, text in texts.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture(params=["bubblewrap", "unconfined"])
def confinement(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with ripgrep in bubblewrap (where installed) and without: the output checks alone."""
    if request.param == "unconfined":
        monkeypatch.setattr("teamrt.tools.files.rg.default_sandbox", lambda: Sandbox(None))
    elif not default_sandbox().confined and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed here")
    return str(request.param)


# == Grep: Claude Code's inputs =============================================================================


def test_type_searches_ripgreps_file_types(ctx: ToolContext, ws: Path) -> None:
    files(ws, {"a.py": "needle\n", "b.pyi": "needle\n", "c.js": "needle\n", "d.txt": "needle\n"})
    assert run(ctx, "Grep", pattern="needle", type="py") == "a.py\nb.pyi"
    assert run(ctx, "Grep", pattern="needle", type="js", output_mode="content") == "c.js:1:needle"
    assert run(ctx, "Grep", pattern="needle", type="py", glob="a*") == "a.py"
    assert run(ctx, "Grep", pattern="needle", type="rust") == "no matches for 'needle'"
    assert refused(ctx, "Grep", pattern="needle", type="javascript") == (
        "Grep: type 'javascript' is not one of ripgrep's file types; use glob instead"
    )
    assert refused(ctx, "Grep", pattern="x", type="py --type-add=x:*") == (
        "Grep: type must be the name of one of ripgrep's file types, such as py or js"
    )


def test_line_numbers_are_shown_unless_n_is_false(ctx: ToolContext, ws: Path) -> None:
    files(ws, {"a.txt": "one\ntwo\nthree\n"})
    assert run(ctx, "Grep", pattern="two", output_mode="content") == "a.txt:2:two"
    assert run(ctx, "Grep", pattern="two", output_mode="content", **{"-n": True}) == "a.txt:2:two"
    assert run(ctx, "Grep", pattern="two", output_mode="content", **{"-n": False}) == "a.txt:two"
    assert run(ctx, "Grep", pattern="two", output_mode="content", **{"-n": False, "-C": 1}) == (
        "a.txt-one\na.txt:two\na.txt-three"
    )
    assert run(ctx, "Grep", pattern="two", **{"-n": False, "-C": 1}) == "a.txt", (
        "ignored outside content mode"
    )
    assert refused(ctx, "Grep", pattern="two", **{"-n": "yes"}) == "Grep: -n must be true or false"


def test_multiline_lets_a_match_span_lines(ctx: ToolContext, ws: Path) -> None:
    files(ws, {"a.rs": "struct A {\n  x: i32,\n  field: u8,\n}\nstruct B {\n}\n"})
    spanning = r"struct A \{[\s\S]*?field"
    assert run(ctx, "Grep", pattern=spanning) == f"no matches for {spanning!r}", "one line at a time"
    assert run(ctx, "Grep", pattern=spanning, multiline=True, output_mode="content") == (
        "a.rs:1:struct A {\na.rs:2:  x: i32,\na.rs:3:  field: u8,"
    )
    dotall = {"pattern": r"x: i32,.*?field", "multiline": True, "output_mode": "content", "-C": 1}
    assert run(ctx, "Grep", **dotall) == "a.rs-1-struct A {\na.rs:2:  x: i32,\na.rs:3:  field: u8,\na.rs-4-}"
    assert run(ctx, "Grep", pattern=r"\{\n\}", multiline=True, output_mode="count") == "a.rs:1"
    assert refused(ctx, "Grep", pattern=r"A \{\n") == (
        "Grep: pattern matches a line break, which only multiline true allows"
    )


def test_head_limit_and_offset_page_through_the_results(ctx: ToolContext, ws: Path) -> None:
    for i in range(10):
        (ws / f"f{i}.txt").write_text("hit\n")
    names = [f"f{i}.txt" for i in range(10)]
    assert run(ctx, "Grep", pattern="hit", head_limit=3).splitlines() == [
        *names[:3],
        "(only the first 3 files are shown; narrow the pattern, path or glob, or pass offset=3 for the next"
        " ones)",
    ]
    assert run(ctx, "Grep", pattern="hit", head_limit=3, offset=3).splitlines() == [
        *names[3:6],
        "(only files 4 to 6 are shown; narrow the pattern, path or glob, or pass offset=6 for the next ones)",
    ]
    assert run(ctx, "Grep", pattern="hit", head_limit=3, offset=8).splitlines() == names[8:]
    assert run(ctx, "Grep", pattern="hit", head_limit=0).splitlines() == names, "0: as many as allowed"
    assert run(ctx, "Grep", pattern="hit", offset=20) == "(offset 20 skips all 10 files)"
    assert run(ctx, "Grep", pattern="hit", output_mode="count", offset=9) == "f9.txt:1"
    (ws / "many.txt").write_text("hit\n" * 5)
    content = {"pattern": "hit", "path": "many.txt", "output_mode": "content"}
    assert run(ctx, "Grep", **content, offset=1, head_limit=2).splitlines() == [
        "many.txt:2:hit",
        "many.txt:3:hit",
        "(only lines 2 to 3 are shown; narrow the pattern, path or glob, or pass offset=3 for the next ones)",
    ]
    assert refused(ctx, "Grep", pattern="hit", offset=-1) == "Grep: offset must be a whole number from 0"
    assert (
        refused(ctx, "Grep", pattern="hit", head_limit=True)
        == "Grep: head_limit must be a whole number from 0"
    )


def test_results_come_sorted_by_path_whatever_order_ripgrep_finds_them_in(ctx: ToolContext, ws: Path) -> None:
    names = sorted(f"d{i % 7}/e{i % 3}/f{i:03}.txt" for i in range(150))
    files(ws, dict.fromkeys(names, "x = 1\nhit\n"))
    listed = run(ctx, "Grep", pattern="hit", head_limit=0)
    assert listed.splitlines() == names
    content = run(ctx, "Grep", pattern="hit", output_mode="content", head_limit=0)
    assert content.splitlines() == [f"{name}:2:hit" for name in names]
    assert all(
        run(ctx, "Grep", pattern="hit", output_mode="content", head_limit=0) == content for _ in range(3)
    )


def test_grep_honours_gitignore_and_ignore_files_with_or_without_git(ctx: ToolContext, ws: Path) -> None:
    needles = (
        "sub/x.log",
        "sub/keep.txt",
        "sub/local.txt",
        "build/out.txt",
        "scratch.txt",
        "node_modules/i.js",
    )
    files(
        ws,
        {".gitignore": "build/\n*.log\n", ".ignore": "scratch.txt\n", **dict.fromkeys(needles, "needle\n")},
    )
    (ws / "sub/.gitignore").write_text("local.txt\n")
    (ws / "node_modules/.gitignore").write_text("*\n")
    assert run(ctx, "Grep", pattern="needle") == "sub/keep.txt", "no .git: the .gitignore files still count"
    assert run(ctx, "Grep", pattern="needle", path="sub") == "sub/keep.txt", "the root's .gitignore too"
    assert run(ctx, "Grep", pattern="needle", path="build/out.txt") == "build/out.txt", (
        "a file named is searched"
    )
    (ws / ".git").mkdir()
    assert run(ctx, "Grep", pattern="needle") == "sub/keep.txt"
    listed = sorted(run(ctx, "Glob", pattern="**/*").splitlines())
    assert listed == [".gitignore", ".ignore", "sub/.gitignore", "sub/keep.txt"]
    assert run(ctx, "Glob", pattern="**/*.log") == "no files match **/*.log in ."
    assert run(ctx, "Glob", pattern="build/*") == "no files match build/* in ."
    assert run(ctx, "Grep", pattern="needle", glob="*.log") == "sub/x.log", "as rg: a glob given overrides"


# == Glob ===================================================================================================


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("src/**", "src/x/y", True),
        ("src/**", "lib/x", False),
        ("src/*", "src/x/y", False),
        ("f?.[ch]", "f1.c", True),
        ("f?.[!ch]", "f1.c", False),
        ("*.{ts,tsx}", "a.tsx", True),
        ("**/*.{ts,tsx}", "d/a.ts", True),
        ("a+b(c).txt", "a+b(c).txt", True),
        ("x,y.txt", "x,y.txt", True),
        ("!bang.txt", "!bang.txt", True),
        ("*.py", ".hidden.py", True),
        ("./src/*.py", "src/a.py", True),
        ("**/deep/*", "src/deep/a", True),
        (r"\*.txt", "*.txt", True),
        (r"\*.txt", "a.txt", False),
    ],
)
def test_glob_patterns(ctx: ToolContext, ws: Path, pattern: str, path: str, matches: bool) -> None:
    (ws / path).parent.mkdir(parents=True, exist_ok=True)
    (ws / path).write_text("")
    (ws / "decoy.md").write_text("")
    assert run(ctx, "Glob", pattern=pattern) == (path if matches else f"no files match {pattern} in .")


def test_glob_lists_newest_first_then_by_path(ctx: ToolContext, ws: Path) -> None:
    for i, name in enumerate(["b.txt", "a.txt", "c/d.txt", "c/e.txt"]):
        files(ws, {name: ""})
        os.utime(ws / name, (1_000_000 + i // 2, 1_000_000 + i // 2))
    assert run(ctx, "Glob", pattern="**/*.txt").splitlines() == ["c/d.txt", "c/e.txt", "a.txt", "b.txt"]


def test_glob_honours_gitignore_lists_hidden_files_and_skips_git_and_the_home(
    ctx: ToolContext, ws: Path
) -> None:
    ignored = {".gitignore": "node_modules/\n*.pyc\n", "node_modules/lib/index.js": "", "src/a.pyc": ""}
    files(ws, {**ignored, ".github/ci.yml": "", ".git/config": "", "src/a.py": ""})
    listed = sorted(run(ctx, "Glob", pattern="**/*").splitlines())
    assert listed == [".github/ci.yml", ".gitignore", "src/a.py"]
    assert run(ctx, "Glob", pattern="**/*.js") == "no files match **/*.js in ."
    assert run(ctx, "Glob", pattern=".git/*") == "no files match .git/* in ."
    assert run(ctx, "Glob", pattern=".teamrt/**") == "no files match .teamrt/** in ."


def test_glob_refuses_bad_patterns_in_one_line(ctx: ToolContext, ws: Path) -> None:
    assert (
        refused(ctx, "Glob", pattern="[z-a]")
        == "Glob: '[z-a]' is not a valid glob pattern: invalid range; 'z' > 'a'"
    )
    assert refused(ctx, "Glob", pattern="{a,{b,c}}") == (
        "Glob: '{a,{b,c}}' is not a valid glob pattern: nested alternate groups are not allowed"
    )
    assert (
        refused(ctx, "Glob", pattern="")
        == "Glob: pattern must be a relative pattern; give the directory as path"
    )
    assert (
        refused(ctx, "Glob", pattern="a\0b") == "Glob: pattern must be at most 10000 characters, without NUL"
    )
    assert refused(ctx, "Glob", pattern="*" * 10_001).startswith("Glob: pattern must be at most 10000")
    assert refused(ctx, "Glob", pattern="src/../../*") == (
        "Glob: '..' is not allowed in the pattern; give the directory as path"
    )


# == Attacks ================================================================================================


@pytest.mark.hostile
def test_a_gitignore_cannot_unignore_git_or_teamrts_home(
    ctx: ToolContext, ws: Path, confinement: str
) -> None:
    """ripgrep is told to skip .git and the home by globs that outrank every ignore file it reads."""
    unignore = "!.git\n!.git/\n!.git/**\n!.teamrt\n!.teamrt/\n!.teamrt/**\n!*\n!**\n"
    for name in (".gitignore", ".ignore", ".rgignore", ".teamrt/.gitignore", ".teamrt/runs/.ignore"):
        (ws / name).write_text(unignore)
    (ws / ".git").mkdir()
    (ws / ".git/config").write_text("needle in git\n")
    (ctx.run_dir / "mail.txt").write_text("needle in the home\n")
    (ws / "ok.txt").write_text("needle\n")
    for mode in ("files_with_matches", "content", "count"):
        for extra in ({}, {"glob": ".git/**"}, {"glob": ".teamrt/**"}, {"glob": "**"}, {"-i": True}):
            found = run(ctx, "Grep", pattern="needle", output_mode=mode, **extra)
            assert ".git/" not in found and ".teamrt" not in found and "in the home" not in found, found
    assert run(ctx, "Grep", pattern="needle") == "ok.txt"
    listed = run(ctx, "Glob", pattern="**/*").splitlines()
    assert sorted(listed) == [".gitignore", ".ignore", ".rgignore", "ok.txt"]
    for pattern in (".git/*", ".teamrt/**/*", "**/config", "**/mail.txt", "**/run.db"):
        assert run(ctx, "Glob", pattern=pattern) == f"no files match {pattern} in ."
    binary = rg.binary()
    assert binary is not None
    scope = rg.Scope.of(FileRoots.of(ctx), "Glob", ".")
    for options in (["--files"], ["--files", "--glob=**"], ["--files-with-matches", "--regexp=needle"]):
        out = asyncio.run(rg.run("Glob", scope.argv(binary, options), ws, 20, "")).out.decode()
        assert "ok.txt" in out and ".git/" not in out and ".teamrt/" not in out, "ripgrep itself skips both"


@pytest.mark.hostile
def test_paths_outside_the_workspace_are_refused(ctx: ToolContext, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (ws / "out").symlink_to(outside)
    for path in ("..", "../outside", str(outside), "/etc", "out", "out/", "ws/../.."):
        for tool, input in (("Grep", {"pattern": "SECRET"}), ("Glob", {"pattern": "**/*"})):
            message = refused(ctx, tool, path=path, **input)
            assert message.startswith(f"{tool}: {path}") and "is outside the workspace" in message, message
    assert run(ctx, "Grep", pattern="SECRET", glob="../**") == "no matches for 'SECRET'"
    assert run(ctx, "Grep", pattern="SECRET", glob="/**/outside/*") == "no matches for 'SECRET'"
    assert run(ctx, "Glob", pattern="**/*") == "no files match **/* in .", "the symlink is not listed"


@pytest.mark.hostile
def test_a_directory_swapped_for_a_symlink_mid_search_shows_nothing_outside(
    ctx: ToolContext, ws: Path, tmp_path: Path, confinement: str
) -> None:
    """A process swaps ``d`` between a real directory and a symlink to a directory outside holding files of
    the same names, as fast as it can, while Grep and Glob run: nothing from outside ever shows. Without
    bubblewrap the names are still checked, but not the lines: ripgrep may read a file through the symlink
    and the name be checked once the directory is back (a run without bubblewrap runs its shell unconfined
    too, so it could read that file anyway)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "d").mkdir()
    for i in range(50):
        (ws / "d" / f"f{i}.txt").write_text("needle inside\n")
        (outside / f"f{i}.txt").write_text("needle TOP SECRET\n")
    (outside / "secret.txt").write_text("needle TOP SECRET\n")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(ws / "d", ws / "d.real")
            os.symlink(outside, ws / "d")
            time.sleep(0.0005)
            os.unlink(ws / "d")
            os.rename(ws / "d.real", ws / "d")
            time.sleep(0.0005)

    swapper = threading.Thread(target=swap)
    swapper.start()
    said = []
    try:
        for _ in range(15):
            if confinement == "bubblewrap":
                said.append(run(ctx, "Grep", pattern="needle", output_mode="content", head_limit=0))
            said.append(run(ctx, "Grep", pattern="needle", head_limit=0))
            said.append(run(ctx, "Glob", pattern="**/*"))
    finally:
        stop.set()
        swapper.join()
    assert not any("SECRET" in s or "secret.txt" in s for s in said)
    assert any("/f1.txt" in s for s in said), "the real directory was searched, under one name or the other"


@needs_bwrap
@pytest.mark.hostile
def test_a_directory_swapped_for_a_symlink_into_teamrts_home_shows_nothing_of_it(
    ctx: ToolContext, ws: Path
) -> None:
    """As above, the symlink leading into the home, and the real directory holding files of the same names:
    ripgrep runs with the home covered, so it reads no file of the home whichever ``d`` it meets."""
    for run_id in ("r1", "r2"):
        (ctx.run_dir.parent / run_id).mkdir(exist_ok=True)
        (ctx.run_dir.parent / run_id / "run.db").write_text("store TOP SECRET\n")
        (ws / "d" / run_id).mkdir(parents=True)
        (ws / "d" / run_id / "run.db").write_text("store inside\n")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(ws / "d", ws / "d.real")
            os.symlink(ctx.run_dir.parent, ws / "d")
            time.sleep(0.0005)
            os.unlink(ws / "d")
            os.rename(ws / "d.real", ws / "d")
            time.sleep(0.0005)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        said = [run(ctx, "Grep", pattern="store", output_mode="content") for _ in range(40)]
    finally:
        stop.set()
        swapper.join()
    assert not any("SECRET" in s for s in said)
    assert any("store inside" in s for s in said)


@pytest.mark.hostile
def test_what_ripgrep_prints_is_checked_again(
    ctx: ToolContext, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Glob's second line of defence: paths ripgrep printed that lead out, into .git or the home, through a
    symlink, or to no regular file, are not shown, whatever ripgrep printed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("")
    (ws / "swapped").symlink_to(outside)
    (ws / "link.txt").symlink_to("ok.txt")
    (ws / "ok.txt").write_text("")
    (ws / "dir").mkdir()
    (ws / ".git").mkdir()
    (ws / ".git/config").write_text("")
    printed = [b"./ok.txt", b"./swapped/x.txt", b"./link.txt", b"./dir", b"./.git/config", b"./gone.txt"]
    printed += [b"./.teamrt/runs/r1/run.db", b"../ws/ok.txt", str(outside / "x.txt").encode(), b"./ok.txt/.."]

    async def rg_printed(op: str, argv: list[str], cwd: Path, seconds: float, narrow: str) -> rg.Output:
        return rg.Output(b"".join(p + b"\0" for p in printed), b"", 0)

    monkeypatch.setattr(rg, "run", rg_printed)
    assert run(ctx, "Glob", pattern="**/*") == "ok.txt"


def test_a_line_is_shown_only_under_the_file_it_came_from(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Content lines are grouped by the ``begin`` message before them, but each must also name that file: a
    line of the home's store printed inside ok.txt's group, or after a ``begin`` cut short, is dropped."""
    (ws / "ok.txt").write_text("needle\n")

    def message(kind: str, path: str, line: int = 1, text: str = "needle\n") -> str:
        data = {"path": {"text": path}, "line_number": line, "lines": {"text": text}}
        return json.dumps({"type": kind, "data": data}, separators=(",", ":"))

    printed = [
        json.dumps({"type": "begin", "data": {"path": {"text": "./ok.txt"}}}, separators=(",", ":")),
        message("match", "./ok.txt"),
        message("match", "./.teamrt/runs/r1/run.db", 2, "secret store\n"),
        '{"type":"begin","data":{"path":{"te',
        message("match", "./ok.txt", 3, "secret store\n"),
    ]

    async def rg_printed(op: str, argv: list[str], cwd: Path, seconds: float, narrow: str) -> rg.Output:
        return rg.Output("\n".join(printed).encode(), b"", 0)

    monkeypatch.setattr(rg, "run", rg_printed)
    assert run(ctx, "Grep", pattern="needle", output_mode="content") == "ok.txt:1:needle"


@pytest.mark.hostile
def test_patterns_that_explode_elsewhere_end_quickly(ctx: ToolContext, ws: Path) -> None:
    """Patterns with catastrophic backtracking (in Python's ``re``) are linear for ripgrep; a pattern that
    would compile to a huge automaton is refused in one line."""
    (ws / "a.txt").write_text("a" * 100_000 + "\n")
    (ws / ("a" * 200)).write_text("")
    start = time.monotonic()
    for pattern in ("(a*)*b", "((a+)+)+$", "(a|aa)*c", "x{1000}{100}", r"\w{300}\W{300}"):
        run(ctx, "Grep", pattern=pattern, output_mode="count")
    assert run(ctx, "Glob", pattern="*a" * 30 + "*b") == f"no files match {'*a' * 30}*b in ."
    assert run(ctx, "Glob", pattern="*a" * 30 + "*") == "a" * 200
    # A ceiling that bounds a search that backtracks (which takes hours), far above the idle time (about 1 s).
    assert time.monotonic() - start < 60
    assert refused(ctx, "Grep", pattern=r"\p{Greek}{99999}").startswith(
        "Grep: pattern is too large for ripgrep's engine (compiled regex exceeds size limit"
    )


def test_huge_outputs_are_cut_with_a_word(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "long.txt").write_text("needle " + "x" * 1_000_000 + "\n")
    (ws / "many.txt").write_text("needle\n" * 1_000)
    line = run(ctx, "Grep", pattern="needle", path="long.txt", output_mode="content")
    assert line == f"long.txt:1:needle {'x' * (LINE_CHARS - 7)} [... line cut at {LINE_CHARS} characters]"
    lines = run(ctx, "Grep", pattern="needle", path="many.txt", output_mode="content", head_limit=0)
    assert len(lines.splitlines()) == GREP_LINES + 1
    monkeypatch.setattr(rg, "OUTPUT_BYTES", 4096)
    cut = run(
        ctx, "Grep", pattern="needle", path="many.txt", output_mode="content", head_limit=0
    ).splitlines()
    assert 1 < len(cut) < GREP_LINES and cut[-2] == f"many.txt:{len(cut) - 1}:needle"
    assert cut[-1] == "(ripgrep's output was cut at 0 MiB; narrow the pattern, path or glob)"
    for i in range(GREP_FILES * 2):
        (ws / f"f{i:04}.txt").write_text("")
    listing = run(ctx, "Glob", pattern="*.txt").splitlines()
    assert (
        len(listing) == 101 + 1
        and listing[-1] == "(ripgrep's listing was cut at 0 MiB; narrow the pattern or path)"
    )


def test_a_listing_that_runs_too_long_is_stopped(
    ctx: ToolContext, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ripgrep that never ends is stopped at the limit: the stand-in sleeps, so the limit decides, not
    how fast a loaded machine lists one file (a real ripgrep can end before a 1 ms limit is even armed)."""
    stand_in = tmp_path / "bin" / "rg"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/usr/bin/sh\nexec /usr/bin/sleep 300\n")
    stand_in.chmod(0o755)
    monkeypatch.setattr(rg, "required", lambda op: str(stand_in))
    monkeypatch.setattr("teamrt.tools.files.glob.GLOB_SECONDS", 0.5)
    (ws / "a.txt").write_text("")
    assert refused(ctx, "Glob", pattern="*") == "Glob: stopped after 0.5 s; narrow the pattern or path"


def test_a_search_cancelled_again_while_it_stops_still_ends_its_process(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled search kills ripgrep's process group and waits for it, and a second cancellation meanwhile
    does not leave it behind, nor its pipes (which would outlive the event loop, and complain when collected).
    Here a process outside the group keeps the pipe open until the test lets it go, so the second
    cancellation comes while the first is being served."""
    unraisable: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda raised: unraisable.append(raised.exc_value))
    gate = tmp_path / "gate"
    os.mkfifo(gate)

    def let_go() -> None:  # the holder reads the gate until it is closed, then ends and the pipe with it
        os.close(os.open(gate, os.O_WRONLY))

    async def until(what: str, condition: Callable[[], bool]) -> None:
        deadline = asyncio.get_running_loop().time() + 30
        while not condition():
            assert asyncio.get_running_loop().time() < deadline, what
            await asyncio.sleep(0.01)

    async def main() -> None:
        argv = ["sh", "-c", f"setsid sh -c 'cat {gate}' & exec sleep 30"]
        search = asyncio.create_task(rg.run("Grep", argv, ws, 60, ""))
        await until("the process never started", lambda: bool(_children("sleep")))
        search.cancel()
        await until("the group was never killed", lambda: not _children("sleep"))
        assert not search.done(), "the first cancellation waits for the pipe the holder keeps open"
        search.cancel()
        await asyncio.to_thread(let_go)
        with pytest.raises(asyncio.CancelledError):
            await search
        assert not _children("sleep", zombies=True), "ended and waited for"

    asyncio.run(main())
    gc.collect()
    assert unraisable == []


def _children(name: str, zombies: bool = False) -> list[int]:
    """This process's children called ``name`` (zombies only when asked for)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat_file.read_text()
        except OSError:
            continue
        comm, fields = text.split("(", 1)[1].rsplit(")", 1)[0], text.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and comm == name and (zombies or fields[0] != "Z"):
            found.append(int(stat_file.parent.name))
    return found


def test_without_ripgrep_both_say_so(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rg, "binary", lambda: None)
    for tool in TOOLS:
        assert refused(ctx, tool, pattern="x") == (
            f"{tool}: ripgrep (rg) is not installed; reinstall teamrt, which depends on it"
        )


def test_a_search_cut_short_ends_at_once_when_the_rest_of_its_output_waits_unread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ripgrep may end on its own while what it printed past the cut waits in a full, paused pipe; the
    search must drain it, or waiting for the process (which asyncio ties to the pipe) hangs to the time
    limit. A writer of 185 kB hits that often enough in 40 tries."""
    monkeypatch.setattr(rg, "OUTPUT_BYTES", 4096)

    async def searches() -> None:
        for _ in range(40):
            found = await asyncio.wait_for(
                rg.run("Grep", ["sh", "-c", "head -c 185000 /dev/zero"], tmp_path, 20.0, "narrow it"),
                rg.REAP_SECONDS,
            )
            assert len(found.out) == 4096

    asyncio.run(searches())
