"""Epochs through a whole team: a restarted child's result counts, and a result sent under an epoch it
has left behind is recorded but not acted on (tests/runtime/test_loop.py covers the loop's half alone)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.mailbox import Mailbox
from teamrt.models import Reply
from teamrt.runtime.supervisor import Supervisor
from teamrt.sim import SimRequest, SimServer
from teamrt.store import create_store
from teamrt.team import load_team
from teamrt.tools.base import ToolContext, ToolResult
from tests.helpers.teams import FAST

pytestmark = pytest.mark.usefixtures("store_db")

FORK = "lead-fork"


class ExplodesOnce:
    """A read-only tool with a bug: it raises (not a ToolError) the first time, so its agent restarts."""

    name = "explode"
    description = "a buggy tool"
    input_schema: dict[str, Any] = {"type": "object"}  # noqa: RUF012
    read_only = True

    def __init__(self) -> None:
        self.exploded = False

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if not self.exploded:
            self.exploded = True
            raise RuntimeError("bug in the tool")
        return ToolResult("worked")


def test_a_restarted_childs_result_counts_and_one_from_its_earlier_epoch_does_not(
    tmp_path: Path, sim: SimServer
) -> None:
    """A background fork raises, restarts under epoch 2, and reports. Meanwhile a result it sent under
    epoch 1 arrives late: the lead records it, marked superseded, and acts only on the epoch-2 one."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "team.toml").write_text('[team]\nmodel = "sim"\n')
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    late: list[str] = []

    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call("spawn_agent", {"kind": "fork", "directives": ["look"], "wait": False})
        text = request.all_text()
        if "FRESH RESULT" in text:
            return Reply().say(
                "acted on the stale one" if "STALE RESULT" in text else "acted on the fresh one"
            )
        return Reply().say("Waiting for the fork.")

    def fork(request: SimRequest) -> Reply:
        outcomes = request.tool_outcomes
        if outcomes and outcomes[0].name == "explode" and not outcomes[0].is_error:
            return Reply().say("FRESH RESULT")
        if outcomes and outcomes[0].is_error and not late:  # the call cut short: restarted, epoch 2
            with Mailbox(run_dir / "mailbox", "r1") as mailbox:
                data = {"status": "done", "reason": None, "epoch": 1}
                stale = mailbox.post(
                    sender=FORK, recipient="lead", body="STALE RESULT", kind="result", epoch=1,
                    summary=f"{FORK} done", data=data,
                )  # fmt: skip
            late.append(stale.id)
        return Reply().call("explode", {})

    sim.policies.update({"lead": lead, "fork": fork})
    store = create_store(run_dir, "r1", task="go", workdir=str(project))
    team = load_team(project / "team.toml", project=project)

    async def go() -> str:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project),
            project=project, settings=FAST, sim=sim,
        )  # fmt: skip
        supervisor.tools.update(explode=ExplodesOnce())
        outcome = await asyncio.wait_for(supervisor.run("go"), 90)
        return outcome.answer

    try:
        answer = asyncio.run(go())
        assert store.reader.agent(FORK).epoch == 2, "the fork was restarted once"
        assert answer == "acted on the fresh one"
        results = {m.id: m.message for m in store.reader.mail("lead") if m.kind == "result"}
        assert len(results) == 2 and late[0] in results, "both results are recorded as ingested"
        assert results[late[0]]["epoch"] == 1
        [fresh] = [m for i, m in results.items() if i != late[0]]
        assert fresh["epoch"] == 2 and fresh["body"] == "FRESH RESULT"
        read = " ".join(str(t.content) for t in store.reader.turns("lead") if t.role == "user")
        assert 'superseded="true"' in read, "the lead was told it is superseded"
        assert "STALE RESULT" not in read
    finally:
        store.close()
