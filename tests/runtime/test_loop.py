"""The agent loop on the scripted model: every path, with the real store, mailbox and files."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from teamrt.mailbox import Inbox, Mailbox
from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.models.catalog import ModelInfo, Price
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.budget import Budget, role_budget, run_budget
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.spill import PREVIEW_CHARS
from teamrt.sandbox.bwrap import Sandbox
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.store import Store, create_store
from teamrt.tools.base import ToolContext, ToolError, ToolResult
from teamrt.tools.permissions import Permissions
from tests.helpers.machine import needs_bwrap

AGENT = "alice"


@dataclass
class FakeTool:
    """A tool whose behaviour a test gives as a coroutine; it counts how many run at once."""

    name: str
    read_only: bool = True
    act: Callable[[dict[str, Any]], Awaitable[str]] | None = None
    description: str = "a test tool"
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    running: int = 0
    most_at_once: int = 0
    calls: int = 0

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls += 1
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            out = await self.act(input) if self.act else f"{self.name} ok"
        finally:
            self.running -= 1
        return ToolResult(out)


async def pause(input: dict[str, Any]) -> str:
    await asyncio.sleep(0.05)
    return "read " + str(input.get("path", ""))


async def broken(input: dict[str, Any]) -> str:
    raise ToolError("no such file: x.txt")


@dataclass
class Rig:
    store: Store
    mailbox: Mailbox
    run_dir: Path
    workspace: Path

    def loop(
        self,
        model: ScriptedModel,
        tools: list[FakeTool],
        *,
        permissions: Permissions | None = None,
        on_ask: str = "deny",
        budgets: list[Budget] | None = None,
        info: ModelInfo | None = None,
        max_turns: int | None = None,
        inbox: Inbox | None = None,
    ) -> AgentLoop:
        spec = AgentSpec(
            name=AGENT,
            model=model,
            model_name="scripted",
            system="You are a test agent.",
            tools={t.name: t for t in tools},
            permissions=permissions or Permissions("bypassPermissions"),
            info=info,
            max_turns=max_turns,
            max_tokens=1000,
        )
        env = AgentEnv(
            store=self.store,
            tools=ToolContext(workspace=self.workspace, run_dir=self.run_dir),
            spill_dir=self.run_dir / "spill",
            asker=policy_asker(on_ask),
            budgets=budgets or [],
            inbox=inbox,
        )
        return AgentLoop(spec, env, epoch=1)


@pytest.fixture
def rig(run_dir: Path) -> Iterator[Rig]:
    workspace = run_dir.parent.parent.parent / "work"
    workspace.mkdir()
    store = create_store(run_dir, "r1", task="test", workdir=str(workspace))
    mailbox = Mailbox(run_dir / "mailbox", "r1")
    for name in (AGENT, "bob"):
        mailbox.register(name)

    async def enrol() -> None:
        await store.add_agent(AGENT, kind="lead", model="scripted")
        await store.begin_epoch(AGENT)

    asyncio.run(enrol())
    yield Rig(store, mailbox, run_dir, workspace)
    mailbox.close()
    store.close()


def user_texts(request: ModelRequest) -> str:
    """Every text and tool-result text of the request's last user message."""
    return "\n".join(b.get("text") or str(b.get("content", "")) for b in request.messages[-1]["content"])


# -- the paths of the loop ------------------------------------------------------


def test_a_turn_without_tools_ends_the_agent(rig: Rig) -> None:
    model = ScriptedModel([Reply().say("All done.")])
    outcome = asyncio.run(rig.loop(model, []).run("Say done."))
    model.check_done()
    assert (outcome.status, outcome.answer, outcome.turns) == ("done", "All done.", 1)
    turns = rig.store.reader.turns(AGENT)
    assert [t.role for t in turns] == ["user", "assistant"]
    assert turns[0].content == [{"type": "text", "text": "Say done."}]
    assert rig.store.reader.agent(AGENT).status == "done"


