"""The generic play: how ``sim`` plays a team it has no policy for (a team file of your own, the
built-in default team, a role it has never seen).

The lead starts each role of its team once (the roles and their descriptions are
in its system prompt), gives each the task and its role's description, waits for
their reports by mail and answers with those reports, as they sent them. Every
other agent looks at the tree, reads the files its task names, runs the commands
its team allows (those its task names, else a few read-only ones) and the merge
gates, and reports what each tool returned, quoted and made inert. A refused call
is reported as refused and never tried again. This rehearses a team (do its
roles start, what may they run, what do the gates say) without pretending to do
its work: nothing is claimed that a tool did not show.

Like every policy it keeps no state: each reply is chosen from the request alone,
so the same request gets the same reply and a resumed agent goes on where it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamrt.models.reply import Reply
from teamrt.models.tokens import message_blocks
from teamrt.sim.plays import coding, coding_lead, coding_review
from teamrt.sim.plays.conversation import (
    Mail,
    first_text,
    fork_directive,
    gist,
    history,
    mail,
    own_text,
    roles,
    round_task,
    this_round,
)
from teamrt.sim.plays.groundwork import commands, inert, listing, named_paths, quote
from teamrt.sim.plays.testtask import about_tests
from teamrt.sim.policy import SimRequest, ToolOutcome
from teamrt.tools.commands_brief import CommandsBrief
from teamrt.tools.commands_brief import parse as commands_told

_REPORT_TO = re.compile(r"send your report to (\S+) with send_message")
_STARTED = re.compile(r"^started (\S+?);")
SUPERVISOR = "supervisor"
REPORT_LINES = 60
"""Lines of each role's report the lead's answer quotes."""


def play(request: SimRequest) -> Reply:
    """The generic play of any role: the lead's part for a lead, the agents' part for the rest. A lead
    with a coder role given a task about tests runs them first and, where they fail, leads as the coding
    example does (``coding_lead``); the coders and the reviewer it starts then play their parts of it."""
    if request.role == "lead" and "spawn_agent" in request.tool_names and roles(request.system):
        if coding_lead.team_roles(request.system) is not None and about_tests(round_task(request)):
            return coding_lead.lead(request, otherwise=lead)
        return lead(request)
    if request.messages and fork_directive(request) is None:
        directive = first_text(request)
        if coding.is_coder_directive(directive):
            return coding.coder(request)
        if coding_lead.REVIEWER_BRIEF in directive:
            return coding_review.reviewer(request)
    return agent(request)


# -- the round: what the agent was asked last, and what it has done since -------------------------


@dataclass(frozen=True)
class Round:
    task: str
    """What it was asked: its task, a follow-up, or the body of a teammate's message."""
    report_to: str | None
    """Whom it mails its report (its directive says so, or the teammate who asked)."""
    done: list[ToolOutcome]
    """Its calls since it was asked, with their results."""


def current_round(request: SimRequest, *, by_mail: bool) -> Round:
    """The agent's latest task and what it did since: its first user turn begins a round, and so does a
    user turn with text of its own (not mail) after it answered (a follow-up, ``teamrt continue``); with
    ``by_mail``, so does a teammate's message once the agent has answered."""
    directive = fork_directive(request)
    if directive is not None:  # a fork: the lead's context, then its own directive
        return Round(directive, None, history(request, own=True))
    start, task, report_to = 0, "", None
    answered = True  # the first user turn begins the first round
    for at, message in enumerate(request.messages):
        if message.get("role") == "assistant":
            answered = not any(b.get("type") == "tool_use" for b in message_blocks(message))
            continue
        own = own_text(message)
        if own and answered:
            start, task = at, own
            found = _REPORT_TO.search(task)
            report_to = found.group(1) if found else None
            answered = False
        elif by_mail and answered:
            asked = [m for m in _mail_in(message) if m.kind == "message" and m.sender != SUPERVISOR]
            if asked:
                start, task, report_to, answered = at, asked[-1].body, asked[-1].sender, False
    trimmed = {**request.params, "messages": request.messages[start:]}
    return Round(task, report_to, history(SimRequest(trimmed)))


def _mail_in(message: dict[str, object]) -> list[Mail]:
    return mail(SimRequest({"messages": [message]}))


# -- an agent ------------------------------------------------------------------------------------


