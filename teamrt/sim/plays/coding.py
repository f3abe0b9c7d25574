"""The coding team on ``sim``: a lead that turns failing tests into tasks and worktree agents,
coders that find and fix the bug behind their task's failures, a reviewer that comments on each
diff by mail.

Every step is chosen from what the tools returned: which tests fail and why,
where grep finds the function under test, whether the test passes after an edit,
what the diff changes and which tests cover it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field

from teamrt.models.reply import Reply
from teamrt.models.tokens import message_blocks
from teamrt.sim.plays.conversation import calls, first_text, gist, history, mail
from teamrt.sim.plays.repair import Candidate, callees, candidates, source_lines
from teamrt.sim.plays.unittest_output import Failure, failures, summary
from teamrt.sim.policy import SimRequest, ToolOutcome

SUITE = "python3 -m unittest"
REVIEW = "REVIEW"
REDO = "My workspace was lost and remade; redoing my changes to"
"""How a coder's turn that redoes what a lost workspace took begins: its replay skips that turn."""
_LOST = re.compile(r"your uncommitted changes to (.+?) are gone: redo them")
REVIEWER_BRIEF = (
    "You review the coders' fixes. Each coder mails you its diff when its tests pass. For each one,"
    " check which tests cover the changed code and whether the change touches tests, and mail the lead"
    " APPROVED or CHANGES REQUESTED with your reasons."
)


# -- the lead ----------------------------------------------------------------------------


def lead(request: SimRequest) -> Reply:
    """Every claim of the lead's answer rests on a tool's result: the suite's output, the spawn's
    report of each coder (merged or not, and what the merge queue's gates said of the merge), the
    integration branch's tip as ``git log`` shows it. What it could not check, it says it could not."""
    done = history(request)
    runs = [o for o in done if o.name == "Bash" and o.input.get("command") == SUITE]
    if not runs:
        return Reply().say("First, which tests fail.").call("Bash", {"command": SUITE})
    first = runs[0]
    if not _ran(first.output):
        return Reply().say(
            f"I could not run the test suite ({SUITE}): {gist(first.output)}. Nothing was changed."
        )
    created = [o for o in done if o.name == "task_create"]
    if not created:
        by_module: dict[str, list[Failure]] = {}
        for failure in failures(first.output):
            by_module.setdefault(failure.module, []).append(failure)
        if not by_module:
            if _green(first.output):
                return Reply().say(f"Nothing to fix: {SUITE} passes ({summary(first.output)}).")
            return Reply().say(
                f"{SUITE} fails ({summary(first.output)}), but its output names no failing test I can"
                " turn into a task. Nothing was changed."
            )
        reply = Reply().say(
            f"{sum(map(len, by_module.values()))} failing tests in {len(by_module)} modules: one task per"
            " module, a reviewer, then one coder per task."
        )
        for module, failed in by_module.items():
            description = "\n".join(
                [*(f"{f.test}: {f.error}" for f in failed), f"Check with: {SUITE} {module}"]
            )
            reply.call("task_create", {"subject": f"Make {module} pass", "description": description})
        return reply.call(
            "spawn_agent", {"kind": "team", "role": "reviewer", "directives": [REVIEWER_BRIEF], "wait": False}
        )
    spawns = calls(request, "spawn_agent")
    reviewer = None if spawns[0].is_error else _started(spawns[0].output)
    tasks = [m.groups() for o in created if (m := re.match(r"created task (\d+): Make (\S+) pass", o.output))]
    if not tasks:
        return Reply().say(
            f"I could not put the tasks on the list: {gist(created[0].output)}. Nothing was changed."
        )
    if len(spawns) < 2:
        send = (
            f" send your diff (git diff) to {reviewer} for review with send_message, and" if reviewer else ""
        )
        directives = [
            f"Claim task {task_id} with task_claim and make its tests pass by fixing the code, not the tests."
            f" Check with: {SUITE} {module}. Then run the whole suite,{send} mark the task done with"
            " task_update."
            for task_id, module in tasks
        ]
        return (
            Reply()
            .say(f"{len(tasks)} tasks; one coder each, in its own worktree, in parallel.")
            .call("spawn_agent", {"kind": "worktree", "role": "coder", "directives": directives})
        )
    coders = spawns[1]
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
    lines = _settled(first, spawns[0], coders, outcomes, merges, done)
    lines.append(_tasks(checked[0]))
    if reviewer:
        lines.append(
            f"Reviews from {reviewer} ({len(reviews)} of {len(fixed)} fixes):"
            if reviews
            else f"No review came from {reviewer}."
            if fixed
            else f"{reviewer} had no fix to review."
        )
        lines += sorted(f"- {m.body.splitlines()[0]}" for m in reviews)  # in any order they came
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
    first: ToolOutcome, reviewer_spawn: ToolOutcome, coders: ToolOutcome,
    outcomes: list[tuple[str, str, str]], merges: list[_Merge], done: list[ToolOutcome],
) -> list[str]:  # fmt: skip
    """The lead's answer, each line from a tool's result."""
    lines = []
    if reviewer_spawn.is_error:
        lines.append(f"The reviewer could not start: {gist(reviewer_spawn.output)}")
    if coders.is_error:
        lines.append(f"The coders could not start: {gist(coders.output)}")
        lines.append(f"Nothing was fixed: {SUITE} said {summary(first.output)} before, and no coder ran.")
        return lines
    lines.append(
        f"{len(merges)} of {len(outcomes)} coders merged their fixes"
        + (f" onto {merges[0].branch}." if merges else "; nothing was merged.")
    )
    if merges:
        lines.append(_integration(merges, done))
    merged = {m.coder: m.said for m in merges}  # what the gates said of each is in its own status
    for name, status, reason in outcomes:
        said = merged.get(name, reason)
        lines.append(f"- {name}: {status}" + (f" ({said})" if said else ""))
    return lines


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


