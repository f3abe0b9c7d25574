"""The chaos checker (``teamrt.testing.chaos.check``) finds every kind of lost or duplicated mail, tells a
loss a loss event names from a silent one, and counts what the harness noted (faults, hangs, refusals, stops).

One uninterrupted run of the research example, finished once per worker (tests/system/conftest.py); each
test copies its home, plants one fault with real files and real SQLite (the ``mail`` table of ``run.db``),
and checks the copy against the run itself: the fault must be counted, exactly once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from teamrt.mailbox import Mailbox, Message, new_id
from teamrt.runtime import losses
from teamrt.testing import chaos
from tests.system.conftest import Finished

EXAMPLE = "research"


@pytest.fixture(scope="module")
def finished(uninterrupted: Callable[[str], Finished]) -> Finished:
    """The worker's uninterrupted research run (conftest.py): copied before a fault is planted."""
    return uninterrupted(EXAMPLE)


def copy(run: Finished, where: Path) -> Path:
    """A copy of the finished run's home, to plant a fault in."""
    return Path(shutil.copytree(run.home, where / "home", symlinks=True))


def check(run: Finished, home: Path, ref: chaos.Reference | None = None) -> chaos.Result:
    return chaos.check(EXAMPLE, home, run.run_id, run.project, ref or run.ref, kills=0)


def counts(result: chaos.Result) -> tuple[int, int, int]:
    return result.lost, result.duplicated, result.corrupted


def sql(home: Path, run: Finished, statement: str, *params: object) -> int:
    """Run one statement on the copy's store; how many rows it changed."""
    with closing(sqlite3.connect(home / "runs" / run.run_id / "run.db")) as db, db:
        return db.execute(statement, params).rowcount


def mailbox(home: Path, run: Finished) -> Path:
    return home / "runs" / run.run_id / "mailbox"


def a_message(home: Path, run: Finished) -> tuple[str, str]:
    """The agent and id of a message the run read (in ``cur/``, ingested): the lead's first to the
    reviewer."""
    [first, *_] = sorted((mailbox(home, run) / "reviewer" / "cur").glob("*.json"))
    assert json.loads(first.read_bytes())["from"] == "lead"
    return "reviewer", first.stem


def unread(home: Path, run: Finished, agent: str, message: str) -> None:
    """Put a read message back unread: its ingest row deleted, its file moved back to ``new/``."""
    assert sql(home, run, "DELETE FROM mail WHERE id = ?", message) == 1
    os.rename(*(mailbox(home, run) / agent / sub / f"{message}.json" for sub in ("cur", "new")))


def test_a_copy_of_the_run_matches_the_run(finished: Finished, tmp_path: Path) -> None:
    result = check(finished, copy(finished, tmp_path))
    assert counts(result) == (0, 0, 0) and result.differences == [] and result.twice == [], result
    mail = finished.ref.mail
    assert mail.delivered and mail.read == mail.delivered, "every message was read"
    assert (mail.broken, mail.doubled) == (0, 0), "each ingested once and acknowledged once"


def test_a_run_with_no_resume_is_checked(finished: Finished, tmp_path: Path) -> None:
    """No resumes.log at all, and one whose only resume died before it was back."""
    home = copy(finished, tmp_path)
    assert not (home / f"{finished.run_id}.{chaos.RESUMES}").exists()
    result = check(finished, home)
    assert (result.resumes, result.resume_ms) == (0, [])
    (home / f"{finished.run_id}.{chaos.RESUMES}").write_text("1.0\n")
    result = check(finished, home)
    assert (result.resumes, result.resume_ms, counts(result)) == (1, [], (0, 0, 0)), result


def test_a_message_put_back_in_new_with_its_ingest_row_deleted_is_lost(
    finished: Finished, tmp_path: Path
) -> None:
    """Read in the reference, left unread here: no agent read it."""
    home = copy(finished, tmp_path)
    unread(home, finished, *a_message(home, finished))
    assert counts(check(finished, home)) == (1, 0, 0)


def test_a_message_file_deleted_from_cur_is_lost(finished: Finished, tmp_path: Path) -> None:
    """Its ingest row kept."""
    home = copy(finished, tmp_path)
    agent, message = a_message(home, finished)
    (mailbox(home, finished) / agent / "cur" / f"{message}.json").unlink()
    assert counts(check(finished, home)) == (1, 0, 0)


def test_an_ingest_row_deleted_is_lost_though_the_file_stays_in_cur(
    finished: Finished, tmp_path: Path
) -> None:
    home = copy(finished, tmp_path)
    _, message = a_message(home, finished)
    assert sql(home, finished, "DELETE FROM mail WHERE id = ?", message) == 1
    assert counts(check(finished, home)) == (1, 0, 0)


def test_a_message_deleted_from_new_is_lost_and_one_left_there_as_in_the_reference_is_not(
    finished: Finished, tmp_path: Path
) -> None:
    """A reference that left a message unread in ``new/`` (as mail to an agent that had ended stays):
    the same leftover is no loss, nor is reading it; deleting it is."""
    left = copy(finished, tmp_path / "left")
    agent, message = a_message(left, finished)
    unread(left, finished, agent, message)
    _, _, mail = chaos.observe(EXAMPLE, left, finished.run_id, finished.project)
    ref = dataclasses.replace(finished.ref, mail=mail)
    assert counts(check(finished, left, ref)) == (0, 0, 0)
    assert counts(check(finished, copy(finished, tmp_path / "read"), ref)) == (0, 0, 0)
    (mailbox(left, finished) / agent / "new" / f"{message}.json").unlink()
    assert counts(check(finished, left, ref)) == (1, 0, 0)