def agent(request: SimRequest) -> Reply:
    """Look, read, run, report: each step from the results of the one before."""
    for shutdown in (m for m in mail(request, last=True) if m.kind == "shutdown_request"):
        if "respond_shutdown" in request.tool_names:
            return (
                Reply()
                .say(f"{shutdown.sender} asks me to finish; I accept.")
                .call("respond_shutdown", {"to": shutdown.sender, "accept": True, "request_id": shutdown.id})
            )
    if any(o.name == "respond_shutdown" and not o.is_error for o in history(request)[-1:]):
        return Reply().say("Shutting down.")
    work = current_round(request, by_mail=request.role != "lead")
    tools = set(request.tool_names)
    brief = commands_told(request.system)
    if not work.done:
        return _first_look(work, tools, brief) or Reply().say(_report(work, request))
    reads = _reads(work, tools)
    if reads:
        reply = Reply().say(f"Reading what my task names: {', '.join(reads)}.")
        for path in reads:
            reply.call("Read", {"file_path": path})
        return reply
    report = _report(work, request)
    sent = [o for o in work.done if o.name == "send_message"]
    if work.report_to and work.report_to != request.agent and "send_message" in tools and not sent:
        summary = f"{request.role or request.agent} report"
        return (
            Reply()
            .say(f"Sending my report to {work.report_to}.")
            .call("send_message", {"to": work.report_to, "body": report, "summary": summary})
        )
    if sent and sent[0].is_error:
        report += f"\n\nMy report did not reach {work.report_to}: {inert(gist(sent[0].output))}"
    return Reply().say(report)


def _first_look(work: Round, tools: set[str], brief: CommandsBrief) -> Reply | None:
    """The first turn of a round, its calls all at once: the tree, the files the task names, the
    commands to run. None when the agent has no tool to do any of it with."""
    reply = Reply()
    calls = 0
    if "LS" in tools:
        reply.call("LS", {})
        calls += 1
    elif "Glob" in tools:
        reply.call("Glob", {"pattern": "**/*"})
        calls += 1
    elif "Bash" in tools and (ls := listing(brief)) is not None:
        reply.call("Bash", {"command": ls})
        calls += 1
    paths = named_paths(work.task) if "Read" in tools else []
    for path in paths:
        if "Glob" in tools:
            reply.call("Glob", {"pattern": path})
        else:
            reply.call("Read", {"file_path": path})
        calls += 1
    if "Bash" in tools:
        for command in commands(work.task, brief)[0]:
            reply.call("Bash", {"command": command})
            calls += 1
    if not calls:
        return None
    said = "Looking at the workspace" + (f", for {', '.join(paths)}" if paths else "")
    return reply.say(said + (", and running the commands I may." if "Bash" in tools else "."))


def _reads(work: Round, tools: set[str]) -> list[str]:
    """The named files Glob found, while none has been read this round."""
    if "Read" not in tools or any(o.name == "Read" for o in work.done):
        return []
    named = set(named_paths(work.task))
    return [
        str(o.input["pattern"])
        for o in work.done
        if o.name == "Glob" and o.input.get("pattern") in named and _found(o)
    ]


def _found(glob: ToolOutcome) -> bool:
    return not glob.is_error and not glob.output.startswith("no files match")


def _report(work: Round, request: SimRequest) -> str:
    """The report: each call of the round and what it returned, quoted; nothing else is claimed."""
    who = request.role or request.agent or "agent"
    lines = [f"Report of {request.agent or who} ({who}), from my tools' results only."]
    if not work.done:
        lines.append("I have no tool to look at the workspace or run commands with, so I have nothing to"
                     " report beyond my task.")  # fmt: skip
    named = named_paths(work.task)
    globbed = {str(o.input.get("pattern")): o for o in work.done if o.name == "Glob"}
    missing = [p for p in named if p in globbed and not _found(globbed[p])]
    for o in work.done:
        if o.name == "Glob" and o.input.get("pattern") in named:
            continue
        if o.name in ("LS", "Glob", "Read", "Bash"):
            lines += [_heading(o), *quote(o.output)]
    if missing:
        lines.append(f"My task names {', '.join(missing)}: Glob found no such file, so I read none of it.")
    refused = commands(work.task, commands_told(request.system))[1] if "Bash" in request.tool_names else []
    if refused:
        lines.append(
            f"My task names {', '.join(f'`{inert(c)}`' for c in refused)}: no allow rule of the team lets me"
            " run it, so I did not."
        )
    return "\n".join(lines)


