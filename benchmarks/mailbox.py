"""Mailbox benchmark: durable delivery latency and 4-sender throughput, against a floor and a rival.

Measured in one run, on the same disk:

- teamrt: ``Mailbox.post`` in one process, ``Inbox.next`` waking in another, which
  acknowledges each message; latency is send start -> receiver holds the parsed message.
- floor: bare loops of write + fsync + rename in one process and a blocking read of an
  inotify descriptor in the other: what any durable, push-woken mailbox must pay.
- polling: the rival's shape, a JSON-array inbox rewritten under a lock file and polled
  every 500 ms.

Latencies are ping-pong (the next message goes when the last was acknowledged), so they
hold no queueing. ``time.perf_counter_ns`` is CLOCK_MONOTONIC here, one clock for all
processes. Prints a table, then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import fcntl
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from teamrt.mailbox import Inbox, Mailbox

RUN = "bench"
IN_MOVED_TO = 0x80
POLL_SECONDS = 0.5
TARGET_P50_RATIO = 1.5
TARGET_P99_MS = 10.0
TARGET_THROUGHPUT_RATIO = 0.7
ROUNDS = 3
BLOCK = 25


def now() -> int:
    return time.perf_counter_ns()


# -- teamrt ------------------------------------------------------------------


def teamrt_receiver(root: str, count: int, conn: Connection, ready: Event) -> None:
    async def go() -> None:
        with Mailbox(root, RUN) as mailbox:
            inbox = Inbox(mailbox, "rx")
            inbox.start()
            ready.set()
            for _ in range(count):
                msg = await inbox.next()
                woke = now()
                inbox.ack(msg)
                conn.send((msg.data["t0"], woke))
            inbox.close()

    asyncio.run(go())


def teamrt_sender(root: str, name: str, count: int, go: Event) -> None:
    with Mailbox(root, RUN) as mailbox:
        go.wait()
        for i in range(count):
            mailbox.post(sender=name, recipient="rx", body=f"{name} {i}", data={"t0": 0})


def teamrt_throughput(base: Path, per_sender: int) -> tuple[int, float]:
    """Messages and seconds for 4 senders at full speed into one acknowledging receiver."""
    root = str(base / "teamrt-throughput")
    total = 4 * per_sender
    with Mailbox(root, RUN) as mailbox:
        mailbox.register("rx")
    parent, child = mp.Pipe()
    ready, go = mp.Event(), mp.Event()
    receiver = mp.Process(target=teamrt_receiver, args=(root, total, child, ready))
    receiver.start()
    senders = [mp.Process(target=teamrt_sender, args=(root, f"s{i}", per_sender, go)) for i in range(4)]
    for s in senders:
        s.start()
    ready.wait()
    time.sleep(0.2)  # let the senders reach their start line
    start = now()
    go.set()
    last = start
    for _ in range(total):
        last = parent.recv()[1]
    receiver.join()
    for s in senders:
        s.join()
    return total, (last - start) / 1e9


# -- floor -------------------------------------------------------------------


def inotify_on(path: str) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = int(libc.inotify_init1(os.O_CLOEXEC))
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), IN_MOVED_TO) < 0:
        raise OSError(ctypes.get_errno(), "inotify")
    return fd


def floor_receiver(new: str, count: int, conn: Connection, ready: Event) -> None:
    fd = inotify_on(new)
    ready.set()
    seen = 0
    while seen < count:
        buf = os.read(fd, 65536)
        woke = now()
        events = 0
        offset = 0
        while offset < len(buf):  # struct inotify_event: wd, mask, cookie, len, name[len]
            name_len = int.from_bytes(buf[offset + 12 : offset + 16], sys.byteorder)
            offset += 16 + name_len
            events += 1
        for _ in range(events):
            conn.send(woke)
        seen += events


def floor_write(tmp: str, new: str, name: str, payload: bytes, sync_dir: bool = False) -> None:
    fd = os.open(os.path.join(tmp, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, payload)
    os.fsync(fd)
    os.close(fd)
    os.rename(os.path.join(tmp, name), os.path.join(new, name))
    if sync_dir:  # the reference that also makes the rename durable, as teamrt does
        fd = os.open(new, os.O_RDONLY | os.O_DIRECTORY)
        os.fsync(fd)
        os.close(fd)


def floor_dirs(base: Path, label: str) -> tuple[str, str]:
    tmp, new = base / label / "tmp", base / label / "new"
    tmp.mkdir(parents=True)
    new.mkdir(parents=True)
    return str(tmp), str(new)


def paired_latency(base: Path, n: int, payload: bytes) -> tuple[list[float], list[float]]:
    """Latency samples of teamrt and of the floor, taken in alternating blocks."""
    root = str(base / "teamrt-latency")
    tmp, new = floor_dirs(base, "floor-latency")
    with Mailbox(root, RUN) as mailbox:
        mailbox.register("rx")
        ours_conn, ours_child = mp.Pipe()
        floor_conn, floor_child = mp.Pipe()
        ours_ready, floor_ready = mp.Event(), mp.Event()
        receivers = [
            mp.Process(target=teamrt_receiver, args=(root, n, ours_child, ours_ready)),
            mp.Process(target=floor_receiver, args=(new, n, floor_child, floor_ready)),
        ]
        for proc in receivers:
            proc.start()
        ours_ready.wait()
        floor_ready.wait()
        ours: list[float] = []
        floor: list[float] = []

        def floor_once(i: int) -> None:
            t0 = now()
            floor_write(tmp, new, f"m{i}", payload)
            floor.append((floor_conn.recv() - t0) / 1e6)

        def ours_once(i: int) -> None:
            mailbox.post(sender="tx", recipient="rx", body=f"ping {i}", data={"t0": now()})
            sent_at, woke = ours_conn.recv()
            ours.append((woke - sent_at) / 1e6)

        # Alternate in blocks: drift on a shared disk meets both alike, and each
        # series pays only for its own leftovers in the journal (a floor rename is
        # never fsynced; a teamrt delivery fsyncs its directory).
        for block in range(0, n, BLOCK):
            order = (floor_once, ours_once) if block // BLOCK % 2 else (ours_once, floor_once)
            for once in order:
                for i in range(block, min(n, block + BLOCK)):
                    once(i)
        for proc in receivers:
            proc.join()
    return ours, floor


def floor_sender(
    tmp: str, new: str, name: str, count: int, payload: bytes, sync_dir: bool, go: Event
) -> None:
    go.wait()
    for i in range(count):
        floor_write(tmp, new, f"{name}-{i}", payload, sync_dir)


def floor_throughput(base: Path, per_sender: int, payload: bytes, sync_dir: bool) -> tuple[int, float]:
    tmp, new = floor_dirs(base, "floor-throughput-dirsync" if sync_dir else "floor-throughput")
    total = 4 * per_sender
    parent, child = mp.Pipe()
    ready, go = mp.Event(), mp.Event()
    receiver = mp.Process(target=floor_receiver, args=(new, total, child, ready))
    receiver.start()
    senders = [
        mp.Process(target=floor_sender, args=(tmp, new, f"s{i}", per_sender, payload, sync_dir, go))
        for i in range(4)
    ]
    for s in senders:
        s.start()
    ready.wait()
    time.sleep(0.2)
    start = now()
    go.set()
    last = start
    for _ in range(total):
        last = parent.recv()
    receiver.join()
    for s in senders:
        s.join()
    return total, (last - start) / 1e9


# -- the rival's shape: a JSON array under a lock file, polled -----------------


class LockedJsonInbox:
    """The rival's inbox: one JSON array, rewritten whole under a lock file for each message."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "inbox.json"
        self.lock = directory / "inbox.lock"
        if not self.path.exists():
            self.path.write_text("[]")

    def _locked(self) -> int:
        fd = os.open(self.lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def append(self, entry: dict[str, object]) -> None:
        fd = self._locked()
        try:
            entries = json.loads(self.path.read_text())
            entries.append(entry)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(entries))
            tmp.replace(self.path)
        finally:
            os.close(fd)

    def read_from(self, index: int) -> list[dict[str, object]]:
        fd = self._locked()
        try:
            entries: list[dict[str, object]] = json.loads(self.path.read_text())
        finally:
            os.close(fd)
        return entries[index:]


