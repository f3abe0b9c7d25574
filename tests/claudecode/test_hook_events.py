"""The hook events Claude Code set-ups use beyond the tool and stop events, through the real loop on the
scripted model: PostToolUseFailure, PermissionRequest, PreCompact/PostCompact (and SessionStart
``compact``), SubagentStart, SessionEnd, and ``async`` hooks. Each test checks the hook's stdin and that
its answer takes effect; the hostile ones feed hangs, floods and forged answers."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from teamrt.claudecode.hooks import parse_hooks
from teamrt.models import Reply
from teamrt.models.errors import ModelContextTooLong
from teamrt.runtime.hook_events import close_background, session_end
from teamrt.runtime.hooks import RunHooks, context, starting
from teamrt.runtime.loop import AgentLoop
from teamrt.store import create_store
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions
from tests.claudecode import test_hooks
from tests.claudecode.test_hooks import (
    Project,
    command,
    hooks_of,
    printing,
    result_of,
    run_lead,
    settings,
)

project = test_hooks.project  # the fixture: a project whose hooks run in the sandbox


def read(project: Project, name: str) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads((project.root / name).read_text()))


NO_SUMMARY = Reply().say("not a summary")
"""The answer to the loop's first try, compaction on demand (the sim model's strategy): no summary in it,
so teamrt's own layers compact."""


def too_long() -> ModelContextTooLong:
    detail = "prompt is too long: 210000 tokens > 200000 maximum"
    return ModelContextTooLong(f"scripted: {detail} (HTTP 400)", status=400, detail=detail)


def specific(event: str, **fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


# -- PostToolUseFailure ----------------------------------------------------------------------------------


def test_post_tool_use_failure_gets_the_error_and_its_context_reaches_the_model(project: Project) -> None:
    said = json.dumps(specific("PostToolUseFailure", additionalContext="run make deps first"))
    project.settings({"hooks": {
        "PostToolUseFailure": [{"matcher": "Bash", "hooks": [command(f"cat > failed.json; echo '{said}'")]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [command("touch post-ran")]}],
    }})  # fmt: skip
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "echo oops >&2; exit 3"}), Reply().say("done"))
    got = read(project, "failed.json")
    assert (got["hook_event_name"], got["tool_name"], got["tool_input"]) == (
        "PostToolUseFailure", "Bash", {"command": "echo oops >&2; exit 3"},
    )  # fmt: skip
    assert got["is_interrupt"] is False and "oops" in got["error"] and got["tool_use_id"]
    assert not (project.root / "post-ran").exists(), "PostToolUse runs only for calls that succeeded"
    assert "PostToolUseFailure hook additional context:\nrun make deps first" in run.said_to_model(2)
    [event] = run.hook_events("PostToolUseFailure")
    assert (event["outcome"], event["tool"]) == ("ok", "Bash")


def test_a_call_refused_before_it_ran_fires_no_post_tool_use_failure(project: Project) -> None:
    project.settings(hooks_of("PostToolUseFailure", (None, [command("touch fired")])))
    project.trust()
    run_lead(project, Reply().call("Bash", {"command": "true"}), Reply().say("done"), deny=("Bash",))
    assert not (project.root / "fired").exists()


# -- PermissionRequest -----------------------------------------------------------------------------------


def test_permission_request_allow_answers_the_ask_with_its_updated_input(project: Project) -> None:
    allow = specific(
        "PermissionRequest", decision={"behavior": "allow", "updatedInput": {"command": "touch b"}}
    )
    project.settings(
        hooks_of("PermissionRequest", ("Bash", [command(f"cat > asked.json; echo '{json.dumps(allow)}'")]))
    )
    project.trust()
    # default mode asks about Bash, and the run's policy (on_ask deny) would refuse: the hook answers first
    run = run_lead(project, Reply().call("Bash", {"command": "touch a"}), Reply().say("done"), mode="default")
    assert (project.root / "b").exists() and not (project.root / "a").exists()
    got = read(project, "asked.json")
    assert (got["hook_event_name"], got["tool_name"], got["tool_input"]) == (
        "PermissionRequest", "Bash", {"command": "touch a"},
    )  # fmt: skip
    assert "tool_use_id" not in got and got["permission_mode"] == "default"
    assert run.hook_events("PermissionRequest")[0]["decision"] == "allow"
    assert not [e for e in run.events if e.kind == "ask"], "no person was asked"