def _heading(o: ToolOutcome) -> str:
    if o.name == "Bash":
        what = f"`{inert(str(o.input.get('command')))}`"
    elif o.name == "Read":
        what = f"Read {inert(str(o.input.get('file_path')))}"
    elif o.name == "Glob":
        what = f"Glob {inert(str(o.input.get('pattern')))}"
    else:
        what = f"LS {inert(str(o.input.get('path', '.')))}"
    if not o.is_error:
        return f"- {what} returned:"
    if re.search(r"\b(denied|refused|not allowed|blocked)\b", o.output, re.IGNORECASE):
        return f"- {what} was refused, not run:"
    return f"- {what} failed:"


# -- the lead ------------------------------------------------------------------------------------


def directive(task: str, role: str, description: str, lead: str) -> str:
    return (
        f"{task.strip()}\n\nYou are the team's {role}: {description.strip()}\nLook at what the task needs,"
        " run the checks you may, and report what your tools showed; claim nothing they did not show."
        f" When you are done, send your report to {lead} with send_message, then end your turn."
    )


def lead(request: SimRequest, note: str = "") -> Reply:
    """Start each role once; wait for every report; let the teammates go; answer with their reports, after
    ``note`` (what the lead's own look showed: the tests it ran first). Only the current round counts: a
    follow-up starts each role again."""
    work = current_round(request, by_mail=False)
    team = roles(request.system)
    spawns = [o for o in work.done if o.name == "spawn_agent"]
    if not spawns:
        reply = Reply().say(
            f"{len(team)} roles in this team ({', '.join(name for name, _ in team)}): starting each once"
            " with the task, then waiting for their reports."
        )
        for name, description in team:
            reply.call(
                "spawn_agent",
                {"kind": "team", "role": name, "wait": False,
                 "directives": [directive(work.task, name, description, request.agent or "lead")]},
            )  # fmt: skip
        return reply
    started = {str(o.input.get("role")): found.group(1) for o in spawns if not o.is_error
               and (found := _STARTED.match(o.output))}  # fmt: skip
    inbox = mail(this_round(request))
    reports: dict[str, Mail] = {}
    for kind in ("message", "result"):  # a teammate's message first, then the result of its end
        for letter in inbox:
            if letter.kind == kind and letter.sender in started.values():
                reports.setdefault(letter.sender, letter)
    idle = {letter.body.removesuffix(" is idle.") for letter in inbox if letter.sender == SUPERVISOR}
    waiting = [name for name in started.values() if name not in reports and name not in idle]
    if waiting:
        return Reply().say(f"Waiting for the reports of {', '.join(waiting)}.")
    asked = {str(o.input.get("agent")) for o in work.done if o.name == "request_shutdown" and not o.is_error}
    leaving = [name for name in started.values() if name not in asked]
    if (
        leaving
        and "request_shutdown" in request.tool_names
        and not any(o.name == "request_shutdown" for o in work.done)
    ):
        reply = Reply().say("Every role has answered; letting them go.")
        for name in leaving:
            reply.call("request_shutdown", {"agent": name, "reason": "the team's reports are in"})
        return reply
    ended = {letter.sender for letter in inbox if letter.kind == "result"}
    stayed = {
        letter.sender for letter in inbox if letter.kind == "shutdown_response" and letter.body != "accepted"
    }
    finishing = [name for name in asked if name not in ended and name not in stayed]
    if finishing:  # answered once, when no more mail is coming
        return Reply().say(f"Waiting for {', '.join(sorted(finishing))} to finish.")
    summary = _summary(spawns, started, reports)
    return Reply().say(f"I ran the tests first: {inert(note)}\n\n{summary}" if note else summary)


def _summary(spawns: list[ToolOutcome], started: dict[str, str], reports: dict[str, Mail]) -> str:
    lines = [
        f"{len(reports)} of {len(spawns)} roles reported. Their reports follow as they sent them; I checked"
        " none of it myself."
    ]
    for o in spawns:
        role = str(o.input.get("role"))
        name = started.get(role)
        if name is None:
            lines.append(f"\n## {inert(role)}: could not start: {inert(gist(o.output))}")
        elif name in reports:
            body = inert(reports[name].body.strip()).splitlines() or ["(an empty report)"]
            more = [f"({len(body) - REPORT_LINES} more lines)"] if len(body) > REPORT_LINES else []
            lines += [f"\n## {name} ({inert(role)})", *body[:REPORT_LINES], *more]
        else:
            lines.append(f"\n## {name} ({inert(role)}): went idle without sending a report.")
    return "\n".join(lines)
