"""The coding team on ``sim``: a lead that turns failing tests into tasks and worktree agents
(``coding_lead``), coders that find and fix the bug behind their task's failures (here), a reviewer
that comments on each diff by mail (``coding_review``).

Every step is chosen from what the tools returned: which tests fail and why,
where grep finds the function under test, whether the test passes after an edit,
what the diff changes and which tests cover it. A coder checks with the command its
directive names, as Claude would even where no rule allows it (the team's rules then
ask the person or refuse); a refused command is said so and never run again, and
the coder goes on with the team's own command its directive names for that case.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from teamrt.models.reply import Reply
from teamrt.models.tokens import message_blocks
from teamrt.sim.plays import coding_lead
from teamrt.sim.plays.coding_lead import REFUSED_LINE, REVIEWER_BRIEF
from teamrt.sim.plays.coding_review import REVIEW
from teamrt.sim.plays.conversation import first_text, gist, history, mail
from teamrt.sim.plays.groundwork import inert
from teamrt.sim.plays.repair import Candidate, callees, candidates, source_lines
from teamrt.sim.plays.suites import PYTEST, UNITTEST, Suite
from teamrt.sim.policy import SimRequest, ToolOutcome

SUITE = UNITTEST
"""The suite of a repository that does not use pytest."""
REDO = "My workspace was lost and remade; redoing my changes to"
"""How a coder's turn that redoes what a lost workspace took begins: its replay skips that turn."""
_LOST = re.compile(r"your uncommitted changes to (.+?) are gone: redo them")
_CHECK = re.compile(r"Check with: (.+?)(?: \(if that is refused: (.+?)\))?(?:\.(?:\s|$)|$)", re.MULTILINE)
REFUSED = "permission denied"
"""How the result of a call the team's rules (or the person, or ``on_ask``) refused begins."""
_CODER = re.compile(r"Claim task \d+ with task_claim")
lead = coding_lead.lead
"""The coding lead (``coding_lead.lead``), as the example team's policies name it."""
__all__ = ["REDO", "REVIEWER_BRIEF", "SUITE", "coder", "is_coder_directive", "lead"]


# -- a coder -----------------------------------------------------------------------------


@dataclass
class _Search:
    """Where a coder's repair stands, replayed from its tool calls.

    For each suspect function in turn (those in the failures' tracebacks, innermost first, whose files
    it reads at once; then those the failing tests call and what those call, found by grep),
    every small change is tried against the test module, each by writing the whole file as read
    with that one change (so a try repeated after a crash does the same, and nothing needs
    undoing); one that leaves no failure is kept at once, else the one that fixes most and breaks
    nothing is written back, and the search starts again from the failures that remain. A file
    left with a try that did not help is written back as read before the next suspect is sought.
    """

    suite: Suite = field(default_factory=lambda: Suite(SUITE))
    last_run: ToolOutcome | None = None
    baseline: frozenset[str] = frozenset()
    suspects: list[str] = field(default_factory=list)
    located: dict[str, str] = field(default_factory=dict)
    """The file of each suspect a traceback's frame names."""
    searched: int = 0
    """Suspects sought (grepped for, or read where a frame names them) since the baseline run."""
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
        found = self.suite.failures(run.output)
        self.baseline = frozenset(f.test for f in found)
        self.located = {}
        for path, name in (frame for f in found for frame in f.frames):
            self.located.setdefault(name, path)
        called = [name for f in found for name in f.called]
        self.suspects = list(dict.fromkeys([*self.located, *called]))
        self.searched, self.where, self.text, self.options, self.results = 0, None, None, None, {}

    def next_located(self) -> str | None:
        """The file of the next suspect when a traceback's frame names it (it is read, not grepped for)."""
        return self.located.get(self.suspects[self.searched]) if self.searched < len(self.suspects) else None

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


def is_coder_directive(directive: str) -> bool:
    """Whether a directive is a coding lead's to a coder (a task to claim and a command to check with)."""
    return _CODER.search(directive) is not None and _CHECK.search(directive) is not None


def refused(outcome: ToolOutcome) -> bool:
    """Whether the call was refused rather than run (a rule, the person, or the run's ``on_ask``)."""
    return outcome.is_error and outcome.output.startswith(REFUSED)


