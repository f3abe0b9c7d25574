"""Fault: the disk under a run's own files fills up while its store still works.

A real small tmpfs, mounted by the test (root only), holds ``TEAMRT_HOME`` (the
run's directory: mailboxes, worktrees, SQLite's files) and the project. The test
fills it at a moment it controls (``tests/helpers/procs/diskrunner.py``: the ``mail.deliver``
fault point of the third review sent to the reviewer; every coder has finished
its edits by then): with empty files until no inode is left while SQLite's files
already exist, or with data until no byte is left while the store is on
PostgreSQL. The run stops in one line, restarting no agent and marking none
failed, before the coder whose review is refused can act on the refusal (its
call's result is never kept, as with a full store); once the test frees space,
``teamrt resume`` delivers the kept review once, completes the coder's call with
it, and lands every coder's fix. Smaller tests: each errno a delivery can meet, a broadcast cut
short, a passing refusal (too many open files) that does not stop the run, and a
coder's work that could not be committed, named at the run's end and landed by a
resume.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from teamrt.demos.examples import coding_repo, team_file
from teamrt.mailbox.mailbox import DELIVERY_ERRNOS, Mailbox, MailNotDelivered
from teamrt.runtime.losses import MAIL_FAILED
from teamrt.store import StoreReader, ToolCallRecord, open_reader
from tests.helpers.git import git
from tests.helpers.machine import mounted_tmpfs

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs to fill needs root")

RUN = "20261128-000000-disk"
HANG_S = 300.0
"""Bounds a hang only: the coding team on sim takes a few seconds."""
RUNNER = str(Path(__file__).parents[1] / "helpers" / "procs" / "diskrunner.py")


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs of 3,000 inodes at ``tmp_path/disk``, unmounted afterwards."""
    with mounted_tmpfs(tmp_path / "disk", "48m", 3000) as where:
        yield where


