"""The coding lead on ``sim``: it runs the suite, puts one task per failing test module on the list, starts a
reviewer and one worktree coder per task, and answers with what merged and what the merge queue's gates
said. The coding example's lead, and the lead of any team with a coder role given a task about failing
tests (``generic.play``), which hands what is not a test failure back to the generic lead.

It plays one round at a time: what it was asked is the newest user turn with text of its own (the
prompt, or a follow-up from ``teamrt continue``), and only the calls and mail since then count, so a
second round runs the tests again and starts coders of its own. Test files the task names restrict the
work to them (the other failures are named in the answer as left alone), and a test command the task
quotes (```pytest -q```; else the one an earlier round's task quoted, which stands as an instruction
would for Claude) is what the coders are told to check with, the team's own command named as the one
to use if that is refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from teamrt.models.reply import Reply
from teamrt.sim.plays.conversation import gist, history, mail, roles, round_tasks, this_round
from teamrt.sim.plays.groundwork import inert
from teamrt.sim.plays.suites import PYTEST_SIGNS, Suite, found, told
from teamrt.sim.plays.testtask import check_command, named_tests, names
from teamrt.sim.plays.unittest_output import Failure
from teamrt.sim.policy import SimRequest, ToolOutcome
from teamrt.tools.commands_brief import parse as commands_told

REVIEWER_BRIEF = (
    "You review the coders' fixes. Each coder mails you its diff when its tests pass. For each one,"
    " check which tests cover the changed code and whether the change touches tests, and mail the lead"
    " APPROVED or CHANGES REQUESTED with your reasons."
)
REFUSED_LINE = "Refused, not run again:"
"""How a line of a coder's answer about a command the team's rules refused begins; the lead repeats it."""
Otherwise = Callable[[SimRequest, str], Reply]
"""What plays the lead when there is no test failure to fix: the request, and what the suite showed."""


@dataclass(frozen=True)
class _Roles:
    coder: str
    reviewer: str | None


def team_roles(system: str) -> _Roles | None:
    """The roles a coding lead starts, from those its system prompt lists: a coder role (``coder``, else
    one whose name says it codes) and a reviewer role if there is one. With no list (a bare prompt), the
    coding example's ``coder`` and ``reviewer``; None when the listed roles include no coder."""
    listed = [name for name, _ in roles(system)]
    if not listed:
        return _Roles("coder", "reviewer")
    coder = next((n for n in listed if n == "coder"), None) or next(
        (n for n in listed if re.search(r"cod(er|ing)|develop|engineer|fixer", n, re.IGNORECASE)), None
    )
    if coder is None:
        return None
    reviewer = next((n for n in listed if n != coder and re.search(r"review", n, re.IGNORECASE)), None)
    return _Roles(coder, reviewer)


