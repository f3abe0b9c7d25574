"""Mail set aside: a message file an inbox could not read is named to the person, and delivered again.

An inbox moves a file it cannot read (truncated, garbage, not UTF-8, a wrong
id) from ``new/`` to ``bad/`` (``teamrt.mailbox.inbox``). Its recipient would
wait for it for ever, and nobody would know. So for each such file, once:

- the message is delivered again, under its own id, when the run has its
  record: a message this process posted (every team tool's mail and every
  child's result go through the supervisor), or, for one an earlier process
  sent, the sender's ``send_message`` (``request_shutdown``,
  ``respond_shutdown``) call in the store, whose result names the id. A
  second delivery under the same id is a no-op for the mailbox, so a crash
  in between does no harm, and the recipient never gets it twice. A child's
  result the resumed run has posted again, and a message whose sender's call
  a crash cut short (its resume sends it again), count as delivered again;
- otherwise its recipient is told (a message naming the id and the sender,
  "ask the sender to send it again"), and so is its sender when that is an
  agent still running: each tell is found in the mailbox before it is sent
  again after a crash;
- a ``mail.quarantined`` event names recipient, sender (read from the record,
  else from the damaged bytes, else "unknown sender"), id, reason and what was
  done; ``teamrt logs``, ``show``, the progress lines and the TUI show it.

A resumed run looks in every agent's ``bad/`` for files no event names yet
(``scan``): set aside by a run that crashed before it could tell.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from teamrt.mailbox import DuplicateId, Mailbox, MailboxError, Message, is_id
from teamrt.mailbox.inbox import Inbox, SetAside
from teamrt.mailbox.maildir import peek
from teamrt.runtime.losses import MAIL_QUARANTINED
from teamrt.store import Store, ToolCallRecord
from teamrt.terminal import clean_line

TELL_KIND = "message"
UNKNOWN = "unknown sender"
_SENDS = {
    "send_message": "message",
    "request_shutdown": "shutdown_request",
    "respond_shutdown": "shutdown_response",
}
_ID_IN_BYTES = re.compile(rb'"id"\s*:\s*"([0-9A-HJKMNP-TV-Z]{26})"')
_RESULT_IN_BYTES = re.compile(rb'"kind"\s*:\s*"result"')
_FROM_IN_BYTES = re.compile(rb'"from"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._-]{0,63})"')


@dataclass(frozen=True)
class Said:
    """What was done about one file set aside, as its event records it."""

    recipient: str
    msg_id: str | None
    sender: str | None
    redelivered: bool
    told: list[str]
    how: str | None = None
    """How it reaches its recipient again (None: it does not)."""


class LostMail:
    """One run's handling of mail set aside. ``alive``: whether an agent is a member still running;
    ``busy``: mark an agent as having mail coming (its parent must not end meanwhile)."""

    def __init__(
        self,
        store: Store,
        mailbox: Mailbox,
        *,
        tell_from: str,
        alive: Callable[[str], bool],
        busy: Callable[[str], None],
        epoch: Callable[[str], int | None] = lambda name: None,
    ) -> None:
        self.store = store
        self.mailbox = mailbox
        self.tell_from = tell_from
        self._alive = alive
        self._busy = busy
        self._epoch = epoch  # an agent's current epoch (None: not running here)
        self.posted: dict[str, Message] = {}
        """Every message this process posted, by id: what a file set aside is delivered again from."""
        self._seen: set[tuple[str, str]] = set()  # (recipient, bad file) handled by this process

    def remember(self, msg: Message) -> None:
        self.posted[msg.id] = msg

    async def handle(self, aside: SetAside) -> Said | None:
        """Deliver again or tell, then record the event; None if it was handled before (here, or by a
        run that crashed after recording it)."""
        key = (aside.agent, aside.bad)
        if key in self._seen:
            return None
        self._seen.add(key)
        events = self.store.reader.events(kinds=(MAIL_QUARANTINED,))
        if any(e.agent == aside.agent and e.data.get("file") == aside.bad for e in events):
            return None
        msg_id = _id_of(aside)
        again_before = any(
            e.agent == aside.agent and e.data.get("id") == msg_id and e.data.get("redelivered")
            for e in events
        )
        record = self._record(msg_id, aside.agent) if msg_id is not None and not again_before else None
        sender = record.sender if record is not None else _sender_of(aside.raw)
        how = None if again_before else self._again(aside, record, sender)
        redelivered = how is not None
        told = [] if redelivered else self._tell(aside, msg_id, sender)
        said = Said(aside.agent, msg_id, sender, redelivered, told, how)
        data: dict[str, Any] = {
            "note": note(said, aside.reason),
            "agent": aside.agent,
            "id": msg_id,
            "sender": sender,
            "reason": aside.reason,
            "file": aside.bad,
            "name": aside.name,
            "redelivered": redelivered,
            "how": how,
            "told": told,
        }
        await self.store.append_event(MAIL_QUARANTINED, data, agent=aside.agent)
        return said

    async def scan(self, found: Iterable[SetAside]) -> list[Said]:
        """Handle the files found in ``bad/`` that no event names yet (a resumed run's look)."""
        said = []
        for aside in found:
            done = await self.handle(aside)
            if done is not None:
                said.append(done)
        return said

    # -- the record ---------------------------------------------------------------

    def _again(self, aside: SetAside, record: Message | None, sender: str | None) -> str | None:
        """How the message reaches its recipient again, said for the note; None: it does not."""
        if record is not None:
            return "delivered again from the run's record" if self._deliver_again(record) else None
        if self._reported_again(aside, sender):
            return f"{sender}'s result was posted again by the resumed run"
        cut = self._cut_short(aside.agent, sender)
        return f"{cut}'s call that sent it, cut short by a crash, sends it again" if cut else None

    def _cut_short(self, recipient: str, sender: str | None) -> str | None:
        """The agent whose team call to ``recipient`` a crash cut short (``running`` under an epoch before its
        current one): its resume finds the message missing from the mailbox and sends it again
        (``Restoring._team_call_once``). Only ``sender``'s when it is known."""
        for call in self.store.reader.tool_calls(statuses=("running",)):
            to = call.input.get("agent") if call.name == "request_shutdown" else call.input.get("to")
            current = self._epoch(call.agent)
            mine = call.name in _SENDS and to == recipient and sender in (None, call.agent)
            if mine and current is not None and call.epoch < current:
                return call.agent
        return None

    def _record(self, msg_id: str, recipient: str) -> Message | None:
        """The message ``msg_id`` to ``recipient`` as the run recorded it: posted by this process, or sent
        by a team tool's call in the store whose result names it."""
        posted = self.posted.get(msg_id)
        if posted is not None:
            return posted if posted.recipient == recipient else None
        said = f"delivered {msg_id} to {recipient}"
        for call in self.store.reader.tool_calls():
            if call.name in _SENDS and call.status == "done" and said in _result_text(call):
                return self._rebuilt(call, msg_id, recipient)
        return None

    def _rebuilt(self, call: ToolCallRecord, msg_id: str, recipient: str) -> Message:
        """The message a team tool's call sent, as ``Services.send`` composed it, under its own id."""
        args = call.input
        kind = _SENDS[call.name]
        data: dict[str, Any] = {}
        if call.name == "send_message":
            body = str(args.get("body", ""))
            summary = str(args.get("summary") or "") or body[:80]
        elif call.name == "request_shutdown":
            body, summary = str(args.get("reason") or "the work is done"), "shutdown?"
        else:
            accept = bool(args.get("accept"))
            body = str(args.get("reason") or "") or ("accepted" if accept else "rejected")
            summary = "accepted" if accept else "rejected"
            data = {"accept": accept, "request_id": args.get("request_id")}
        created = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(call.started_at or call.created_at))
        return Message(
            id=msg_id, run=self.mailbox.run, sender=call.agent, recipient=recipient, kind=kind, thread=msg_id,
            reply_to=None, summary=summary[:200], body=body, data=data, created_at=created, epoch=call.epoch,
        )  # fmt: skip

    def _reported_again(self, aside: SetAside, sender: str | None) -> bool:
        """Whether a child's result set aside has been posted again since: a resumed run reports again each
        ended child whose result its parent's ``new/`` and ``cur/`` lack (``Restoring._restore``)."""
        if sender is None or not _RESULT_IN_BYTES.search(aside.raw or b""):
            return False
        return any(
            (data.get("from"), data.get("kind")) == (sender, "result")
            for data in peek(self.mailbox.root, aside.agent)
        )

    def _deliver_again(self, msg: Message) -> bool:
        """Deliver ``msg`` under its own id; True when it is (or was, before a crash) in the mailbox again."""
        self._busy(msg.recipient)
        try:
            self.mailbox.deliver(msg)
        except DuplicateId:
            return True  # delivered again before a crash, its record rebuilt a little differently
        except (MailboxError, OSError):
            return False
        return True

    # -- telling ------------------------------------------------------------------

    def _tell(self, aside: SetAside, msg_id: str | None, sender: str | None) -> list[str]:
        """Tell the recipient, and the sender when it is an agent still running; the names told."""
        shown_id = msg_id or aside.name
        who = sender or UNKNOWN
        told = []
        if self._alive(aside.agent):
            if sender == self.tell_from:  # teamrt's own note: a merge that failed, a teammate that idled
                ask = "it was a note from teamrt: check where your work and your team stand, and go on"
            elif sender:
                ask = f"ask {sender} to send it again"
            else:
                ask = "ask again for whatever you are waiting for"
            text = (
                f"A message to you (id {shown_id}, from {who}) was damaged on disk and set aside"
                f" ({aside.reason}); {ask}."
            )
            if self._tell_once(aside.agent, text, aside.bad):
                told.append(aside.agent)
        if sender is not None and sender != aside.agent and self._alive(sender):
            text = (
                f"Your message {shown_id} to {aside.agent} was damaged on disk before {aside.agent} read it,"
                f" and set aside ({aside.reason}); send it again if it still matters."
            )
            if self._tell_once(sender, text, aside.bad):
                told.append(sender)
        return told

    def _tell_once(self, to: str, text: str, bad: str) -> bool:
        """Post ``text`` to ``to`` unless a tell about ``bad`` is in its mailbox already; False if the
        mailbox would not take it."""
        root = self.mailbox.root
        if any(_tells_of(data, bad) for data in peek(root, to)):
            return True
        self._busy(to)
        try:
            msg = self.mailbox.post(
                sender=self.tell_from, recipient=to, body=text, kind=TELL_KIND, summary="mail set aside",
                data={"set_aside": bad},
            )  # fmt: skip
        except (MailboxError, OSError):
            return False
        self.remember(msg)
        return True


