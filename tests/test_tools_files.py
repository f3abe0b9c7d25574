"""The file tools on a real filesystem: confinement, the run directory, read/write/edit/glob/grep."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from teamrt.tools import ToolContext, ToolError, ToolResult, builtin_tools
from teamrt.tools.files import GLOB_RESULTS, GREP_FILE_BYTES, GREP_FILES, GREP_LINES, glob_regex

TOOLS = builtin_tools()


def run(ctx: ToolContext, tool: str, **input: Any) -> ToolResult:
    return asyncio.run(TOOLS[tool].run(input, ctx))


def refused(ctx: ToolContext, tool: str, **input: Any) -> str:
    with pytest.raises(ToolError) as caught:
        run(ctx, tool, **input)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- confinement ----------------------------------------------------------------------


def test_relative_paths_resolve_against_the_workspace_and_write_creates_parents(
    ctx: ToolContext, ws: Path
) -> None:
    assert (
        run(ctx, "write", file_path="a/b/c.txt", content="one\ntwo\n").content
        == "created a/b/c.txt (2 lines)"
    )
    assert (ws / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert run(ctx, "read", file_path=str(ws / "a/b/c.txt")).content == "     1\tone\n     2\ttwo"
    assert run(ctx, "write", file_path="a/b/c.txt", content="x").content == "overwrote a/b/c.txt (1 lines)"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "/tmp/teamrt-outside"])
def test_paths_outside_the_workspace_are_refused(ctx: ToolContext, ws: Path, path: str) -> None:
    assert "outside the workspace" in refused(ctx, "read", file_path=path)
    assert "outside the workspace" in refused(ctx, "write", file_path=path, content="x")
    assert "outside the workspace" in refused(ctx, "edit", file_path=path, old_string="a", new_string="b")
    assert not (ws.parent / "x").exists()
    assert not Path("/tmp/teamrt-outside").exists()


def test_a_symlink_pointing_outside_is_refused_for_reading_and_writing(
    ctx: ToolContext, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("private\n")
    (ws / "link").symlink_to(outside)
    (ws / "dangling").symlink_to(tmp_path / "not-yet")
    (ws / "dir").symlink_to(tmp_path)
    message = refused(ctx, "read", file_path="link")
    assert (
        message
        == f"read: link (which resolves to {outside}) is outside the workspace {ws}; use a path inside it"
    )
    refused(ctx, "write", file_path="link", content="changed")
    refused(ctx, "edit", file_path="link", old_string="private", new_string="changed")
    refused(ctx, "write", file_path="dangling", content="created")
    refused(ctx, "write", file_path="dir/new.txt", content="created")
    refused(ctx, "read", file_path="dir/outside.txt")
    assert outside.read_text() == "private\n"
    assert not (tmp_path / "not-yet").exists()
    assert not (tmp_path / "new.txt").exists()
    for tool, input in (("glob", {"pattern": "**/*"}), ("grep", {"pattern": "private"})):
        assert "outside" not in run(ctx, tool, **input).content


def test_a_symlink_inside_the_workspace_is_followed(ctx: ToolContext, ws: Path) -> None:
    (ws / "real.txt").write_text("hello\n")
    (ws / "alias").symlink_to("real.txt")
    (ws / "later").symlink_to("sub/new.txt")
    assert run(ctx, "read", file_path="alias").content == "     1\thello"
    assert run(ctx, "write", file_path="later", content="made\n").content == "created sub/new.txt (1 lines)"
    assert (ws / "sub/new.txt").read_text() == "made\n"


def test_a_symlink_loop_is_refused_clearly(ctx: ToolContext, ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    assert refused(ctx, "read", file_path="a/x") == "read: a/x has a symlink loop"


def test_the_run_directory_is_refused_and_skipped_as_is_git(ctx: ToolContext, ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("secret git\n")
    (ws / "code.txt").write_text("not secret\n")
    for path in (".teamrt/runs/r1/run.db", str(ctx.run_dir / "mailbox/lead/new/m.json")):
        assert "run's own directory" in refused(ctx, "read", file_path=path)
        assert "run's own directory" in refused(ctx, "write", file_path=path, content="x")
    assert "run's own directory" in refused(ctx, "glob", pattern="*", path=".teamrt/runs/r1")
    (ws / "to-run").symlink_to(ctx.run_dir)
    assert "run's own directory" in refused(ctx, "read", file_path="to-run/run.db")
    assert run(ctx, "glob", pattern="**/*").content == "code.txt"
    assert run(ctx, "grep", pattern="secret").content == "code.txt"
    assert run(ctx, "grep", pattern="secret", path=".teamrt").content == "no matches for 'secret'"


def test_extra_roots_are_read_only_and_a_spill_directory_inside_the_run_is_readable(
    ws: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "home/runs/r1"
    spill = run_dir / "spill"
    spill.mkdir(parents=True)
    (spill / "big.txt").write_text("spilled\n")
    (run_dir / "run.db").write_text("store\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("guide\n")
    ctx = ToolContext(workspace=ws, run_dir=run_dir, extra_roots=(spill, docs))
    assert run(ctx, "read", file_path=str(spill / "big.txt")).content == "     1\tspilled"
    assert run(ctx, "grep", pattern="guide", path=str(docs)).content == str(docs / "guide.md")
    message = refused(ctx, "write", file_path=str(docs / "guide.md"), content="x")
    assert message.endswith("is in a read-only directory; only the workspace can be changed")
    refused(ctx, "edit", file_path=str(spill / "big.txt"), old_string="spilled", new_string="x")
    assert "run's own directory" in refused(ctx, "read", file_path=str(run_dir / "run.db"))
    assert (docs / "guide.md").read_text() == "guide\n"


def test_a_worktree_workspace_inside_the_run_directory_works(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs/r1"
    worktree = run_dir / "worktrees/alice"
    worktree.mkdir(parents=True)
    ctx = ToolContext(workspace=worktree, run_dir=run_dir)
    assert run(ctx, "write", file_path="f.txt", content="mine\n").content == "created f.txt (1 lines)"
    assert run(ctx, "glob", pattern="*").content == "f.txt"
    assert "run's own directory" in refused(ctx, "read", file_path="../../run.db")


# -- read -----------------------------------------------------------------------------


def test_read_numbers_lines_pages_and_cuts_long_lines(ctx: ToolContext, ws: Path) -> None:
    lines = [f"line {i}" for i in range(1, 2101)]
    lines[2] = "x" * 2500
    (ws / "f.txt").write_text("\n".join(lines) + "\n")
    first = run(ctx, "read", file_path="f.txt").content.splitlines()
    assert first[0] == "     1\tline 1"
    assert first[2] == "     3\t" + "x" * 2000 + " [... line cut at 2000 characters]"
    assert first[1999] == "  2000\tline 2000"
    assert first[2000] == "(lines 1-2000 shown; more follow: read on with offset=2001)"
    assert len(first) == 2001
    rest = run(ctx, "read", file_path="f.txt", offset=2099, limit=5).content
    assert rest == "  2099\tline 2099\n  2100\tline 2100"
    assert (
        refused(ctx, "read", file_path="f.txt", offset=3000)
        == "read: f.txt has 2100 lines; offset 3000 is past its end"
    )
    assert refused(ctx, "read", file_path="f.txt", limit=0) == "read: limit must be a whole number from 1"


def test_read_refuses_binary_files_directories_and_missing_files(ctx: ToolContext, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    (ws / "empty.txt").write_text("")
    (ws / "d").mkdir()
    assert refused(ctx, "read", file_path="blob.bin") == (
        "read: blob.bin is a binary file; only text files can be read"
    )
    assert refused(ctx, "read", file_path="d") == "read: d is a directory; list it with glob"
    assert refused(ctx, "read", file_path="nope.txt") == "read: nope.txt does not exist"
    assert run(ctx, "read", file_path="empty.txt").content == "(empty.txt is empty)"


# -- edit -----------------------------------------------------------------------------


def test_edit_replaces_a_unique_match_and_keeps_line_endings(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"alpha\r\nbeta\r\n")
    assert run(ctx, "edit", file_path="f.txt", old_string="beta", new_string="gamma").content == (
        "edited f.txt: 1 replacement(s)"
    )
    assert (ws / "f.txt").read_bytes() == b"alpha\r\ngamma\r\n"


def test_edit_refuses_a_missing_or_repeated_match_unless_replace_all(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("x = 1\nx = 1\n")
    message = refused(ctx, "edit", file_path="f.txt", old_string="x = 1", new_string="x = 2")
    assert message == (
        "edit: old_string occurs 2 times in f.txt; add surrounding lines to make it unique, or set"
        " replace_all to true"
    )
    assert (ws / "f.txt").read_text() == "x = 1\nx = 1\n"
    assert "was not found in f.txt" in refused(ctx, "edit", file_path="f.txt", old_string="y", new_string="z")
    assert "old_string is empty" in refused(ctx, "edit", file_path="f.txt", old_string="", new_string="z")
    result = run(ctx, "edit", file_path="f.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert result.content == "edited f.txt: 2 replacement(s)"
    assert (ws / "f.txt").read_text() == "x = 2\nx = 2\n"


# -- glob -----------------------------------------------------------------------------


def test_glob_lists_matches_newest_first(ctx: ToolContext, ws: Path) -> None:
    for i, name in enumerate(["old.py", "src/mid.py", "src/deep/new.py", "notes.md"]):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("")
        os.utime(ws / name, (1_000_000 + i, 1_000_000 + i))
    assert run(ctx, "glob", pattern="*.py").content == "old.py"
    assert run(ctx, "glob", pattern="**/*.py").content == "src/deep/new.py\nsrc/mid.py\nold.py"
    assert run(ctx, "glob", pattern="*.py", path="src").content == "src/mid.py"
    assert run(ctx, "glob", pattern="*.{md,py}").content == "notes.md\nold.py"
    assert run(ctx, "glob", pattern="*.rs").content == "no files match *.rs in ."
    assert "'..' is not allowed" in refused(ctx, "glob", pattern="../*")
    assert "must be a relative pattern" in refused(ctx, "glob", pattern="/etc/*")
    assert refused(ctx, "glob", pattern="*", path="notes.md") == "glob: notes.md is not a directory"


def test_glob_caps_its_results_and_says_so(ctx: ToolContext, ws: Path) -> None:
    for i in range(GLOB_RESULTS + 5):
        (ws / f"f{i:03}.txt").write_text("")
    lines = run(ctx, "glob", pattern="*.txt").content.splitlines()
    assert len(lines) == GLOB_RESULTS + 1
    assert (
        lines[-1]
        == f"({GLOB_RESULTS} of {GLOB_RESULTS + 5} files shown, newest first; narrow the pattern or path)"
    )


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("*.py", "a.py", True),
        ("*.py", "d/a.py", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "d/e/a.py", True),
        ("src/**", "src/x/y", True),
        ("src/**", "lib/x", False),
        ("f?.[ch]", "f1.c", True),
        ("f?.[!ch]", "f1.c", False),
        ("*.{ts,tsx}", "a.tsx", True),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_patterns(pattern: str, path: str, matches: bool) -> None:
    assert (glob_regex(pattern).fullmatch(path) is not None) is matches


# -- grep -----------------------------------------------------------------------------


def test_grep_modes_case_and_file_filter(ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src/a.py").write_text("import os\nMARK: one\nmark: two\n")
    (ws / "b.txt").write_text("MARK: three\n")
    (ws / "blob.bin").write_bytes(b"MARK\x00binary")
    assert run(ctx, "grep", pattern="MARK").content == "b.txt\nsrc/a.py"
    assert (
        run(ctx, "grep", pattern="MARK", output_mode="count", **{"-i": True}).content == "b.txt:1\nsrc/a.py:2"
    )
    assert (
        run(ctx, "grep", pattern="MARK", output_mode="content", glob="*.py").content == "src/a.py:2:MARK: one"
    )
    assert run(ctx, "grep", pattern="MARK", glob="src/*.py", path=".").content == "src/a.py"
    assert run(ctx, "grep", pattern="two", path="src/a.py").content == "src/a.py"
    assert "not a valid regular expression" in refused(ctx, "grep", pattern="(")
    assert "output_mode must be one of" in refused(ctx, "grep", pattern="x", output_mode="lines")
    assert refused(ctx, "grep", pattern="x", path="nope") == "grep: nope does not exist"


def test_grep_caps_lines_and_files_and_skips_big_files(ctx: ToolContext, ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * (GREP_LINES + 10))
    lines = run(ctx, "grep", pattern="hit", output_mode="content").content.splitlines()
    assert len(lines) == GREP_LINES + 1
    assert lines[-1].startswith(f"(only the first {GREP_LINES} matching lines are shown")
    for i in range(GREP_FILES + 1):
        (ws / f"f{i:03}.txt").write_text("hit\n")
    lines = run(ctx, "grep", pattern="hit").content.splitlines()
    assert len(lines) == GREP_FILES + 1
    assert lines[-1].startswith(f"(only the first {GREP_FILES} files are shown")
    (ws / "huge.log").write_bytes(b"needle\n" + b"." * GREP_FILE_BYTES)
    assert run(ctx, "grep", pattern="needle").content == (
        "no matches for 'needle'\n(1 files over 5 MiB were not searched)"
    )


# -- the registry ---------------------------------------------------------------------------


def test_builtin_tools_have_the_model_facing_names_and_flags() -> None:
    assert list(TOOLS) == ["read", "write", "edit", "glob", "grep", "bash"]
    assert {name for name, tool in TOOLS.items() if tool.read_only} == {"read", "glob", "grep"}
    for tool in TOOLS.values():
        assert tool.input_schema["type"] == "object"
        assert set(tool.input_schema["required"]) <= set(tool.input_schema["properties"])


def test_importing_the_tools_does_not_import_the_sdk() -> None:
    code = "import sys, teamrt.tools; sys.exit('anthropic' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_temporaries_a_crash_left_are_removed_and_nothing_else(tmp_path: Path) -> None:
    from teamrt.tools.files import TEMPORARY_SUFFIX, remove_temporaries

    left = tmp_path / "kit" / f".dates.py.ab12{TEMPORARY_SUFFIX}"
    left.parent.mkdir()
    left.write_text("half")
    kept = [
        tmp_path / "kit" / "dates.py",
        tmp_path / "kit" / "notes.teamrt-tmp",
        tmp_path / ".git" / f".x{TEMPORARY_SUFFIX}",
    ]
    for path in kept:
        path.parent.mkdir(exist_ok=True)
        path.write_text("mine")
    assert remove_temporaries(tmp_path) == [left]
    assert not left.exists() and all(p.exists() for p in kept)
