"""The ``sim`` model: a Messages API simulator on loopback, driven by policies.

No SDK import here: the server speaks HTTP itself, and the ``sim`` provider is
the ``anthropic`` provider pointed at it.
"""

from __future__ import annotations

import atexit
import threading

from teamrt.sim.cache import CacheLedger, CacheOutcome, Position, render
from teamrt.sim.corpus import Corpus, Page
from teamrt.sim.faults import KINDS as FAULT_KINDS
from teamrt.sim.faults import Fault, FaultPlan
from teamrt.sim.policy import Policy, SimRequest, ToolOutcome, echo
from teamrt.sim.server import SimCall, SimServer
from teamrt.sim.servertools import searcher

_shared: SimServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> SimServer:
    """The process's own simulator (the example teams' policies, the generic play for every other role),
    started on first use, closed at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            from teamrt.sim.plays import DEFAULT, POLICIES

            _shared = SimServer(POLICIES, default=DEFAULT)
            atexit.register(_shared.close)
        return _shared


__all__ = [
    "FAULT_KINDS",
    "CacheLedger",
    "CacheOutcome",
    "Corpus",
    "Fault",
    "FaultPlan",
    "Page",
    "Policy",
    "Position",
    "SimCall",
    "SimRequest",
    "SimServer",
    "ToolOutcome",
    "echo",
    "render",
    "searcher",
    "shared_server",
]
