"""The file tools on a real filesystem: confinement, teamrt's home, protected paths, deny rules, hostile
input, and read, write, edit, glob and grep themselves."""

from __future__ import annotations

import asyncio
import json
import os
import random
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from teamrt.sandbox.bwrap import default_sandbox
from teamrt.sandbox.protect import PROTECTED, protected_paths
from teamrt.tools import ToolContext, ToolError, ToolResult, builtin_tools
from teamrt.tools.files import grep, rg
from teamrt.tools.files.confine import IN_HOME, FileRoots
from teamrt.tools.files.glob import GLOB_RESULTS
from teamrt.tools.files.grep import GREP_FILE_BYTES, GREP_FILES, GREP_LINES

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
        run(ctx, "Write", file_path="a/b/c.txt", content="one\ntwo\n").content
        == "created a/b/c.txt (2 lines)"
    )
    assert (ws / "a/b/c.txt").read_text() == "one\ntwo\n"
    assert run(ctx, "Read", file_path=str(ws / "a/b/c.txt")).content == "     1\tone\n     2\ttwo"
    assert run(ctx, "Write", file_path="a/b/c.txt", content="x").content == "overwrote a/b/c.txt (1 lines)"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "/tmp/teamrt-outside"])
@pytest.mark.hostile
def test_paths_outside_the_workspace_are_refused(ctx: ToolContext, ws: Path, path: str) -> None:
    assert "outside the workspace" in refused(ctx, "Read", file_path=path)
    assert "outside the workspace" in refused(ctx, "Write", file_path=path, content="x")
    assert "outside the workspace" in refused(ctx, "Edit", file_path=path, old_string="a", new_string="b")
    assert not (ws.parent / "x").exists()
    assert not Path("/tmp/teamrt-outside").exists()