def polling_receiver(directory: str, count: int, conn: Connection, ready: Event) -> None:
    inbox = LockedJsonInbox(Path(directory))
    ready.set()
    seen = 0
    while seen < count:
        time.sleep(POLL_SECONDS)
        for entry in inbox.read_from(seen):
            conn.send((entry["t0"], now()))
            seen += 1


def polling_latency(base: Path, n: int) -> list[float]:
    directory = base / "polling"
    directory.mkdir()
    inbox = LockedJsonInbox(directory)
    parent, child = mp.Pipe()
    ready = mp.Event()
    proc = mp.Process(target=polling_receiver, args=(str(directory), n, child, ready))
    proc.start()
    ready.wait()
    rng = random.Random(7)
    for i in range(n):  # arrivals at random phases of the poll, not waiting for receipts
        time.sleep(rng.uniform(0, POLL_SECONDS / 2))
        inbox.append({"t0": now(), "body": f"ping {i}"})
    samples = []
    for _ in range(n):
        sent_at, woke = parent.recv()
        samples.append((woke - sent_at) / 1e6)
    proc.join()
    return samples


# -- report ------------------------------------------------------------------


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--latency-n", type=int, default=600, help="ping-pong messages per latency series")
    parser.add_argument(
        "--per-sender", type=int, default=500, help="messages per sender per throughput round"
    )
    parser.add_argument("--polling-n", type=int, default=40, help="messages through the polled JSON inbox")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="teamrt-bench-", dir=os.environ.get("TMPDIR")) as tmp:
        base = Path(tmp)
        # The floor writes as many bytes as a teamrt message file holds.
        with Mailbox(base / "probe", RUN) as probe:
            probe.register("rx")
            raw = b"x" * len(
                probe.post(sender="tx", recipient="rx", body="ping 0", data={"t0": now()}).encode()
            )
        ours, floor = paired_latency(base, args.latency_n, raw)
        # Throughput in alternating rounds, for the same reason.
        runs: dict[str, list[tuple[int, float]]] = {"teamrt": [], "floor": [], "floor+dirsync": []}
        for round_ in range(ROUNDS):
            where = base / f"r{round_}"
            runs["teamrt"].append(teamrt_throughput(where, args.per_sender))
            runs["floor"].append(floor_throughput(where, args.per_sender, raw, sync_dir=False))
            runs["floor+dirsync"].append(floor_throughput(where, args.per_sender, raw, sync_dir=True))
        rate = {k: sum(n for n, _ in v) / sum(s for _, s in v) for k, v in runs.items()}
        ours_tp, floor_tp = rate["teamrt"], rate["floor"]
        polling = polling_latency(base, args.polling_n)

    result = {
        "p50_ms": round(statistics.median(ours), 3),
        "p99_ms": round(pct(ours, 0.99), 3),
        "floor_p50_ms": round(statistics.median(floor), 3),
        "floor_p99_ms": round(pct(floor, 0.99), 3),
        "polling_p50_ms": round(statistics.median(polling), 1),
        "polling_p99_ms": round(pct(polling, 0.99), 1),
        "msgs_per_s_4": round(ours_tp),
        "floor_msgs_per_s_4": round(floor_tp),
        "floor_dirsync_msgs_per_s_4": round(rate["floor+dirsync"]),
    }
    result["p50_vs_floor"] = round(result["p50_ms"] / result["floor_p50_ms"], 2)
    result["throughput_vs_floor"] = round(ours_tp / floor_tp, 2)
    result["throughput_vs_floor_dirsync"] = round(ours_tp / rate["floor+dirsync"], 2)
    result["p50_vs_polling"] = round(result["p50_ms"] / result["polling_p50_ms"], 4)
    result["targets_met"] = (
        result["p50_vs_floor"] <= TARGET_P50_RATIO
        and result["p99_ms"] <= TARGET_P99_MS
        and result["throughput_vs_floor"] >= TARGET_THROUGHPUT_RATIO
    )

    print(f"{'':24}{'p50 ms':>10}{'p99 ms':>10}{'msgs/s (4 senders)':>22}")
    print(f"{'teamrt mailbox':24}{result['p50_ms']:>10}{result['p99_ms']:>10}{result['msgs_per_s_4']:>22}")
    print(
        f"{'floor (fsync+rename)':24}{result['floor_p50_ms']:>10}{result['floor_p99_ms']:>10}"
        f"{result['floor_msgs_per_s_4']:>22}"
    )
    print(f"{'floor + directory fsync':24}{'':>10}{'':>10}{result['floor_dirsync_msgs_per_s_4']:>22}")
    print(f"{'polled JSON array':24}{result['polling_p50_ms']:>10}{result['polling_p99_ms']:>10}{'-':>22}")
    print(
        f"p50 {result['p50_vs_floor']}x floor (target <= {TARGET_P50_RATIO}), p99 {result['p99_ms']} ms "
        f"(target <= {TARGET_P99_MS}), throughput {result['throughput_vs_floor']}x floor "
        f"(target >= {TARGET_THROUGHPUT_RATIO}): {'met' if result['targets_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
