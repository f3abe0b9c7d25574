"""Self-fencing: a queued run's child kills its tools and exits before anyone may take its run over.

The child's worker writes a byte down a pipe every ``PULSE_S`` (its read end is
``PULSE_FD_ENV``). Two threads guard the child:

- the checker reads the run's lease every ``LEASE_CHECK_S`` on a connection of its
  own: the token this child took (learnt the first time the row names this process
  as its owner), and that owner's heartbeat age in the database's clock;
- the watchdog, which never blocks on the database, fences when the pipe reaches
  EOF (the worker died), when no pulse came for ``PULSE_LOST_S`` (the worker is
  stopped), when the lease was taken by someone else or this owner's heartbeat is
  ``LEASE_LOST_S`` old, or when no check has succeeded for ``LEASE_LOST_S``.

Fencing SIGKILLs every process descended from the child (its tools, their
sandboxes), then ends the child at once (``os._exit``): it happens before the
lease goes stale (``ownership.STALE_AFTER_S``), so a worker that is only stopped
has no child left writing once another takes its run. A child fenced because its
worker is gone first hands its lease back (token bumped, owner cleared) when the
database answers at once, so the sweeper need not wait for the lease to go stale.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time

from teamrt.queue.timing import LEASE_CHECK_S, LEASE_LOST_S, PULSE_LOST_S
from teamrt.store.ownership import host_identity

PULSE_FD_ENV = "TEAMRT_PULSE_FD"
FENCED_EXIT = 75
"""The exit status of a child that fenced itself."""
WATCH_S = 0.2
GIVE_UP_S = 2.0
"""How long a fencing child tries to hand its lease back (connecting, then updating), each."""


class Fence:
    """The two guarding threads of one child; ``start`` them once the run is known."""

    def __init__(self, url: str, run_id: str, pulse_fd: int | None) -> None:
        self.url = url
        self.run_id = run_id
        self.pulse_fd = pulse_fd
        self.host = host_identity()
        self.pid = os.getpid()
        self.token: int | None = None
        self.last_ok = time.monotonic()
        self.reason: str | None = None

    def start(self) -> None:
        if self.pulse_fd is not None:
            os.set_inheritable(self.pulse_fd, False)  # the child's tools never hold it
        threading.Thread(target=self._check_loop, name="fence-check", daemon=True).start()
        threading.Thread(target=self._watch_loop, name="fence-watch", daemon=True).start()

    # -- the checker ---------------------------------------------------------------

    def _check_loop(self) -> None:
        import psycopg

        from teamrt.queue.connect import conninfo

        conn: psycopg.Connection[tuple[object, ...]] | None = None
        while self.reason is None:
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(
                        conninfo(self.url), autocommit=True, connect_timeout=int(LEASE_CHECK_S * 2),
                        options=f"-c statement_timeout={int(LEASE_CHECK_S * 2000)}",
                    )  # fmt: skip
                row = conn.execute(
                    "SELECT owner_token, owner_host, owner_pid,"
                    " extract(epoch from clock_timestamp()) - heartbeat_at FROM runs WHERE id = %s",
                    (self.run_id,),
                ).fetchone()
                self._saw(row)
                self.last_ok = time.monotonic()
            except Exception:  # an unreachable database is what the watchdog times
                if conn is not None:
                    conn.close()
                conn = None
            time.sleep(LEASE_CHECK_S)

    def _saw(self, row: tuple[object, ...] | None) -> None:
        if row is None:
            return  # the run's row is not made yet
        token, host, pid, age = row
        mine = host == self.host and pid == self.pid
        if self.token is None:
            if mine:
                self.token = int(str(token))
            return
        if int(str(token)) != self.token:
            self.reason = f"run {self.run_id} was taken over (lease {self.token} -> {token})"
        elif mine and age is not None and float(str(age)) >= LEASE_LOST_S:
            self.reason = f"run {self.run_id}'s heartbeat is {float(str(age)):.0f} s old"

    # -- the watchdog ----------------------------------------------------------------

    def _watch_loop(self) -> None:
        last_pulse = time.monotonic()
        while True:
            now = time.monotonic()
            if self.pulse_fd is not None:
                ready, _, _ = select.select([self.pulse_fd], [], [], WATCH_S)
                if ready:
                    try:
                        data = os.read(self.pulse_fd, 4096)
                    except OSError:
                        data = b""
                    if not data:
                        self.fence("its worker is gone (pulse pipe closed)", give_up=True)
                    last_pulse = time.monotonic()
                elif now - last_pulse >= PULSE_LOST_S:
                    self.fence(f"no pulse from its worker for {now - last_pulse:.0f} s", give_up=True)
            else:
                time.sleep(WATCH_S)
            if self.reason is not None:
                self.fence(self.reason)
            if time.monotonic() - self.last_ok >= LEASE_LOST_S:
                self.fence(f"its lease could not be checked for {time.monotonic() - self.last_ok:.0f} s")

    def fence(self, why: str, *, give_up: bool = False) -> None:
        """Kill every descendant process, say why on stderr, exit at once; with ``give_up`` (its worker is
        gone, the database may well answer), hand the lease back first (``_give_up``)."""
        kill_descendants()
        try:
            if give_up:
                self._give_up()
            print(
                f"teamrt: fenced: run {self.run_id}: {why}; its tools were killed",
                file=sys.stderr,
                flush=True,
            )
        finally:
            os._exit(FENCED_EXIT)

    def _give_up(self) -> None:
        """Hand the run's lease back, its token bumped (so this process's own writer can write no more), so
        that another worker need not wait for it to go stale; skipped when the database does not answer
        within ``GIVE_UP_S`` (it goes stale then, as the design expects)."""
        import psycopg

        from teamrt.queue.connect import conninfo

        try:
            with psycopg.connect(
                conninfo(self.url), autocommit=True, connect_timeout=int(GIVE_UP_S),
                options=f"-c statement_timeout={int(GIVE_UP_S * 1000)}",
            ) as conn:  # fmt: skip
                conn.execute(  # only while this process is the owner (a take since would have replaced it)
                    "UPDATE runs SET owner_host = NULL, owner_pid = NULL, owner_start_time = NULL,"
                    " owner_since = NULL, owner_token = owner_token + 1"
                    " WHERE id = %s AND owner_host = %s AND owner_pid = %s"
                    " AND (%s::bigint IS NULL OR owner_token = %s::bigint)",
                    (self.run_id, self.host, self.pid, self.token, self.token),
                )
        except Exception:  # out of reach: the lease goes stale instead
            pass


def kill_descendants() -> None:
    """SIGKILL every process descended from this one (read from /proc; the tree is walked twice, for
    what was forked meanwhile)."""
    from teamrt.procs import tree

    me = os.getpid()
    for _ in range(2):
        for pid in tree(me) - {me}:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def start_fence(url: str, run_id: str) -> Fence:
    """Guard this child (``PULSE_FD_ENV`` names its pulse pipe; without it only the lease is watched)."""
    raw = os.environ.pop(PULSE_FD_ENV, None)
    fence = Fence(url, run_id, int(raw) if raw and raw.isdigit() else None)
    fence.start()
    return fence