def test_a_second_copy_of_a_message_ingested_is_duplicated(finished: Finished, tmp_path: Path) -> None:
    """The same message again under a new id (a send run twice), delivered, ingested and acknowledged."""
    home = copy(finished, tmp_path)
    agent, message = a_message(home, finished)
    raw = (mailbox(home, finished) / agent / "cur" / f"{message}.json").read_bytes()
    again = dataclasses.replace(Message.decode(raw), id=new_id())
    with Mailbox(mailbox(home, finished), finished.run_id) as box:
        box.deliver(again)
    inserted = sql(
        home, finished,
        "INSERT INTO mail (run_id, id, agent, sender, kind, turn_id, message, ingested_at)"
        " SELECT run_id, ?, agent, sender, kind, turn_id, ?, ingested_at FROM mail WHERE id = ?",
        again.id, json.dumps(again.to_dict()), message,
    )  # fmt: skip
    assert inserted == 1
    os.rename(*(mailbox(home, finished) / agent / sub / f"{again.id}.json" for sub in ("new", "cur")))
    assert counts(check(finished, home)) == (0, 1, 0)


def test_a_message_both_in_new_and_cur_is_duplicated(finished: Finished, tmp_path: Path) -> None:
    home = copy(finished, tmp_path)
    agent, message = a_message(home, finished)
    name = f"{message}.json"
    shutil.copyfile(
        mailbox(home, finished) / agent / "cur" / name, mailbox(home, finished) / agent / "new" / name
    )
    assert counts(check(finished, home)) == (0, 1, 0)


def test_control_mail_left_unread_is_no_loss_and_one_acknowledged_unread_is(
    finished: Finished, tmp_path: Path
) -> None:
    """Whether an agent's idling is told is a matter of timing; a control message kept in part is not."""
    home = copy(finished, tmp_path)
    with Mailbox(mailbox(home, finished), finished.run_id) as box:
        idle = box.post(sender="supervisor", recipient="lead", body="reviewer is idle.", kind="control")
    assert counts(check(finished, home)) == (0, 0, 0)
    os.rename(*(mailbox(home, finished) / "lead" / sub / f"{idle.id}.json" for sub in ("new", "cur")))
    assert counts(check(finished, home)) == (1, 0, 0)


def test_lost_mail_is_counted_in_a_run_whose_answer_differs(finished: Finished, tmp_path: Path) -> None:
    home = copy(finished, tmp_path)
    answer = "UPDATE turns SET content = replace(content, ?, ?) WHERE agent = 'lead'"
    assert sql(home, finished, answer, "Wrote REPORT.md", "Wrote nothing") > 0
    unread(home, finished, *a_message(home, finished))
    result = check(finished, home)
    assert [d.split(":")[0] for d in result.differences] == ["answer"], result.differences
    assert counts(result) == (1, 0, 0)


def event(home: Path, run: Finished, kind: str, note: str) -> None:
    """A loss event in the copy's store, as the runtime records one."""
    row = json.dumps({"note": note})
    added = sql(home, run, "INSERT INTO events (run_id, at, agent, kind, data) VALUES (?, 0, NULL, ?, ?)",
                run.run_id, kind, row)  # fmt: skip
    assert added == 1


def test_lost_mail_nothing_names_is_a_silent_loss_and_named_it_is_not(
    finished: Finished, tmp_path: Path
) -> None:
    home = copy(finished, tmp_path)
    unread(home, finished, *a_message(home, finished))
    silent = check(finished, home)
    assert (silent.silent_losses, silent.silent, silent.named_losses) == (1, ["1 message(s) lost"], 0)
    event(home, finished, losses.MAIL_FAILED, "lead's message to reviewer was not delivered: no space left")
    named = check(finished, home)
    assert (named.silent_losses, named.named_losses, counts(named)) == (0, 1, (1, 0, 0)), named
    assert named.losses == [
        f"{losses.MAIL_FAILED}: lead's message to reviewer was not delivered: no space left"
    ]


def test_a_loss_event_with_nothing_lost_is_named_not_silent(finished: Finished, tmp_path: Path) -> None:
    """A workspace remade whose work was redone: said to the person, nothing differs."""
    home = copy(finished, tmp_path)
    event(home, finished, losses.WORKSPACE_REMADE, "reviewer's workspace was remade")
    result = check(finished, home)
    assert (result.silent_losses, result.named_losses, result.differences) == (0, 1, []), result


def test_the_harness_notes_of_faults_hangs_refusals_and_stops_are_counted(
    finished: Finished, tmp_path: Path
) -> None:
    home = copy(finished, tmp_path)
    notes = {
        chaos.INJECTED: "wal run.db-wal 100 -> 0 bytes\nmail reviewer/new/x.json cut\nwal cut again\n",
        chaos.HANGS: "an owner did not end in 30 s\n",
        chaos.REFUSED: "run X was not resumed: ...; teamrt resume X --accept-loss goes on\n",
        chaos.STOPS: "StoreWriteFailed: the run store stopped: no space left on device\n",
    }
    for name, text in notes.items():
        (home / f"{finished.run_id}.{name}").write_text(text)
    result = chaos.check(EXAMPLE, home, finished.run_id, finished.project, finished.ref, kills=2)
    assert result.faults == ["kill", "mail", "wal"] and result.hangs == 1, result
    assert len(result.refused) == 1 and result.named_losses == 1 and len(result.stops) == 1, result
    assert result.silent_losses == 0 and result.errors == [], result
