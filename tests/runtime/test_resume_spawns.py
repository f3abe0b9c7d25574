"""A resume does not log a spawn again: the spawn the crash cut short logs only the children it had not
logged (``restoring``), so ``teamrt run``'s progress and ``logs`` say each spawn once."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrt.models import Reply
from teamrt.runtime.spawning import FORK_PLACEHOLDER
from teamrt.store import open_reader
from tests.runtime.test_restore import (
    LEAD_TEAM,
    RUN,
    begin,
    crash,
    last_turn,
    resume,
    runs_home,
    scripted,
    text,
    use,
)


def test_a_resume_logs_only_the_children_the_cut_short_spawn_had_not_logged(
    tmp_path: Path, runs_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lead's spawn of two forks had made and logged the first when the run crashed; the resume makes
    the second and logs it alone, not the first again."""
    project = tmp_path / "project"
    project.mkdir()
    scene = begin(tmp_path, project, LEAD_TEAM)
    spawn = use("toolu_spawn", "spawn_agent", kind="fork", directives=["look at A", "look at B"])

    async def build() -> None:
        store = scene.store
        await last_turn(scene, "lead", [spawn])
        await store.move_tool_call("toolu_spawn", "running")
        await store.add_agent("lead-fork", kind="fork", model="sim", parent="lead", role="fork",
                              workspace=str(project))  # fmt: skip
        epoch = await store.begin_epoch("lead-fork")
        copy = [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [spawn]}]
        await store.append_turn("lead-fork", epoch=epoch, role="compaction", content=copy)
        placeholder = {"type": "tool_result", "tool_use_id": "toolu_spawn", "content": FORK_PLACEHOLDER}
        await store.append_turn(
            "lead-fork", epoch=epoch, role="user", content=[placeholder, text("look at A")]
        )
        await store.append_event(
            "spawn", {"kind": "fork", "children": ["lead-fork"], "wait": True}, agent="lead"
        )

    scene.call(build())
    crash(scene)
    model = scripted({
        "lead-fork": [Reply().say("A is fine")], "lead-fork-1": [Reply().say("B is broken")],
        "lead": [Reply().say("reviewed")],
    })  # fmt: skip
    assert resume(monkeypatch, model).outcome.status == "done"
    reader = open_reader(scene.run_dir, RUN)
    try:
        spawns = [(e.agent, e.data["children"]) for e in reader.events(kinds=("spawn",))]
    finally:
        reader.close()
    assert spawns == [("lead", ["lead-fork"]), ("lead", ["lead-fork-1"])]


__all__ = ["runs_home"]  # the fixture, imported for pytest to find