def lead(request: SimRequest, otherwise: Otherwise | None = None) -> Reply:
    """Every claim of the lead's answer rests on a tool's result: the suite's output, the spawn's
    report of each coder (merged or not, and what the merge queue's gates said of the merge), the
    integration branch's tip as ``git log`` shows it. What it could not check, it says it could not.
    ``otherwise``: who answers when the suite shows no failure to fix (else the lead says so itself)."""
    team = team_roles(request.system) or _Roles("coder", "reviewer")
    asked_before = round_tasks(request)
    task = asked_before.pop() if asked_before else ""
    request = this_round(request)
    done = history(request)
    suite = _suite(request, done)
    if suite is None:
        return (
            Reply()
            .say("Which test runner does this repository use?")
            .call("Grep", {"pattern": PYTEST_SIGNS, "output_mode": "files_with_matches"})
        )
    runs = [o for o in done if o.name == "Bash" and o.input.get("command") == suite.command]
    if not runs:
        return Reply().say("First, which tests fail.").call("Bash", {"command": suite.command})
    first = runs[0]
    if not suite.ran(first.output):
        said = f"I could not run the test suite ({suite.command}): {gist(first.output)}."
        return otherwise(request, said) if otherwise else Reply().say(f"{said} Nothing was changed.")
    named = named_tests(task)
    by_module: dict[str, list[Failure]] = {}
    for failure in suite.failures(first.output):
        by_module.setdefault(failure.module, []).append(failure)
    if not by_module:
        if suite.green(first.output):
            said = f"{suite.command} passes ({suite.summary(first.output)})."
            return otherwise(request, said) if otherwise else Reply().say(f"Nothing to fix: {said}")
        said = (f"{suite.command} fails ({suite.summary(first.output)}), but its output names no failing test"
                " I can turn into a task.")  # fmt: skip
        return otherwise(request, said) if otherwise else Reply().say(f"{said} Nothing was changed.")
    chosen = {m: f for m, f in by_module.items() if not named or names(m, named)}
    left = _left_alone(by_module, chosen, named)
    if not chosen:
        return Reply().say(
            f"Nothing to fix: {', '.join(named)} {'does' if len(named) == 1 else 'do'} not fail here"
            f" ({suite.command}: {suite.summary(first.output)}). {left} Nothing was changed."
        )
    created = [o for o in done if o.name == "task_create"]
    if not created:
        return _plan(suite, chosen, left, team)
    tasks = [
        (m.group(1), m.group(2))
        for o in created
        if (m := re.match(r"created task (\d+): Make (\S+) pass", o.output))
    ]
    if not tasks:
        return Reply().say(
            f"I could not put the tasks on the list: {gist(created[0].output)}. Nothing was changed."
        )
    spawns = [o for o in done if o.name == "spawn_agent"]
    reviewer_spawn = next((o for o in spawns if o.input.get("kind") == "team"), None)
    reviewer = None if reviewer_spawn is None or reviewer_spawn.is_error else _started(reviewer_spawn.output)
    coders = next((o for o in spawns if o.input.get("kind") == "worktree"), None)
    if coders is None:
        runner = "pytest" if suite.pytest else "unittest"
        asked = next(  # a command asked for once stands in the rounds after, as it would for Claude
            (c for t in [task, *reversed(asked_before)] if (c := check_command(t, runner, named_tests(t)))),
            None,
        )
        directives = [_directive(suite, int(i), module, asked, reviewer) for i, module in tasks]
        return (
            Reply()
            .say(f"{len(tasks)} tasks; one coder each, in its own worktree, in parallel.")
            .call("spawn_agent", {"kind": "worktree", "role": team.coder, "directives": directives})
        )
    return _after_coders(request, done, suite, first, reviewer_spawn, reviewer, coders, tasks, left)


def _plan(suite: Suite, chosen: dict[str, list[Failure]], left: str, team: _Roles) -> Reply:
    """The first step of the work: one task per failing module the task is about, and the reviewer."""
    reply = Reply().say(
        f"{sum(map(len, chosen.values()))} failing tests in {len(chosen)} modules: one task per module"
        + (", a reviewer," if team.reviewer else ",")
        + " then one coder per task."
        + (f" {left}" if left else "")
    )
    for module, failed in chosen.items():
        description = "\n".join(
            [*(f"{f.test}: {f.error}" for f in failed), f"Check with: {suite.check(module)}"]
        )
        reply.call("task_create", {"subject": f"Make {module} pass", "description": description})
    if team.reviewer:
        reply.call(
            "spawn_agent",
            {"kind": "team", "role": team.reviewer, "directives": [REVIEWER_BRIEF], "wait": False},
        )
    return reply


def _directive(suite: Suite, task_id: int, module: str, asked: str | None, reviewer: str | None) -> str:
    """A coder's directive: its task, the command to check it with (the one the task quoted, the
    suite's as the one to use if that is refused), the whole suite, the reviewer to mail its diff."""
    check = suite.check(module)
    if asked and asked != suite.command:
        check = f"{asked} {module} (if that is refused: {check})"
    send = f" send your diff (git diff) to {reviewer} for review with send_message, and" if reviewer else ""
    return (
        f"Claim task {task_id} with task_claim and make its tests pass by fixing the code, not the tests."
        f" Check with: {check}. Then run the whole suite (`{suite.command}`),{send} mark the task done"
        " with task_update."
    )


