"""The research team on ``sim``: a lead that looks up on the web what reviewers advise and forks over a
source tree, forks that read and grep their parts, a reviewer that challenges the synthesis with counts of
its own.

Each step is chosen from what the tools returned: the pages the web search found and the one WebFetch
read, which parts ``ls`` listed, the line counts and definitions grep found, the challenges the reviewer
raised. Without the web tools (a team that denies them) the lead surveys the tree alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from teamrt.models.reply import Reply
from teamrt.sim.plays.conversation import Mail, fork_directive, gist, history, mail
from teamrt.sim.policy import SimRequest, ToolOutcome

MAX_FORKS = 6
BIG_FILE_LINES = 400
"""The reviewer asks about files longer than this."""
DEFINITION = r"^\s*(?:export\s+)?(?:async\s+def|def|class|function|func|fn|pub\s+fn|struct|interface)\s+(\w+)"
MARKERS = r"\b(?:TODO|FIXME|XXX|HACK)\b"
SYNTHESIS = "SYNTHESIS"
CHALLENGES = "CHALLENGES"
ANSWERS = "ANSWERS"
APPROVED = "APPROVED"
NOT_APPROVED = "NOT APPROVED"
REPORT = "REPORT.md"
GUIDANCE_QUERY = "how big should a source file be"
GUIDANCE_PROMPT = "What does it advise about the size of a source file?"
REVIEWER_BRIEF = (
    "You review the lead's survey of this source tree. When the synthesis comes by mail, check its"
    f" claims against the tree yourself (count lines, grep for {MARKERS}) and reply to the lead with"
    f" {CHALLENGES}: a numbered list of what it gets wrong or leaves out, or {APPROVED}: what you checked."
)


def lead(request: SimRequest) -> Reply:
    """Every claim of the lead's answer rests on a tool's result: the parts ``ls`` listed, what the
    forks reported (and which of them finished), the reviewer's verdict, whether the report was
    written. What failed (a spawn, a message, the write), the answer says."""
    done = history(request)
    listing = _last(done, "Bash")
    if listing is None:
        return _first_turn(request)
    if listing.is_error:
        return Reply().say(
            f"I could not list the tree (ls -1p): {gist(listing.output)}. Nothing was surveyed."
        )
    parts = _parts(listing.output)
    spawns = [o for o in done if o.name == "spawn_agent"]
    if not spawns:
        if not parts:
            return Reply().say("The tree is empty; there is nothing to survey.")
        groups = _groups(parts)
        directives = [
            "Survey these parts of the tree, each in a few lines: what it does (from its docstrings"
            " and names), its files and lines, and its main definitions. Cite paths.\n"
            f"Parts: {', '.join(group)}"
            for group in groups
        ]
        return (
            Reply()
            .say(f"{len(parts)} parts. A reviewer to challenge the synthesis, and {len(groups)} forks.")
            .call("spawn_agent", {"kind": "team", "role": "reviewer", "directives": [REVIEWER_BRIEF],
                                  "wait": False})
            .call("spawn_agent", {"kind": "fork", "directives": directives})
        )  # fmt: skip
    reviewer = None if spawns[0].is_error else _started(spawns[0].output)
    forked = spawns[-1]
    findings = {} if forked.is_error else _findings(forked.output)
    sent = [o for o in done if o.name == "send_message"]
    if reviewer is not None and not sent:
        draft = _synthesis(parts, findings)
        said = "The forks are back" if not forked.is_error else "The forks could not start"
        return (
            Reply()
            .say(f"{said}. Sending the synthesis to {reviewer} to challenge.")
            .call("send_message", {"to": reviewer, "body": draft, "summary": "synthesis for review"})
        )
    reviewed = reviewer is not None and not sent[0].is_error
    inbox = mail(request)
    verdicts = [
        m for m in inbox if reviewed and m.sender == reviewer and m.body.startswith((CHALLENGES, APPROVED))
    ]
    idle = any(
        m.sender == "supervisor" and m.body == f"{reviewer} is idle." for m in mail(request, last=True)
    )
    if reviewed and not verdicts and not idle:
        return Reply().say(f"Waiting for {reviewer}'s challenges.")
    verdict = verdicts[0] if verdicts else None
    challenges = _challenges(verdict) if verdict is not None else None
    checked = [
        o for o in done if o.name in ("Read", "Grep") and challenges and _subject(o) in challenges.subjects
    ]
    if challenges is not None and challenges.subjects and not checked:
        reply = Reply().say(f"{reviewer} raised {len(challenges.items)} points; checking them.")
        for path in challenges.files:
            reply.call("Read", {"file_path": path, "limit": 15})
            reply.call("Grep", {"pattern": DEFINITION, "path": path, "output_mode": "content"})
        for path, line in challenges.markers:
            reply.call("Read", {"file_path": path, "offset": line, "limit": 1})
        return reply
    answered = any(o.name == "send_message" and o.input.get("body", "").startswith(ANSWERS) for o in done)
    asked_to_stop = any(o.name == "request_shutdown" for o in done)
    wrote = _last(done, "Write")
    review = _review_state(reviewer, spawns[0], sent, verdict)
    if (
        wrote is None
        or (challenges is not None and not answered)
        or (reviewer is not None and not asked_to_stop)
    ):
        answers = _answers(challenges, checked, parts, findings) if challenges is not None else None
        reply = Reply().say(
            f"Answering {reviewer} and writing {REPORT}." if answers else f"Writing {REPORT}."
        )
        if answers is not None and not answered:
            reply.call("send_message", {"to": reviewer, "body": answers, "summary": "answers"})
        guidance = _guidance(_last(done, "WebFetch"))
        reply.call(
            "Write",
            {"file_path": REPORT,
             "content": _report(parts, findings, review, answers or "", reviewer, guidance)},
        )  # fmt: skip
        if reviewer is not None and not asked_to_stop:
            reply.call("request_shutdown", {"agent": reviewer, "reason": "the report is written"})
        return reply
    return Reply().say(_settled(parts, findings, forked, wrote, reviewer, review, challenges, done))


def _first_turn(request: SimRequest) -> Reply:
    """Search the web for what reviewers advise on the size of a file (when the lead has WebSearch), read
    the page found first (when it has WebFetch), and list the parts of the tree."""
    if "web_search" in request.tool_names and not request.searches:
        return (
            Reply().say("First, what reviewers advise on the size of a source file.").search(GUIDANCE_QUERY)
        )
    reply = Reply()
    found = request.search_results
    if found and "WebFetch" in request.tool_names:
        top = found[0]
        quote = top.text.split(". ")[0][:200]
        reply.cite(f"{top.title} answers it; reading it whole.", url=top.url, title=top.title, quote=quote)
        reply.call("WebFetch", {"url": top.url, "prompt": GUIDANCE_PROMPT})
    elif request.searches:
        reply.say("The search found nothing to read.")
    return reply.say("Now the parts of this tree.").call("Bash", {"command": "ls -1p"})


def _guidance(fetched: ToolOutcome | None) -> str:
    """The report's section on what the page WebFetch read advises: its first emphasised sentence, with
    its address; or why there is none."""
    if fetched is None:
        return ""
    url = fetched.input.get("url", "")
    if fetched.is_error:
        return f"I could not read {url}: {gist(fetched.output)}."
    advice = re.search(r"\*\*(.+?)\*\*", fetched.output, re.DOTALL)
    said = " ".join(advice.group(1).split()) if advice else "nothing in bold; see the page"
    return f"{url} advises: {said}. The reviewer's questions on big files below follow it."


def _review_state(
    reviewer: str | None, spawned: ToolOutcome, sent: list[ToolOutcome], verdict: Mail | None
) -> str:
    """The review as the report and the answer tell it: the verdict, or why there is none."""
    if verdict is not None:
        return verdict.body
    if reviewer is None:
        return f"No review: the reviewer could not start ({gist(spawned.output)})."
    if sent and sent[0].is_error:
        return f"No review: the synthesis did not reach {reviewer} ({gist(sent[0].output)})."
    return f"No review: {reviewer} went idle without a verdict."


def _settled(
    parts: list[str], findings: dict[str, _Finding], forked: ToolOutcome, wrote: ToolOutcome,
    reviewer: str | None, review: str, challenges: _Challenges | None, done: list[ToolOutcome],
) -> str:  # fmt: skip
    """The lead's answer, each claim from a tool's result."""
    files, lines = sum(f.files for f in findings.values()), sum(f.lines for f in findings.values())
    if forked.is_error:
        survey = [f"none surveyed: the forks could not start ({gist(forked.output)})"]
    else:
        ended = re.findall(r"^## (\S+): (\w+)", forked.output, re.MULTILINE)
        survey = [f"{files} files, {lines:,} lines, surveyed by {sum(s == 'done' for _, s in ended)} forks"]
        unfinished = [f"{name} ({status})" for name, status in ended if status != "done"]
        if unfinished:
            survey.append(f"{', '.join(unfinished)} did not finish")
        missing = [p for p in parts if p not in findings]
        if missing:
            survey.append(f"not surveyed: {', '.join(missing)}")
        uncounted = [p for p, f in findings.items() if "could not count" in f.text]
        if uncounted:
            survey.append(f"lines not counted in {', '.join(uncounted)}")
    head = (
        f"I could not write {REPORT} ({gist(wrote.output)}); the survey had"
        if wrote.is_error
        else f"Wrote {REPORT}:"
    )
    said = f"{head} {len(parts)} parts, {'; '.join(survey)}; "
    if challenges is None:
        return said + review
    if not challenges.items:
        return said + f"{reviewer} approved the synthesis."
    said += f"{reviewer} raised {len(challenges.items)} challenge(s), each answered in the report."
    answers = next(
        o for o in done if o.name == "send_message" and o.input.get("body", "").startswith(ANSWERS)
    )
    return said + (
        f" My answers did not reach {reviewer}: {gist(answers.output)}." if answers.is_error else ""
    )


def fork(request: SimRequest) -> Reply:
    directive = fork_directive(request) or ""
    wanted = re.search(r"^Parts: (.+)$", directive, re.MULTILINE)
    parts = [p.strip() for p in wanted.group(1).split(",")] if wanted else []
    if not parts:
        return Reply().say("My directive names no parts to survey.")
    mine = history(request, own=True)
    if not mine:
        reply = Reply().say(f"Counting lines and definitions in {', '.join(parts)}.")
        for part in parts:
            reply.call("Grep", {"pattern": "^", "path": part, "output_mode": "count"})
            reply.call("Grep", {"pattern": DEFINITION, "path": part, "output_mode": "content"})
        return reply
    counts = _counts(o.output for o in mine if o.name == "Grep" and o.input.get("output_mode") == "count")
    if not any(o.name == "Read" for o in mine):
        reply = Reply().say("Reading what each part says about itself.")
        for part in parts:
            head = _head_file(part, counts)
            if head is not None:
                reply.call("Read", {"file_path": head, "limit": 15})
        if reply.content[1:]:
            return reply
    definitions = _definitions(
        o.output for o in mine if o.input.get("output_mode") == "content" and not o.is_error
    )
    heads = {
        o.input["file_path"]: f"could not read it ({gist(o.output)})" if o.is_error else _purpose(o.output)
        for o in mine
        if o.name == "Read"
    }
    failed = {
        (o.input.get("path"), o.input.get("output_mode")): gist(o.output)
        for o in mine
        if o.name == "Grep" and o.is_error
    }
    sections = []
    for part in parts:
        files = {p: n for p, n in counts.items() if _in_part(p, part)}
        names = [d for p, d in definitions if _in_part(p, part)]
        head = _head_file(part, counts)
        shown = f" ({', '.join(names[:8])}{', ...' if len(names) > 8 else ''})" if names else ""
        size = (
            f"could not count its lines ({failed[part, 'count']})"
            if (part, "count") in failed
            else f"{_plural(len(files), 'file')}, {sum(files.values()):,} lines"
        )
        defined = (
            f"could not grep its definitions ({failed[part, 'content']})"
            if (part, "content") in failed
            else f"{len(names)} definitions{shown}"
        )
        purpose = (
            (heads.get(head) or "not stated in the code")
            if head in heads
            else "not read: no file of it was counted"
        )
        sections.append(f"### {part}\n{size}; {defined}.\nPurpose: {purpose}")
    return Reply().say("\n\n".join(sections))


def reviewer(request: SimRequest) -> Reply:
    inbox = mail(request)
    done = history(request)
    reply = Reply()
    syntheses = [m for m in inbox if m.body.startswith(SYNTHESIS)]
    answers = [m for m in inbox if m.body.startswith(ANSWERS)]
    verdicts = [o for o in done if o.name == "send_message" and o.input.get("body", "").startswith(
        (CHALLENGES, APPROVED, NOT_APPROVED))]  # fmt: skip
    on_answers = [v for v in verdicts if _on_answers(v.input["body"])]
    on_syntheses = [v for v in verdicts if not _on_answers(v.input["body"])]
    if len(syntheses) > len(on_syntheses):
        counted = _last(done, "Grep", output_mode="count")
        if counted is None:
            return (
                Reply()
                .say("Checking the synthesis against the tree.")
                .call("Grep", {"pattern": "^", "output_mode": "count"})
                .call("Grep", {"pattern": MARKERS, "output_mode": "content"})
                .call("Bash", {"command": "ls -1p"})
            )
        markers = _last(done, "Grep", output_mode="content")
        listing = _last(done, "Bash")
        unchecked = [
            f"I could not {what}: {gist(o.output)}"
            for o, what in ((counted, "count the lines of the tree"), (markers, "grep for open markers"),
                            (listing, "list the tree"))
            if o is not None and o.is_error
        ]  # fmt: skip
        body = _review(
            syntheses[-1], _counts([counted.output]), markers.output if markers else "",
            _parts(listing.output if listing else ""), unchecked,
        )  # fmt: skip
        reply.call("send_message", {"to": syntheses[-1].sender, "body": body, "summary": body.split(":")[0]})
    elif len(answers) > len(on_answers):
        raised = on_syntheses[-1].input["body"] if on_syntheses else ""
        markers = _last(done, "Grep", output_mode="content")
        body = _check_answers(raised, answers[-1].body, markers.output if markers else "")
        reply.call("send_message", {"to": answers[-1].sender, "body": body, "summary": body.split(":")[0]})
    for request_mail in (m for m in mail(request, last=True) if m.kind == "shutdown_request"):
        reply.call(
            "respond_shutdown", {"to": request_mail.sender, "accept": True, "request_id": request_mail.id}
        )
    if not reply.content:
        return Reply().say("Ready to review the synthesis when it comes.")
    return reply


# -- reading tool output ---------------------------------------------------------------


def _last(done: list[ToolOutcome], tool: str, **where: str) -> ToolOutcome | None:
    found = [o for o in done if o.name == tool and all(o.input.get(k) == v for k, v in where.items())]
    return found[-1] if found else None


def _parts(listing: str) -> list[str]:
    """The entries ``ls -1p`` listed, hidden ones, caches and the report left out."""
    skip = {"__pycache__/", "node_modules/", REPORT}
    return [
        n.strip()
        for n in listing.splitlines()
        if n.strip() and not n.startswith(".") and n.strip() not in skip
    ]


def _groups(parts: list[str]) -> list[list[str]]:
    """The parts in at most MAX_FORKS groups of neighbours, directories before loose files."""
    ordered = [p for p in parts if p.endswith("/")] + [p for p in parts if not p.endswith("/")]
    size = -(-len(ordered) // MAX_FORKS)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _started(output: str) -> str | None:
    found = re.match(r"started (\S+?)[;,]", output)
    return found.group(1) if found else None


def _counts(outputs: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for output in outputs:
        for line in output.splitlines():
            path, _, n = line.rpartition(":")
            if path and n.isdigit():
                counts[path] = int(n)
    return counts


def _definitions(outputs: Iterable[str]) -> list[tuple[str, str]]:
    found = []
    for output in outputs:
        for line in output.splitlines():
            path, _, rest = line.partition(":")
            name = re.search(DEFINITION, rest.partition(":")[2])
            if name:
                found.append((path, name.group(1)))
    return found


def _in_part(path: str, part: str) -> bool:
    return path.startswith(part) if part.endswith("/") else path == part


def _head_file(part: str, counts: dict[str, int]) -> str | None:
    """The file that says what ``part`` is: itself, its ``__init__.py`` or README, or its largest file."""
    if not part.endswith("/"):
        return part
    files = {p: n for p, n in counts.items() if p.startswith(part)}
    for name in ("__init__.py", "README.md", "README", "mod.rs", "index.js", "index.ts"):
        if part + name in files:
            return part + name
    return max(files, key=lambda p: (files[p], p)) if files else None


def _purpose(read_output: str) -> str:
    """The first sentence of a file's opening docstring or comment, from ``read``'s numbered lines."""
    lines = [line.partition("\t")[2].strip() for line in read_output.splitlines() if "\t" in line]
    for line in lines:
        text = line.strip("\"'#/*!- ").strip()
        if text and not text.startswith(("from ", "import ", "package ", "use ", "<")):
            return text.split(". ")[0].rstrip(".") + "."
    return ""


class _Finding:
    def __init__(self, text: str) -> None:
        self.text = text.strip()
        numbers = re.search(r"(\d+) files?, ([\d,]+) lines", text)
        self.files = int(numbers.group(1)) if numbers else 0
        self.lines = int(numbers.group(2).replace(",", "")) if numbers else 0


def _findings(spawn_output: str) -> dict[str, _Finding]:
    """Each part's section from the forks' answers, by part."""
    found = {}
    for section in re.split(r"^### ", spawn_output, flags=re.MULTILINE)[1:]:
        part, _, body = section.partition("\n")
        found[part.strip()] = _Finding(body.split("\n## ")[0])
    return found


def _synthesis(parts: list[str], findings: dict[str, _Finding]) -> str:
    lines = [f"{SYNTHESIS}: {len(parts)} parts, {sum(f.lines for f in findings.values()):,} lines."]
    for part in parts:
        finding = findings.get(part)
        lines.append(f"- {part}: " + (finding.text.replace("\n", " ") if finding else "not surveyed"))
    return "\n".join(lines)


def _on_answers(body: str) -> bool:
    """Whether a verdict of the reviewer is on the lead's answers (not on a synthesis)."""
    return body.startswith((f"{APPROVED}: the answers", f"{NOT_APPROVED}: the answers"))


