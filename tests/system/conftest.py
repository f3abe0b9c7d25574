"""The chaos tests' uninterrupted runs, made once per worker and shared by every module that reads them
(test_chaos, test_chaos_faults, test_chaos_checker, test_fault_git): an example's run on sim is the same
run each time, and each costs seconds. Read-only: a test that plants a fault copies the run first."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from teamrt.testing import chaos


@dataclasses.dataclass(frozen=True)
class Finished:
    """An uninterrupted run of an example: its home, id and project, and the reference made of it."""

    home: Path
    run_id: str
    project: Path
    ref: chaos.Reference


@pytest.fixture(scope="session")
def chaos_ctx() -> Any:
    return chaos.context()


@pytest.fixture(scope="session")
def chaos_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree the research team surveys: teamrt's own, copied once, so every run sees the same."""
    return chaos.prepare("research", tmp_path_factory.mktemp("tree"))


@pytest.fixture(scope="session")
def uninterrupted(
    tmp_path_factory: pytest.TempPathFactory, chaos_ctx: Any, chaos_tree: Path
) -> Callable[[str], Finished]:
    """The uninterrupted run of an example (``coding`` or ``research``), made the first time it is asked."""
    made: dict[str, Finished] = {}

    def of(example: str) -> Finished:
        if example not in made:
            where = tmp_path_factory.mktemp(f"reference-{example}")
            project = chaos.prepare(example, where, chaos_tree)
            ref = chaos.reference(example, where / "home", project, chaos_ctx)
            [run_dir] = (where / "home" / "runs").iterdir()
            made[example] = Finished(where / "home", run_dir.name, project, ref)
        return made[example]

    return of