def _tasks(listed: ToolOutcome) -> str:
    """How many tasks are done, as ``task_list`` showed them."""
    if listed.is_error:
        return f"I could not list the tasks: {gist(listed.output)}"
    tasks = []
    for line in listed.output.splitlines():
        try:
            task = json.loads(line)
        except ValueError:
            continue
        if isinstance(task, dict):
            tasks.append(task)
    left = [f"{t.get('subject')} ({t.get('status')})" for t in tasks if t.get("status") != "done"]
    said = f"Tasks: {len(tasks) - len(left)} of {len(tasks)} done"
    return said + (f"; not done: {', '.join(left)}." if left else ".")


def _ran(output: str) -> bool:
    """Whether unittest ran at all (its closing ``Ran N tests`` line is in the output)."""
    return re.search(r"^Ran \d+ tests?", output, re.MULTILINE) is not None


def _green(output: str) -> bool:
    return _ran(output) and re.search(r"^OK\b", output, re.MULTILINE) is not None


def _started(output: str) -> str | None:
    found = re.match(r"started (\S+?)[;,]", output)
    return found.group(1) if found else None


# -- a coder -----------------------------------------------------------------------------


@dataclass
class _Search:
    """Where a coder's repair stands, replayed from its tool calls.

    For each suspect function in turn (those the failing tests call, then what those call),
    every small change is tried against the test module, each by writing the whole file as read
    with that one change (so a try repeated after a crash does the same, and nothing needs
    undoing); one that leaves no failure is kept at once, else the one that fixes most and breaks
    nothing is written back, and the search starts again from the failures that remain. A file
    left with a try that did not help is written back as read before the next suspect is sought.
    """

    last_run: ToolOutcome | None = None
    baseline: frozenset[str] = frozenset()
    suspects: list[str] = field(default_factory=list)
    searched: int = 0
    """Suspects grepped for since the baseline run."""
    where: tuple[str, str] | None = None
    text: list[str] | None = None
    """The suspect's file as read."""
    options: list[Candidate] | None = None
    results: dict[int, frozenset[str]] = field(default_factory=dict)
    trying: int | None = None
    applying: int | None = None
    dirty: bool = False
    """The file holds a try that was not kept."""
    kept: list[Candidate] = field(default_factory=list)

    def new_baseline(self, run: ToolOutcome) -> None:
        found = failures(run.output)
        self.baseline = frozenset(f.test for f in found)
        self.suspects = list(dict.fromkeys(name for f in found for name in f.called))
        self.searched, self.where, self.text, self.options, self.results = 0, None, None, None, {}

    def best(self) -> int | None:
        """The tried change that fixes most and breaks nothing, if any fixes anything."""
        better = [(len(fails), k) for k, fails in self.results.items() if fails < self.baseline]
        return min(better)[1] if better else None

    def with_change(self, k: int) -> str:
        assert self.text is not None and self.options is not None
        option = self.options[k]
        lines = list(self.text)
        lines[option.line - 1] = lines[option.line - 1].replace(option.before, option.after)
        return "\n".join(lines) + "\n"


