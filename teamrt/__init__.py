"""teamrt: a runtime for teams of LLM agents.

    import teamrt

    result = teamrt.run("Make the failing tests pass", team="team.toml", model="sim")
    print(result.status, result.answer, result.integration_branch, result.cost_usd)

The public API is what ``__all__`` names; it loads on first use (``teamrt.api``), so ``import teamrt``
stays free of the model SDK, the store's database layer and the TUI. The test kit is ``teamrt.testing``.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from teamrt.errors import TeamrtError, UserError

if TYPE_CHECKING:
    from teamrt.api import RunResult, continue_run, resume, run, run_async
    from teamrt.team import Role, Team

__version__ = "0.1.0"

_HOMES = {
    "RunResult": "teamrt.api",
    "continue_run": "teamrt.api",
    "resume": "teamrt.api",
    "run": "teamrt.api",
    "run_async": "teamrt.api",
    "Role": "teamrt.team",
    "Team": "teamrt.team",
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


__all__ = [
    "Role",
    "RunResult",
    "Team",
    "TeamrtError",
    "UserError",
    "__version__",
    "continue_run",
    "resume",
    "run",
    "run_async",
]

# A library stays quiet unless the application configures logging.
logging.getLogger("teamrt").addHandler(logging.NullHandler())