def _check_answers(raised: str, answers: str, markers: str) -> str:
    """The reviewer's verdict on the lead's answers: every point it raised has an answer, and every
    line the answers quote as an open marker is one its own grep found."""
    points = {int(n) for n in re.findall(r"^(\d+)\. ", raised, re.MULTILINE)}
    answered = {int(n) for n in re.findall(r"^(\d+)\. ", answers, re.MULTILINE)}
    found = {":".join(line.split(":")[:2]) for line in markers.splitlines() if line.count(":") >= 2}
    quoted = re.findall(r"(\S+:\d+) `", answers)
    unfound = [q for q in quoted if q not in found]
    if points - answered or unfound:
        said = (
            [f"points {', '.join(map(str, sorted(points - answered)))} have no answer"]
            if points - answered
            else []
        )
        said += [f"{', '.join(unfound)} are not lines my grep found"] if unfound else []
        return f"{NOT_APPROVED}: the answers leave open what I raised: {'; '.join(said)}."
    return f"{APPROVED}: the answers address all {len(points)} points I raised" + (
        f", and the {len(quoted)} lines they quote are the markers my grep found." if quoted else "."
    )


def _review(
    synthesis: Mail, counts: dict[str, int], markers: str, parts: list[str], unchecked: list[str]
) -> str:
    """The reviewer's verdict: what its own counts and greps find that the synthesis does not say, and
    what it could not check (then it does not approve)."""
    points = list(unchecked)
    missing = [
        p for p in parts if f"- {p}:" not in synthesis.body or f"- {p}: not surveyed" in synthesis.body
    ]
    if missing:
        points.append(f"The synthesis does not cover {', '.join(missing)}.")
    big = sorted(((n, p) for p, n in counts.items() if n > BIG_FILE_LINES), reverse=True)[:3]
    for n, path in big:
        points.append(
            f"{path} ({n} lines) is among the biggest files of the tree; what does it hold, and is it too"
            " big?"
        )
    found = [line for line in markers.splitlines() if re.search(MARKERS, line) and ":" in line][:5]
    if found:
        points.append(
            "Open markers left in the code: "
            + "; ".join(f.split(":")[0] + ":" + f.split(":")[1] for f in found)
        )
    if not points:
        return f"{APPROVED}: every part is covered; no file over {BIG_FILE_LINES} lines and no open markers."
    return f"{CHALLENGES}:\n" + "\n".join(f"{i}. {p}" for i, p in enumerate(points, 1))


