"""``teamrt diff``: a run's merged work and each worktree agent's, over a real repository and run store
(tests/helpers/reviews.py), and what it does with an agent's hostile files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from teamrt.cli import main
from tests.helpers.git import IDENTITY, git
from tests.helpers.reviews import CLAMP, LEAP, RUN, Reviewed, make_reviewed


@pytest.fixture
def reviewed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Reviewed:
    made = make_reviewed(tmp_path)
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    monkeypatch.chdir(made.project)
    return made


def diff(capsysbinary: pytest.CaptureFixture[bytes], *args: str) -> tuple[int, bytes, str]:
    code = main(["diff", RUN, *args])
    out, err = capsysbinary.readouterr()
    return code, out, err.decode()


def applied(project: Path, where: Path, patch: bytes, base: str) -> Path:
    """A checkout of ``base`` at ``where`` with ``patch`` applied by git."""
    git(project, "worktree", "add", "-q", "--detach", str(where), base)
    done = subprocess.run(
        ["git", "apply", "--index"], cwd=where, input=patch, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return where


def test_the_run_s_diff_is_all_it_merged_and_applies(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes], tmp_path: Path
) -> None:
    code, out, err = diff(capsysbinary)
    assert code == 0 and err == ""
    assert out.startswith(b"diff --git a/kit/dates.py b/kit/dates.py\n")
    assert b"+    return max(lo, min(x, hi))\n" in out and b"\x1b" not in out  # plain through a pipe
    tree = applied(reviewed.project, tmp_path / "check", out, reviewed.base)
    assert (tree / "kit/dates.py").read_text() == LEAP and (tree / "kit/numbers.py").read_text() == CLAMP


def test_an_agent_s_diff_is_its_branch_against_where_it_was_cut(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    code, out, _ = diff(capsysbinary, "coder-1")
    assert code == 0
    assert re.findall(rb"^diff --git .*$", out, re.M) == [b"diff --git a/kit/dates.py b/kit/dates.py"]
    assert b"+    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n" in out


def test_a_live_agent_s_diff_is_its_worktree_new_files_included_its_index_untouched(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    worktree = reviewed.run_dir / "worktrees" / "coder-2"
    before = git(worktree, "status", "--porcelain")
    code, out, err = diff(capsysbinary, "coder-2")
    assert code == 0
    assert b"+++ b/kit/extra.py\n@@ -0,0 +1 @@\n+ANSWER = 42\n" in out
    assert b"+    return max(lo, min(x, hi))\n" in out
    assert "coder-2 is still at work" in err
    assert git(worktree, "status", "--porcelain") == before == " M kit/numbers.py\n?? kit/extra.py".strip()


def test_stat_and_names_only(reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    _, out, _ = diff(capsysbinary, "--stat")
    assert b"kit/dates.py   | 2 +-" in out and b"2 files changed, 2 insertions(+), 2 deletions(-)" in out
    _, out, _ = diff(capsysbinary, "coder-2", "--name-only")
    assert out == b"kit/extra.py\nkit/numbers.py\n"


def test_colour_on_request_each_kind_of_line_as_git_colours_it(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    _, out, _ = diff(capsysbinary, "coder-1", "--color=always")
    text = out.decode()
    assert "\x1b[1mdiff --git a/kit/dates.py b/kit/dates.py\x1b[0m" in text
    assert "\x1b[36m@@ -1,2 +1,2 @@\x1b[0m" in text
    assert "\x1b[31m-    return year % 4 == 0\x1b[0m" in text
    assert "\n def is_leap(year):\n" in text  # context: as it is


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nobody"], "no agent named 'nobody' in run 'r1' (its agents: coder-1, coder-2, coder-3, lead,"
         " lead-fork-1)"),
        (["lead-fork-1"], "agent lead-fork-1 of run r1 is a fork agent: it works in its parent's workspace"
         " and has no branch of its own"),
        (["lead"], "agent lead of run r1 is a lead agent: it works in the project"),
        (["coder-3"], "the branch teamrt/r1-coder-3 of agent coder-3 no longer exists (teamrt gc deletes"),
    ],
)  # fmt: skip
def test_what_has_no_diff_is_one_line(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes], args: list[str], said: str
) -> None:
    code, out, err = diff(capsysbinary, *args)
    assert code == 1 and out == b""
    assert err.startswith(f"teamrt: {said}") and err.count("\n") == 1


def test_an_unknown_run_and_a_run_gone_from_git_are_one_line(
    reviewed: Reviewed, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main(["diff", "nope"]) == 1
    assert capsysbinary.readouterr().err.decode().startswith("teamrt: no run named 'nope'")
    git(reviewed.project, "branch", "-D", f"teamrt/{RUN}")
    code, _, err = diff(capsysbinary)
    assert code == 1
    said = "the integration branch teamrt/r1 of run r1 was deleted (teamrt gc deletes it once applied)"
    assert err == f"teamrt: {said}\n"


def test_an_agent_with_no_changes_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    made = make_reviewed(tmp_path, coder1={"kit/dates.py": "def is_leap(year):\n    return year % 4 == 0\n"})
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    code, out, err = diff(capsysbinary, "coder-1")
    assert (code, out) == (0, b"")
    assert err == "teamrt: no changes: the branch teamrt/r1-coder-1 is as the commit coder-1 was cut from\n"


def test_crlf_and_latin_1_files_keep_their_bytes_through_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    files: dict[str, str | bytes] = {
        "win.txt": b"one\r\ntwo\r\n",
        "latin.txt": "caf\u00e9 cr\u00e8me\n".encode("latin-1"),
    }
    made = make_reviewed(tmp_path, coder1=files)
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    _, out, _ = diff(capsysbinary, "coder-1")
    tree = applied(made.project, tmp_path / "check", out, made.base)
    assert (tree / "win.txt").read_bytes() == files["win.txt"]
    assert (tree / "latin.txt").read_bytes() == files["latin.txt"]


# -- hostile -------------------------------------------------------------------------------------------

ESCAPES = (
    "title \x1b]0;pwned\x07 clip \x1b]52;c;cHduZWQ=\x07 red \x1b[31mred\x1b[0m bell \x07"
    " [bold red]markup[/]\n"
)


@pytest.mark.hostile
def test_escape_sequences_in_a_file_reach_no_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    made = make_reviewed(tmp_path, coder1={"evil.txt": ESCAPES})
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    _, piped, _ = diff(capsysbinary, "coder-1")
    assert b"\x1b" not in piped and b"\x07" not in piped
    shown = piped.decode()
    assert (
        "+title \ufffd]0;pwned\ufffd clip \ufffd]52;c;cHduZWQ=\ufffd red \ufffd[31mred\ufffd[0m bell \ufffd"
        in shown
    )
    assert "[bold red]markup[/]" in shown  # shown as written, never read as markup
    _, coloured, _ = diff(capsysbinary, "coder-1", "--color=always")
    text = coloured.decode()
    assert "\x07" not in text and "]52;" in text
    assert set(re.findall(r"\x1b[^m]*m", text)) <= {"\x1b[1m", "\x1b[0m", "\x1b[36m", "\x1b[32m", "\x1b[31m"}
    assert "\x1b]" not in text and "\x1b[31mred" not in text


@pytest.mark.hostile
def test_a_file_name_with_a_newline_and_an_escape_is_shown_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    made = make_reviewed(tmp_path, coder1={"odd\nname\x1b[2J.txt": "x\n"})
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    _, out, _ = diff(capsysbinary, "coder-1", "--name-only")
    assert out == b'"odd\\nname\\033[2J.txt"\n'
    _, out, _ = diff(capsysbinary, "coder-1")
    assert b'+++ "b/odd\\nname\\033[2J.txt"\n' in out and b"\x1b" not in out


@pytest.mark.hostile
def test_a_diff_driver_and_textconv_the_repository_names_are_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    """The agent committed ``.gitattributes`` naming a driver, and (as if planted before the sandbox held
    the repository read-only) its configuration runs a program: diff, textconv and an external diff."""
    marker = tmp_path / "ran"
    made = make_reviewed(tmp_path, coder1={".gitattributes": "* diff=evil\n", "kit/dates.py": LEAP})
    program = tmp_path / "evil.sh"
    program.write_text(f"#!/bin/sh\ntouch {marker}\necho converted\n")
    program.chmod(0o755)
    for key in ("diff.evil.textconv", "diff.evil.command", "diff.external"):
        git(made.project, "config", key, str(program))
    (made.project / ".git" / "info" / "attributes").write_text("* diff=evil\n")
    monkeypatch.setenv("TEAMRT_HOME", str(made.project / ".teamrt"))
    for args in ([], ["--color=always"], ["--stat"]):
        code, out, _ = diff(capsysbinary, "coder-1", *args)
        assert code == 0 and b"converted" not in out
    _, out, _ = diff(capsysbinary, "coder-1")
    assert b"+    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n" in out
    assert b"+* diff=evil\n" in out
    assert not marker.exists()
    subprocess.run(["git", "diff", made.base, f"teamrt/{RUN}-coder-1"], cwd=made.project,
                   env={**os.environ, **IDENTITY}, capture_output=True, check=False)  # fmt: skip
    assert marker.exists(), "plain git runs the driver: the test would see it run"
