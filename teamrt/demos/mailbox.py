"""``teamrt demo``: the mailbox at work between real processes, until the agent runtime exists.

The lead (this process) starts alice, bob and carol as worker processes
(``python -m teamrt.demos.mailbox --agent NAME ...``) and, through one run's
mailbox, measures latency, broadcasts a task, mails an agent who is not in
the run, plants a hostile file and shuts the workers down.

One-way latency is the receiver's wake time minus the sender's send start,
both ``time.perf_counter_ns()``: CLOCK_MONOTONIC on Linux, one clock for
every process on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt import home
from teamrt.errors import TeamrtError
from teamrt.mailbox import Inbox, Mailbox, MailboxError, Message, UnknownRecipient, new_id, open_watcher
from teamrt.mailbox.watcher import Watcher
from teamrt.procs import python_module

LEAD = "lead"
WORKERS = ("alice", "bob", "carol")
STRANGER = "dave"
TASK = "count the words of this sentence and send the number back"
HOSTILE = b'{"v": 1, "kind": "message", "body": "cut short"'
START_TIMEOUT = 15.0  # seconds for a fresh worker process to answer its first message
REPLY_TIMEOUT = 5.0
EXIT_TIMEOUT = 5.0
ORPHAN_CHECK_SECONDS = 1.0
INDENT = "   "

Workers = dict[str, subprocess.Popen[bytes]]


class DemoFailed(TeamrtError):
    """A step of the demo went wrong; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Reply:
    msg: Message
    woke_ns: int  # when it reached the lead


@dataclass(frozen=True, slots=True)
class Sample:
    worker: str
    one_way_ns: int
    round_trip_ns: int


# -- the lead ----------------------------------------------------------------


class Lead:
    """The lead's side: sends through the mailbox and collects replies from its inbox."""

    def __init__(self, mailbox: Mailbox, inbox: Inbox, workers: Workers) -> None:
        self.mailbox = mailbox
        self.inbox = inbox
        self.workers = workers
        self.sent = 0
        self.received = 0

    def send(self, recipient: str, body: str) -> Message:
        """Deliver a message stamped with its send start (``data["sent_ns"]``)."""
        data = {"sent_ns": time.perf_counter_ns()}
        msg = self.mailbox.post(sender=LEAD, recipient=recipient, body=body, data=data)
        self.sent += 1
        return msg

    def broadcast(self, body: str, kind: str) -> list[Message]:
        data = {"sent_ns": time.perf_counter_ns()}
        sent = self.mailbox.broadcast(sender=LEAD, body=body, kind=kind, data=data)
        self.sent += len(sent)
        return sent

    async def replies(
        self, sent: Iterable[Message], kind: str, timeout: float = REPLY_TIMEOUT
    ) -> dict[str, Reply]:
        """Each recipient's reply (of ``kind``) to ``sent``; every message read is acknowledged."""
        waiting = {msg.id: msg.recipient for msg in sent}
        got: dict[str, Reply] = {}
        try:
            async with asyncio.timeout(timeout):
                while waiting:
                    msg = await self.inbox.next()
                    woke_ns = time.perf_counter_ns()
                    self.received += 1
                    self.inbox.ack(msg)
                    if msg.kind != kind:
                        raise DemoFailed(f"{msg.sender} answered with a {msg.kind!r}, not a {kind!r}")
                    if msg.reply_to in waiting:
                        got[waiting.pop(msg.reply_to)] = Reply(msg, woke_ns)
        except TimeoutError:
            raise DemoFailed("; ".join(self._silence(name, timeout) for name in waiting.values())) from None
        return got

    def _silence(self, name: str, timeout: float) -> str:
        code = self.workers[name].poll()
        if code is None:
            return f"{name} did not answer within {timeout:g} s"
        return f"{name} did not answer: its process exited with code {code}"


async def lead_demo(mailbox: Mailbox, watcher: Watcher, workers: Workers, rounds: int) -> None:
    async with Inbox(mailbox, LEAD, watcher=watcher) as inbox:
        lead = Lead(mailbox, inbox, workers)
        await start(lead, watcher.kind)
        await ping_pong(lead, rounds)
        await broadcast_task(lead)
        unknown_recipient(lead)
        await hostile_file(lead, WORKERS[0])
        received = await shutdown(lead)
        report_counts(lead, received)


async def start(lead: Lead, watcher_kind: str) -> None:
    """Wait until every worker process is up and answering."""
    began = time.perf_counter()
    await lead.replies([lead.send(name, "hello") for name in WORKERS], "message", START_TIMEOUT)
    pids = ", ".join(f"{name} (pid {proc.pid})" for name, proc in lead.workers.items())
    print(f"workers: {pids}, answering after {time.perf_counter() - began:.2f} s")
    print(f"wake-ups: {watcher_kind}; every delivery is fsynced")


