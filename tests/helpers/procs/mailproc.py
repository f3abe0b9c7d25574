"""Mailbox peers run as separate processes by the tests: ``python tests/helpers/procs/mailproc.py CMD ...``.

send ROOT RUN FROM TO COUNT      deliver COUNT messages, printing "sent <id>" after each returns
sendloop ROOT RUN FROM TO        print "ready", then deliver until killed, printing "try <id>"
                                 before and "sent <id>" after each delivery
drain ROOT RUN AGENT COUNT OUT   print "ready", receive and ack COUNT messages, write their ids
                                 to OUT, print "overflows <n>" (waiting up to 2.5 s for one)
hold ROOT RUN AGENT              print "got <id>" for the first message and never acknowledge it
"""

from __future__ import annotations

import asyncio
import sys
import time

from teamrt.mailbox import Inbox, Mailbox, Message


def send(root: str, run: str, sender: str, recipient: str, count: int) -> None:
    with Mailbox(root, run) as mailbox:
        for i in range(count):
            msg = mailbox.post(sender=sender, recipient=recipient, body=f"{sender} {i}", data={"i": i})
            print("sent", msg.id, flush=True)


def sendloop(root: str, run: str, sender: str, recipient: str) -> None:
    with Mailbox(root, run) as mailbox:
        print("ready", flush=True)
        i = 0
        while True:
            msg = Message.compose(run=run, sender=sender, recipient=recipient, body=f"{sender} {i}" * 50)
            print("try", msg.id, flush=True)
            mailbox.deliver(msg)
            print("sent", msg.id, flush=True)
            i += 1


async def drain(root: str, run: str, agent: str, count: int, out: str) -> None:
    with Mailbox(root, run) as mailbox:
        inbox = Inbox(mailbox, agent)
        inbox.start()
        print("ready", flush=True)
        ids: list[str] = []
        while len(ids) < count:
            msg = await inbox.next()
            ids.append(msg.id)
            inbox.ack(msg)
        with open(out, "w") as f:
            f.write("\n".join(ids))
        # The first scan after a freeze finds every message at once; the loop reads
        # the rest of the kernel's event queue (and its overflow event) only after.
        for _ in range(50):
            if inbox.overflows:
                break
            await asyncio.sleep(0.05)
        print("overflows", inbox.overflows, flush=True)
        inbox.close()


async def hold(root: str, run: str, agent: str) -> None:
    with Mailbox(root, run) as mailbox:
        inbox = Inbox(mailbox, agent)
        msg = await inbox.next()
        print("got", msg.id, flush=True)
        time.sleep(3600)  # killed here, between reading and acknowledging


def main(argv: list[str]) -> None:
    cmd, args = argv[0], argv[1:]
    if cmd == "send":
        send(args[0], args[1], args[2], args[3], int(args[4]))
    elif cmd == "sendloop":
        sendloop(args[0], args[1], args[2], args[3])
    elif cmd == "drain":
        asyncio.run(drain(args[0], args[1], args[2], int(args[3]), args[4]))
    elif cmd == "hold":
        asyncio.run(hold(args[0], args[1], args[2]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv[1:])