def test_permission_request_updated_input_meets_the_deny_rules_again(project: Project) -> None:
    allow = specific(
        "PermissionRequest", decision={"behavior": "allow", "updatedInput": {"command": "rm -rf x"}}
    )
    project.settings(hooks_of("PermissionRequest", ("Bash", [printing(allow)])))
    project.trust()
    run = run_lead(
        project, Reply().call("Bash", {"command": "touch a"}), Reply().say("done"), mode="default",
        deny=("Bash(rm:*)",),
    )  # fmt: skip
    assert "permission denied" in result_of(run.model.requests[1])


def test_permission_request_deny_refuses_with_its_message_and_interrupt_stops(project: Project) -> None:
    deny = specific("PermissionRequest", decision={"behavior": "deny", "message": "not on Fridays"})
    project.settings(hooks_of("PermissionRequest", ("Bash", [printing(deny)])))
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "touch a"}), Reply().say("done"), mode="default")
    assert "permission denied by a PermissionRequest hook: not on Fridays" in result_of(run.model.requests[1])
    stop = specific("PermissionRequest", decision={"behavior": "deny", "message": "halt", "interrupt": True})
    project.settings(hooks_of("PermissionRequest", ("Bash", [printing(stop)])))
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "touch a"}), mode="default")
    assert run.outcome.status == "stopped" and "halt" in (run.outcome.reason or "")
    assert len(run.model.requests) == 1, "the agent stopped before another model call"


@pytest.mark.hostile
def test_attack_a_forged_permission_request_answer_grants_nothing(project: Project) -> None:
    """A decision of the wrong shape, an exit 2, a flood: the ask goes on as without hooks (the run's policy
    denies it)."""
    forged = specific("PermissionRequest", decision={"behavior": "allow please", "updatedInput": "rm"})
    project.settings({"hooks": {"PermissionRequest": [{"matcher": "Bash", "hooks": [
        printing(forged),
        printing(specific("PermissionRequest", decision="allow")),
        command("echo allow >&2; exit 2"),
        command("head -c 3000000 /dev/zero | tr '\\0' '{'"),
    ]}]}})  # fmt: skip
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "touch a"}), Reply().say("done"), mode="default")
    assert not (project.root / "a").exists()
    assert "permission denied" in result_of(run.model.requests[1])
    outcomes = sorted(e["outcome"] for e in run.hook_events("PermissionRequest"))
    assert outcomes == ["blocked", "error", "error", "error"]
    assert not any("decision" in e for e in run.hook_events("PermissionRequest"))


# -- compaction -------------------------------------------------------------------------------------------


def test_compaction_fires_pre_and_post_compact_and_session_start_compact(project: Project) -> None:
    project.settings({"hooks": {
        "PreCompact": [{"matcher": "auto", "hooks": [command("cat > pre.json")]}],
        "PostCompact": [{"hooks": [command("cat > post.json")]}],
        "SessionStart": [
            {"matcher": "compact", "hooks": [command("cat > start.json; echo 'remember: tabs'")]}
        ],
    }})  # fmt: skip
    project.trust()
    steps = [Reply().call("Bash", {"command": "true"}), too_long(), NO_SUMMARY, Reply().say("SUMMARY-42"),
             Reply().call("Bash", {"command": "true"}), Reply().say("done")]  # fmt: skip
    run = run_lead(project, *steps)
    assert run.outcome.status == "done", run.outcome.reason
    pre = read(project, "pre.json")
    assert (pre["hook_event_name"], pre["trigger"], pre["custom_instructions"]) == (
        "PreCompact",
        "auto",
        None,
    )
    post = read(project, "post.json")
    assert (post["trigger"], post["compact_summary"]) == ("auto", "SUMMARY-42")
    assert read(project, "start.json")["source"] == "compact"
    assert "SessionStart hook additional context:\nremember: tabs" in run.said_to_model(
        len(run.model.requests)
    )
    assert [e["event"] for e in run.hook_events()] == ["PreCompact", "PostCompact", "SessionStart"]


def test_a_pre_compact_block_of_a_compaction_the_api_forced_fails_the_agent(project: Project) -> None:
    project.settings(hooks_of("PreCompact", (None, [command("echo 'keep every byte' >&2; exit 2")])))
    project.trust()
    run = run_lead(project, too_long())
    assert run.outcome.status == "failed"
    assert "a PreCompact hook blocked a compaction the context needs: keep every byte" in (
        run.outcome.reason or ""
    )


@pytest.mark.hostile
def test_attack_a_pre_compact_hook_that_hangs_blocks_nothing(project: Project) -> None:
    project.settings(hooks_of("PreCompact", (None, [command("sleep 300", timeout=1)])))
    project.trust()
    run = run_lead(project, too_long(), NO_SUMMARY, Reply().say("SUMMARY"), Reply().say("done"))
    assert run.outcome.status == "done", run.outcome.reason
    assert [e["outcome"] for e in run.hook_events("PreCompact")] == ["timeout"]