def coder(request: SimRequest) -> Reply:
    request = _without_redos(request)
    directive = first_text(request)
    task = re.search(r"Claim task (\d+)", directive)
    module = re.search(rf"Check with: {SUITE} ([\w.]+?)\.?(?=\s|$)", directive)
    reviewer = re.search(r"send your diff \(git diff\) to (\S+)", directive)
    if not (task and module):
        return Reply().say("My directive names no task and no test module; nothing to do.")
    check = f"{SUITE} {module.group(1)}"
    done = history(request)
    if not any(o.name == "task_claim" for o in done):
        return (
            Reply()
            .say(f"Claiming task {task.group(1)} and running its tests.")
            .call("task_claim", {"task_id": int(task.group(1))})
            .call("Bash", {"command": check})
        )
    redo = _redo(request, done)
    if redo:  # the files as it last wrote them; then on from where it was
        reply = Reply().say(f"{REDO} {', '.join(path for path, _ in redo)}.")
        for path, content in redo:
            reply.call("Write", {"file_path": path, "content": content})
        return reply
    if any(m.sender == "supervisor" and "merge" in m.summary for m in mail(request, last=True)):
        return (
            Reply().say("My branch was not merged; running my tests again.").call("Bash", {"command": check})
        )
    s = _replay(done, check)
    if s.last_run is None or s.trying is not None or s.applying is not None:  # a run cut short
        return (
            Reply().say(f"Running the tests of task {task.group(1)} again.").call("Bash", {"command": check})
        )
    if s.options is None and not _ran(s.last_run.output):  # no try in the file: the tests did not run
        return Reply().say(
            f"I could not run my task's tests ({check}): {gist(s.last_run.output)}. Giving up."
        )
    if _green(s.last_run.output):
        return _finish(done, s, check, int(task.group(1)), reviewer.group(1) if reviewer else None)
    if s.where is not None and s.options is None:
        return Reply().say(f"Reading {s.where[0]}.").call("Read", {"file_path": s.where[0]})
    if s.where is not None and s.options is not None:
        path, name = s.where
        k = len(s.results) if len(s.results) < len(s.options) else s.best()
        if k is not None:
            option = s.options[k]
            said = (
                f"{name}, change {k + 1} of {len(s.options)}: `{option.before}` -> `{option.after}`."
                if k not in s.results
                else f"The best change to {name} fixes {len(s.baseline - s.results[k])} of {len(s.baseline)}"
                " failures; keeping it and looking again."
            )
            return (
                Reply()
                .say(said)
                .call("Write", {"file_path": path, "content": s.with_change(k)})
                .call("Bash", {"command": check})
            )
    reply = Reply()
    if s.dirty and s.where is not None and s.text is not None:
        reply.call("Write", {"file_path": s.where[0], "content": "\n".join(s.text) + "\n"})
    if s.searched >= len(s.suspects):
        tried = ", ".join(s.suspects) or "the code under test"
        return reply.say(f"No small change to {tried} fixes {', '.join(sorted(s.baseline))}; giving up.")
    suspect = s.suspects[s.searched]
    return reply.say(f"Looking for {suspect}, which the failing tests depend on.").call(
        "Grep", {"pattern": rf"^\s*def {suspect}\(", "glob": "*.py", "output_mode": "content"}
    )


def _redo(request: SimRequest, done: list[ToolOutcome]) -> list[tuple[str, str]]:
    """When the supervisor's mail of the last user turn says the workspace was lost and names files whose
    changes are gone: each such file the coder wrote, with what it last wrote there."""
    lost = [
        name.strip()
        for m in mail(request, last=True)
        if m.sender == "supervisor" and (found := _LOST.search(m.body))
        for name in found.group(1).split(", ")
    ]
    written: dict[str, str] = {}
    for o in done:
        path, content = o.input.get("file_path"), o.input.get("content")
        if o.name == "Write" and not o.is_error and isinstance(path, str) and isinstance(content, str):
            written[path] = content
    return [(path, content) for path, content in written.items() if any(_same(path, n) for n in lost)]