def test_tool_results_are_journaled_and_sent_back(rig: Rig) -> None:
    read = FakeTool("read", act=pause)
    model = ScriptedModel([Reply().call("read", {"path": "a.txt"}, id="t1"), Reply().say("a.txt is fine")])
    outcome = asyncio.run(rig.loop(model, [read]).run("Check a.txt"))
    assert outcome.status == "done" and outcome.answer == "a.txt is fine"
    second = model.requests[1].messages[-1]["content"]
    assert second == [{"type": "tool_result", "tool_use_id": "t1", "content": "read a.txt"}]
    [call] = rig.store.reader.tool_calls(AGENT)
    assert (call.status, call.is_error, call.result) == ("done", False, second)
    assert [t.role for t in rig.store.reader.turns(AGENT)] == ["user", "assistant", "user", "assistant"]


def test_a_tool_error_goes_back_to_the_model(rig: Rig) -> None:
    model = ScriptedModel([Reply().call("read", {}, id="t1"), Reply().say("The file is missing.")])
    outcome = asyncio.run(rig.loop(model, [FakeTool("read", act=broken)]).run("go"))
    assert outcome.status == "done"
    result = model.requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True and result["content"] == "no such file: x.txt"
    assert rig.store.reader.tool_calls(AGENT)[0].status == "error"


def test_read_only_calls_run_together_and_others_in_order(rig: Rig) -> None:
    read = FakeTool("read", act=pause)
    write = FakeTool("write", read_only=False, act=pause)
    calls = Reply()
    for i in range(12):
        calls.call("read", {"path": f"{i}.txt"})
    calls.call("write", {"path": "w"}).call("write", {"path": "v"}).call("read", {"path": "z"})
    model = ScriptedModel([calls, Reply().say("ok")])
    asyncio.run(rig.loop(model, [read, write]).run("go"))
    assert read.most_at_once == 10, "read-only calls run in parallel, at most 10 at once"
    assert write.most_at_once == 1
    results = model.requests[1].messages[-1]["content"]
    assert [r["content"] for r in results][:2] == ["read 0.txt", "read 1.txt"]
    assert len(results) == 15 and results[-1]["content"] == "read z", "results keep the calls' order"


def test_max_turns_stops_the_agent(rig: Rig) -> None:
    model = ScriptedModel([Reply().call("read", {}) for _ in range(3)])
    outcome = asyncio.run(rig.loop(model, [FakeTool("read")], max_turns=3).run("loop forever"))
    model.check_done()
    assert outcome.status == "stopped" and outcome.turns == 3 and "3 turns" in (outcome.reason or "")


def test_the_call_that_could_overrun_the_budget_is_never_made(rig: Rig) -> None:
    model = ScriptedModel([Reply().call("read", {}), Reply().say("never said")])
    # the first call's worst case (~1,050: its estimate x 1.3 + max_tokens) fits; a second (the API's count of
    # the first, ~60, + ~1,080) does not
    budget = Budget("run", max_tokens=1_120)
    outcome = asyncio.run(rig.loop(model, [FakeTool("read")], budgets=[budget]).run("go"))
    assert outcome.status == "stopped" and "budget exhausted" in (outcome.reason or "")
    assert len(model.requests) == 1 and model.remaining == 1, "the second call was not made"
    assert 0 < budget.spent_tokens <= 1_120 and budget.held_tokens == 0


def test_a_dollar_budget_counts_the_worst_price(rig: Rig) -> None:
    info = ModelInfo(Price(1000, 1000, 1000, 1000, 1000), 1024)
    model = ScriptedModel([Reply().say("too dear")])
    budget = Budget("agent alice", max_usd=0.5)  # 1,000 max_tokens alone could cost $1
    outcome = asyncio.run(rig.loop(model, [], budgets=[budget], info=info).run("go"))
    assert outcome.status == "stopped" and "dollar budget" in (outcome.reason or "")
    assert model.requests == [] and model.remaining == 1


