"""The coding team's reviewer on ``sim``: it reads each diff a coder mails it, greps the tests that
cover the changed functions, and mails the lead APPROVED or CHANGES REQUESTED with its reasons, each
reason from what the diff and grep showed.
"""

from __future__ import annotations

import re

from teamrt.models.reply import Reply
from teamrt.sim.plays.conversation import gist, history, mail
from teamrt.sim.policy import SimRequest

REVIEW = "REVIEW"
"""How a coder's mail asking for a review begins."""


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