def note(said: Said, reason: str) -> str:
    """The event's one line for a person."""
    what = f"mail to {said.recipient} (id {said.msg_id or '?'}, from {said.sender or UNKNOWN})"
    if said.redelivered:
        done = said.how or "delivered again"
    elif said.told:
        done = f"told {' and '.join(said.told)}; it is lost"
    else:
        done = "nobody could be told; it is lost"
    return clean_line(f"{what} was damaged on disk and set aside: {done} ({reason})")


def found_in_bad(inbox: Inbox) -> list[SetAside]:
    """The files ``inbox`` (or an earlier run's) set aside from ``new/``, from their reason notes."""
    found = []
    for n in inbox.set_aside():
        bad = str(n.get("file") or "")
        if bad:
            reason = str(n.get("reason") or "no reason kept")
            found.append(
                SetAside(inbox.agent, str(n.get("name") or "?"), bad, reason, inbox.read_set_aside(bad))
            )
    return found


def _tells_of(data: dict[str, Any], bad: str) -> bool:
    inner = data.get("data")
    return isinstance(inner, dict) and inner.get("set_aside") == bad


def _result_text(call: ToolCallRecord) -> str:
    return json.dumps(call.result) if call.result else ""


def _id_of(aside: SetAside) -> str | None:
    """The message's id: its file's name (delivery names it ``<id>.json``), else the id in its bytes."""
    stem = aside.name.removesuffix(".json")
    if is_id(stem):
        return stem
    found = _ID_IN_BYTES.search(aside.raw or b"")
    return found.group(1).decode() if found else None


def _sender_of(raw: bytes | None) -> str | None:
    """The sender named in a damaged message's bytes, if it can still be read."""
    found = _FROM_IN_BYTES.search(raw or b"")
    return found.group(1).decode() if found else None