@pytest.mark.parametrize(
    ("budget", "says"),
    [
        (run_budget(None, 0.5), "the limit is $0.5000; raise it with --budget-usd (or [team] budget_usd in"
         " the team file, or [run] budget_usd in the settings file)"),
        (run_budget(100, None), "; raise it with --budget-tokens (or [team] budget_tokens in the team file)"),
        (role_budget(AGENT, "coder", None, 0.5), "agent alice dollar budget: $0.0000 spent"),
        (role_budget(AGENT, "coder", None, 0.5), "; raise it with [roles.coder] budget_usd in the team file"),
        (role_budget(AGENT, "coder", 100, None), "; raise it with [roles.coder] budget_tokens in the team"),
        (role_budget(AGENT, None, 100, None), "; raise it with [lead] budget_tokens in the team file"),
    ],
)  # fmt: skip
def test_a_budget_reached_says_how_to_raise_it(rig: Rig, budget: Budget, says: str) -> None:
    info = ModelInfo(Price(1000, 1000, 1000, 1000, 1000), 1024)
    model = ScriptedModel([Reply().say("too dear")])
    outcome = asyncio.run(rig.loop(model, [], budgets=[budget], info=info).run("go"))
    assert outcome.status == "stopped" and (outcome.reason or "").startswith("budget exhausted: ")
    assert says in (outcome.reason or ""), outcome.reason
    assert rig.store.reader.agent(AGENT).status_reason == outcome.reason


def test_stopping_kills_the_tool_and_marks_the_call_interrupted(rig: Rig) -> None:
    started = asyncio.Event()

    async def forever(input: dict[str, Any]) -> str:
        started.set()
        await asyncio.sleep(1000)
        return "never"

    model = ScriptedModel([Reply().call("bash", {"command": "sleep 1000"}, id="t1")])

    async def go() -> Outcome:
        loop = rig.loop(model, [FakeTool("bash", read_only=False, act=forever)])
        task = asyncio.create_task(loop.run("go"))
        await started.wait()
        loop.stop("stopped by the user")
        return await task

    outcome = asyncio.run(go())
    assert outcome.status == "stopped" and outcome.reason == "stopped by the user"
    assert rig.store.reader.tool_calls(AGENT)[0].status == "interrupted"
    assert rig.store.reader.agent(AGENT).status == "stopped"


def test_mail_arriving_during_a_tool_call_is_ingested_at_the_next_turn(rig: Rig) -> None:
    async def tool_meanwhile_mailed(input: dict[str, Any]) -> str:
        rig.mailbox.post(sender="bob", recipient=AGENT, body="Use the v2 API.", summary="hint")
        return "tool output"

    model = ScriptedModel([Reply().call("read", {}, id="t1"), Reply().say("Switched to v2.")])

    async def go() -> Outcome:
        async with Inbox(rig.mailbox, AGENT) as inbox:
            return await rig.loop(model, [FakeTool("read", act=tool_meanwhile_mailed)], inbox=inbox).run("go")

    assert asyncio.run(go()).status == "done"
    content = model.requests[1].messages[-1]["content"]
    assert content[0]["type"] == "tool_result", "tool results come first"
    assert 'from="bob"' in content[1]["text"] and "Use the v2 API." in content[1]["text"]
    [mail] = rig.store.reader.mail(AGENT)
    assert mail.sender == "bob" and mail.turn_id == rig.store.reader.turns(AGENT)[2].id
    assert not list((rig.run_dir / "mailbox" / AGENT / "new").iterdir()), "acknowledged after the commit"


def test_mail_waiting_when_the_model_finishes_gets_another_turn(rig: Rig) -> None:
    def answer(request: ModelRequest) -> Reply:
        rig.mailbox.post(sender="bob", recipient=AGENT, body="One more thing: check b.txt")
        return Reply().say("Done.")

    model = ScriptedModel([answer, Reply().say("Checked b.txt too.")])

    async def go() -> Outcome:
        async with Inbox(rig.mailbox, AGENT) as inbox:
            return await rig.loop(model, [], inbox=inbox).run("go")

    outcome = asyncio.run(go())
    assert outcome.answer == "Checked b.txt too." and outcome.turns == 2
    assert "check b.txt" in user_texts(model.requests[1])


def test_unknown_tools_are_errors_to_the_model(rig: Rig) -> None:
    model = ScriptedModel([Reply().call("nope", {}, id="t1"), Reply().say("ok")])
    asyncio.run(rig.loop(model, [FakeTool("read")]).run("go"))
    result = model.requests[1].messages[-1]["content"][0]
    assert result["is_error"] and "no tool named 'nope'" in result["content"]


