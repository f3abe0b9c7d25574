"""Event kinds that no run records, for tests that use the store as a log of anything.

``Store.append_event`` takes an ``EventKind`` (teamrt.events), so mypy checks every kind teamrt records.
The store itself records any kind: tests of its order, commits and fencing write markers (``a``,
``a.after``), and the readers' tests write a kind teamrt does not know, which they must still show.
"""

from __future__ import annotations

from typing import cast

from teamrt.events import EventKind


def marker(kind: str) -> EventKind:
    """``kind`` passed as an event kind, though teamrt records no such event."""
    return cast(EventKind, kind)