# -- SubagentStart ----------------------------------------------------------------------------------------


def test_subagent_start_gets_the_child_and_its_context_opens_the_childs_turn(project: Project) -> None:
    said = json.dumps(specific("SubagentStart", additionalContext="follow the security rules"))
    hooks = parse_hooks([settings("user", {"hooks": {
        "SubagentStart": [{"matcher": "reviewer", "hooks": [command(f"cat > sub.json; echo '{said}'")]}],
        "SessionStart": [{"hooks": [command("true")]}],
    }})])  # fmt: skip
    run_dir = project.root / ".teamrt" / "runs" / "r9"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r9", task="t", workdir=str(project.root))
    try:
        for kind, agent, fires in (
            ("team", "reviewer", True),
            ("team", "writer", False),
            ("lead", "lead", False),
        ):
            (project.root / "sub.json").unlink(missing_ok=True)
            hooked = RunHooks(hooks).for_agent(store, name=f"{agent}-1", kind=kind, agent=agent)
            loop = cast(AgentLoop, SimpleNamespace(
                env=SimpleNamespace(hooks=hooked, tools=ToolContext(workspace=project.root, run_dir=run_dir)),
                spec=SimpleNamespace(permissions=Permissions("default"), team="hooked", persistent=False),
                messages=[],
            ))  # fmt: skip
            assert asyncio.run(starting(loop, "do it")) is None
            assert (project.root / "sub.json").exists() is fires, agent
            shown = [b["text"] for b in context(loop)]
            assert ("SubagentStart hook additional context:\nfollow the security rules" in shown) is fires
        got = read(project, "sub.json") if (project.root / "sub.json").exists() else None
        assert got is None  # the lead's start fired none (the file was removed before it)
    finally:
        store.close()


def test_subagent_start_input_names_the_agent(project: Project) -> None:
    hooks = parse_hooks([settings("user", hooks_of("SubagentStart", (None, [command("cat > sub.json")])))])
    run_dir = project.root / ".teamrt" / "runs" / "r8"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r8", task="t", workdir=str(project.root))
    try:
        hooked = RunHooks(hooks).for_agent(store, name="lead-fork-2", kind="fork", agent="general")
        loop = cast(AgentLoop, SimpleNamespace(
            env=SimpleNamespace(hooks=hooked, tools=ToolContext(workspace=project.root, run_dir=run_dir)),
            spec=SimpleNamespace(permissions=Permissions("default"), team="hooked", persistent=False),
            messages=[],
        ))  # fmt: skip
        assert asyncio.run(starting(loop, "do it")) is None
        got = read(project, "sub.json")
        assert (got["hook_event_name"], got["agent_id"], got["agent_type"]) == (
            "SubagentStart",
            "lead-fork-2",
            "fork",
        )
    finally:
        store.close()


# -- SessionEnd ---------------------------------------------------------------------------------------------


def test_session_end_runs_as_the_run_ends_with_claude_codes_reason(project: Project) -> None:
    project.settings(hooks_of("SessionEnd", ("other", [command("cat > end.json")])))
    project.trust()
    run = run_lead(project, Reply().say("done"))
    got = read(project, "end.json")
    assert (got["hook_event_name"], got["reason"], got["teamrt"]["status"]) == ("SessionEnd", "other", "done")
    assert got["session_id"] and got["transcript_path"] == "" and got["cwd"] == str(project.root)
    assert [e["outcome"] for e in run.hook_events("SessionEnd")] == ["ok"]


@pytest.mark.hostile
def test_attack_a_session_end_hook_gets_claude_codes_short_budget(project: Project) -> None:
    """Without its own timeout a SessionEnd hook gets 1.5 s (Claude Code's budget); the run ends anyway."""
    project.settings(hooks_of("SessionEnd", (None, [command("sleep 300")])))
    project.trust()
    began = time.monotonic()
    run = run_lead(project, Reply().say("done"))
    assert run.outcome.status == "done"
    assert [e["outcome"] for e in run.hook_events("SessionEnd")] == ["timeout"]
    assert time.monotonic() - began < 30


