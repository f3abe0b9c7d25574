"""The simulator does not pretend: a team it plays only generically says so at the start, the example
teams' policies claim only what their tools returned, and a spawn that fails is seen, not buried.

The policies are driven here through conversations whose tool results a test chooses (a red
merge, a tip that was not checked, a spawn refused), then as a whole team on ``sim``.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.demos.examples import EXAMPLES, team_file
from teamrt.models import Reply
from teamrt.runtime.landing import gates_said
from teamrt.runtime.simnotice import SIM_UNPLAYED, sim_notice
from teamrt.runtime.spawning import SPAWN_FAILED
from teamrt.runtime.teamrun import Choices, run_team_file
from teamrt.sim import SimRequest, echo
from teamrt.sim.plays import POLICIES, coding, coding_review, research, unplayed_notice
from teamrt.sim.plays.conversation import FORK_MARK
from teamrt.store import open_reader
from teamrt.team import load_team
from teamrt.tools.commands_brief import render as commands_brief

Tool = Callable[[str, dict[str, Any]], tuple[str, bool]]
"""A test's world: a tool call's name and input to its result text and whether it is an error."""

SUITE_RED = (
    "F.\n======================================================================\n"
    "FAIL: test_leap (tests.test_dates.LeapTest.test_leap)\n"
    "----------------------------------------------------------------------\n"
    "Traceback (most recent call last):\n"
    '  File "/w/tests/test_dates.py", line 7, in test_leap\n'
    "    self.assertTrue(is_leap_year(2000))\nAssertionError: False is not true\n\n"
    "----------------------------------------------------------------------\n"
    "Ran 2 tests in 0.001s\n\nFAILED (failures=1)\n[exit code 1]"
)
CODING_GATES = commands_brief((), ("python3 -m unittest -q",))
"""What the runtime tells the coding team's lead of its gates (it runs unittest by them)."""
BRANCH = "teamrt/r1"
TIP = "a" * 40
DIFF_REVIEW = (
    "REVIEW of task 1:\ndiff --git a/kit/dates.py b/kit/dates.py\n--- a/kit/dates.py\n+++ b/kit/dates.py\n"
    "@@ -1,3 +1,3 @@\n def is_leap_year(year):\n-    return year % 4 == 0 and year % 100 != 0\n"
    "+    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)\n"
)


def mail_block(sender: str, body: str, *, kind: str = "message", n: int = 1) -> dict[str, Any]:
    return {"type": "text", "text": f'<mail id="m{n}" from="{sender}" kind="{kind}">\n{body}\n</mail>'}