async def ping_pong(lead: Lead, rounds: int) -> None:
    print(f"1. ping-pong, {rounds} round trips to each worker, one at a time")
    samples: list[Sample] = []
    for i in range(rounds):
        for name in WORKERS:
            sent = lead.send(name, f"ping {i}")
            replies = await lead.replies([sent], "message")
            samples.append(_sample(sent, replies[name]))
    print(f"{INDENT}one-way latency (send start -> receiver awake) and round trip, in ms:")
    for line in latency_table(samples):
        print(INDENT + line)


def _sample(sent: Message, reply: Reply) -> Sample:
    sent_ns: int = sent.data["sent_ns"]
    woke_ns = reply.msg.data.get("woke_ns")
    if not isinstance(woke_ns, int):
        raise DemoFailed(f"{sent.recipient}'s reply does not say when it woke")
    return Sample(sent.recipient, woke_ns - sent_ns, reply.woke_ns - sent_ns)


async def broadcast_task(lead: Lead) -> None:
    began = time.perf_counter_ns()
    replies = await lead.replies(lead.broadcast(TASK, "task_assigned"), "result")
    elapsed = time.perf_counter_ns() - began
    print(f"2. broadcast a task to {len(replies)} workers: {TASK!r}")
    results = ", ".join(f"{name} {replies[name].msg.body}" for name in WORKERS)
    print(f"{INDENT}results: {results} (all back in {_ms(elapsed)} ms)")


def unknown_recipient(lead: Lead) -> None:
    try:
        lead.send(STRANGER, "are you there?")
    except UnknownRecipient as e:
        print(f"3. mail to {STRANGER!r}, who is not in the run, is an error to the sender:")
        print(f"{INDENT}UnknownRecipient: {e}")
        return
    raise DemoFailed(f"mail to {STRANGER!r}, who is not in the run, was accepted")


