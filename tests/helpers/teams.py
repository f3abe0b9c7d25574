"""Teams in tests: short model settings, a whole run on ``sim``, one call through the real SDK."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrt.api import RunResult
from teamrt.models import ModelRequest, ModelResponse, open_model
from teamrt.settings import ModelSettings, Settings
from teamrt.sim import SimServer
from teamrt.store import StoreReader, open_reader
from teamrt.testing import run_on_sim

FAST = Settings(
    model=ModelSettings(stall_seconds=0.5, stream_retries=2, stream_retry_delay=0.01, sdk_retries=2)
)
"""Model settings that keep retries and stalls short in tests."""


@dataclass(frozen=True)
class Kept:
    """A finished run's store as a test reads it: ``kept.reader``, as the ``Store`` that ran it has one."""

    reader: StoreReader

    def close(self) -> None:
        self.reader.close()


def kept(result: RunResult) -> Kept:
    """The store of the run ``result`` tells of, to read."""
    return Kept(open_reader(result.run_dir, result.run_id))


def supervise(project: Path, sim: SimServer, run_dir: Path, prompt: str = "go") -> RunResult:
    """``prompt`` run to its end (``run_on_sim``) as ``project``'s ``team.toml`` says, its models on
    ``sim``, as run ``r1`` kept in ``run_dir``; 60 s only bound a hang."""
    return run_on_sim(
        project / "team.toml",
        prompt,
        project=project,
        sim=sim,
        run_dir=run_dir,
        run_id="r1",
        settings=FAST,
        timeout=60,
    )


def complete(sim: SimServer, request: ModelRequest, **kw: Any) -> ModelResponse:
    """One call through the real SDK to ``sim``, with FAST settings, from a fresh event loop."""

    async def go() -> ModelResponse:
        model = open_model("sim", sim=sim, settings=FAST)
        try:
            return await model.complete(request, **kw)
        finally:
            await model.aclose()

    return asyncio.run(go())
