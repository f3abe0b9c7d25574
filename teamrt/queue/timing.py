"""Every interval that decides how fast the queue notices a dead worker and hands its run on, in one place.

The order matters: a child fences itself (``PULSE_LOST_S``, ``LEASE_LOST_S``) before
its run's lease goes stale (``ownership.STALE_AFTER_S``, 15 s), so nobody takes a run
over while its old owner may still write. A worker is stalled after
``STALLED_WORKER_S`` without a heartbeat; the sweeper (every ``SWEEP_EVERY_S``) then
hands its runs on once their lease is free (a fenced child hands it back when the
database answers) or stale: 10 to 20 s after a worker is killed or stopped, about
30 s when its children cannot reach the database either.
"""

from __future__ import annotations

from teamrt.store.ownership import STALE_AFTER_S

PULSE_S = 1.0
"""How often a worker writes a byte down each child's pulse pipe."""
PULSE_LOST_S = 10.0
"""A child that has had no pulse for this long (its worker stopped, say by SIGSTOP) fences itself."""
LEASE_CHECK_S = 2.0
"""How often a child reads its run's lease on a connection of its own."""
LEASE_LOST_S = 10.0
"""A child whose lease check has not succeeded for this long (or whose own heartbeat is this old)
fences itself."""
WORKER_HEARTBEAT_S = 2.0
"""Procrastinate's worker heartbeat (its ``update_heartbeat_interval``)."""
STALLED_WORKER_S = 10.0
"""A worker whose heartbeat is older than this is stalled: its jobs go to the sweeper."""
SWEEP_EVERY_S = 5
"""The sweeper's period (a Procrastinate periodic task, seconds in its cron)."""
NO_RUN_ROW_STALLED_S = STALE_AFTER_S + 5.0
"""A stalled attempt whose run has no row yet (its child died before creating it) is handed on only
after its worker has been silent this long: any child it had has fenced itself by then."""
QUOTA_RETRY_S = 3
"""How soon a run held back by its submitter's quota is tried again (never counted as an attempt)."""
MAX_ATTEMPTS = 3
"""Attempts a run may crash (its child dying, or its worker lost) before it ends failed."""
BRANCH_CHECK_S = 2.0
"""How often a worker looks whether a run's integration branch moved, to push it."""
STOP_GRACE_S = 30.0
"""How long an aborted job waits for its run to stop before its process group is killed."""
FOLLOW_POLL_S = 1.0
"""How often a second delivery of an attempt that another worker drives looks whether it ended."""