class _Challenges:
    def __init__(self, verdict: Mail) -> None:
        self.items = re.findall(r"^\d+\. (.+)$", verdict.body, re.MULTILINE)
        self.files = [m.group(1) for item in self.items if (m := re.match(r"(\S+) \(\d+ lines\)", item))]
        self.markers = [
            (path, int(line))
            for item in self.items
            if item.startswith("Open markers")
            for path, line in re.findall(r"(\S+?):(\d+)", item.partition(": ")[2])
        ]
        self.subjects = set(self.files) | {path for path, _ in self.markers}


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _first_line(read_output: str) -> str:
    return read_output.splitlines()[0].partition("\t")[2].strip() if read_output else ""


def _subject(outcome: ToolOutcome) -> str:
    return str(outcome.input.get("file_path") or outcome.input.get("path") or "")


def _challenges(verdict: Mail) -> _Challenges:
    return _Challenges(verdict)


def _answers(
    challenges: _Challenges, checked: list[ToolOutcome], parts: list[str], findings: dict[str, _Finding]
) -> str:
    """The lead's answer to each challenge, from what its reads and greps returned; a point it did not
    check it says it did not."""
    lines = [f"{ANSWERS}:"]
    for i, item in enumerate(challenges.items, 1):
        if item.startswith("Open markers"):
            quoted = [
                f"{o.input['file_path']}:{o.input['offset']} "
                + (f"(could not read: {gist(o.output)})" if o.is_error else f"`{_first_line(o.output)}`")
                for o in checked
                if o.name == "Read" and "offset" in o.input
            ]
            lines.append(f"{i}. Each is quoted here, for the code's owners to settle: {'; '.join(quoted)}.")
            continue
        path = next((p for p in challenges.files if item.startswith(p + " ")), None)
        if path is None:
            lines.append(f"{i}. {_uncovered(item, parts, findings)}")
            continue
        head = next(
            (o for o in checked if o.name == "Read" and _subject(o) == path and "offset" not in o.input), None
        )
        defs = next((o for o in checked if o.name == "Grep" and o.input["path"] == path), None)
        if head is None or head.is_error:
            lines.append(f"{i}. {path}: I could not read it ({gist(head.output) if head else 'not read'}).")
            continue
        purpose = _purpose(head.output) or "Its opening lines do not say what it is for."
        if defs is None or defs.is_error:
            lines.append(f"{i}. {path}: {purpose} I could not count its definitions.")
            continue
        n = len(_definitions([defs.output]))
        size = re.search(r"\((\d+) lines\)", item)
        lines.append(
            f"{i}. {path}: {purpose} It has {n} definitions,"
            f" {int(size.group(1)) // max(n, 1) if size else '?'} lines each on average; whether it is too"
            " big is for its owners to judge."
        )
    return "\n".join(lines)