def drive(
    policy: Callable[[SimRequest], Reply],
    world: Tool,
    *,
    role: str,
    team: str,
    start: list[dict[str, Any]] | None = None,
    mail: Callable[[str, dict[str, Any]], list[dict[str, Any]]] | None = None,
    turns: int = 12,
    system: str = "",
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Run ``policy`` against ``world`` until it ends its turn: (its last text, every call it made).
    ``mail``: blocks to add to the user turn that carries the result of a call (its name and input);
    ``system``: the agent's system prompt."""
    messages = start or [{"role": "user", "content": [{"type": "text", "text": "Do the work."}]}]
    made: list[tuple[str, dict[str, Any]]] = []
    for turn in range(turns):
        reply = policy(SimRequest({"model": "sim", "system": system, "messages": messages}, role, role, team))
        content = [
            {**b, "id": f"toolu_{turn}_{i}"} if b["type"] == "tool_use" else b
            for i, b in enumerate(reply.content)
        ]
        messages = [*messages, {"role": "assistant", "content": content}]
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return "\n".join(b["text"] for b in content if b["type"] == "text"), made
        results: list[dict[str, Any]] = []
        extra: list[dict[str, Any]] = []
        for use in uses:
            made.append((use["name"], use["input"]))
            output, is_error = world(use["name"], use["input"])
            block = {"type": "tool_result", "tool_use_id": use["id"], "content": output}
            results.append({**block, "is_error": True} if is_error else block)
            extra += mail(use["name"], use["input"]) if mail else []
        messages = [*messages, {"role": "user", "content": results + extra}]
    raise AssertionError(f"{role} did not end within {turns} turns")


# -- the roles no policy plays -------------------------------------------------------------


def test_a_team_of_other_roles_is_told_it_is_played_generically() -> None:
    said = unplayed_notice("mine", ["lead", "fork", "coder", "reviewer"])
    assert said == (
        "teamrt: note: sim plays this team's lead, coder, reviewer generically: each looks at the files,"
        " runs the commands the team allows and its gates, and reports only what its tools returned (a lead"
        " with coders, on failing tests, works as the coding example does); a rehearsal of the team, not its"
        " work: name a Claude model (--model) for real work"
    ), "the generic lead never forks"
    one = unplayed_notice("coding", ["lead", "coder", "tester"])
    assert one is not None and "this team's tester generically" in one, (
        "the coding roles are the coding play's"
    )
    assert unplayed_notice("mine", ["lead"], default=lambda request: Reply().say("x")) is None, "all played"


def test_a_server_without_the_generic_play_says_which_roles_only_echo() -> None:
    said = unplayed_notice("mine", ["lead", "fork", "coder", "reviewer"], default=echo)
    assert said == (
        "teamrt: note: sim plays the example teams' roles (research: lead, fork, reviewer; coding: lead,"
        " coder, reviewer); this team's lead, fork, coder, reviewer only echo their prompt: name a Claude"
        " model (--model) for real work"
    )
    assert unplayed_notice("coding", ["lead", "fork", "coder", "reviewer"]) is None, "its lead never forks"
    assert unplayed_notice("research", ["lead", "fork", "reviewer"]) is None
    one = unplayed_notice("coding", ["lead", "coder", "tester"], default=echo)
    assert one is not None and "this team's tester only echoes its prompt" in one


def test_the_notice_follows_the_team_file_and_the_server(tmp_path: Path) -> None:
    mine = tmp_path / "team.toml"
    mine.write_text('[team]\nname = "mine"\nmodel = "sim"\n[roles.coder]\n[roles.reviewer]\n')
    team = load_team(mine, project=tmp_path)
    said = sim_notice(team, load_definitions(tmp_path))
    assert said is not None and "this team's lead, coder, reviewer generically" in said
    coding_team = load_team(team_file("coding"), project=tmp_path)
    assert sim_notice(coding_team, load_definitions(tmp_path)) is None
    mine.write_text('[team]\nname = "mine"\nmodel = "claude-sonnet-5-5"\n[roles.coder]\n')
    assert sim_notice(load_team(mine, project=tmp_path), load_definitions(tmp_path)) is None


def test_the_notice_of_a_run_on_claude_never_imports_the_simulator(tmp_path: Path) -> None:
    (tmp_path / "team.toml").write_text('[team]\nmodel = "claude-sonnet-5-5"\n[roles.coder]\n')
    code = (
        "import sys\nfrom pathlib import Path\nfrom teamrt.agents import load_definitions\n"
        "from teamrt.runtime.simnotice import sim_notice\n"
        "from teamrt.team import load_team\n"
        f"p = Path({str(tmp_path)!r})\n"
        "assert sim_notice(load_team(p / 'team.toml', project=p), load_definitions(p)) is None\n"
        "assert 'teamrt.sim' not in sys.modules and 'anthropic' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_run_of_a_team_of_ones_own_on_sim_records_the_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text('[team]\nname = "mine"\nprompt = "Fix it."\n[roles.coder]\n')
    summary = asyncio.run(
        run_team_file(project / "team.toml", prompt=None, project=project, choices=Choices(model="sim"))
    )
    assert summary.outcome.answer.startswith("1 of 1 roles reported."), "the generic lead heard its coder"
    reader = open_reader(tmp_path / "home" / "runs" / summary.run_id, summary.run_id)
    try:
        [event] = reader.events(kinds=(SIM_UNPLAYED,))
    finally:
        reader.close()
    assert "this team's lead, coder generically" in event.data["note"]
    assert "a rehearsal of the team, not its work" in event.data["note"]


# -- the coding lead claims what its tools returned ---------------------------------------------


def coding_world(coders: str, *, tip: tuple[str, bool] = (TIP, False), suite: str = SUITE_RED) -> Tool:
    """The coding lead's tools: the suite fails one test, the coders' spawn reports ``coders``,
    ``git log`` on the integration branch says ``tip``."""

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "Bash" and args["command"] == coding.SUITE:
            return suite, "Ran " in suite or suite.startswith("permission")
        if name == "Bash" and args["command"].startswith("git log -1 --format=%H "):
            return tip
        if name == "task_create":
            return f"created task 1: {args['subject']}", False
        if name == "spawn_agent" and args["kind"] == "team":
            return "started reviewer; each result will arrive as mail", False
        if name == "spawn_agent":
            return coders, coders.startswith("worktree agents")
        if name == "task_list":
            done = "done" if "merged onto" in coders else "open"
            return f'{{"id": 1, "subject": "Make tests.test_dates pass", "status": "{done}"}}', False
        return "delivered m9 to reviewer", False

    return world


def coding_lead(world: Tool) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    def reviews(tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        said = "APPROVED for coder: kit/dates.py changed in is_leap_year; no test was edited."
        return [mail_block("reviewer", said)] if args.get("kind") == "worktree" else []

    return drive(coding.lead, world, role="lead", team="coding", mail=reviews, system=CODING_GATES)


def coder_ended(status: str, reason: str) -> str:
    return f"## coder: {status} ({reason})\nFixed task 1: 'x' -> 'y' (line 2).\n"


GREEN = f"merged onto {BRANCH} at {TIP[:12]}; gates passed: `python3 -m unittest -q`"
TOLERATED = f"merged onto {BRANCH} at {TIP[:12]}; 1 of 1 gates still fail, only tests that failed before"


def test_the_lead_says_the_branch_passes_only_when_the_gates_passed_at_its_tip() -> None:
    answer, calls = coding_lead(coding_world(coder_ended("done", GREEN)))
    assert ("Bash", {"command": f"git log -1 --format=%H {BRANCH}"}) in calls, "it looked at the tip"
    assert "1 of 1 coders merged their fixes onto teamrt/r1." in answer
    assert f"{BRANCH} passes at its tip {TIP[:12]}: there the merge queue's gates passed: `python3" in answer
    assert f"- coder: done (merged onto {BRANCH} at {TIP[:12]})" in answer, "the gates are said once"


def test_a_merge_that_left_tests_failing_is_not_called_green() -> None:
    answer, _ = coding_lead(coding_world(coder_ended("done", TOLERATED)))
    assert "passes at" not in answer and f"{BRANCH} is not shown to pass" in answer, answer
    assert "still fail" in answer


def test_a_red_merge_is_no_merge_and_nothing_is_claimed_of_the_branch() -> None:
    red = "not merged after 3 attempts (red); its work is kept on branch teamrt/r1-coder (worktree /w)"
    answer, calls = coding_lead(coding_world(coder_ended("failed", red)))
    assert "0 of 1 coders merged their fixes; nothing was merged." in answer, answer
    assert "passes" not in answer and not any(c[0] == "Bash" and "git log" in c[1]["command"] for c in calls)
    assert "Tasks: 0 of 1 done" in answer


@pytest.mark.parametrize(
    ("tip", "says"),
    [
        (
            ("permission denied: Bash(git log:*) is not allowed", True),
            "I could not read the tip of teamrt/r1",
        ),
        (("b" * 40, False), f"The tip of {BRANCH} (bbbbbbbbbbbb) is no merge a coder reported"),
    ],
)
def test_a_tip_that_was_not_checked_is_not_claimed(tip: tuple[str, bool], says: str) -> None:
    answer, _ = coding_lead(coding_world(coder_ended("done", GREEN), tip=tip))
    assert says in answer and "passes at" not in answer, answer


def test_a_merge_landed_again_after_a_crash_does_not_hide_the_gates_of_the_tip() -> None:
    """After a crash, a coder whose merge was made already lands again at whatever the tip is then;
    the merge that the gates passed at that tip still counts."""
    again = f"merged onto {BRANCH} at {TIP[:12]}; no gate ran: it was on the integration branch already"
    coders = (
        coder_ended("done", again) + "\n" + coder_ended("done", GREEN).replace("## coder:", "## coder-1:")
    )

    def reviews(tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
        said = "APPROVED for {}: kit/dates.py changed; no test was edited."
        both = [mail_block("reviewer", said.format(c), n=n) for n, c in ((1, "coder"), (2, "coder-1"))]
        return both if args.get("kind") == "worktree" else []

    answer, _ = drive(
        coding.lead, coding_world(coders), role="lead", team="coding", mail=reviews, system=CODING_GATES
    )
    assert "2 of 2 coders merged their fixes" in answer
    assert f"{BRANCH} passes at its tip {TIP[:12]}: there the merge queue's gates passed" in answer, answer


def test_a_suite_that_did_not_run_is_not_called_nothing_to_fix() -> None:
    world = coding_world("", suite="permission denied: python3 is not allowed")
    answer, calls = coding_lead(world)
    assert answer.startswith("I could not run the test suite (python3 -m unittest): permission denied")
    assert [c[0] for c in calls] == ["Bash"]


def test_the_lead_whose_coders_could_not_start_says_so() -> None:
    refused = "worktree agents need a git repository with a commit; /w is not in one"
    answer, calls = coding_lead(coding_world(refused))
    assert answer.startswith(f"The coders could not start: {refused}")
    assert "Nothing was fixed" in answer and "merged" not in answer and "passes" not in answer
    assert ("request_shutdown", {"agent": "reviewer", "reason": "the coders are done"}) in calls


def test_gates_said_reads_the_merge_queues_output() -> None:
    gates = ("python3 -m unittest -q",)
    assert gates_said(gates, "$ python3 -m unittest -q\nRan 9 tests\n\nOK") == (
        "gates passed: `python3 -m unittest -q`"
    )
    tolerated = (
        "$ python3 -m unittest -q\nFAILED (failures=2)\n"
        "[exit code 1, but every failing test failed before this merge too; fixed by it: a]"
    )
    assert gates_said(gates, tolerated) == (
        "`python3 -m unittest -q` still fails on the merge, as it did on the integration branch before it;"
        " no test that passed there fails now"
    )
    two = ("ruff check", *gates)
    assert gates_said(two, f"$ ruff check\n$ fake\nAll checks passed!\n{tolerated}") == (
        "`python3 -m unittest -q` still fails on the merge, as it did on the integration branch before it;"
        " no test that passed there fails now; `ruff check` passed"
    ), "each gate's own part of the output: a line of it starting with $ is not another gate"
    assert (
        gates_said(gates, "[... 9 characters cut ...]\nOK") == "the gates' output was cut; teamrt show has it"
    )
    assert gates_said((), "") == "the team has no gates"
    assert gates_said(gates, "already on the integration branch").startswith("no gate ran")


# -- the coders and the reviewers --------------------------------------------------------------


def test_a_coder_whose_tests_do_not_run_does_not_claim_a_fix() -> None:
    directive = "Claim task 1 with task_claim and fix it. Check with: python3 -m unittest tests.test_dates."

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "task_claim":
            return "you hold task 1: Make tests.test_dates pass", False
        return "[killed: the command ran past its 120 s limit]", True

    start = [{"role": "user", "content": [{"type": "text", "text": directive}]}]
    answer, _ = drive(coding.coder, world, role="coder", team="coding", start=start)
    assert answer.startswith("I could not run my task's tests (python3 -m unittest tests.test_dates)"), answer
    assert "Fixed" not in answer


def test_the_coding_reviewer_whose_grep_failed_does_not_say_no_test_covers_the_fix() -> None:
    sent: list[str] = []

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "Grep":
            return "grep: tests does not exist", True
        sent.append(args.get("body", ""))
        return "delivered m2 to lead", False

    start = [
        {"role": "user", "content": [{"type": "text", "text": "Review."}, mail_block("coder", DIFF_REVIEW)]}
    ]
    drive(coding_review.reviewer, world, role="reviewer", team="coding", start=start)
    [verdict] = sent
    assert verdict.startswith("CHANGES REQUESTED for coder: I could not check which tests cover is_leap_year")
    assert "no test calls" not in verdict


# -- the research team -----------------------------------------------------------------------


def research_world(*, reviewer: bool = True, forks: bool = True, write: bool = True) -> Tool:
    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "Bash":
            return "engine/\ncli.py", False
        if name == "spawn_agent" and args["kind"] == "team":
            return ("started reviewer; each result will arrive as mail", False) if reviewer else (
                "the run may have 2 agents; it has 2", True)  # fmt: skip
        if name == "spawn_agent":
            if not forks:
                return "the run may have 2 agents; it has 2", True
            return (
                "## lead-fork: done\n### engine/\n2 files, 10 lines; 1 definitions (run).\n"
                "Purpose: The engine.\n\n### cli.py\n1 file, 5 lines; 1 definitions (main).\n"
                "Purpose: The command line.",
                False,
            )
        if name == "Write":
            return ("wrote REPORT.md", False) if write else ("permission denied: Write(REPORT.md)", True)
        return "delivered m3 to reviewer", False

    return world


def approved(tool: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    if tool != "send_message":
        return []
    return [mail_block("reviewer", f"{research.APPROVED}: every part is covered.", n=5)]


@pytest.mark.parametrize(
    ("world", "says", "never"),
    [
        (
            research_world(),
            "Wrote REPORT.md: 2 parts, 3 files, 15 lines, surveyed by 1 forks; reviewer"
            " approved the synthesis.",
            "could not",
        ),
        (research_world(reviewer=False), "; No review: the reviewer could not start", "approved"),
        (research_world(forks=False), "2 parts, none surveyed: the forks could not start", "surveyed by"),
        (research_world(write=False), "I could not write REPORT.md (permission denied", "Wrote"),
    ],
)
def test_the_research_lead_claims_what_its_tools_returned(world: Tool, says: str, never: str) -> None:
    answer, _ = drive(research.lead, world, role="lead", team="research", mail=approved)
    assert says in answer and never not in answer, answer


def test_the_research_reviewer_does_not_approve_what_it_could_not_check() -> None:
    sent: list[str] = []

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if name == "Grep" and args.get("output_mode") == "count":
            return "grep: stopped after 30 s; narrow the pattern, path or glob", True
        if name == "Grep":
            return "(no matches)", False
        if name == "Bash":
            return "cli.py", False
        sent.append(args.get("body", ""))
        return "delivered m4 to lead", False

    synthesis = mail_block("lead", f"{research.SYNTHESIS}: 1 parts, 5 lines.\n- cli.py: 1 file, 5 lines.")
    start = [{"role": "user", "content": [{"type": "text", "text": "Review."}, synthesis]}]
    drive(research.reviewer, world, role="reviewer", team="research", start=start)
    [verdict] = sent
    assert verdict.startswith(
        f"{research.CHALLENGES}:\n1. I could not count the lines of the tree: grep: stopped"
    )


def test_the_research_reviewer_checks_the_answers_before_approving_them() -> None:
    raised = f"{research.CHALLENGES}:\n1. Open markers left in the code: a.py:3\n2. The synthesis misses b/."
    assert research._check_answers(
        raised, f"{research.ANSWERS}:\n1. a.py:3 `# TODO`", "a.py:3:# TODO"
    ).startswith(f"{research.NOT_APPROVED}: the answers leave open what I raised: points 2 have no answer")
    answers = f"{research.ANSWERS}:\n1. Each is quoted: a.py:4 `x`\n2. Agreed."
    assert "a.py:4 are not lines my grep found" in research._check_answers(raised, answers, "a.py:3:# TODO")
    good = f"{research.ANSWERS}:\n1. Each is quoted: a.py:3 `# TODO`\n2. Agreed."
    assert research._check_answers(raised, good, "a.py:3:# TODO").startswith(
        f"{research.APPROVED}: the answers address all 2 points"
    )


def test_a_fork_whose_count_failed_does_not_report_zero_lines() -> None:
    start = [
        {"role": "user", "content": [{"type": "text", "text": "Survey."}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_s", "name": "spawn_agent",
                                           "input": {"kind": "fork", "directives": ["x"]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s",
                                      "content": FORK_MARK + " go"},
                                     {"type": "text", "text": "Survey it.\nParts: engine/"}]},
    ]  # fmt: skip

    def world(name: str, args: dict[str, Any]) -> tuple[str, bool]:
        if args.get("output_mode") == "count":
            return "grep: engine/ does not exist", True
        return "(no matches)", False

    answer, _ = drive(research.fork, world, role="fork", team="research", start=start)
    assert "could not count its lines (grep: engine/ does not exist)" in answer and "0 lines" not in answer
    assert "not stated in the code" not in answer, "nothing was read, so nothing is said of its purpose"


# -- a spawn that fails ---------------------------------------------------------------------


def test_the_coding_team_outside_git_ends_saying_its_coders_could_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = tmp_path / "plain"
    shutil.copytree(EXAMPLES / "coding-team" / "repo", project)
    summary = asyncio.run(
        run_team_file(team_file("coding"), prompt=None, project=project, choices=Choices(model="sim"))
    )
    outcome = summary.outcome
    assert outcome.status == "done", outcome
    assert outcome.answer.startswith("The coders could not start: worktree agents need a git repository")
    assert "merged" not in outcome.answer and "passes" not in outcome.answer
    assert outcome.reason is not None and outcome.reason.startswith(
        "1 spawn failed; the first: lead could not start worktree coder agents: worktree agents need"
    )
    reader = open_reader(tmp_path / "home" / "runs" / summary.run_id, summary.run_id)
    try:
        [failed] = reader.events(kinds=(SPAWN_FAILED,))
        assert failed.agent == "lead"
        assert {k: failed.data[k] for k in ("agent", "kind", "role", "children")} == {
            "agent": "lead", "kind": "worktree", "role": "coder", "children": 3,
        }  # fmt: skip
        assert "git repository" in failed.data["reason"]
        run = reader.run()
        assert (run.status, run.status_reason) == ("done", outcome.reason)
        assert not reader.events(kinds=(SIM_UNPLAYED,)), "sim plays the coding team"
        assert [t.status for t in reader.tasks()] == ["abandoned"] * 3, "nobody could start them"
    finally:
        reader.close()


def test_the_example_policies_are_the_ones_named() -> None:
    assert sorted(POLICIES) == [
        "coding/coder", "coding/lead", "coding/reviewer",
        "research/fork", "research/lead", "research/reviewer",
    ]  # fmt: skip