def _same(written: str, named: str) -> bool:
    """Whether the path a call wrote is the file a notice names (relative to the workspace)."""
    written, named = written.removeprefix("./"), named.removeprefix("./")
    return written == named or written.endswith(f"/{named}")


def _without_redos(request: SimRequest) -> SimRequest:
    """The request without the coder's turns that redid what a lost workspace took: after one, the files
    are as they were, so the coder goes on as if the loss had not been (its search replays the same)."""
    messages = [
        m
        for m in request.messages
        if not (
            m.get("role") == "assistant"
            and any(
                b.get("type") == "text" and str(b.get("text", "")).startswith(REDO) for b in message_blocks(m)
            )
        )
    ]
    if len(messages) == len(request.messages):
        return request
    return dataclasses.replace(request, params={**request.params, "messages": messages})


def _replay(done: list[ToolOutcome], check: str) -> _Search:
    s = _Search()
    for o in done:
        if o.name == "Bash" and o.input.get("command") == check:
            s.last_run = o
            fails = frozenset(f.test for f in failures(o.output)) if "Ran " in o.output else None
            if s.trying is not None and s.options is not None:
                s.results[s.trying] = s.baseline | {"(broken)"} if fails is None else fails
                if fails == frozenset():
                    s.kept.append(s.options[s.trying])
                s.dirty = fails != frozenset()
                s.trying = None
            elif s.applying is not None and s.options is not None:
                s.kept.append(s.options[s.applying])
                s.applying, s.dirty = None, False
                s.new_baseline(o)
            elif s.where is None:
                s.new_baseline(o)
        elif o.name == "Grep" and s.searched < len(s.suspects):
            s.searched += 1
            s.where, s.text, s.options, s.results, s.dirty = _definition(o.output), None, None, {}, False
        elif o.name == "Read" and s.where is not None:
            s.text = source_lines(o.output)
            s.options = candidates(s.text, s.where[1])
            s.suspects += [c for c in callees(s.text, s.where[1]) if c not in s.suspects]
        elif o.name == "Write" and s.options is not None:
            k = next((i for i in range(len(s.options)) if s.with_change(i) == o.input.get("content")), None)
            if k is None:  # the file written back as read
                s.dirty = False
            elif k in s.results:
                s.applying = k
            else:
                s.trying = k
    return s


def _definition(grep_output: str) -> tuple[str, str] | None:
    """The first definition grep found outside the tests: (path, function name)."""
    for line in grep_output.splitlines():
        path, _, rest = line.partition(":")
        name = re.search(r"def (\w+)\(", rest)
        if name and path.endswith(".py") and not re.search(r"(^|/)(tests?/|test_)", path):
            return path, name.group(1)
    return None


def _finish(done: list[ToolOutcome], state: _Search, check: str, task: int, reviewer: str | None) -> Reply:
    after = done[done.index(state.last_run) + 1 :] if state.last_run in done else []
    suite = next((o for o in after if o.name == "Bash" and o.input.get("command") == SUITE), None)
    if suite is None:
        return (
            Reply()
            .say(f"{check}: {summary(state.last_run.output if state.last_run else '')}. Now the whole suite.")
            .call("Bash", {"command": SUITE})
        )
    diff = next((o for o in after if o.name == "Bash" and o.input.get("command") == "git diff"), None)
    if diff is None:
        return Reply().call("Bash", {"command": "git diff"})
    if not any(o.name == "task_update" for o in after):
        reply = Reply()
        if reviewer and diff.output.strip() and diff.output != "(no output)":
            body = f"{REVIEW} of task {task}:\n{diff.output.strip()}"
            reply.call("send_message", {"to": reviewer, "body": body, "summary": f"review task {task}"})
        return reply.call("task_update", {"task_id": task, "status": "done"})
    changes = (
        "; ".join(f"{c.before!r} -> {c.after!r} (line {c.line})" for c in state.kept)
        or "no change was needed"
    )
    lines = [
        f"Fixed task {task}: {changes}.",
        f"{check}: {summary(state.last_run.output if state.last_run else '')}.",
        f"Whole suite in my worktree: {summary(suite.output)} (other tasks' failures are other coders').",
    ]
    update = next(o for o in after if o.name == "task_update")
    if update.is_error:
        lines.append(f"I could not mark task {task} done: {gist(update.output)}")
    sent = next((o for o in after if o.name == "send_message"), None)
    if sent is not None and sent.is_error:
        lines.append(f"My diff did not reach {reviewer} for review: {gist(sent.output)}")
    return Reply().say("\n".join(lines))