def _uncovered(item: str, parts: list[str], findings: dict[str, _Finding]) -> str:
    """The answer to a point that names no file: parts the synthesis did not cover, or anything else."""
    named = re.match(r"The synthesis does not cover (.+)\.$", item)
    if named is None:
        return "Noted in the report's review; I did not check it further."
    missing = [p.strip() for p in named.group(1).split(", ")]
    unsurveyed = [p for p in missing if p in parts and p not in findings]
    unlisted = [p for p in missing if p not in parts]
    said = []
    if unsurveyed:
        said.append(f"Agreed: {', '.join(unsurveyed)} went unsurveyed; the report says so.")
    if unlisted:
        said.append(
            f"{', '.join(unlisted)} were not in my listing of the tree, so the report leaves them out."
        )
    surveyed = [p for p in missing if p in findings]
    if surveyed:
        said.append(f"{', '.join(surveyed)} are surveyed in the report.")
    return " ".join(said)


def _report(
    parts: list[str], findings: dict[str, _Finding], review: str, answers: str, reviewer: str | None,
    guidance: str = "",
) -> str:  # fmt: skip
    """REPORT.md: each part as its fork found it, the review (or why there is none), the answers."""
    files = sum(f.files for f in findings.values())
    lines = sum(f.lines for f in findings.values())
    reviewed = f" {reviewer} challenged the synthesis." if answers else ""
    out = [
        "# Survey of this source tree",
        "",
        f"{len(parts)} parts, {files} files, {lines:,} lines. The parts were given to forks of the lead"
        f" (line counts and definitions by grep, purpose from the code's own opening lines).{reviewed}",
        "",
        "## Parts",
    ]
    for part in parts:
        finding = findings.get(part)
        out += ["", f"### {part}", finding.text if finding else "Not surveyed."]
    if guidance:
        out += ["", "## Guidance from the web", "", guidance]
    out += ["", "## Review", "", review, "", answers, ""]
    return "\n".join(out)
