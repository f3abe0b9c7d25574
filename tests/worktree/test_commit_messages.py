"""The commits teamrt makes of an agent's work, and their merges: a subject, a body, trailers, nothing an
agent can turn into a terminal's instruction or a trailer of its own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer
from teamrt.worktree.message import Work, commit_message, headline, merge_message, one_line
from tests.helpers.git import git, make_repo, run_worktree_team
from tests.worktree.test_worktree import APP, CHECK, CHECK_PY, lead_spawning, team_toml

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_repo(
        tmp_path / "project",
        {"app.py": APP, "check.py": CHECK_PY, "README": "hello\n", "team.toml": team_toml([CHECK])},
    )


def coder_saying(answer: str, *, task: str | None = None):  # type: ignore[no-untyped-def]
    """Fixes add (claiming a task of subject ``task`` first, when given), then answers ``answer``."""

    def coder(request: SimRequest) -> Reply:
        if task is not None and request.calls("task_create") == 0:
            return Reply().call("task_create", {"subject": task})
        if task is not None and request.calls("task_claim") == 0:
            return Reply().call("task_claim", {"task_id": 1})
        if request.calls("Edit") == 0:
            return Reply().call("Edit", {"file_path": "app.py", "old_string": "a - b", "new_string": "a + b"})
        return Reply().say(answer)

    return coder


# -- the messages themselves ------------------------------------------------------------


def test_a_commit_has_the_summarys_headline_as_subject_the_rest_wrapped_and_trailers() -> None:
    summary = (
        "## Summary\n\nFixed add in app.py.\n\nIt subtracted instead of adding; every caller of add in the"
        " module now gets the sum, and check.py passes again without any change to the tests themselves."
    )
    work = Work("coder-1", summary, task='#3 "fix add"', run="r7")
    assert commit_message(work) == (
        "Fixed add in app.py.\n\n"
        "It subtracted instead of adding; every caller of add in the module now\n"
        "gets the sum, and check.py passes again without any change to the tests\n"
        "themselves.\n\n"
        'Agent: coder-1\nTask: #3 "fix add"\nRun: r7\n'
    )


def test_a_long_headline_is_cut_between_words_and_kept_whole_in_the_body() -> None:
    said = "Rewrote the tokenizer so that nested brackets and escaped quotes parse in linear time"
    message = commit_message(Work("coder", said, run="r1"))
    subject, body, trailers = message.split("\n\n")
    assert subject == "Rewrote the tokenizer so that nested brackets and escaped quotes..."
    assert len(subject) <= 72 and said.startswith(subject[:-3])
    assert body == "Rewrote the tokenizer so that nested brackets and escaped quotes parse\nin linear time"
    assert trailers == "Agent: coder\nRun: r1\n"
    assert one_line("x" * 80) == "x" * 69 + "...", "one word longer than the line: cut where it must be"


def test_an_agent_that_said_nothing_gets_its_tasks_title_and_a_kept_branch_says_why() -> None:
    note, title = "Not merged: coder ended stopped.", "speed up the parser"
    work = Work("coder", "", task=f'#2 "{title}"', run="r1", note=note, task_title=title)
    assert commit_message(work) == (
        "speed up the parser\n\nNot merged: coder ended stopped.\n\n"
        'Agent: coder\nTask: #2 "speed up the parser"\nRun: r1\n'
    )
    assert headline("# Done\n\n- **Fixed** the parser\n") == "Fixed the parser"


def test_a_merge_names_the_agent_what_it_did_and_how_its_gates_passed() -> None:
    work = Work("coder", "Fixed add.", task="Fix add in app.py.", run="r1")
    assert merge_message(work, ["`pytest -q`", "`ruff check` [exit code 1, but ...]"]) == (
        "Merge coder: Fixed add.\n\nGates passed:\n- `pytest -q`\n- `ruff check` [exit code 1, but ...]\n\n"
        "Agent: coder\nTask: Fix add in app.py.\nRun: r1\n"
    )
    assert "No gates: the team has none." in merge_message(work, ())
    assert "The gates have not run yet." in merge_message(work, None)


# -- on a run ---------------------------------------------------------------------------------


def test_a_worktree_agents_commit_and_its_merge_carry_subject_body_and_trailers(
    project: Path, sim: SimServer
) -> None:
    sim.policies.update({
        "lead": lead_spawning("Fix add in app.py.\nIt subtracts."),
        "coder": coder_saying("Fixed add: it returns a + b.\n\ncheck.py passes now."),
    })  # fmt: skip
    outcome, _ = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    assert git(project, "log", "-1", "--format=%B", "teamrt/r1-coder") == (
        "Fixed add: it returns a + b.\n\ncheck.py passes now.\n\n"
        "Agent: coder\nTask: Fix add in app.py. It subtracts.\nRun: r1"
    )
    assert git(project, "log", "-1", "--format=%B", "teamrt/r1") == (
        f"Merge coder: Fixed add: it returns a + b.\n\nGates passed:\n- `{CHECK}`\n\n"
        "Agent: coder\nTask: Fix add in app.py. It subtracts.\nRun: r1"
    )
    assert git(project, "rev-parse", "teamrt/r1^2") == git(project, "rev-parse", "teamrt/r1-coder")


def test_a_claimed_task_is_named_by_number_and_subject(project: Path, sim: SimServer) -> None:
    sim.policies.update({
        "lead": lead_spawning("Fix add in app.py."),
        "coder": coder_saying("Fixed add.", task="fix add"),
    })  # fmt: skip
    outcome, _ = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    trailers = git(project, "log", "-1", "--format=%(trailers)", "teamrt/r1-coder")
    assert trailers == 'Agent: coder\nTask: #1 "fix add"\nRun: r1'


@pytest.mark.hostile
def test_an_agents_summary_cannot_forge_trailers_or_reach_the_terminal_through_git_log(
    project: Path, sim: SimServer
) -> None:
    forged = (
        "Fixed add\x1b]0;owned\x07 \x1b[2J\r\n\rAgent: lead\nTask: none\rRun: r0\n---\nAgent: root\n"
        "\u202eevil\x9b31m\n\nSigned-off-by: Mallory <m@example.invalid>"
    )
    sim.policies.update({
        "lead": lead_spawning("Fix add\x1b[31m in app.py.\r\nAgent: lead"),
        "coder": coder_saying(forged, task="fix\x1b]52;c;bad\x07 add\nRun: r0"),
    })  # fmt: skip
    outcome, _ = run_worktree_team(project, sim, "Fix the bug.")
    assert outcome.status == "done", outcome
    for ref in ("teamrt/r1-coder", "teamrt/r1"):
        shown = git(project, "log", "-1", "--format=%B", ref)
        assert not CONTROLS.search(shown), shown
        trailers = git(project, "log", "-1", "--format=%(trailers:only)", ref)
        assert trailers == 'Agent: coder\nTask: #1 "fix]52;c;bad add Run: r0"\nRun: r1', trailers
        parsed = subprocess.run(["git", "interpret-trailers", "--parse"], input=shown + "\n", cwd=project,
                                capture_output=True, text=True, check=True)  # fmt: skip
        assert parsed.stdout.strip() == trailers, "git's own parser finds only teamrt's trailers"
    assert git(project, "log", "-1", "--format=%s", "teamrt/r1-coder") == "Fixed add]0;owned [2J"
