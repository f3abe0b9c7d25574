"""``teamrt worker``: Procrastinate workers that drive queued runs and sweep up after dead workers.

One process runs two of the library's workers on one event loop: one takes
``DRIVE_TASK`` jobs from the pool's queue, ``slots`` at a time; the other runs the
sweeper (``sweeper.sweep``, a periodic task with a queueing lock, so one copy is
queued per pool) from a queue of its own, so that a worker whose slots are all
taken still sweeps. Both heartbeat every ``WORKER_HEARTBEAT_S``. A run held back by
its submitter's quota is tried again in ``QUOTA_RETRY_S`` (``QuotaRetry``), not
counted as an attempt. SIGTERM or SIGINT stops both from taking jobs; running runs
are waited for.
"""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

from teamrt.errors import UserError
from teamrt.queue.attempts import QuotaWait
from teamrt.queue.connect import DEFAULT_POOL, DRIVE_TASK, SWEEP_TASK, make_app
from teamrt.queue.sweeper import SWEEP_SUFFIX, sweep
from teamrt.queue.timing import QUOTA_RETRY_S, STALLED_WORKER_S, SWEEP_EVERY_S, WORKER_HEARTBEAT_S
from teamrt.store.ownership import host_identity
from teamrt.terminal import clean_line

if TYPE_CHECKING:
    import procrastinate

_POOL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class BadPool(UserError):
    pass


def check_pool(pool: str) -> str:
    if not _POOL.fullmatch(pool):
        raise BadPool(
            f"queue {pool[:70]!r} is not a queue name (letters, digits, '.', '_' and '-', up to 64)"
        )
    return pool


def build_app(url: str, pool: str) -> procrastinate.App:
    """The library's app with teamrt's two tasks registered for ``pool``."""
    from procrastinate.retry import BaseRetryStrategy, RetryDecision

    from teamrt.queue.drive import drive_run

    class QuotaRetry(BaseRetryStrategy):
        def get_retry_decision(self, *, exception: BaseException, job: Any) -> RetryDecision | None:
            return (
                RetryDecision(retry_in={"seconds": QUOTA_RETRY_S})
                if isinstance(exception, QuotaWait)
                else None
            )

    app = make_app(url)

    async def drive(run_id: str, attempt: int) -> str:
        return await drive_run(url, run_id, attempt)

    async def sweeping(timestamp: int) -> None:
        await sweep(app, url, pool)

    app.task(name=DRIVE_TASK, retry=QuotaRetry(), queue=pool)(drive)
    sweeper = app.task(name=SWEEP_TASK, queue=pool + SWEEP_SUFFIX, queueing_lock=f"sweep:{pool}")(sweeping)
    app.periodic(cron=f"* * * * * */{SWEEP_EVERY_S}", periodic_id=pool)(sweeper)  # 6th field: seconds
    return app


class Unreachable(UserError):
    pass


def run_worker(url: str, *, slots: int, pool: str = DEFAULT_POOL) -> None:
    """Work ``pool`` with ``slots`` runs at once until SIGTERM or SIGINT; the database is upgraded to the
    newest schema first, as a run's store is when it is opened for writing."""
    check_pool(pool)
    _upgrade(url)
    _log_to_stderr()
    asyncio.run(_work(url, slots, pool))


def _upgrade(url: str) -> None:
    from sqlalchemy.exc import DBAPIError

    from teamrt.queue.connect import queue_engine
    from teamrt.store import migrate
    from teamrt.store.engine import describe
    from teamrt.store.errors import database_reason

    engine = queue_engine(url)
    try:
        with engine.connect() as conn:
            migrate.upgrade(conn, describe(url))
    except DBAPIError as e:
        raise Unreachable(
            f"the queue's database {describe(url)} cannot be used: {database_reason(e)}"
        ) from None
    finally:
        engine.dispose()


async def _work(url: str, slots: int, pool: str) -> None:
    from procrastinate.worker import Worker

    app = build_app(url, pool)
    name = host_identity()
    common: dict[str, Any] = {
        "install_signal_handlers": False, "update_heartbeat_interval": WORKER_HEARTBEAT_S,
        "stalled_worker_timeout": STALLED_WORKER_S, "name": name,
    }  # fmt: skip
    async with app.open_async():
        workers = [
            Worker(app, queues=[pool], concurrency=slots, **common),
            Worker(app, queues=[pool + SWEEP_SUFFIX], concurrency=1, **common),
        ]
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: [w.stop() for w in workers])  # type: ignore[no-untyped-call]
        logging.getLogger("teamrt.queue").info("worker %s on queue %s with %d slot(s)", name, pool, slots)
        await asyncio.gather(*(w.run() for w in workers))  # type: ignore[no-untyped-call]


class _Clean(logging.Formatter):
    """Log lines quote what submitters and repositories said (a git error): made safe for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return clean_line(super().format(record))


def _log_to_stderr() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Clean("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