async def hostile_file(lead: Lead, agent: str) -> None:
    """Plant invalid JSON in ``agent``'s new/: it goes to bad/, and ``agent`` goes on receiving."""
    name = f"{new_id()}.json"  # older than the next message's id, so read before it
    maildir = lead.mailbox.root / agent
    fd = os.open(maildir / "tmp" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(HOSTILE)
    os.rename(maildir / "tmp" / name, maildir / "new" / name)
    print(f"4. planted invalid JSON (mode 0600) as {agent}/new/{name}")
    msg = lead.send(agent, "still there?")
    reply = (await lead.replies([msg], "message"))[agent]
    note = _quarantine_note(lead.mailbox, agent, name)
    print(f"{INDENT}moved to {agent}/bad/{note['file']}, reason: {note['reason']}")
    round_trip = reply.woke_ns - msg.data["sent_ns"]
    print(f"{INDENT}{agent} went on receiving: answered the next message in {_ms(round_trip)} ms")


def _quarantine_note(mailbox: Mailbox, agent: str, name: str) -> dict[str, Any]:
    with mailbox.open_maildir(agent) as maildir:
        for note in maildir.quarantined():
            if note["name"] == name:
                return note
    raise DemoFailed(f"{agent} answered, but did not quarantine the hostile file first")


async def shutdown(lead: Lead) -> dict[str, object]:
    """Ask every worker to stop; returns how many messages each says it received."""
    sent = lead.broadcast("the work is done; please stop", "shutdown_request")
    replies = await lead.replies(sent, "shutdown_response")
    codes = await asyncio.to_thread(stop, lead.workers, EXIT_TIMEOUT)
    unclean = [f"{name} {_ending(code)}" for name, code in codes.items() if code != 0]
    if unclean:
        raise DemoFailed(f"after its shutdown_response, {', '.join(unclean)}")
    print(f"5. shutdown_request to all: {len(replies)} shutdown_response, every worker exited with code 0")
    return {name: reply.msg.data.get("received") for name, reply in replies.items()}


def report_counts(lead: Lead, received: dict[str, object]) -> None:
    """Check the mailbox on disk against the counts."""
    counts = {sub: _count_files(lead.mailbox, sub) for sub in ("new", "cur", "bad")}
    if counts["new"]:
        raise DemoFailed(f"{counts['new']} message(s) left unacknowledged in new/")
    if counts["cur"] != lead.sent + lead.received:
        raise DemoFailed(f"{counts['cur']} messages in cur/, but {lead.sent + lead.received} were sent")
    by_worker = ", ".join(f"{name} {received[name]}" for name in WORKERS)
    print(f"messages: lead sent {lead.sent} and received {lead.received}; workers received {by_worker}")
    print(f"on disk: {counts['cur']} acknowledged in cur/, 0 left in new/, {counts['bad']} files in bad/")


def _count_files(mailbox: Mailbox, sub: str) -> int:
    return sum(len(os.listdir(mailbox.root / agent / sub)) for agent in mailbox.members())


def latency_table(samples: Sequence[Sample]) -> list[str]:
    """p50/p90/p99/max one-way latency and the round-trip p50, per worker and overall, in ms."""
    lines = [f"{'worker':<8}{'p50':>8}{'p90':>8}{'p99':>8}{'max':>8}{'rtt p50':>10}"]
    for name in (*WORKERS, "all"):
        chosen = [s for s in samples if name in (s.worker, "all")]
        one_way = sorted(s.one_way_ns for s in chosen)
        round_trip = sorted(s.round_trip_ns for s in chosen)
        cells = [percentile(one_way, p) for p in (50, 90, 99)] + [one_way[-1]]
        row = "".join(f"{_ms(ns):>8}" for ns in cells)
        lines.append(f"{name:<8}{row}{_ms(percentile(round_trip, 50)):>10}")
    return lines


def percentile(ordered: Sequence[int], pct: float) -> int:
    """The nearest-rank percentile of ascending ``ordered`` values."""
    rank = math.ceil(pct / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.2f}"


def _ending(code: int | None) -> str:
    return "was killed: it did not exit in time" if code is None else f"exited with code {code}"


# -- processes -----------------------------------------------------------------


def run(rounds: int = 200) -> int:
    """The demo: 0 on success, 1 with one line on stderr when a step fails."""
    began = time.perf_counter()
    try:
        lead_run(rounds)
    except DemoFailed as e:
        print(f"teamrt demo: {e}", file=sys.stderr)
        return 1
    print(f"done in {time.perf_counter() - began:.1f} s")
    return 0


def lead_run(rounds: int) -> None:
    """Create the run, start the workers, lead them, and stop them whatever happens."""
    run_id = home.new_run_id()
    with closing(open_watcher()) as watcher, Mailbox(home.run_dir(run_id) / "mailbox", run_id) as mailbox:
        for agent in (LEAD, *WORKERS):
            mailbox.register(agent)
        print(f"teamrt mailbox demo, run {run_id}: a lead and {len(WORKERS)} worker processes")
        print(f"mailbox: {mailbox.root}")
        print(f"{INDENT}one maildir per agent: tmp/ new/ cur/ bad/, one JSON file per message")
        workers: Workers = {}
        try:
            for name in WORKERS:
                workers[name] = start_worker(mailbox, name)
            asyncio.run(lead_demo(mailbox, watcher, workers, rounds))
        finally:
            stop(workers, 0)


def start_worker(mailbox: Mailbox, name: str) -> subprocess.Popen[bytes]:
    command = python_module("teamrt.demos.mailbox")
    command += ["--agent", name, "--root", str(mailbox.root), "--run", mailbox.run]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def stop(workers: Workers, timeout: float) -> dict[str, int | None]:
    """Wait up to ``timeout`` s in all for the workers to exit; kill the rest (code None)."""
    deadline = time.monotonic() + timeout
    codes: dict[str, int | None] = {}
    for name, proc in workers.items():
        try:
            codes[name] = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            codes[name] = None
    return codes


# -- a worker ------------------------------------------------------------------


def worker_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m teamrt.demos.mailbox", description="A worker process of `teamrt demo`."
    )
    parser.add_argument("--agent", required=True)
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--run", required=True)
    args = parser.parse_args(argv)
    prefix = f"teamrt demo worker {args.agent}"
    # The lead reports the quarantine itself; a worker logs only errors.
    logging.basicConfig(level=logging.ERROR, format=f"{prefix}: %(message)s")
    try:
        with Mailbox(args.root, args.run) as mailbox:
            asyncio.run(work(mailbox, args.agent))
    except (DemoFailed, MailboxError, OSError) as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def work(mailbox: Mailbox, agent: str) -> None:
    """Serve until a shutdown request, or until the lead process has gone."""
    lead_pid = os.getppid()
    serving = asyncio.create_task(serve(mailbox, agent))
    while os.getppid() == lead_pid:
        done, _ = await asyncio.wait({serving}, timeout=ORPHAN_CHECK_SECONDS)
        if done:
            return await serving  # raises what serve() raised
    serving.cancel()
    raise DemoFailed(f"the lead (pid {lead_pid}) has gone; stopping")


async def serve(mailbox: Mailbox, agent: str) -> None:
    """Record, acknowledge and answer each message, until a shutdown request."""
    received = 0
    async with Inbox(mailbox, agent) as inbox:
        async for msg in inbox:
            woke_ns = time.perf_counter_ns()
            received += 1  # the record: a real agent commits msg.id to its store before the ack
            inbox.ack(msg)
            mailbox.deliver(answer(msg, {"woke_ns": woke_ns, "received": received}))
            if msg.kind == "shutdown_request":
                return


def answer(msg: Message, data: dict[str, int]) -> Message:
    if msg.kind == "task_assigned":
        return msg.reply(f"{len(msg.body.split())} words", kind="result", data=data)
    if msg.kind == "shutdown_request":
        return msg.reply("stopping", kind="shutdown_response", data=data)
    return msg.reply("pong", data=data)


if __name__ == "__main__":
    raise SystemExit(worker_main())
