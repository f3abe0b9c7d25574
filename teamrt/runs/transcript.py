"""An agent's conversation as a person reads it: ``teamrt transcript``.

The store keeps every turn in the Messages API's shape (``turns``); this reads
them back as entries: the prompt, what the agent said, each tool call folded
to a line (``describe_call``) with its result under it in a line or two, mail
as ``mail from X`` (not the ``<mail ...>`` markup the model reads), and marks
where the conversation turned: a follow-up prompt of ``teamrt continue`` (a
new round, as its ``run.continued`` event records it), a restart (a new
epoch), a compaction. Thinking is
left out unless asked for. Text here is as the store has it: whoever prints it
makes it inert (``teamrt.terminal.clean``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from teamrt.runs.query import RunsError, reading
from teamrt.runs.render import describe_call
from teamrt.store import AgentRecord, NotFound, TurnRecord
from teamrt.store.rounds import CONTINUED

Kind = Literal["prompt", "user", "assistant", "thinking", "call", "result", "error", "mail", "mark"]

RESULT_LINES = 2
"""A folded result's lines."""
RESULT_CHARS = 160

_MAIL = re.compile(
    r'<mail id="(?P<id>[^"]*)" from="(?P<sender>[^"]*)" kind="(?P<kind>[^"]*)"'
    r'(?P<superseded> superseded="true")?(?: summary="(?P<summary>.*?)")?>\n?(?P<body>.*?)\n?</mail>',
    re.DOTALL,
)
"""Mail as the agent loop writes it into a user turn (``runtime.loop``, ``_mail_block``)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing said or done. ``text``: what shows folded; ``more``: the rest, shown with ``full``."""

    kind: Kind
    text: str
    more: str = ""
    who: str = ""
    """The sender of mail."""


@dataclass(frozen=True, slots=True)
class Mail:
    sender: str
    kind: str
    summary: str
    body: str
    superseded: bool


def parse_mail(text: str) -> Mail | None:
    """The mail a user turn's text block carries, or None when it is other text."""
    found = _MAIL.fullmatch(text.strip())
    if found is None:
        return None
    return Mail(
        found["sender"], found["kind"], found["summary"] or "", found["body"], bool(found["superseded"])
    )


def read(run_dir: Path, run_id: str, agent: str) -> tuple[AgentRecord, list[TurnRecord], dict[str, int]]:
    """``agent``'s record, its turns and the run's follow-up prompts (each with its round's number);
    RunsError (one line) for an agent the run does not have."""
    with reading(run_dir, run_id) as store, store.snapshot() as reader:
        try:
            record = reader.agent(agent)
        except NotFound:
            names = ", ".join(sorted(a.name for a in reader.agents())) or "none yet"
            raise RunsError(f"no agent named {agent!r} in run {run_id!r} (its agents: {names})") from None
        events = reader.events(kinds=(CONTINUED,))
        rounds = {str(e.data.get("prompt", "")).strip(): int(e.data.get("round", 0)) for e in events}
        return record, reader.turns(agent), rounds


def messages_json(turns: Iterable[TurnRecord]) -> list[dict[str, Any]]:
    """The turns as stored (``--json``): role, content blocks, epoch, and when."""
    return [
        {"seq": t.seq, "epoch": t.epoch, "role": t.role, "content": t.content, "stop_reason": t.stop_reason,
         "model": t.model, "at": t.created_at}
        for t in turns
    ]  # fmt: skip


