"""``teamrt worker``: take queued runs from the server database's queue and run them here."""

from __future__ import annotations

import argparse

from teamrt.queue.connect import DEFAULT_POOL, queue_url
from teamrt.store.ownership import host_identity


def handle(args: argparse.Namespace) -> int:
    from teamrt.queue.worker import check_pool, run_worker

    url = queue_url()
    host_identity()  # a bad TEAMRT_HOST is one line now, not in every run's child
    run_worker(url, slots=args.slots, pool=check_pool(args.queue or DEFAULT_POOL))
    return 0