# -- permissions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "allow", "deny", "on_ask", "ran", "says"),
    [
        ("default", ["Bash(make test:*)"], [], "deny", True, None),
        ("bypassPermissions", [], ["Bash(make:*)"], "allow", False, "permission denied"),
        ("default", [], [], "allow", True, None),
        ("default", [], [], "deny", False, "--on-ask deny"),
        ("plan", [], [], "allow", False, "plan"),
    ],
    ids=["allow rule", "deny rule", "ask answered yes", "ask answered no", "plan mode"],
)
def test_permissions(
    rig: Rig, mode: str, allow: list[str], deny: list[str], on_ask: str, ran: bool, says: str | None
) -> None:
    bash = FakeTool("bash", read_only=False)
    model = ScriptedModel([Reply().call("bash", {"command": "make test"}, id="t1"), Reply().say("ok")])
    permissions = Permissions(mode, allow=allow, deny=deny)
    asyncio.run(rig.loop(model, [bash], permissions=permissions, on_ask=on_ask).run("go"))
    assert bash.calls == (1 if ran else 0)
    result = model.requests[1].messages[-1]["content"][0]
    if says is None:
        assert "is_error" not in result
    else:
        assert result["is_error"] and says in result["content"]


# -- spilling --------------------------------------------------------------------


def test_big_results_are_spilled_with_a_preview_and_the_path(rig: Rig) -> None:
    async def huge(input: dict[str, Any]) -> str:
        return "x" * 60_000 if input["n"] == 0 else "y" * 45_000

    calls = Reply()
    for n in range(6):
        calls.call("read", {"n": n}, id=f"t{n}")
    model = ScriptedModel([calls, Reply().say("ok")])
    asyncio.run(rig.loop(model, [FakeTool("read", act=huge)]).run("go"))
    results = model.requests[1].messages[-1]["content"]
    first = results[0]["content"]
    assert first.startswith("x" * PREVIEW_CHARS) and "60,000 characters" in first
    spilled = rig.run_dir / "spill" / f"{AGENT}-t0.txt"
    assert spilled.read_text() == "x" * 60_000 and str(spilled) in first
    assert sum(len(r["content"]) for r in results) <= 200_000, "a turn's results are capped together"
    assert sum("characters in all" in r["content"] for r in results) >= 2


# -- context -----------------------------------------------------------------------


def small_window(tokens: int) -> ModelInfo:
    return ModelInfo(Price(0, 0, 0, 0, 0), 1024, context_window=tokens)


async def page(input: dict[str, Any]) -> str:
    return "z" * 4_000  # about 1,000 tokens a result


def test_old_tool_results_are_cleared_first(rig: Rig) -> None:
    model = ScriptedModel([*(Reply().call("read", {"n": n}) for n in range(6)), Reply().say("done")])
    outcome = asyncio.run(rig.loop(model, [FakeTool("read", act=page)], info=small_window(7_000)).run("go"))
    assert outcome.status == "done"
    assert "cleared to save context" in str(model.requests[-1].messages)
    assert "compaction" in [t.role for t in rig.store.reader.turns(AGENT)]


def test_a_summary_replaces_the_history_when_clearing_is_not_enough(rig: Rig) -> None:
    def act(request: ModelRequest) -> Reply:
        if "Write a summary" in user_texts(request):
            return Reply().say("SUMMARY: read pages 0-4, nothing wrong.")
        return Reply().call("read", {})

    model = ScriptedModel([act] * 12)
    loop = rig.loop(model, [FakeTool("read", act=page)], info=small_window(3_400), max_turns=6)
    asyncio.run(loop.run("go"))
    assert any("Write a summary" in user_texts(r) for r in model.requests), "the model was asked to summarise"
    assert any("SUMMARY: read pages" in str(r.messages[0]["content"]) for r in model.requests)


def test_compaction_gives_up_after_three_failures(rig: Rig) -> None:
    async def flood(input: dict[str, Any]) -> str:
        return "z" * 20_000  # one result alone overflows the window

    model = ScriptedModel([Reply().call("read", {}), *(Reply().say("s" * 100) for _ in range(3))])
    outcome = asyncio.run(rig.loop(model, [FakeTool("read", act=flood)], info=small_window(4_000)).run("go"))
    model.check_done()
    assert outcome.status == "failed" and "3 compactions" in (outcome.reason or "")