def _left_alone(
    by_module: dict[str, list[Failure]], chosen: dict[str, list[Failure]], named: list[str]
) -> str:
    """The line saying which failing modules the task did not name, so no one touches them ('' if none)."""
    others = [f"{m} ({len(f)} failing)" for m, f in by_module.items() if m not in chosen]
    if not others:
        return ""
    return (
        f"Left alone, as the task names only {', '.join(named)}: {', '.join(others)}, failing in my checkout."
    )


def _after_coders(
    request: SimRequest, done: list[ToolOutcome], suite: Suite, first: ToolOutcome,
    reviewer_spawn: ToolOutcome | None, reviewer: str | None, coders: ToolOutcome,
    tasks: list[tuple[str, str]], left: str,
) -> Reply:  # fmt: skip
    """Once the coders have answered: the reviews, the task list, the integration branch's tip, the
    reviewer let go, then the answer."""
    outcomes = (
        [] if coders.is_error else re.findall(r"^## (\S+): (\w+)(?: \((.*)\))?$", coders.output, re.MULTILINE)
    )
    reviews = [
        m
        for m in mail(request)
        if reviewer and m.sender == reviewer and m.body.startswith(("APPROVED", "CHANGES"))
    ]
    fixed = (
        [] if coders.is_error else re.findall(r"^## (\S+): done .*\nFixed task", coders.output, re.MULTILINE)
    )
    checked = [o for o in done if o.name == "task_list"]
    idle = any(
        m.sender == "supervisor" and m.body == f"{reviewer} is idle." for m in mail(request, last=True)
    )
    if reviewer and len(reviews) < len(fixed) and not checked and not idle:
        return Reply().say(f"{len(reviews)} of {len(fixed)} reviews are in; waiting for {reviewer}.")
    merges = [
        _Merge(name, m.group(0), m.group(1), m.group(2), reason)
        for name, status, reason in outcomes
        if status == "done" and (m := re.match(r"merged onto (\S+) at (\w+)", reason or ""))
    ]
    log = f"git log -1 --format=%H {merges[0].branch}" if merges else None
    wanted: list[tuple[str, dict[str, str]]] = []  # all at once; after a crash, what it cut short again
    if not checked:
        wanted.append(("task_list", {}))
    if log is not None and not any(o.name == "Bash" and o.input.get("command") == log for o in done):
        wanted.append(("Bash", {"command": log}))
    if reviewer and not any(o.name == "request_shutdown" for o in done):
        wanted.append(("request_shutdown", {"agent": reviewer, "reason": "the coders are done"}))
    if wanted:
        said = (
            "Every coder has answered. Checking the task list and the integration branch's tip"
            if not coders.is_error
            else "The coders could not start. Checking the task list"
        )
        reply = Reply().say(said + (", then letting the reviewer go." if reviewer else "."))
        for name, args in wanted:
            reply.call(name, args)
        return reply
    lines = _settled(suite, first, reviewer_spawn, coders, outcomes, merges, done)
    lines.append(_tasks(checked[0], {int(i) for i, _ in tasks}))
    if reviewer:
        lines.append(
            f"Reviews from {reviewer} ({len(reviews)} of {len(fixed)} fixes):"
            if reviews
            else f"No review came from {reviewer}."
            if fixed
            else f"{reviewer} had no fix to review."
        )
        lines += sorted(f"- {m.body.splitlines()[0]}" for m in reviews)  # in any order they came
    if left:
        lines.append(left)
    return Reply().say("\n".join(lines))


@dataclass(frozen=True)
class _Merge:
    """A coder whose work the spawn's report says was merged, and what it says of the merge."""

    coder: str
    said: str
    """``merged onto BRANCH at COMMIT``."""
    branch: str
    commit: str
    reason: str
    """The whole reason, with what the gates said of the merge."""