def test_session_end_reason_is_prompt_input_exit_when_the_person_stopped_it(project: Project) -> None:
    hooks = parse_hooks([settings("user", {"hooks": {"SessionEnd": [
        {"matcher": "prompt_input_exit", "hooks": [command("cat > end.json")]},
    ]}})])  # fmt: skip
    run_dir = project.root / ".teamrt" / "runs" / "r7"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r7", task="t", workdir=str(project.root))
    try:
        ctx = ToolContext(workspace=project.root, run_dir=run_dir)
        asyncio.run(session_end(hooks, store, ctx, "stopped", "budget exhausted: tokens"))
        assert not (project.root / "end.json").exists()
        asyncio.run(session_end(hooks, store, ctx, "stopped", "stopped by user"))
        assert read(project, "end.json")["reason"] == "prompt_input_exit"
    finally:
        store.close()


# -- async hooks ------------------------------------------------------------------------------------------


def test_an_async_hook_does_not_hold_the_agent_and_its_answer_comes_next_turn(project: Project) -> None:
    said = json.dumps(
        specific("PostToolUse", additionalContext="lint: 2 warnings") | {"systemMessage": "linted"}
    )
    project.settings(hooks_of("PostToolUse", ("Write", [
        command(f"cat > async.json; sleep 0.1; echo '{said}'", **{"async": True}),
    ])))  # fmt: skip
    project.trust()
    steps = [Reply().call("Write", {"file_path": "a.py", "content": "x = 1\n"}),
             Reply().call("Bash", {"command": "sleep 1"}), Reply().say("done")]  # fmt: skip
    run = run_lead(project, *steps)
    assert read(project, "async.json")["tool_name"] == "Write"
    assert "lint: 2 warnings" not in run.said_to_model(2), "the agent did not wait for it"
    assert "additional context:\nlint: 2 warnings" in run.said_to_model(3)
    assert "message:\nlinted" in run.said_to_model(3)
    [event] = run.hook_events("PostToolUse")
    assert (event["outcome"], event["async"]) == ("ok", True)


def test_an_async_rewake_hooks_exit_2_reaches_the_agent(project: Project) -> None:
    project.settings(hooks_of("PostToolUse", ("Write", [
        command("cat > /dev/null; echo 'tests failed: 3' >&2; exit 2", asyncRewake=True),
    ])))  # fmt: skip
    project.trust()
    steps = [Reply().call("Write", {"file_path": "a.py", "content": "x\n"}),
             Reply().call("Bash", {"command": "sleep 1"}), Reply().say("done")]  # fmt: skip
    run = run_lead(project, *steps)
    assert "reports:\ntests failed: 3" in run.said_to_model(3)
    assert "tests failed" not in run.said_to_model(2)


@pytest.mark.hostile
def test_attack_an_async_hook_that_never_ends_is_killed_at_the_run_end(project: Project) -> None:
    project.settings(hooks_of("PostToolUse", (None, [
        command("cat > /dev/null; sleep 300", timeout=600, **{"async": True}),
    ])))  # fmt: skip
    project.trust()
    steps = [Reply().call("Bash", {"command": "sleep 1"}), Reply().say("done")]
    began = time.monotonic()
    run = run_lead(project, *steps)
    assert run.outcome.status == "done" and time.monotonic() - began < 30
    [event] = run.hook_events("PostToolUse")
    assert (event["outcome"], event["async"]) == ("killed", True)
    assert "the run ended before it did" in event["note"]


@pytest.mark.hostile
def test_attack_async_hooks_are_bounded_per_agent_and_a_flood_is_cut(project: Project) -> None:
    flood = "cat > /dev/null; head -c 5000000 /dev/zero | tr '\\0' x; echo"
    project.settings(hooks_of("PostToolUse", (None, [
        command(f"sleep 300 # {i}", **{"async": True}) for i in range(5)
    ] + [command(flood, asyncRewake=True)])))  # fmt: skip
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "true"}), Reply().say("done"))
    outcomes = sorted(e["outcome"] for e in run.hook_events("PostToolUse"))
    assert outcomes.count("not run") == 2 and outcomes.count("killed") == 4
    assert all(len(m["content"]) < 1_000_000 for r in run.model.requests for m in r.messages
               if isinstance(m["content"], str))  # fmt: skip


def test_close_background_ends_every_running_job_and_passes_over_agents_without_hooks() -> None:
    from teamrt.runtime.hook_async import Background

    ended: list[str] = []

    async def job(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            ended.append(name)

    async def go() -> tuple[int, int]:
        background = Background(limit=2)
        assert background.start(job("a")) and background.start(job("b"))
        assert not background.start(job("c")), "a third job past the limit is dropped"
        await asyncio.sleep(0)  # let both jobs begin
        running = len(background.tasks)
        agent: Any = SimpleNamespace(background=background)
        await asyncio.wait_for(close_background([None, agent, None]), 5)
        return running, len(background.tasks)

    assert asyncio.run(go()) == (2, 0)
    assert sorted(ended) == ["a", "b"]