def coder(request: SimRequest) -> Reply:
    request = _without_redos(request)
    directive = first_text(request)
    task = re.search(r"Claim task (\d+)", directive)
    named = _CHECK.search(directive)
    reviewer = re.search(r"send your diff \(git diff\) to (\S+)", directive)
    if not (task and named):
        return Reply().say("My directive names no task and no test module; nothing to do.")
    check = named.group(1).strip()
    instead = named.group(2).strip() if named.group(2) else None
    whole = re.search(r"whole suite \(`([^`\n]+)`\)", directive)
    suite = Suite(whole.group(1) if whole else PYTEST if "pytest" in check else SUITE)
    done = history(request)
    if not any(o.name == "task_claim" for o in done):
        return (
            Reply()
            .say(f"Claiming task {task.group(1)} and running its tests.")
            .call("task_claim", {"task_id": int(task.group(1))})
            .call("Bash", {"command": check})
        )
    denied = next(
        (o for o in done if o.name == "Bash" and o.input.get("command") == check and refused(o)), None
    )
    if denied is not None and instead is None:
        return Reply().say(
            f"{REFUSED_LINE} `{inert(check)}` ({inert(gist(denied.output))}). My directive names no other"
            " command to check with, so I changed nothing; the merge queue's gates will judge the branch."
        )
    active = instead if denied is not None and instead is not None else check
    redo = _redo(request, done)
    if redo:  # the files as it last wrote them; then on from where it was
        reply = Reply().say(f"{REDO} {', '.join(path for path, _ in redo)}.")
        for path, content in redo:
            reply.call("Write", {"file_path": path, "content": content})
        return reply
    if any(m.sender == "supervisor" and "merge" in m.summary for m in mail(request, last=True)):
        return (
            Reply().say("My branch was not merged; running my tests again.").call("Bash", {"command": active})
        )
    s = _replay(done, {check, active}, suite)
    if s.last_run is None or s.trying is not None or s.applying is not None:  # a run cut short, or refused
        said = (
            f"`{check}` was refused: I will not run it again, and check with `{active}` instead."
            if denied is not None
            and not any(o.input.get("command") == active for o in done if o.name == "Bash")
            else f"Running the tests of task {task.group(1)} again."
        )
        return Reply().say(said).call("Bash", {"command": active})
    if s.options is None and not suite.ran(s.last_run.output):  # no try in the file: the tests did not run
        return Reply().say(
            f"I could not run my task's tests ({active}): {gist(s.last_run.output)}. Giving up."
        )
    if suite.green(s.last_run.output):
        return _finish(done, s, active, int(task.group(1)), reviewer.group(1) if reviewer else None, denied)
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
                .call("Bash", {"command": active})
            )
    reply = Reply()
    if s.dirty and s.where is not None and s.text is not None:
        reply.call("Write", {"file_path": s.where[0], "content": "\n".join(s.text) + "\n"})
    if s.searched >= len(s.suspects):
        tried = ", ".join(s.suspects) or "the code under test"
        return reply.say(f"No small change to {tried} fixes {', '.join(sorted(s.baseline))}; giving up.")
    suspect = s.suspects[s.searched]
    located = s.next_located()
    if located is not None:
        return reply.say(f"The traceback fails in {suspect}, in {located}: reading it.").call(
            "Read", {"file_path": located}
        )
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


def _replay(done: list[ToolOutcome], checks: set[str], suite: Suite) -> _Search:
    """The search replayed from the calls: a run of any of ``checks`` (the command the directive names,
    or the one it names for when that is refused) is a run of the task's tests; a refused one is none."""
    s = _Search(suite)
    for o in done:
        if o.name == "Bash" and o.input.get("command") in checks and not refused(o):
            s.last_run = o
            fails = frozenset(f.test for f in suite.failures(o.output)) if suite.ran(o.output) else None
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
        elif (
            o.name == "Read"
            and (s.where is None or s.options is not None)
            and s.next_located() == str(o.input.get("file_path"))
        ):  # the next suspect, where a frame says it is
            name = s.suspects[s.searched]
            s.searched += 1
            s.where, s.options, s.results, s.dirty = (str(o.input["file_path"]), name), None, {}, False
            s.text = source_lines(o.output)
            s.options = candidates(s.text, name)
            s.suspects += [c for c in callees(s.text, name) if c not in s.suspects]
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


def _finish(
    done: list[ToolOutcome], state: _Search, check: str, task: int, reviewer: str | None,
    denied: ToolOutcome | None,
) -> Reply:  # fmt: skip
    after = done[done.index(state.last_run) + 1 :] if state.last_run in done else []
    summary = state.suite.summary
    command = state.suite.command
    suite = next((o for o in after if o.name == "Bash" and o.input.get("command") == command), None)
    if suite is None:
        return (
            Reply()
            .say(f"{check}: {summary(state.last_run.output if state.last_run else '')}. Now the whole suite.")
            .call("Bash", {"command": command})
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
    if denied is not None:
        command = inert(str(denied.input.get("command")))
        lines.append(f"{REFUSED_LINE} `{command}` ({inert(gist(denied.output))}); I checked with `{check}`.")
    update = next(o for o in after if o.name == "task_update")
    if update.is_error:
        lines.append(f"I could not mark task {task} done: {gist(update.output)}")
    sent = next((o for o in after if o.name == "send_message"), None)
    if sent is not None and sent.is_error:
        lines.append(f"My diff did not reach {reviewer} for review: {gist(sent.output)}")
    return Reply().say("\n".join(lines))
