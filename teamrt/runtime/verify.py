"""Verify before resuming: does the store hold what the run's directory shows was done?

A resume goes on from the store. A store that lost commits (a WAL emptied or
cut, a server restored from an older backup) would have the run redo, in
silence, work it had done: reviews counted twice, a branch merged twice, mail
it had read never recorded. So ``resume_run`` first asks ``verify`` and, when
it finds anything, refuses in one line (``StoreBehind``) unless the person
accepts the loss (``teamrt resume RUN --accept-loss``): then ``accept_loss``
records it (a ``store.behind`` event, its ``note`` naming what was lost) and
puts back in ``new/`` the mail the store never recorded as read, so it is
read once more, not never.

What is compared (each a finding, a line naming what is missing):

- the run directory's ``commits`` file against the store's count
  (``store.integrity``): ahead means the store lost commits;
- SQLite's ``PRAGMA quick_check`` of ``run.db`` (not on a server database);
- acknowledged mail without an ingest row: a file in an agent's ``cur/`` is
  moved there only after the turn that read it was committed, so one the
  store has no row for was read in a commit the store lost (the supervisor's
  own mailbox, whose control mail is recorded as events, and control mail,
  as the chaos checker counts it, are left out);
- mailboxes of agents the store does not know: a mailbox is made only once
  its agent's row is committed.

Git *behind* the store (a branch deleted, a workspace gone) is no refusal:
the resume repairs it or names it (``branch.restored``, ``worktree.remade``);
git ahead of the store (a merge made, not recorded) is recorded by
``resume.reconcile_git``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from teamrt.events import SUPERVISOR
from teamrt.mailbox import is_name
from teamrt.mailbox.message import MAX_MESSAGE_BYTES
from teamrt.runtime.losses import STORE_BEHIND
from teamrt.store import Store, StoreReader, integrity, open_reader
from teamrt.store import engine as eng
from teamrt.store.errors import database_reason

MAILBOX = "mailbox"
SHOWN_IDS = 6
"""Message ids a finding names; the rest are counted."""


@dataclass
class Unrecorded:
    """Acknowledged mail the store has no ingest row for, and agents with a mailbox the store does not
    know: what the run's mailbox shows the store lost."""

    mail: dict[str, list[str]] = field(default_factory=dict)
    """Message ids in ``cur/`` with no ingest row, by agent."""
    agents: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(ids) for ids in self.mail.values())


def verify(run_dir: Path, run_id: str, reader: StoreReader) -> list[str]:
    """What the store of run ``run_id`` lacks against its run directory: one line each, empty when all
    is there."""
    sidecar = integrity.read_sidecar(run_dir)  # before the store: the file only ever follows it
    url = eng.store_url(run_dir)
    try:
        run = reader.run()
        findings = []
        lost = integrity.behind(run_dir, run.commits, sidecar)
        if lost:
            findings.append(integrity.behind_finding(lost, url))
        findings += _structure(url)
        findings += mail_findings(unrecorded(run_dir, reader))
    except SQLAlchemyError as e:
        return [f"the store cannot be read: {database_reason(e)}"]
    return findings


def _structure(url: str) -> list[str]:
    path = eng.sqlite_path(url) if eng.is_sqlite(url) else None
    if path is None:
        return []
    said = integrity.quick_check(path)
    return [] if said is None else [f"{path.name} fails SQLite's quick_check ({said})"]


def unrecorded(run_dir: Path, reader: StoreReader) -> Unrecorded:
    """The run's acknowledged mail the store never recorded as read, and its mailboxes of agents the store
    does not know."""
    root = run_dir / MAILBOX
    found = Unrecorded()
    if not root.is_dir():
        return found
    known = {a.name for a in reader.agents()}
    for agent in _mailboxes(root):
        if agent not in known:
            found.agents.append(agent)
        rows = reader.ingested_ids(agent) if agent in known else set()
        missing = _acknowledged(root / agent / "cur", rows)
        if missing:
            found.mail[agent] = missing
    return found


def mail_findings(found: Unrecorded) -> list[str]:
    findings = []
    if found.mail:
        said = "message was" if found.count == 1 else "messages were"
        findings.append(f"{found.count} acknowledged {said} never recorded as read ({_ids(found.mail)})")
    if found.agents:
        findings.append(f"mailboxes of agents the store does not know: {', '.join(found.agents)}")
    return findings


def _ids(mail: dict[str, list[str]]) -> str:
    shown = [f"{agent} {msg_id}" for agent, ids in mail.items() for msg_id in ids]
    more = len(shown) - SHOWN_IDS
    return ", ".join(shown[:SHOWN_IDS]) + (f" and {more} more" if more > 0 else "")


def _mailboxes(root: Path) -> list[str]:
    """The agents with a maildir under ``root`` (real directories with agent names), the supervisor's
    left out."""
    return sorted(
        entry.name
        for entry in os.scandir(root)
        if is_name(entry.name) and entry.name != SUPERVISOR and entry.is_dir(follow_symlinks=False)
    )


def _acknowledged(cur: Path, ingested: set[str]) -> list[str]:
    """The ids of the messages in ``cur/`` that are not ``ingested``, oldest first, control mail left out;
    files that are not messages are left to the inbox's quarantine."""
    try:
        entries = sorted(os.scandir(cur), key=lambda e: e.name)
    except OSError:
        return []
    ids = []
    for entry in entries:
        if not entry.name.endswith(".json") or entry.name.removesuffix(".json") in ingested:
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_size > MAX_MESSAGE_BYTES:
                continue
            data = json.loads(Path(entry.path).read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("kind") != "control":
            ids.append(entry.name.removesuffix(".json"))
    return ids


async def accept_loss(store: Store, run_dir: Path, findings: list[str]) -> str:
    """Go on from what the store has (``teamrt resume --accept-loss``): record the loss first (a
    ``store.behind`` event whose note names it), then put the mail the store never recorded as read
    back in ``new/``, to be read once. The event's commit also brings the run directory's count back to
    the store's. Returns the note."""
    found = unrecorded(run_dir, store.reader)
    note = f"resumed with {integrity.ACCEPT_LOSS}: {'; '.join(findings)}"
    if found.count:
        note += f"; {found.count} acknowledged message(s) put back to be read again"
    data = {"note": note, "findings": findings, "mail": found.mail, "unknown_agents": found.agents}
    await store.append_event(STORE_BEHIND, data)
    for agent, ids in found.mail.items():
        _unacknowledge(run_dir / MAILBOX / agent, ids)
    return note


def _unacknowledge(maildir: Path, ids: list[str]) -> None:
    """Move ``cur/<id>.json`` back to ``new/``; a copy already in ``new/`` stands (the one in ``cur/``
    would have the inbox take it for read)."""
    for msg_id in ids:
        name = f"{msg_id}.json"
        cur, new = maildir / "cur" / name, maildir / "new" / name
        try:
            os.link(cur, new, follow_symlinks=False)
        except FileExistsError:
            pass
        except FileNotFoundError:
            continue
        cur.unlink(missing_ok=True)
    _sync_dir(maildir / "new")  # the move back outlives a crash: else a next resume refuses again


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refuse_if_behind(run_dir: Path, run_id: str) -> None:
    """Raise ``StoreBehind`` naming what the store of run ``run_id`` lacks (``verify``); nothing when all
    is there. For a command that refuses before it starts what would resume the run (``resume --detach``)."""
    reader = open_reader(run_dir, run_id)
    try:
        findings = verify(run_dir, run_id, reader)
    finally:
        reader.close()
    if findings:
        raise integrity.StoreBehind(run_id, findings)