def _settled(
    suite: Suite, first: ToolOutcome, reviewer_spawn: ToolOutcome | None, coders: ToolOutcome,
    outcomes: list[tuple[str, str, str]], merges: list[_Merge], done: list[ToolOutcome],
) -> list[str]:  # fmt: skip
    """The lead's answer, each line from a tool's result."""
    lines = []
    if reviewer_spawn is not None and reviewer_spawn.is_error:
        lines.append(f"The reviewer could not start: {gist(reviewer_spawn.output)}")
    if coders.is_error:
        lines.append(f"The coders could not start: {gist(coders.output)}")
        lines.append(
            f"Nothing was fixed: {suite.command} said {suite.summary(first.output)} before, and no coder ran."
        )
        return lines
    lines.append(
        f"{len(merges)} of {len(outcomes)} coders merged their fixes"
        + (f" onto {merges[0].branch}." if merges else "; nothing was merged.")
    )
    if merges:
        lines.append(_integration(merges, done))
    merged = {m.coder: m.said for m in merges}  # what the gates said of each is in its own status
    refusals = _refusals(coders.output)
    for name, status, reason in outcomes:
        said = merged.get(name, reason)
        lines.append(f"- {name}: {status}" + (f" ({said})" if said else ""))
        lines += [f"  {line}" for line in refusals.get(name, [])]
    return lines


def _refusals(report: str) -> dict[str, list[str]]:
    """The lines of each coder's answer about a command it was refused, made inert."""
    found: dict[str, list[str]] = {}
    name = None
    for line in report.splitlines():
        head = re.match(r"^## (\S+): ", line)
        if head:
            name = head.group(1)
        elif name and line.startswith(REFUSED_LINE):
            found.setdefault(name, []).append(inert(line))
    return found


def _integration(merges: list[_Merge], done: list[ToolOutcome]) -> str:
    """What is known of the integration branch: the gates' verdict on the merge that is its tip."""
    branch = merges[0].branch
    command = f"git log -1 --format=%H {branch}"
    log = next((o for o in done if o.name == "Bash" and o.input.get("command") == command), None)
    if log is None or log.is_error or not re.fullmatch(r"[0-9a-f]{40}", log.output.strip()):
        said = gist(log.output) if log is not None else "not checked"
        return f"I could not read the tip of {branch} ({said}), so I do not claim it passes."
    tip = log.output.strip()
    last = [m for m in merges if tip.startswith(m.commit)]
    if not last:
        return f"The tip of {branch} ({tip[:12]}) is no merge a coder reported, so I do not claim it passes."
    green = next((g for m in last if (g := re.search(r"; (gates passed: .*)$", m.reason))), None)
    if green:
        return f"{branch} passes at its tip {tip[:12]}: there the merge queue's {green.group(1)}."
    said = last[0].reason.partition("; ")[2] or "the merge queue gave no gate result"
    return f"{branch} is not shown to pass at its tip {tip[:12]}: {said}."


def _tasks(listed: ToolOutcome, ids: set[int]) -> str:
    """How many of this round's tasks (``ids``) are done, as ``task_list`` showed them."""
    if listed.is_error:
        return f"I could not list the tasks: {gist(listed.output)}"
    tasks = []
    for line in listed.output.splitlines():
        try:
            task = json.loads(line)
        except ValueError:
            continue
        if isinstance(task, dict) and task.get("id") in ids:
            tasks.append(task)
    left = [f"{t.get('subject')} ({t.get('status')})" for t in tasks if t.get("status") != "done"]
    said = f"Tasks: {len(tasks) - len(left)} of {len(tasks)} done"
    return said + (f"; not done: {', '.join(left)}." if left else ".")


def _suite(request: SimRequest, done: list[ToolOutcome]) -> Suite | None:
    """The suite the lead runs: the one a gate or allow rule names, else what its Grep for pytest's signs
    found; None before that Grep."""
    named = told(commands_told(request.system))
    if named is not None:
        return named
    grep = next((o for o in done if o.name == "Grep" and o.input.get("pattern") == PYTEST_SIGNS), None)
    return None if grep is None else found(grep.output, grep.is_error)


def _started(output: str) -> str | None:
    started = re.match(r"started (\S+?)[;,]", output)
    return started.group(1) if started else None