def entries(
    turns: list[TurnRecord], rounds: dict[str, int] | None = None, *, thinking: bool = False
) -> list[Entry]:
    """The turns as a person reads them, each tool result right under its call; ``rounds``: the run's
    follow-up prompts, by text, each with its round's number (``read``)."""
    rounds = rounds or {}
    results = {
        b.get("tool_use_id"): b
        for t in turns
        if t.role == "user"
        for b in t.content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    out: list[Entry] = []
    epoch: int | None = None
    prompted = False
    for turn in turns:
        if epoch is not None and turn.epoch != epoch:
            out.append(Entry("mark", f"restarted (epoch {turn.epoch}): it goes on from its last kept turn"))
        epoch = turn.epoch
        if turn.role == "compaction":
            out.append(_compaction(turn, first=not out))
            continue
        if turn.role == "assistant":
            out += _assistant(turn.content, results, thinking)
            continue
        for block in turn.content:
            if not isinstance(block, dict) or block.get("type") != "text":
                continue
            text = str(block.get("text", ""))
            mail = parse_mail(text)
            if mail is not None:
                out.append(mail_entry(mail))
            elif not prompted:
                out.append(Entry("prompt", text.strip()))
                prompted = True
            elif text.strip() in rounds:
                out.append(Entry("mark", f"round {rounds[text.strip()]}: a follow-up prompt"))
                out.append(Entry("prompt", text.strip()))
            else:
                out.append(Entry("user", text.strip()))
    return out


def _compaction(turn: TurnRecord, *, first: bool) -> Entry:
    count = len(turn.content)
    if first:  # a fork starts from a copy of its parent's conversation
        return Entry("mark", f"started from a copy of its parent's conversation ({count} messages)")
    return Entry(
        "mark", f"compacted: {count} message{'s' if count != 1 else ''} replace the conversation before"
    )


def mail_entry(mail: Mail) -> Entry:
    """Mail as a person reads it: ``mail from reviewer: <its summary or first line>``, the body in ``more``
    (the TUI's transcript says it so too)."""
    head = f"mail from {mail.sender}" + (f" ({mail.kind})" if mail.kind != "message" else "")
    if mail.superseded:
        return Entry("mail", f"{head}: from an earlier run of {mail.sender}, ignored", who=mail.sender)
    said = mail.summary or _first_line(mail.body)
    body = mail.body.strip()
    return Entry("mail", f"{head}: {said}", body if body != said else "", who=mail.sender)


def _assistant(content: list[Any], results: dict[object, dict[str, Any]], thinking: bool) -> list[Entry]:
    out: list[Entry] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            out.append(Entry("assistant", str(block["text"]).strip()))
        elif kind == "thinking" and thinking:
            out.append(Entry("thinking", str(block.get("thinking", "")).strip()))
        elif kind == "redacted_thinking" and thinking:
            out.append(Entry("thinking", "(thinking redacted by the provider)"))
        elif kind in ("tool_use", "server_tool_use"):
            args = block.get("input")
            args = args if isinstance(args, dict) else {}
            shown = describe_call(str(block.get("name", "?")), args)
            out.append(Entry("call", shown, json.dumps(args, indent=2, ensure_ascii=False)))
            result = results.get(block.get("id"))
            if result is not None:
                out.append(_result(result))
        elif kind == "web_search_tool_result":
            out.append(_search(block.get("content")))
    return out


def _result(block: dict[str, Any]) -> Entry:
    text = result_text(block.get("content")).strip()
    lines = [line for line in text.split("\n") if line.strip()]
    kind: Kind = "error" if block.get("is_error") else "result"
    if not lines:
        return Entry(kind, "(no output)")
    shown = [_clip(line) for line in lines[:RESULT_LINES]]
    if len(lines) > RESULT_LINES:
        shown[-1] += f"  ... ({len(lines)} lines)"
    folded = "\n".join(shown)
    return Entry(kind, folded, text if folded != text else "")


def _search(content: object) -> Entry:
    if not isinstance(content, list):
        code = content.get("error_code", "?") if isinstance(content, dict) else "?"
        return Entry("error", f"web search failed: {code}")
    pages = [f"{r.get('title', '')} ({r.get('url', '')})" for r in content if isinstance(r, dict)]
    if not pages:
        return Entry("result", "no results")
    return Entry("result", f"{len(pages)} results: {_clip(pages[0])}", "\n".join(pages))


def result_text(content: object) -> str:
    """A tool result's text (its images and documents named, not shown)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict):
            kind = block.get("type")
            parts.append(str(block.get("text", "")) if kind == "text" else f"({kind})")
    return "\n".join(parts)


def _first_line(text: str) -> str:
    return _clip(next((line for line in text.split("\n") if line.strip()), ""))


def _clip(line: str) -> str:
    line = line.strip()
    return line if len(line) <= RESULT_CHARS else line[: RESULT_CHARS - 3] + "..."
