"""teamrt's test kit: run a team on a simulator you script, and check what it did.

    from teamrt.testing import Reply, SimRequest, SimServer, run_on_sim

    def lead(request: SimRequest) -> Reply:
        return Reply().say("done")

    with SimServer({"lead": lead}) as sim:
        result = run_on_sim("team.toml", "go", project=project, sim=sim)

- ``SimServer``: the Messages API on loopback, for the unmodified anthropic SDK; its policies (functions
  from a ``SimRequest`` to a ``Reply``) play the roles, by ``<team>/<role>`` or ``<role>``; ``Fault``s
  queued on ``sim.faults`` break its responses (rate limits, overloads, cut or stalled streams); each
  request it answered is a ``SimCall`` in ``sim.calls``.
- ``ScriptedModel``: a ``Model`` in the process that answers from a list of steps, for a loop alone.
- ``run_on_sim``: a whole run through the real runtime, returning a ``teamrt.RunResult``.
- ``chaos``: crash a run at every fault point and resume it; ``pgserver``: a throwaway PostgreSQL.

Names load on first use, so importing this module costs nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from teamrt.models.reply import Reply
    from teamrt.models.scripted import ScriptedModel
    from teamrt.sim.faults import Fault
    from teamrt.sim.policy import SimRequest
    from teamrt.sim.server import SimCall, SimServer
    from teamrt.testing.onsim import run_on_sim

_HOMES = {
    "Fault": "teamrt.sim.faults",
    "Reply": "teamrt.models.reply",
    "ScriptedModel": "teamrt.models.scripted",
    "SimCall": "teamrt.sim.server",
    "SimRequest": "teamrt.sim.policy",
    "SimServer": "teamrt.sim.server",
    "run_on_sim": "teamrt.testing.onsim",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = ["Fault", "Reply", "ScriptedModel", "SimCall", "SimRequest", "SimServer", "run_on_sim"]
