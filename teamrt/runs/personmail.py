"""A person's mail to a run's agents, as ``teamrt logs`` and ``teamrt send`` tell it: sent, delivered, read.

``teamrt send`` (and the TUI's ``m``) puts a message from ``user`` into the agent's mailbox; the sender
does not own the run's store, so nothing is written there when it is sent. The run records it only
when the agent reads it: the turn that takes it in records it in the ``mail`` table, with the time
(``ingested_at``: the read receipt). The event log therefore never had it. This module puts the two
halves together: a message read is in the store; one delivered and not yet read is still in the
agent's maildir (``new/``, peeked at without claiming it); one sent from another host to a run whose
owner has not taken it yet waits in the database (``steering``). ``Tracker`` hands ``follow`` each
message once as sent and once as read, in the order of their times, for ``teamrt logs`` (text or JSON).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from teamrt.events import USER
from teamrt.mailbox.maildir import peek
from teamrt.runs.render import iso_time
from teamrt.store import StoreReader
from teamrt.terminal import clean_json, clean_line

MAILBOX_DIR = "mailbox"
TEXT_CHARS = 80
"""Of a message's text, what its line in ``logs`` quotes."""
ENDED = frozenset({"done", "failed", "stopped"})
AGENT_WIDTH = 12
KIND_WIDTH = 16


@dataclass(frozen=True, slots=True)
class PersonMail:
    """One message from the person to an agent of the run."""

    id: str
    to: str
    text: str
    """What it says, on one line, as sent (not yet made safe for a terminal)."""
    sent_at: float
    read_at: float | None
    """When the agent took it into a turn; None while it has not."""
    where: Literal["read", "mailbox", "database"]
    """Read; delivered into the agent's mailbox, unread; or left in the database for the run's owner."""


@dataclass(frozen=True, slots=True)
class MailLine:
    """What ``logs`` says of a message at a time: that it was sent, or that it was read."""

    at: float
    what: Literal["sent", "read"]
    mail: PersonMail
    agent_ended: bool = False
    """For a message not read: its agent has ended, so it never will be."""


def person_mail(reader: StoreReader, run_dir: Path) -> list[PersonMail]:
    """Every ``message`` the person sent to the run's agents, oldest first."""
    found: dict[str, PersonMail] = {}
    for m in reader.mail(sender=USER):
        if m.kind == "message":
            found[m.id] = _mail(m.message, m.agent, m.ingested_at, "read")
    root = run_dir / MAILBOX_DIR
    for agent in (a.name for a in reader.agents()):
        for data in peek(root, agent) if root.is_dir() else ():
            if _from_person(data) and data.get("id") not in found:
                found[str(data["id"])] = _mail(data, agent, None, "mailbox")
    for left in reader.steering_waiting():
        if _from_person(left.message) and left.message.get("id") not in found:
            to = str(left.message.get("to", "?"))
            found[str(left.message["id"])] = _mail(left.message, to, None, "database", left.sent_at)
    return sorted(found.values(), key=lambda m: (m.sent_at, m.id))


def _from_person(data: dict[str, Any]) -> bool:
    return data.get("from") == USER and data.get("kind") == "message" and isinstance(data.get("id"), str)


def _mail(
    data: dict[str, Any], to: str, read_at: float | None, where: Literal["read", "mailbox", "database"],
    fallback: float = 0.0,
) -> PersonMail:  # fmt: skip
    body, summary = data.get("body"), data.get("summary")
    text = summary if isinstance(summary, str) else ""
    if isinstance(body, str) and len(body) <= TEXT_CHARS:  # the summary of a long one is its preview
        text = body
    sent_at = sent_time(data.get("created_at"), fallback)
    return PersonMail(str(data["id"]), to, " ".join(str(text).split()), sent_at, read_at, where)


def sent_time(value: object, fallback: float) -> float:
    """A message's ``created_at`` (ISO 8601) in seconds since the epoch; ``fallback`` if it does not read."""
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return fallback


class Tracker:
    """Which of the person's messages ``logs`` has said were sent and read; each pass, what is new."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._sent: set[str] = set()
        self._read: set[str] = set()

    def new(self, reader: StoreReader) -> list[MailLine]:
        """The lines not said yet, by time."""
        ended = {a.name for a in reader.agents() if a.status in ENDED}
        lines = []
        for mail in person_mail(reader, self.run_dir):
            if mail.id not in self._sent:
                self._sent.add(mail.id)
                lines.append(MailLine(mail.sent_at, "sent", mail, mail.to in ended))
            if mail.read_at is not None and mail.id not in self._read:
                self._read.add(mail.id)
                lines.append(MailLine(mail.read_at, "read", mail))
        return sorted(lines, key=lambda line: line.at)


def format_mail(line: MailLine, started: float) -> str:
    """``+12.3s  you → coder   mail   "please also…" (m-…; delivered, not read yet)``, or
    ``+15.5s  coder   mail.read   read your message m-… after 3.2s``; safe for a terminal."""
    who = line.mail.to if line.what == "read" else f"you → {line.mail.to}"
    kind = "mail.read" if line.what == "read" else "mail"
    head = (
        f"{f'+{max(0.0, line.at - started):.1f}s':>8}  {clean_line(who):<{AGENT_WIDTH}}  {kind:<{KIND_WIDTH}}"
    )
    return f"{head}  {describe(line)}"


def describe(line: MailLine) -> str:
    """What the line says of the message (without its time, agent and kind), safe for a terminal."""
    mail = line.mail
    if line.what == "read":
        took = max(0.0, (mail.read_at or mail.sent_at) - mail.sent_at)
        return f"read your message {clean_line(mail.id)} after {took:.1f}s"
    shown = clean_line(mail.text)
    quoted = f'"{shown if len(shown) <= TEXT_CHARS else shown[: TEXT_CHARS - 1] + "…"}"'
    state = state_of(line)
    return f"{quoted} ({clean_line(mail.id)}{f'; {state}' if state else ''})"


def mail_json(line: MailLine, started: float) -> str:
    """The line as ``logs --json`` gives it: the shape of an event's (``id`` null: it is no event), its
    kind ``mail.sent`` or ``mail.read``, its data the message's id, recipient, text and state."""
    mail = line.mail
    said = {
        "id": None,
        "at": iso_time(line.at),
        "elapsed_s": round(max(0.0, line.at - started), 3),
        "agent": USER if line.what == "sent" else mail.to,
        "kind": f"mail.{line.what}",
        "data": {"message": mail.id, "to": mail.to, "text": mail.text, "state": state_of(line) or "read"},
        "summary": describe(line),
    }
    return clean_json(json.dumps(said, ensure_ascii=False))


def state_of(line: MailLine) -> str:
    """Where a message not read stands ("" once read: a line of its own says so)."""
    mail = line.mail
    if mail.read_at is not None:
        return ""
    if mail.where == "database":
        return "left in the database for the run's owner"
    if line.agent_ended:
        return f"delivered, never read: {mail.to} had ended"
    return "delivered, not read yet"