def teamrt(disk: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``teamrt args`` in the project on ``disk``, which fills (``mode``: inodes or space; none: it does
    not) at the third review's delivery."""
    env = {**os.environ, "TEAMRT_HOME": str(disk / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, RUNNER, str(disk / "filler"), mode, *args]
    return subprocess.run(
        command, cwd=disk / "project", env=env, capture_output=True, text=True, timeout=HANG_S
    )


@needs_root
@pytest.mark.slow
@pytest.mark.usefixtures("store_db")
def test_a_full_disk_refuses_mail_stops_the_run_in_one_line_and_resume_lands_every_fix(
    disk: Path, store_db: str, tmp_path: Path
) -> None:
    mode = "inodes" if store_db == "sqlite" else "space"
    project = coding_repo(disk / "project")
    stopped = teamrt(disk, mode, "run", str(team_file("coding")), "--run-id", RUN)
    run_dir = disk / "home" / "runs" / RUN
    if store_db == "sqlite":
        assert (run_dir / "run.db").exists(), "SQLite's files were made before the inodes ran out"

    assert stopped.returncode == 1, stopped.stderr
    assert "Traceback" not in stopped.stderr, stopped.stderr
    said = [line for line in stopped.stderr.splitlines() if line.startswith("teamrt: ")]
    assert len(said) == 1, stopped.stderr
    what = "the inode table of the disk under" if mode == "inodes" else "the disk under"
    assert said[0].startswith(f"teamrt: run {RUN} stopped: {what} {run_dir / 'mailbox'} is full"), said
    assert said[0].endswith(f"free space there, then: teamrt resume {RUN}"), said

    reader = open_reader(run_dir, RUN)
    try:
        assert reader.run().status == "running", "nothing after the stop was kept: the run resumes"
        failed = reader.events(kinds=(MAIL_FAILED,))
        assert [e.data["to"] for e in failed] == ["reviewer"], failed
        sender = failed[0].agent
        assert sender is not None, "the event names the coder whose message it was"
        assert "not delivered: no space left on device" in failed[0].data["note"]
        assert "kept, to be delivered when the run is resumed" in failed[0].data["note"]
        pending = _sends(reader, sender, "reviewer")
        assert [c.status for c in pending][-1] == "running", "the refused call's result was never kept"
        assert not [c for c in pending if c.is_error], "nothing acted on the refusal"
        assert not [a.name for a in reader.agents() if a.status == "failed"], "no agent is failed for it"
        assert not reader.events(kinds=("agent.raised",)), "no agent met the full disk and restarted"
    finally:
        reader.close()
    _assert_nothing_half_written(run_dir / "mailbox")

    shutil.rmtree(disk / "filler")
    resumed = teamrt(disk, "none", "resume", RUN)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr

    reader = open_reader(run_dir, RUN)
    try:
        assert reader.run().status == "done"
        merges = {m.agent: m.status for m in reader.merges()}
        assert merges == {"coder": "merged", "coder-1": "merged", "coder-2": "merged"}, merges
        kept = failed[0].data["id"]
        assert kept in reader.ingested_ids("reviewer"), "the kept review reached the reviewer"
        completed = _sends(reader, sender, "reviewer")[-1]
        assert completed.status == "done" and kept in json.dumps(completed.result), completed
    finally:
        reader.close()
    _assert_each_message_once(run_dir / "mailbox")
    checkout = tmp_path / "integration"
    git(project, "worktree", "add", "-q", "--detach", str(checkout), f"teamrt/{RUN}")
    tests = subprocess.run(
        [sys.executable, "-m", "unittest", "-q"], cwd=checkout, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert tests.returncode == 0, f"the integration branch holds every fix:\n{tests.stderr}"


def _sends(reader: StoreReader, sender: str, to: str) -> list[ToolCallRecord]:
    """``sender``'s ``send_message`` calls to ``to``, oldest first."""
    return [c for c in reader.tool_calls(sender) if c.name == "send_message" and c.input.get("to") == to]


def _assert_nothing_half_written(mailbox: Path) -> None:
    """Every file in a ``new/`` or ``cur/`` is a whole message; no ``tmp/`` keeps a leftover."""
    from teamrt.mailbox import Message

    for agent in mailbox.iterdir():
        assert not list((agent / "tmp").iterdir()), f"a leftover in {agent.name}/tmp"
        for sub in ("new", "cur"):
            for path in (agent / sub).iterdir():
                Message.decode(path.read_bytes())


def _assert_each_message_once(mailbox: Path) -> None:
    """No message is there twice, by id or by what it says; three reviews reached the reviewer."""
    from teamrt.mailbox import Message

    ids: Counter[str] = Counter()
    said: Counter[tuple[str, str, str, str]] = Counter()
    for path in mailbox.glob("*/*/*.json"):
        if path.parent.name not in ("new", "cur"):
            continue
        msg = Message.decode(path.read_bytes())
        ids[msg.id] += 1
        if msg.kind != "control":
            said[msg.sender, msg.recipient, msg.kind, msg.body] += 1
    assert [i for i, n in ids.items() if n > 1] == []
    assert [k[:3] for k, n in said.items() if n > 1] == []
    reviews = [k for k in said if k[1] == "reviewer" and k[0].startswith("coder")]
    assert len(reviews) == 3, reviews


@pytest.mark.parametrize("code", sorted(DELIVERY_ERRNOS))
def test_a_refused_delivery_names_its_cause_and_leaves_nothing_in_new(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each errno the host can refuse a delivery with becomes ``MailNotDelivered``, naming the cause and
    the recipient; the maildir's ``new/`` and ``tmp/`` stay empty."""
    mailbox = Mailbox(tmp_path / "mailbox", "r1")
    mailbox.register("bob")
    real_write = os.write

    def refusing(fd: int, data: bytes) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "write", refusing)
    try:
        with pytest.raises(MailNotDelivered) as raised:
            mailbox.post(sender="alice", recipient="bob", body="hello")
    finally:
        monkeypatch.setattr(os, "write", real_write)
        mailbox.close()
    assert str(raised.value) == f"not delivered: {os.strerror(code).lower()} (mailbox of bob)"
    assert raised.value.lasting == (code in (errno.ENOSPC, errno.EDQUOT, errno.EIO))
    for sub in ("new", "tmp"):
        assert not list((tmp_path / "mailbox" / "bob" / sub).iterdir())


def test_work_a_failed_landing_left_uncommitted_is_named_at_the_run_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A coder whose work teamrt could not commit (git's index lock planted at the third review) ends
    failed with its fix uncommitted in its worktree: the run's end names that worktree, never a silent
    "done"."""
    import asyncio

    from teamrt import faults
    from teamrt.runtime.teamrun import Choices, run_team_file

    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project = coding_repo(tmp_path / "project")
    reviews: list[str] = []

    def lock_at_third_review(detail: str) -> None:
        if detail.startswith("reviewer/"):
            reviews.append(detail)
            if len(reviews) == 3:
                for admin in (project / ".git" / "worktrees").glob("coder*"):
                    (admin / "index.lock").write_text("")

    with faults.inject("mail.deliver", lock_at_third_review):
        work = run_team_file(team_file("coding"), prompt=None, project=project, choices=Choices(model="sim"))
        summary = asyncio.run(asyncio.wait_for(work, HANG_S))
    stranded = re.findall(
        r"(coder[-0-9]*)'s work is left uncommitted in its worktree (\S+)", summary.outcome.reason or ""
    )
    assert stranded, summary.outcome
    for agent, where in stranded:
        assert where == str(tmp_path / "home" / "runs" / summary.run_id / "worktrees" / agent)
        assert git(Path(where), "status", "--porcelain").strip(), "its fix is there, uncommitted"


@pytest.mark.slow
def test_a_run_killed_with_work_that_could_not_be_committed_lands_it_on_resume(tmp_path: Path) -> None:
    """Before teamrt stopped runs for a full disk, such a coder was left failed, and a resume of the run
    (hung, then killed) ended "done: nothing was merged". Now the resume commits and lands its work."""
    disk = tmp_path / "disk"  # no tmpfs here: the runner's paths only
    disk.mkdir()
    coding_repo(disk / "project")
    killed = teamrt(disk, "lock", "run", str(team_file("coding")), "--run-id", RUN)
    assert killed.returncode == -9, killed.stderr
    run_dir = disk / "home" / "runs" / RUN
    reader = open_reader(run_dir, RUN)
    try:
        failed = [a.name for a in reader.agents() if a.status == "failed"]
    finally:
        reader.close()
    assert failed, "a coder's landing failed before the kill"
    for lock in (disk / "project" / ".git" / "worktrees").glob("coder*/index.lock"):
        lock.unlink()
    resumed = teamrt(disk, "none", "resume", RUN)
    assert resumed.returncode == 0, resumed.stderr
    reader = open_reader(run_dir, RUN)
    try:
        merges = {m.agent: m.status for m in reader.merges()}
    finally:
        reader.close()
    assert merges == {"coder": "merged", "coder-1": "merged", "coder-2": "merged"}, merges


def test_a_passing_refusal_is_the_senders_tool_error_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Too many open files is no full disk: the sender hears it (``send it again later``), ``mail.failed``
    names it, and the run goes on: sent again, the message arrives once."""
    from teamrt import faults
    from teamrt.models import Reply
    from teamrt.sim import SimRequest, SimServer
    from teamrt.sim.plays.conversation import history
    from tests.helpers.teams import supervise

    def lead(request: SimRequest) -> Reply:
        sent = [o for o in history(request) if o.name == "send_message"]
        if not sent or (sent[-1].is_error and len(sent) < 2):
            return Reply().call("send_message", {"to": "supervisor", "body": "a note"})
        return Reply().say(" | ".join(o.output for o in sent))

    refusals: list[str] = []

    def too_many_files(detail: str) -> None:
        if detail.startswith("supervisor/") and not refusals:
            refusals.append(detail)
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text('[team]\nmodel = "sim"\n')
    run_dir = tmp_path / "home" / "runs" / "r1"
    with SimServer() as sim, faults.inject("mail.deliver", too_many_files):
        sim.policies["lead"] = lead
        outcome = supervise(project, sim, run_dir)
    assert outcome.status == "done", outcome
    first, second = outcome.answer.split(" | ")
    assert first == "not delivered: too many open files (mailbox of supervisor); send it again later"
    assert second.startswith("delivered ")
    reader = open_reader(run_dir, "r1")
    try:
        failed = reader.events(kinds=(MAIL_FAILED,))
        assert [(e.agent, e.data["to"], "message" in e.data) for e in failed] == [
            ("lead", "supervisor", False)
        ]
        assert "too many open files" in failed[0].data["note"]
    finally:
        reader.close()
    assert len(list((run_dir / "mailbox" / "supervisor" / "cur").glob("*.json"))) == 1, "sent again, once"


def test_a_broadcast_the_disk_cuts_short_says_who_has_it(tmp_path: Path) -> None:
    from teamrt import faults

    mailbox = Mailbox(tmp_path / "mailbox", "r1")
    for name in ("alice", "bob", "carol"):
        mailbox.register(name)

    def full_for_carol(detail: str) -> None:
        if detail.startswith("carol/"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    try:
        with faults.inject("mail.deliver", full_for_carol), pytest.raises(MailNotDelivered) as raised:
            mailbox.broadcast(sender="alice", body="all hands")
    finally:
        mailbox.close()
    assert raised.value.recipient == "carol" and raised.value.lasting
    assert [m.recipient for m in raised.value.delivered] == ["bob"]
    assert len(list((tmp_path / "mailbox" / "bob" / "new").iterdir())) == 1
    assert not list((tmp_path / "mailbox" / "carol" / "new").iterdir())