@pytest.mark.hostile
def test_a_symlink_pointing_outside_is_refused_for_reading_and_writing(
    ctx: ToolContext, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("private\n")
    (ws / "link").symlink_to(outside)
    (ws / "dangling").symlink_to(tmp_path / "not-yet")
    (ws / "dir").symlink_to(tmp_path)
    message = refused(ctx, "Read", file_path="link")
    assert (
        message
        == f"Read: link (which resolves to {outside}) is outside the workspace {ws}; use a path inside it"
    )
    refused(ctx, "Write", file_path="link", content="changed")
    refused(ctx, "Edit", file_path="link", old_string="private", new_string="changed")
    refused(ctx, "Write", file_path="dangling", content="created")
    refused(ctx, "Write", file_path="dir/new.txt", content="created")
    refused(ctx, "Read", file_path="dir/outside.txt")
    assert outside.read_text() == "private\n"
    assert not (tmp_path / "not-yet").exists()
    assert not (tmp_path / "new.txt").exists()
    for tool, input in (("Glob", {"pattern": "**/*"}), ("Grep", {"pattern": "private"})):
        assert "outside" not in run(ctx, tool, **input).content


def test_a_symlink_inside_the_workspace_is_followed(ctx: ToolContext, ws: Path) -> None:
    (ws / "real.txt").write_text("hello\n")
    (ws / "alias").symlink_to("real.txt")
    (ws / "later").symlink_to("sub/new.txt")
    assert run(ctx, "Read", file_path="alias").content == "     1\thello"
    assert run(ctx, "Write", file_path="later", content="made\n").content == "created sub/new.txt (1 lines)"
    assert (ws / "sub/new.txt").read_text() == "made\n"


def test_symlinked_directories_inside_the_workspace_are_followed_by_hand(ctx: ToolContext, ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "rel").symlink_to("real")
    (ws / "abs").symlink_to(ws / "real")
    (ws / "real/sub").mkdir()
    (ws / "real/sub/up").symlink_to("../../real/f.txt")
    assert run(ctx, "Write", file_path="rel/f.txt", content="one\n").content == "created real/f.txt (1 lines)"
    assert (
        run(ctx, "Write", file_path="abs/new/g.txt", content="").content == "created real/new/g.txt (0 lines)"
    )
    assert run(ctx, "Edit", file_path="abs/f.txt", old_string="one", new_string="two").content == (
        "edited real/f.txt: 1 replacement(s)"
    )
    assert run(ctx, "Read", file_path="rel/sub/up").content == "     1\ttwo"
    assert run(ctx, "Read", file_path=str(ws / "abs/sub/../f.txt")).content == "     1\ttwo"
    assert (ws / "abs").is_symlink() and (ws / "real/new/g.txt").exists()


def test_writes_keep_the_mode_but_never_set_user_id_and_leave_no_temporaries(
    ctx: ToolContext, ws: Path
) -> None:
    (ws / "kept.sh").write_text("echo\n")
    (ws / "kept.sh").chmod(0o750)
    (ws / "suid").write_text("x\n")
    (ws / "suid").chmod(0o4755)
    run(ctx, "Write", file_path="kept.sh", content="echo hi\n")
    run(ctx, "Edit", file_path="suid", old_string="x", new_string="y")
    assert stat.S_IMODE((ws / "kept.sh").stat().st_mode) == 0o750
    assert stat.S_IMODE((ws / "suid").stat().st_mode) == 0o755
    assert sorted(p.name for p in ws.iterdir()) == [".teamrt", "kept.sh", "suid"]


@pytest.mark.hostile
def test_a_symlink_loop_is_refused_clearly(ctx: ToolContext, ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    assert refused(ctx, "Read", file_path="a/x") == "Read: a/x has a symlink loop"


@pytest.mark.hostile
def test_teamrts_home_is_refused_for_reading_and_writing_and_walks_skip_it(
    ctx: ToolContext, ws: Path
) -> None:
    other = ws / ".teamrt/runs/r0"
    other.mkdir(parents=True)
    (other / "run.db").write_text("secret other run\n")
    (ws / ".teamrt/agents").mkdir()
    (ws / ".teamrt/agents/lead.md").write_text("secret agent\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("secret git\n")
    (ws / "code.txt").write_text("not secret\n")
    mail = str(ctx.run_dir / "mailbox/lead/new/m.json")
    for path in (".teamrt/runs/r1/run.db", ".teamrt/runs/r0/run.db", ".teamrt/agents/lead.md", mail):
        assert refused(ctx, "Read", file_path=path) == f"Read: {path} {IN_HOME}"
        assert refused(ctx, "Write", file_path=path, content="x") == f"Write: {path} {PROTECTED}"
        assert refused(ctx, "Edit", file_path=path, old_string="secret", new_string="x").endswith(PROTECTED)
    assert refused(ctx, "Glob", pattern="*", path=".teamrt/runs/r1") == f"Glob: .teamrt/runs/r1 {IN_HOME}"
    assert refused(ctx, "Grep", pattern="secret", path=".teamrt") == f"Grep: .teamrt {IN_HOME}"
    (ws / "to-run").symlink_to(ctx.run_dir)
    assert refused(ctx, "Read", file_path="to-run/run.db") == (
        f"Read: to-run/run.db (which resolves to {ctx.run_dir / 'run.db'}) {IN_HOME}"
    )
    assert run(ctx, "Glob", pattern="**/*").content == "code.txt"
    assert run(ctx, "Grep", pattern="secret").content == "code.txt"
    assert run(ctx, "Grep", pattern="secret", output_mode="content").content == "code.txt:1:not secret"
    assert (ws / ".teamrt/agents/lead.md").read_text() == "secret agent\n"
    assert (ctx.run_dir / "run.db").read_text() == "secret store\n"


def test_extra_roots_are_read_only_and_a_spill_directory_inside_the_run_is_readable(
    ws: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "home/runs/r1"
    spill = run_dir / "spill"
    spill.mkdir(parents=True)
    (spill / "big.txt").write_text("spilled\n")
    (run_dir / "run.db").write_text("spilled store\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("guide\n")
    ctx = ToolContext(workspace=ws, run_dir=run_dir, extra_roots=(spill, docs))
    assert run(ctx, "Read", file_path=str(spill / "big.txt")).content == "     1\tspilled"
    assert run(ctx, "Grep", pattern="guide", path=str(docs)).content == str(docs / "guide.md")
    assert run(ctx, "Grep", pattern="spilled", path=str(spill)).content == str(spill / "big.txt")
    assert run(ctx, "Glob", pattern="*", path=str(spill)).content == str(spill / "big.txt")
    message = refused(ctx, "Write", file_path=str(docs / "guide.md"), content="x")
    assert message.endswith("is in a read-only directory; only the workspace can be changed")
    message = refused(ctx, "Edit", file_path=str(spill / "big.txt"), old_string="spilled", new_string="x")
    assert message.endswith("is in a read-only directory; only the workspace can be changed")
    assert refused(ctx, "Read", file_path=str(run_dir / "run.db")) == f"Read: {run_dir / 'run.db'} {IN_HOME}"
    assert (docs / "guide.md").read_text() == "guide\n"


def test_a_worktree_workspace_inside_teamrts_home_works(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs/r1"
    worktree = run_dir / "worktrees/alice"
    worktree.mkdir(parents=True)
    (run_dir / "run.db").write_text("mine store\n")
    ctx = ToolContext(workspace=worktree, run_dir=run_dir)
    assert run(ctx, "Write", file_path="f.txt", content="mine\n").content == "created f.txt (1 lines)"
    assert run(ctx, "Edit", file_path="f.txt", old_string="mine", new_string="ours").content == (
        "edited f.txt: 1 replacement(s)"
    )
    assert run(ctx, "Glob", pattern="*").content == "f.txt"
    assert run(ctx, "Grep", pattern="ours", output_mode="content").content == "f.txt:1:ours"
    assert refused(ctx, "Read", file_path="../../run.db") == f"Read: ../../run.db {IN_HOME}"
    assert refused(ctx, "Write", file_path="../../x.txt", content="x") == f"Write: ../../x.txt {IN_HOME}"


@pytest.mark.hostile
def test_protected_paths_are_never_written(tmp_path: Path) -> None:
    project = tmp_path / "project"
    run_dir = project / ".teamrt/runs/r1"
    run_dir.mkdir(parents=True)
    team_file = project / "team.toml"
    team_file.write_text("[team]\n")
    (project / ".git/hooks").mkdir(parents=True)
    (project / ".git/config").write_text("[core]\n")
    protected = protected_paths((project,), home=project / ".teamrt", team_file=team_file)
    ctx = ToolContext(workspace=project, run_dir=run_dir, protected=protected)
    for path in (
        ".git/config",
        ".git/hooks/pre-commit",
        ".git/info/attributes",
        ".claude/agents/coder.md",
        ".claude/settings.json",
        ".mcp.json",
        "sub/.mcp.json",
        "vendor/lib/.git/config",
        ".teamrt/agents/lead.md",
        "team.toml",
        str(team_file),
    ):
        assert refused(ctx, "Write", file_path=path, content="x") == f"Write: {path} {PROTECTED}"
    assert refused(ctx, "Edit", file_path=".git/config", old_string="core", new_string="x").endswith(
        PROTECTED
    )
    (project / "to-git").symlink_to(".git")
    assert refused(ctx, "Write", file_path="to-git/hooks/pre-commit", content="x").endswith(PROTECTED)
    assert run(ctx, "Read", file_path=".git/config").content == "     1\t[core]"
    assert not (project / ".git/hooks/pre-commit").exists() and not (project / ".claude").exists()
    assert team_file.read_text() == "[team]\n"


@pytest.mark.hostile
def test_a_deny_rule_for_reading_refuses_read_and_hides_files_from_glob_and_grep(
    ws: Path, run_dir: Path
) -> None:
    real = Path(os.path.realpath(ws))

    def read_denied(path: Path) -> str | None:
        return "Read(secrets/**)" if path.parent.is_relative_to(real / "secrets") else None

    ctx = ToolContext(workspace=ws, run_dir=run_dir, read_denied=read_denied)
    (ws / "secrets").mkdir()
    (ws / "secrets/key.txt").write_text("token = 1\n")
    (ws / "secrets/other.txt").write_text("token = 2\n")
    (ws / "app.py").write_text("token = load()\n")
    (ws / "alias.txt").symlink_to("secrets/key.txt")
    assert refused(ctx, "Read", file_path="secrets/key.txt") == (
        "Read: secrets/key.txt is denied by the rule Read(secrets/**)"
    )
    assert refused(ctx, "Read", file_path="alias.txt") == (
        f"Read: alias.txt (which resolves to {real / 'secrets/key.txt'})"
        " is denied by the rule Read(secrets/**)"
    )
    hidden = "(2 matching files are hidden by the agent's deny rules)"
    assert run(ctx, "Grep", pattern="token").content == f"app.py\n{hidden}"
    assert (
        run(ctx, "Grep", pattern="token", output_mode="content").content
        == f"app.py:1:token = load()\n{hidden}"
    )
    assert run(ctx, "Glob", pattern="*.txt").content == "no files match *.txt in ."  # symlinks are not listed
    assert run(ctx, "Glob", pattern="**/*.txt").text.endswith(
        "(2 matching files are hidden by the agent's deny rules)"  # not alias.txt: symlinks are not listed
    )
    assert (
        run(ctx, "Write", file_path="secrets/new.txt", content="x\n").content
        == "created secrets/new.txt (1 lines)"
    )


# -- hostile input ----------------------------------------------------------------------

LONG_NAME = "n" * 300


@pytest.mark.parametrize(
    ("tool", "input", "message"),
    [
        ("Read", {"file_path": LONG_NAME}, f"Read: {LONG_NAME} has a name longer than 255 bytes"),
        ("Write", {"file_path": f"d/{LONG_NAME}", "content": ""}, f"Write: d/{LONG_NAME} has a name longer"),
        ("Glob", {"pattern": "*", "path": LONG_NAME}, f"Glob: {LONG_NAME} has a name longer than 255 bytes"),
        ("Read", {"file_path": "d/" * 2500}, "Read: file_path is longer than 4096 bytes"),
        ("Write", {"file_path": "x" * 5000, "content": ""}, "Write: file_path is longer than 4096 bytes"),
        ("Grep", {"pattern": "x", "path": "é" * 3000}, "Grep: path is longer than 4096 bytes"),
        (
            "Read",
            {"file_path": "\ud800"},
            "Read: file_path holds a lone surrogate (U+D800), which is not valid",
        ),
        (
            "Write",
            {"file_path": "f\udcff.txt", "content": ""},
            "Write: file_path holds a lone surrogate (U+DCFF)",
        ),
        (
            "Write",
            {"file_path": "f.txt", "content": "a\udfffb"},
            "Write: content holds a lone surrogate (U+DFFF)",
        ),
        ("Edit", {"file_path": "f.txt", "old_string": "\ud800", "new_string": "x"}, "Edit: old_string holds"),
        ("Edit", {"file_path": "f.txt", "old_string": "x", "new_string": "\ud800"}, "Edit: new_string holds"),
        ("Glob", {"pattern": "*\ud800"}, "Glob: pattern holds a lone surrogate (U+D800)"),
        ("Grep", {"pattern": "\ud800"}, "Grep: pattern holds a lone surrogate (U+D800)"),
        ("Grep", {"pattern": "x", "glob": "*\udc00"}, "Grep: glob holds a lone surrogate (U+DC00)"),
        ("Read", {"file_path": "a\0b"}, "Read: file_path must be a non-empty path without NUL characters"),
        ("Read", {"file_path": ""}, "Read: file_path must be a non-empty path without NUL characters"),
        ("Read", {"file_path": 7}, "Read: file_path must be a string"),
        ("Grep", {"pattern": "a\0"}, "Grep: pattern must be at most 10000 characters, without NUL"),
        ("Grep", {"pattern": "a" * 10_001}, "Grep: pattern must be at most 10000 characters, without NUL"),
        ("Grep", {"pattern": "x", "-A": -1}, "Grep: -A must be a whole number from 0"),
        ("Grep", {"pattern": "x", "head_limit": -1}, "Grep: head_limit must be a whole number from 0"),
        ("Grep", {"pattern": "x", "glob": "{"}, "Grep: glob is not valid: unclosed alternate group"),
        ("Glob", {"pattern": "[z-a]"}, "Glob: '[z-a]' is not a valid glob pattern"),
        ("Read", {"file_path": "p"}, "Read: p is not a regular file"),
        ("Write", {"file_path": "p", "content": ""}, "Write: p is not a regular file"),
        (
            "Write",
            {"file_path": "f.txt/x", "content": ""},
            "Write: f.txt/x has a part that is not a directory",
        ),
        ("Write", {"file_path": ".", "content": ""}, "Write: . is a directory"),
    ],
)
@pytest.mark.hostile
def test_hostile_input_gets_a_clear_one_line_error(
    ctx: ToolContext, ws: Path, tool: str, input: dict[str, Any], message: str
) -> None:
    (ws / "f.txt").write_text("x\n")
    os.mkfifo(ws / "p")
    assert refused(ctx, tool, **input).startswith(message)
    assert (ws / "f.txt").read_text() == "x\n"


def test_names_that_are_not_utf8_are_shown_replaced(ctx: ToolContext, ws: Path) -> None:
    os.close(os.open(os.fsencode(ws) + b"/bad\xff.txt", os.O_CREAT | os.O_WRONLY))
    with open(os.fsencode(ws) + b"/bad\xfe.md", "wb") as f:
        f.write(b"needle\n")
    assert run(ctx, "Glob", pattern="bad*").text.splitlines() == ["bad\ufffd.md", "bad\ufffd.txt"]
    assert run(ctx, "Grep", pattern="needle", output_mode="content").content == "bad\ufffd.md:1:needle"


# -- read -----------------------------------------------------------------------------


def test_read_numbers_lines_pages_and_cuts_long_lines(ctx: ToolContext, ws: Path) -> None:
    lines = [f"line {i}" for i in range(1, 2101)]
    lines[2] = "x" * 2500
    (ws / "f.txt").write_text("\n".join(lines) + "\n")
    first = run(ctx, "Read", file_path="f.txt").text.splitlines()
    assert first[0] == "     1\tline 1"
    assert first[2] == "     3\t" + "x" * 2000 + " [... line cut at 2000 characters]"
    assert first[1999] == "  2000\tline 2000"
    assert first[2000] == "(lines 1-2000 shown; more follow: read on with offset=2001)"
    assert len(first) == 2001
    rest = run(ctx, "Read", file_path="f.txt", offset=2099, limit=5).content
    assert rest == "  2099\tline 2099\n  2100\tline 2100"
    assert (
        refused(ctx, "Read", file_path="f.txt", offset=3000)
        == "Read: f.txt has 2100 lines; offset 3000 is past its end"
    )
    assert refused(ctx, "Read", file_path="f.txt", limit=0) == "Read: limit must be a whole number from 1"


def test_read_refuses_binary_files_directories_and_missing_files(ctx: ToolContext, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    (ws / "empty.txt").write_text("")
    (ws / "d").mkdir()
    assert refused(ctx, "Read", file_path="blob.bin") == (
        "Read: blob.bin is a binary file; only text files can be read"
    )
    assert refused(ctx, "Read", file_path="d") == "Read: d is a directory; list it with LS"
    assert refused(ctx, "Read", file_path="nope.txt") == "Read: nope.txt does not exist"
    assert run(ctx, "Read", file_path="empty.txt").content == "(empty.txt is empty)"


# -- edit -----------------------------------------------------------------------------


def test_edit_replaces_a_unique_match_and_keeps_line_endings(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"alpha\r\nbeta\r\n")
    assert run(ctx, "Edit", file_path="f.txt", old_string="beta", new_string="gamma").content == (
        "edited f.txt: 1 replacement(s)"
    )
    assert (ws / "f.txt").read_bytes() == b"alpha\r\ngamma\r\n"


def test_edit_refuses_a_missing_or_repeated_match_unless_replace_all(ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("x = 1\nx = 1\n")
    message = refused(ctx, "Edit", file_path="f.txt", old_string="x = 1", new_string="x = 2")
    assert message == (
        "Edit: old_string occurs 2 times in f.txt; add surrounding lines to make it unique, or set"
        " replace_all to true"
    )
    assert (ws / "f.txt").read_text() == "x = 1\nx = 1\n"
    assert "was not found in f.txt" in refused(ctx, "Edit", file_path="f.txt", old_string="y", new_string="z")
    assert "old_string is empty" in refused(ctx, "Edit", file_path="f.txt", old_string="", new_string="z")
    result = run(ctx, "Edit", file_path="f.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert result.content == "edited f.txt: 2 replacement(s)"
    assert (ws / "f.txt").read_text() == "x = 2\nx = 2\n"


# -- glob -----------------------------------------------------------------------------


def test_glob_lists_matches_newest_first(ctx: ToolContext, ws: Path) -> None:
    for i, name in enumerate(["old.py", "src/mid.py", "src/deep/new.py", "notes.md"]):
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text("")
        os.utime(ws / name, (1_000_000 + i, 1_000_000 + i))
    assert run(ctx, "Glob", pattern="*.py").content == "old.py"
    assert run(ctx, "Glob", pattern="**/*.py").content == "src/deep/new.py\nsrc/mid.py\nold.py"
    assert run(ctx, "Glob", pattern="*.py", path="src").content == "src/mid.py"
    assert run(ctx, "Glob", pattern="*.{md,py}").content == "notes.md\nold.py"
    assert run(ctx, "Glob", pattern="*.rs").content == "no files match *.rs in ."
    assert "'..' is not allowed" in refused(ctx, "Glob", pattern="../*")
    assert "must be a relative pattern" in refused(ctx, "Glob", pattern="/etc/*")
    assert refused(ctx, "Glob", pattern="*", path="notes.md") == "Glob: notes.md is not a directory"


def test_glob_caps_its_results_and_says_so(ctx: ToolContext, ws: Path) -> None:
    for i in range(GLOB_RESULTS + 5):
        (ws / f"f{i:03}.txt").write_text("")
    lines = run(ctx, "Glob", pattern="*.txt").text.splitlines()
    assert len(lines) == GLOB_RESULTS + 1
    assert (
        lines[-1]
        == f"({GLOB_RESULTS} of {GLOB_RESULTS + 5} files shown, newest first; narrow the pattern or path)"
    )


# -- grep -----------------------------------------------------------------------------


def test_grep_modes_case_and_file_filter(ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src/a.py").write_text("import os\nMARK: one\nmark: two\n")
    (ws / "b.txt").write_text("MARK: three\n")
    (ws / "blob.bin").write_bytes(b"MARK\x00binary")
    assert run(ctx, "Grep", pattern="MARK").content == "b.txt\nsrc/a.py"
    assert (
        run(ctx, "Grep", pattern="MARK", output_mode="count", **{"-i": True}).content == "b.txt:1\nsrc/a.py:2"
    )
    one_file = {"output_mode": "count", "path": "src/a.py", "-i": True}
    assert run(ctx, "Grep", pattern="MARK", **one_file).content == "src/a.py:2", "a single file is named too"
    assert run(ctx, "Grep", pattern="MARK", path="b.txt").content == "b.txt"
    assert (
        run(ctx, "Grep", pattern="MARK", output_mode="content", glob="*.py").content == "src/a.py:2:MARK: one"
    )
    assert run(ctx, "Grep", pattern="MARK", glob="src/*.py", path=".").content == "src/a.py"
    assert run(ctx, "Grep", pattern="two", path="src/a.py").content == "src/a.py"
    assert "not a valid regular expression" in refused(ctx, "Grep", pattern="(")
    assert "output_mode must be one of" in refused(ctx, "Grep", pattern="x", output_mode="lines")
    assert refused(ctx, "Grep", pattern="x", path="nope") == "Grep: nope does not exist"


def test_grep_caps_lines_and_files_and_skips_big_files(ctx: ToolContext, ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * (GREP_LINES + 10))
    lines = run(ctx, "Grep", pattern="hit", output_mode="content").text.splitlines()
    assert len(lines) == GREP_LINES + 1
    assert lines[-1].startswith(f"(only the first {GREP_LINES} lines are shown")
    for i in range(GREP_FILES + 1):
        (ws / f"f{i:03}.txt").write_text("hit\n")
    lines = run(ctx, "Grep", pattern="hit").text.splitlines()
    assert len(lines) == GREP_FILES + 1
    assert lines[-1].startswith(f"(only the first {GREP_FILES} files are shown")
    (ws / "huge.log").write_bytes(b"needle\n" + b"." * GREP_FILE_BYTES)
    assert run(ctx, "Grep", pattern="needle").content == "no matches for 'needle'"
    assert refused(ctx, "Grep", pattern="needle", path="huge.log") == (
        "Grep: huge.log is over 5 MiB, too large to search"
    )


def test_grep_speaks_ripgreps_dialect_and_shows_context(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("zero\nid 123\ntwo\nthree\nfour\nid 456\n")
    assert run(ctx, "Grep", pattern=r"id \d{3}", output_mode="count").content == "a.txt:2"
    assert run(ctx, "Grep", pattern="id", output_mode="content", **{"-C": 1}).content == (
        "a.txt-1-zero\na.txt:2:id 123\na.txt-3-two\n--\na.txt-5-four\na.txt:6:id 456"
    )
    assert run(ctx, "Grep", pattern="id", output_mode="content", **{"-B": 1, "-A": 0}).content == (
        "a.txt-1-zero\na.txt:2:id 123\n--\na.txt-5-four\na.txt:6:id 456"
    )
    assert run(ctx, "Grep", pattern="o", output_mode="content", head_limit=2).content == (
        "a.txt:1:zero\na.txt:3:two\n"
        "(only the first 2 lines are shown; narrow the pattern, path or glob,"
        " or pass offset=2 for the next ones)"
    )
    assert refused(ctx, "Grep", pattern="(?<=id) 1") == (
        "Grep: pattern is not a valid regular expression: look-around, including look-ahead and look-behind,"
        " is not supported"
    )
    assert (
        refused(ctx, "Grep", pattern="(") == "Grep: pattern is not a valid regular expression: unclosed group"
    )
    assert run(ctx, "Grep", pattern="-v").content == "no matches for '-v'"


def test_grep_searches_hidden_files_but_not_ignored_ones_git_or_fifos(ctx: ToolContext, ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git/HEAD").write_text("needle\n")
    (ws / ".gitignore").write_text("ignored.txt\n")
    (ws / "ignored.txt").write_text("needle\n")
    (ws / ".env.example").write_text("needle\n")
    (ws / "plain.txt").write_text("needle\n")
    os.mkfifo(ws / "pipe")
    assert run(ctx, "Grep", pattern="needle").content == ".env.example\nplain.txt"


def test_a_catastrophic_python_pattern_is_linear_for_ripgrep(ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 40 + "!\n" + "a" * 40 + "\n")
    assert run(ctx, "Grep", pattern="(a+)+$", output_mode="count").content == "a.txt:1"


def test_grep_without_ripgrep_says_so(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rg, "binary", lambda: None)
    assert refused(ctx, "Grep", pattern="x") == (
        "Grep: ripgrep (rg) is not installed; reinstall teamrt, which depends on it"
    )


@pytest.mark.hostile
def test_grep_shows_only_what_the_agent_may_read_whatever_ripgrep_prints(
    ws: Path, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line of defence: the paths ripgrep prints are checked again, so a search that reached
    the home, .git, a denied file or (through a swapped symlink) another directory shows none of it."""
    real = Path(os.path.realpath(ws))
    home = ws / ".teamrt"
    (home / "runs/r0").mkdir(parents=True)
    ctx = ToolContext(
        workspace=ws,
        run_dir=home / "runs/r1",
        read_denied=lambda p: "Read(secret.txt)" if p == real / "secret.txt" else None,
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    for path in (ws / "ok.txt", ws / "secret.txt", home / "runs/r0/run.db", outside / "x.txt"):
        path.write_text("needle\n")
    (ws / ".git").mkdir()
    (ws / ".git/config").write_text("needle\n")
    (ws / "swapped").symlink_to(outside)
    printed = [
        b"./ok.txt",
        b"./secret.txt",
        b"./.teamrt/runs/r0/run.db",
        b"./.git/config",
        b"./swapped/x.txt",
    ]
    printed += [b"./gone.txt", b"../ws/ok.txt", str(outside / "x.txt").encode()]

    async def rg_printed(op: str, argv: list[str], cwd: Path, seconds: float, narrow: str) -> rg.Output:
        if "--json" not in argv:
            return rg.Output(b"".join(p + b"\0" for p in printed), b"", 0)
        lines = []
        for p in printed:
            path = {"text": p.decode()}
            match = {"path": path, "line_number": 1, "lines": {"text": "needle\n"}}
            lines += [{"type": "begin", "data": {"path": path}}, {"type": "match", "data": match}]
        out = "\n".join(json.dumps(line, separators=(",", ":")) for line in lines).encode()
        return rg.Output(out, b"", 0)

    monkeypatch.setattr(rg, "run", rg_printed)
    hidden = "(1 matching file is hidden by the agent's deny rules)"
    assert run(ctx, "Grep", pattern="needle").content == f"ok.txt\n{hidden}"
    assert run(ctx, "Grep", pattern="needle", output_mode="content").content == f"ok.txt:1:needle\n{hidden}"


@pytest.mark.hostile
def test_ripgrep_itself_sees_no_further_than_the_root_it_searches(
    ctx: ToolContext, ws: Path, tmp_path: Path
) -> None:
    """The first line of defence: without the output filter, ripgrep still finds nothing in the home or
    outside the workspace, even when asked to follow symlinks."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.txt").write_text("needle\n")
    (ws / "swapped").symlink_to(outside)
    (ctx.run_dir / "mail.txt").write_text("needle\n")
    (ws / "ok.txt").write_text("needle\n")
    binary = rg.binary()
    assert binary is not None
    scope = rg.Scope.of(FileRoots.of(ctx), "Grep", ".")
    argv = scope.argv(binary, ["--files-with-matches", "--null", "--follow", "--glob=**", "--regexp=needle"])
    out = asyncio.run(rg.run("Grep", argv, scope.directory, 20, "")).out
    if default_sandbox().confined:
        assert out == b"./ok.txt\0"
    else:  # the glob keeps it out of the home; only bubblewrap hides what lies outside
        assert b"./ok.txt\0" in out and b"mail" not in out


@pytest.mark.hostile
def test_a_grep_that_runs_too_long_is_stopped_while_the_event_loop_runs_on(
    ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pattern that keeps ripgrep's engine busy for many seconds over a 5 MiB file ends at the time limit
    with an error, and ripgrep with it; meanwhile the supervisor's event loop keeps running."""
    monkeypatch.setattr(grep, "GREP_SECONDS", 1.0)
    _slow_to_search(ws)

    async def main() -> tuple[ToolResult | ToolError, int, float]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        beat = asyncio.create_task(ticker())
        start = time.monotonic()
        try:
            outcome: ToolResult | ToolError = await TOOLS["Grep"].run({"pattern": SLOW}, ctx)
        except ToolError as e:
            outcome = e
        took = time.monotonic() - start
        beat.cancel()
        return outcome, ticks, took

    outcome, ticks, took = asyncio.run(main())
    assert str(outcome) == "Grep: stopped after 1 s; narrow the pattern, path or glob"
    # A ceiling that bounds a ripgrep that outlives its kill (the search alone runs for many seconds), far
    # above the idle time (about 1.1 s).
    assert took < 30
    assert ticks >= 10
    assert not _children_named("rg", "bwrap")


def test_a_cancelled_grep_ends_ripgrep(ctx: ToolContext, ws: Path) -> None:
    _slow_to_search(ws)

    async def main() -> None:
        search = asyncio.create_task(TOOLS["Grep"].run({"pattern": SLOW}, ctx))
        for _ in range(500):
            if _children_named("rg", "bwrap"):
                break
            await asyncio.sleep(0.02)
        assert _children_named("rg", "bwrap"), "ripgrep never started"
        search.cancel()
        with pytest.raises(asyncio.CancelledError):
            await search

    asyncio.run(main())
    assert not _children_named("rg", "bwrap")


SLOW = "[ab]*a[ab]{30}c"
"""A pattern that keeps ripgrep's engine busy for seconds on each file ``_slow_to_search`` makes."""


def _slow_to_search(ws: Path) -> None:
    """Two files of random lines of a and b, just under GREP_FILE_BYTES each."""
    noise = random.Random(1).randbytes(80 * 60_000).translate(bytes(b"ab"[i % 2] for i in range(256)))
    for name in ("one.txt", "two.txt"):
        (ws / name).write_bytes(b"\n".join(noise[i : i + 80] for i in range(0, len(noise), 80)))


def _children_named(*names: str) -> list[str]:
    """This process's children with one of ``names``."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat_file.read_text()
        except OSError:
            continue
        comm, fields = text.split("(", 1)[1].rsplit(")", 1)[0], text.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and comm in names and fields[0] != "Z":
            found.append(comm)
    return found


# -- the registry ---------------------------------------------------------------------------


def test_builtin_tools_have_the_model_facing_names_and_flags() -> None:
    assert list(TOOLS) == [
        "Read", "Write", "Edit", "Glob", "Grep", "LS", "Bash", "WebFetch", "WebSearch"
    ]  # fmt: skip
    read_only = {name for name, tool in TOOLS.items() if tool.read_only}
    assert read_only == {"Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch"}
    for tool in TOOLS.values():
        assert tool.input_schema["type"] == "object"
        assert set(tool.input_schema["required"]) <= set(tool.input_schema["properties"])


def test_importing_the_tools_does_not_import_the_sdk() -> None:
    code = "import sys, teamrt.tools.registry; sys.exit(any(m in sys.modules for m in ('anthropic', 'mcp')))"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_temporaries_a_crash_left_are_removed_and_nothing_else(tmp_path: Path) -> None:
    from teamrt.tools.files.edit import TEMPORARY_SUFFIX, remove_temporaries

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