# -- with the real bash tool -----------------------------------------------------


def sleepers(seconds: str) -> dict[int, int]:
    """The live ``sleep <seconds>`` processes on the machine: pid to start time."""
    from teamrt.procs import is_running, process_start_time

    found = {}
    want = f"sleep\0{seconds}\0".encode()
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if f.read() != want:
                    continue
        except OSError:  # not a process, or gone
            continue
        start = process_start_time(int(entry.name))
        if start is not None and is_running(int(entry.name), start):
            found[int(entry.name)] = start
    return found


@pytest.mark.parametrize("confinement", [pytest.param("bubblewrap", marks=needs_bwrap), "none"])
def test_a_stopped_agent_leaves_no_process_behind(rig: Rig, confinement: str) -> None:
    """Stopped while its command runs a background and a foreground sleep, both of which demonstrably
    exist, the agent leaves neither behind: bubblewrap's namespace ends them, and without it (a run that
    opted in) the command's process group is the unit of cleanup."""
    from teamrt.procs import is_running
    from teamrt.tools.shell.bash import Bash

    seconds = f"1000.{os.getpid()}{secrets.randbelow(10**6):06}"  # only this test's sleeps have it
    model = ScriptedModel([Reply().call("bash", {"command": f"sleep {seconds} & sleep {seconds}"}, id="t1")])
    seen: dict[int, int] = {}

    async def go() -> Outcome:
        loop = rig.loop(model, [])
        if confinement == "bubblewrap":
            loop.spec.tools = {"bash": Bash()}
        else:
            loop.spec.tools = {"bash": Bash(Sandbox(None))}
            loop.env.tools = ToolContext(
                workspace=rig.workspace, run_dir=rig.run_dir, policy=SandboxPolicy(unconfined=True)
            )
        task = asyncio.create_task(loop.run("go"))
        deadline = asyncio.get_running_loop().time() + 30
        while len(seen) < 2 or not any(c.processes for c in rig.store.reader.tool_calls(AGENT)):
            assert asyncio.get_running_loop().time() < deadline, f"the two sleeps never ran: {seen}"
            assert not task.done(), "the agent ended before its command ran"
            await asyncio.sleep(0.02)
            seen.update(sleepers(seconds))
        loop.stop("stopped by the user")
        return await task

    try:
        outcome = asyncio.run(go())
        assert outcome.status == "stopped"
        [call] = rig.store.reader.tool_calls(AGENT)
        assert call.status == "interrupted" and call.processes
        for proc in call.processes:
            assert not is_running(proc.pid, proc.start_time), "the journaled process is gone"
        left = [pid for pid, start in seen.items() if is_running(pid, start)]
        assert left == [], f"sleep processes left: {left}"
        assert sleepers(seconds) == {}
    finally:  # whatever failed, this test's sleeps do not outlive it
        for pid in sleepers(seconds):
            os.kill(pid, signal.SIGKILL)


def test_a_result_from_a_superseded_epoch_is_recorded_but_not_acted_on(rig: Rig) -> None:
    rig.mailbox.post(sender="bob", recipient=AGENT, body="STALE RESULT", kind="result", epoch=1)
    rig.mailbox.post(sender="bob", recipient=AGENT, body="FRESH RESULT", kind="result", epoch=3)
    rig.mailbox.post(sender="bob", recipient=AGENT, body="old peer note", kind="message", epoch=1)
    model = ScriptedModel([Reply().say("ok")])

    async def go() -> Outcome:
        async with Inbox(rig.mailbox, AGENT) as inbox:
            loop = rig.loop(model, [], inbox=inbox)
            loop.env.current_epoch = lambda agent: 3 if agent == "bob" else None
            return await loop.run("go")

    asyncio.run(go())
    seen = user_texts(model.requests[0])
    assert "STALE RESULT" not in seen and 'superseded="true"' in seen
    assert "FRESH RESULT" in seen and "old peer note" in seen, "peer messages always count"
    assert len(rig.store.reader.mail(AGENT)) == 3, "every message is recorded as ingested"
