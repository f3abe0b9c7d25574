"""The coding team on ``sim``: a lead that turns failing tests into tasks and worktree agents,
coders that find and fix the bug behind their task's failures, a reviewer that comments on each
diff by mail.

Every step is chosen from what the tools returned: which tests fail and why,
where grep finds the function under test, whether the test passes after an edit,
what the diff changes and which tests cover it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...reply import Reply
from ..policy import SimRequest, ToolOutcome
from .conversation import calls, first_text, history, mail
from .repair import Candidate, callees, candidates, source_lines
from .unittest_output import Failure, failures, summary

SUITE = "python3 -m unittest"
REVIEW = "REVIEW"
REVIEWER_BRIEF = (
    "You review the coders' fixes. Each coder mails you its diff when its tests pass. For each one,"
    " check which tests cover the changed code and whether the change touches tests, and mail the lead"
    " APPROVED or CHANGES REQUESTED with your reasons."
)


# -- the lead ----------------------------------------------------------------------------


def lead(request: SimRequest) -> Reply:
    done = history(request)
    runs = [o for o in done if o.name == "bash" and o.input.get("command") == SUITE]
    if not runs:
        return Reply().say("First, which tests fail.").call("bash", {"command": SUITE})
    created = [o for o in done if o.name == "task_create"]
    if not created:
        by_module: dict[str, list[Failure]] = {}
        for failure in failures(runs[0].output):
            by_module.setdefault(failure.module, []).append(failure)
        if not by_module:
            return Reply().say(f"Nothing to fix: {summary(runs[0].output)}.")
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
    reviewer = _started(spawns[0].output) or "reviewer"
    tasks = [m.groups() for o in created if (m := re.match(r"created task (\d+): Make (\S+) pass", o.output))]
    if len(spawns) < 2:
        directives = [
            f"Claim task {task_id} with task_claim and make its tests pass by fixing the code, not the tests."
            f" Check with: {SUITE} {module}. Then run the whole suite, send your diff (git diff) to"
            f" {reviewer} for review with send_message, and mark the task done with task_update."
            for task_id, module in tasks
        ]
        return (
            Reply()
            .say(f"{len(tasks)} tasks; one coder each, in its own worktree, in parallel.")
            .call("spawn_agent", {"kind": "worktree", "role": "coder", "directives": directives})
        )
    outcomes = re.findall(r"^## (\S+): (\w+)(?: \((.*)\))?$", spawns[1].output, re.MULTILINE)
    merged = [name for name, status, reason in outcomes if status == "done" and "merged" in (reason or "")]
    reviews = [
        m for m in mail(request) if m.sender == reviewer and m.body.startswith(("APPROVED", "CHANGES"))
    ]
    fixed = re.findall(r"^## (\S+): done .*\nFixed task", spawns[1].output, re.MULTILINE)
    asked = [o for o in done if o.name == "request_shutdown"]
    if len(reviews) < len(fixed) and not asked:
        return Reply().say(f"{len(reviews)} of {len(fixed)} reviews are in; waiting for {reviewer}.")
    if not asked:
        return (
            Reply()
            .say("Every fix is merged and reviewed. Checking the task list, then letting the reviewer go.")
            .call("task_list", {})
            .call("request_shutdown", {"agent": reviewer, "reason": "every fix is merged and reviewed"})
        )
    lines = [
        f"{len(merged)} of {len(outcomes)} coders merged their fixes; the integration branch passes {SUITE}."
    ]
    for name, status, reason in outcomes:
        lines.append(f"- {name}: {status}" + (f" ({reason})" if reason else ""))
    lines.append(f"Reviews from {reviewer}:")
    lines += sorted(f"- {m.body.splitlines()[0]}" for m in reviews)  # in any order they came
    return Reply().say("\n".join(lines))


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
            .call("bash", {"command": check})
        )
    if any(m.sender == "supervisor" and "merge" in m.summary for m in mail(request, last=True)):
        return (
            Reply().say("My branch was not merged; running my tests again.").call("bash", {"command": check})
        )
    s = _replay(done, check)
    if s.last_run is None or s.trying is not None or s.applying is not None:  # a run cut short
        return (
            Reply().say(f"Running the tests of task {task.group(1)} again.").call("bash", {"command": check})
        )
    if not failures(s.last_run.output):
        return _finish(done, s, check, int(task.group(1)), reviewer.group(1) if reviewer else None)
    if s.where is not None and s.options is None:
        return Reply().say(f"Reading {s.where[0]}.").call("read", {"file_path": s.where[0]})
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
                .call("write", {"file_path": path, "content": s.with_change(k)})
                .call("bash", {"command": check})
            )
    reply = Reply()
    if s.dirty and s.where is not None and s.text is not None:
        reply.call("write", {"file_path": s.where[0], "content": "\n".join(s.text) + "\n"})
    if s.searched >= len(s.suspects):
        tried = ", ".join(s.suspects) or "the code under test"
        return reply.say(f"No small change to {tried} fixes {', '.join(sorted(s.baseline))}; giving up.")
    suspect = s.suspects[s.searched]
    return reply.say(f"Looking for {suspect}, which the failing tests depend on.").call(
        "grep", {"pattern": rf"^\s*def {suspect}\(", "glob": "*.py", "output_mode": "content"}
    )


def _replay(done: list[ToolOutcome], check: str) -> _Search:
    s = _Search()
    for o in done:
        if o.name == "bash" and o.input.get("command") == check:
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
        elif o.name == "grep" and s.searched < len(s.suspects):
            s.searched += 1
            s.where, s.text, s.options, s.results, s.dirty = _definition(o.output), None, None, {}, False
        elif o.name == "read" and s.where is not None:
            s.text = source_lines(o.output)
            s.options = candidates(s.text, s.where[1])
            s.suspects += [c for c in callees(s.text, s.where[1]) if c not in s.suspects]
        elif o.name == "write" and s.options is not None:
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
    suite = next((o for o in after if o.name == "bash" and o.input.get("command") == SUITE), None)
    if suite is None:
        return (
            Reply()
            .say(f"{check}: {summary(state.last_run.output if state.last_run else '')}. Now the whole suite.")
            .call("bash", {"command": SUITE})
        )
    diff = next((o for o in after if o.name == "bash" and o.input.get("command") == "git diff"), None)
    if diff is None:
        return Reply().call("bash", {"command": "git diff"})
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
    return Reply().say(
        f"Fixed task {task}: {changes}.\n{check}: {summary(state.last_run.output if state.last_run else '')}."
        f"\nWhole suite in my worktree: {summary(suite.output)} (other tasks' failures are other coders')."
    )


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
        greps = [o for o in done if o.name == "grep" and o.input.get("path") == "tests"]
        wanted = [fn for _, fn in changed if fn]
        consumed = sum(1 for m in asked[: len(answered)] if any(fn for _, fn in _changed(m.body)))
        if wanted and len(greps) <= consumed:
            pattern = rf"\b({'|'.join(sorted(set(wanted)))})\("
            return reply.say(f"Reviewing {pending.sender}'s diff: which tests cover it?").call(
                "grep", {"pattern": pattern, "path": "tests", "output_mode": "content"}
            )
        covering = greps[-1].output if wanted and greps else ""
        body = _verdict(pending.sender, changed, covering)
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