# -- the reviewer ------------------------------------------------------------------------


def reviewer(request: SimRequest) -> Reply:
    inbox = mail(request)
    done = history(request)
    asked = [m for m in inbox if m.body.startswith(REVIEW)]
    answered = [o for o in done if o.name == "send_message"]
    reply = Reply()
    if len(asked) > len(answered):
        pending = asked[len(answered)]
        changed = _changed(pending.body)
        greps = [o for o in done if o.name == "Grep" and o.input.get("path") == "tests"]
        wanted = [fn for _, fn in changed if fn]
        consumed = sum(1 for m in asked[: len(answered)] if any(fn for _, fn in _changed(m.body)))
        if wanted and len(greps) <= consumed:
            pattern = rf"\b({'|'.join(sorted(set(wanted)))})\("
            return reply.say(f"Reviewing {pending.sender}'s diff: which tests cover it?").call(
                "Grep", {"pattern": pattern, "path": "tests", "output_mode": "content"}
            )
        covering = greps[-1] if wanted and greps else None
        if covering is not None and covering.is_error:
            body = (
                f"CHANGES REQUESTED for {pending.sender}: I could not check which tests cover"
                f" {', '.join(sorted(set(wanted)))} ({gist(covering.output)}); show me a test that fails"
                " without the fix."
            )
        else:
            body = _verdict(pending.sender, changed, covering.output if covering else "")
        reply.call("send_message", {"to": "lead", "body": body, "summary": f"review of {pending.sender}"})
    for shutdown in (m for m in mail(request, last=True) if m.kind == "shutdown_request"):
        reply.call("respond_shutdown", {"to": shutdown.sender, "accept": True, "request_id": shutdown.id})
    return reply if reply.content else Reply().say("Ready to review diffs as they come.")


def _changed(diff: str) -> list[tuple[str, str]]:
    """(file, function) for each changed line of a diff: the last ``def`` above it, in the hunk's
    lines or in git's hunk header ('' if none)."""
    found = []
    path = function = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[4:].removeprefix("b/")
        elif line.startswith("@@"):
            header = re.search(r"@@.*@@.*\bdef (\w+)\(", line)
            function = header.group(1) if header else ""
        elif line.startswith((" ", "+", "-")) and not line.startswith(("---", "+++")):
            defined = re.match(r"[ +-]\s*(?:async\s+)?def (\w+)\(", line)
            if defined:
                function = defined.group(1)
            elif line[0] in "+-":
                found.append((path, function))
    return list(dict.fromkeys(found))


def _verdict(author: str, changed: list[tuple[str, str]], covering: str) -> str:
    files = sorted({path for path, _ in changed})
    tests_touched = [p for p in files if re.search(r"(^|/)(tests?/|test_)", p)]
    hits = [line for line in covering.splitlines() if re.match(r"\S+:\d+:", line)]
    test_files = sorted({line.split(":")[0] for line in hits})
    functions = sorted({fn for _, fn in changed if fn})
    if tests_touched:
        return (f"CHANGES REQUESTED for {author}: the fix edits tests ({', '.join(tests_touched)});"
                " fix the code, not the tests.")  # fmt: skip
    if functions and not hits:
        return (f"CHANGES REQUESTED for {author}: no test calls {', '.join(functions)}; add one that fails"
                " without the fix.")  # fmt: skip
    return (
        f"APPROVED for {author}: {', '.join(files) or 'no files'} changed"
        + (f" in {', '.join(functions)}" if functions else "")
        + (f"; covered by {len(hits)} test lines in {', '.join(test_files)}" if hits else "")
        + "; no test was edited."
    )
