"""Teams in tests: short model settings, a whole run on ``sim``, one call through the real SDK."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamrt.models import ModelRequest, ModelResponse, open_model
from teamrt.settings import ModelSettings, Settings
from teamrt.sim import SimServer

if TYPE_CHECKING:
    from teamrt.runtime.agent import Outcome

FAST = Settings(
    model=ModelSettings(stall_seconds=0.5, stream_retries=2, stream_retry_delay=0.01, sdk_retries=2)
)
"""Model settings that keep retries and stalls short in tests."""


def supervise(project: Path, sim: SimServer, run_dir: Path, prompt: str = "go") -> Outcome:
    """``prompt`` run to its end by the real supervisor, as ``project``'s ``team.toml`` says, its models on
    ``sim``, in a new run kept in ``run_dir``; 60 s only bound a hang."""
    from teamrt.agents import load_definitions
    from teamrt.runtime.supervisor import Supervisor
    from teamrt.store import create_store
    from teamrt.team import load_team

    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r1", task=prompt, workdir=str(project))

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=load_team(project / "team.toml", project=project),
            definitions=load_definitions(project), project=project, settings=FAST, sim=sim,
        )  # fmt: skip
        return await asyncio.wait_for(supervisor.run(prompt), 60)

    try:
        return asyncio.run(go())
    finally:
        store.close()


def complete(sim: SimServer, request: ModelRequest, **kw: Any) -> ModelResponse:
    """One call through the real SDK to ``sim``, with FAST settings, from a fresh event loop."""

    async def go() -> ModelResponse:
        model = open_model("sim", sim=sim, settings=FAST)
        try:
            return await model.complete(request, **kw)
        finally:
            await model.aclose()

    return asyncio.run(go())
