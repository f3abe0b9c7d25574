"""Claude Code's hooks: read from settings files, trusted or not, run confined at every event of a run.

The runs go through the real supervisor, loop, tools, sandbox and store, the
model scripted; each hook is a real shell command in the project.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from teamrt.agents import load_definitions
from teamrt.claudecode import trust
from teamrt.claudecode.hook_answers import TEXT_CHARS, combine, interpret
from teamrt.claudecode.hooks import (
    KEPT_BYTES,
    MAX_TIMEOUT,
    Hook,
    Ran,
    parse_hooks,
    run_hook,
)
from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.claudecode.settings import SettingsFile, read_settings_files
from teamrt.cli import main
from teamrt.models import ModelRequest, Reply, ScriptedModel
from teamrt.runs import follow as logs
from teamrt.runs import progress
from teamrt.runtime.agent import Outcome
from teamrt.runtime.hooks import HOOK_EVENT, MAX_CONTINUATIONS, RunHooks, context, load_hooks, starting
from teamrt.runtime.loop import AgentLoop
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.bwrap import Sandbox, default_sandbox
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.store import EventRecord, create_store
from teamrt.team import Role, Team, team_to_json
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import FAST

# -- reading them ------------------------------------------------------------------------------------


def settings(scope: str, data: dict[str, Any], path: str = "settings.json") -> SettingsFile:
    return SettingsFile(scope, Path(f"/{scope}/{path}"), data)


def hooks_of(event: str, *groups: tuple[str | None, list[dict[str, Any]]]) -> dict[str, Any]:
    entries = []
    for matcher, hooks in groups:
        entries.append({"hooks": hooks} if matcher is None else {"matcher": matcher, "hooks": hooks})
    return {"hooks": {event: entries}}


def command(text: str, **more: Any) -> dict[str, Any]:
    return {"type": "command", "command": text, **more}


def test_a_settings_file_of_hooks_reads_as_claude_code_writes_it() -> None:
    data = {
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash|Write", "hooks": [command("./guard.sh", timeout=30)]},
                {"matcher": "mcp__.*", "hooks": [command("./mcp.sh")]},
            ],
            "PostToolUse": [{"matcher": "Edit|MultiEdit|Write", "hooks": [command("ruff format")]}],
            "Stop": [{"hooks": [command("make test", statusMessage="testing")]}],
            "SessionStart": [{"matcher": "startup", "hooks": [command("cat notes.md")]}],
        }
    }
    found = parse_hooks([settings("project", data)])
    assert found.problems == ()
    assert [(h.event, h.matcher, h.command, h.timeout) for h in found.hooks] == [
        ("PreToolUse", "Bash|Write", "./guard.sh", 30.0),
        ("PreToolUse", "mcp__.*", "./mcp.sh", 60.0),
        ("PostToolUse", "Edit|MultiEdit|Write", "ruff format", 60.0),
        ("Stop", "", "make test", 60.0),
        ("SessionStart", "startup", "cat notes.md", 60.0),
    ]
    assert [h.command for h in found.matching("PreToolUse", "Bash")] == ["./guard.sh"]
    assert [h.command for h in found.matching("PostToolUse", "MultiEdit")] == ["ruff format"]
    assert found.matching("PostToolUse", "Read") == []
    assert [h.command for h in found.matching("Stop")] == ["make test"]
    assert [h.command for h in found.matching("SessionStart", "startup")] == ["cat notes.md"]
    assert found.matching("SessionStart", "resume") == []


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [
        ("", "Bash", True),
        ("*", "Grep", True),
        ("Bash", "Bash", True),
        ("Bash", "BashOutput", False),  # a plain name is the whole name, not a search
        ("Edit|Write", "MultiEdit", True),  # MultiEdit: Edit's older name
        ("Edit|Write", "Write", True),
        ("bash", "Bash", True),  # teamrt's older and any-case names of a tool count too
        ("Agent", "Task", True),  # Claude Code's newer name of Task
        ("^Ag.*", "Task", True),
        ("Notebook.*", "Edit", False),
        ("Edit.*", "Edit", True),
        (".*Edit", "MultiEdit", True),
        ("mcp__.*", "spawn_agent", False),
    ],
)
def test_a_matcher_selects_tools_by_claude_codes_rule(matcher: str, tool: str, runs: bool) -> None:
    found = parse_hooks([settings("user", hooks_of("PreToolUse", (matcher, [command("x")])))])
    assert found.problems == ()
    assert bool(found.matching("PreToolUse", tool)) is runs


def test_what_cannot_be_used_is_left_out_with_a_line_naming_the_file_and_place() -> None:
    data = {
        "hooks": {
            "TaskCreated": [{"hooks": [command("x")]}],
            "Setup": [{"matcher": "init", "hooks": [command("npm install")]}],
            "PreToolUse": [
                {"matcher": ["Bash", "Write"], "hooks": [command("list-matcher")]},
                {"matcher": "Bash(", "hooks": [command("bad-regex")]},
                {"matcher": "Bash", "hooks": "not a list"},
                {
                    "matcher": "Bash",
                    "hooks": [
                        {"type": "prompt", "prompt": "is this safe?"},
                        {"type": "command"},
                        command("slow", timeout=-1),
                        command("later", **{"if": "Bash(rm *)"}),
                        command("odd", colour="red"),
                        "echo not an object",
                        command("millis", timeout=30000),
                        command("background", **{"async": "yes"}),
                    ],
                },
            ],
            "Stop": {"hooks": []},
        }
    }
    found = parse_hooks([settings("local", data, "settings.local.json")])
    problems = "\n".join(found.problems)
    assert all(line.startswith("/local/settings.local.json: hooks.") for line in found.problems)
    assert "teamrt does not run TaskCreated hooks" in problems
    assert "hooks.Setup: Setup hooks run with `teamrt init` (trigger init" in problems
    assert "hooks.PreToolUse[0]: matcher must be a string" in problems
    assert "hooks.PreToolUse[1]: matcher 'Bash(' is not a regular expression" in problems
    assert "hooks.PreToolUse[2]: must be an object with a list 'hooks'" in problems
    assert "hooks.PreToolUse[3].hooks[0]: type 'prompt' is not run by teamrt" in problems
    assert "hooks.PreToolUse[3].hooks[1]: command must be a non-empty string" in problems
    assert "hooks[2]: timeout must be a number of seconds above 0; it gets 60" in problems
    assert (
        "hooks.PreToolUse[3].hooks[6]: timeout 30000 is seconds, as Claude Code reads it (8.3 h);"
        f" teamrt waits at most {MAX_TIMEOUT:g} s; if milliseconds were meant, write 30"
    ) in problems
    assert "hooks.PreToolUse[3].hooks[7]: async must be true or false; the hook is waited for" in problems
    assert "hooks.PreToolUse[3].hooks[3]: 'if' is not used by teamrt" in problems
    assert "hooks.PreToolUse[3].hooks[4]: unknown field 'colour' ignored" in problems
    assert "hooks.PreToolUse[3].hooks[5]: must be an object" in problems
    assert "hooks.Stop: must be a list" in problems
    # what could be used still runs: a guard with a bad timeout gets the default, one with 'if' runs always
    assert [(h.command, h.timeout, h.background) for h in found.matching("PreToolUse", "Bash")] == [
        ("slow", 60.0, False), ("later", 60.0, False), ("odd", 60.0, False), ("millis", MAX_TIMEOUT, False),
        ("background", 60.0, False),
    ]  # fmt: skip
    assert len(found.problems) == 14, "each problem named once"
    assert parse_hooks([settings("project", {"hooks": ["x"]})]).problems == (
        "/project/settings.json: hooks must be an object of events; its hooks are left out",
    )


def test_a_repository_cannot_turn_off_the_persons_own_hooks() -> None:
    user = settings("user", hooks_of("Stop", (None, [command("mine")])))
    project = settings("project", {"disableAllHooks": True, **hooks_of("Stop", (None, [command("theirs")]))})
    assert [h.command for h in parse_hooks([user, project]).hooks] == ["mine"]
    user_off = settings("user", {"disableAllHooks": True, **hooks_of("Stop", (None, [command("mine")]))})
    assert parse_hooks([user_off, settings("project", hooks_of("Stop", (None, [command("x")])))]).hooks == ()


def test_one_command_runs_once_per_event_however_often_it_is_named() -> None:
    user = settings("user", hooks_of("PreToolUse", ("Bash", [command("audit")]), ("*", [command("audit")])))
    project = settings("project", hooks_of("PreToolUse", ("", [command("audit"), command("other")])))
    assert [(h.command, h.scope) for h in parse_hooks([user, project]).matching("PreToolUse", "Bash")] == [
        ("audit", "user"), ("other", "project"),
    ]  # fmt: skip


def test_the_trusted_hash_is_of_the_repositorys_hooks_and_nothing_else() -> None:
    guard = hooks_of("PreToolUse", ("Bash", [command("./guard.sh", timeout=5)]))
    base = trust.hooks_digest([settings("project", guard)])
    assert base is not None
    entry = {"timeout": 5, "command": "./guard.sh", "type": "command"}
    reordered = {"hooks": {"PreToolUse": [{"hooks": [entry], "matcher": "Bash"}]}}
    same = [
        [settings("project", reordered)],
        [settings("project", {**guard, "permissions": {"allow": ["Read"]}})],
        [settings("project", guard), settings("local", {"hooks": {}})],
        [settings("user", hooks_of("Stop", (None, [command("mine")]))), settings("project", guard)],
    ]
    assert all(trust.hooks_digest(files) == base for files in same)
    changed = [
        [settings("project", hooks_of("PreToolUse", ("Bash", [command("./guard.sh", timeout=6)])))],
        [settings("project", guard), settings("local", hooks_of("Stop", (None, [command("x")])))],
        [settings("local", guard)],  # the same hooks moved to the other file
    ]
    assert all(trust.hooks_digest(files) not in (base, None) for files in changed)
    assert trust.hooks_digest([settings("user", guard), settings("local", {"hooks": {}})]) is None


# -- what a run of one means -------------------------------------------------------------------------------

HOOK = Hook("PreToolUse", "", "x", 60.0, "user", Path("/user/settings.json"))


def ran(code: int | None, stdout: str = "", stderr: str = "", **more: Any) -> Ran:
    return Ran(HOOK, code, stdout, stderr, 5, **more)


def decision_json(decision: str, reason: str = "") -> str:
    """A PreToolUse hook's JSON answer with ``permissionDecision``."""
    specific = {"hookEventName": "PreToolUse", "permissionDecision": decision}
    return json.dumps(
        {"hookSpecificOutput": specific | ({"permissionDecisionReason": reason} if reason else {})}
    )


def printing(output: dict[str, Any] | str) -> dict[str, Any]:
    """A hook that reads its event and prints ``output`` (JSON when not a string)."""
    text = output if isinstance(output, str) else json.dumps(output)
    return command(f"cat > /dev/null; printf '%s\\n' {shlex.quote(text)}")


def test_exit_2_blocks_with_its_stderr_and_other_codes_are_errors_that_block_nothing() -> None:
    blocked = interpret(ran(2, stdout='{"decision": "approve"}', stderr="no rm -rf here\n"), "PreToolUse")
    assert (blocked.outcome, blocked.block, blocked.decision) == ("blocked", "no rm -rf here", None)
    assert interpret(ran(2), "Stop").block == "a Stop hook blocked this without saying why"
    failed = interpret(ran(1, stderr="Traceback ...\nKeyError: 'x'\n"), "PreToolUse")
    assert (failed.outcome, failed.block, failed.note) == ("error", None, "exit code 1: Traceback ...")
    assert interpret(ran(-9), "PreToolUse").note == "killed by signal 9"
    timed = interpret(ran(None, failure="timed out after 1 s", timed_out=True), "PreToolUse")
    assert (timed.outcome, timed.block) == ("timeout", None)
    refused = interpret(ran(None, failure="not run: no bwrap"), "PreToolUse")
    assert (refused.outcome, refused.note) == ("not run", "not run: no bwrap")


def test_plain_stdout_is_context_only_where_claude_code_makes_it_so() -> None:
    assert interpret(ran(0, "today: release day\n"), "SessionStart").context == "today: release day"
    assert interpret(ran(0, "ticket ABC-1\n"), "UserPromptSubmit").context == "ticket ABC-1"
    assert interpret(ran(0, "formatted 1 file\n"), "PostToolUse").context == ""


def test_json_answers_are_honoured() -> None:
    def said(event: str, output: dict[str, Any]) -> Any:
        return interpret(ran(0, json.dumps(output)), event)

    specific = {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": "not on main"}  # fmt: skip
    deny = said("PreToolUse", {"hookSpecificOutput": specific})
    assert (deny.outcome, deny.block) == ("blocked", "not on main")
    allowed = {
        "permissionDecision": "allow",
        "permissionDecisionReason": "safe",
        "updatedInput": {"command": "ls"},
    }
    allow = said("PreToolUse", {"hookSpecificOutput": allowed})
    assert (allow.decision, allow.reason, allow.updated_input, allow.block) == (
        "allow",
        "safe",
        allowed["updatedInput"],
        None,
    )
    assert said("PreToolUse", {"decision": "approve", "reason": "fine"}).decision == "allow"
    assert said("PreToolUse", {"decision": "block", "reason": "older form"}).block == "older form"
    post = said("PostToolUse", {"decision": "block", "reason": "lint failed",
                                "hookSpecificOutput": {"additionalContext": "3 errors"}})  # fmt: skip
    assert (post.block, post.context) == ("lint failed", "3 errors")
    stop = said("Stop", {"continue": False, "stopReason": "quota reached", "systemMessage": "bye"})
    assert (stop.stop, stop.note, stop.block) == ("quota reached", "bye", None)
    assert said("SessionStart", {"decision": "block"}).block is None  # a session's start cannot be blocked


@pytest.mark.parametrize(
    ("stdout", "why"),
    [
        ("{not json", "starts with { but is not JSON"),
        ('{"continue": "no"}', "continue must be true or false"),
        ('{"decision": "maybe"}', "decision must be 'block'"),
        ('{"hookSpecificOutput": {"permissionDecision": "perhaps"}}', "permissionDecision 'perhaps'"),
        ('{"hookSpecificOutput": {"hookEventName": "Stop"}}', "hookEventName is 'Stop' in a PreToolUse hook"),
        ('{"hookSpecificOutput": {"updatedInput": "rm -rf /"}}', "updatedInput must be an object"),
        ('{"hookSpecificOutput": []}', "hookSpecificOutput must be an object"),
    ],
)
def test_output_that_is_not_a_valid_answer_is_a_non_blocking_error(stdout: str, why: str) -> None:
    said = interpret(ran(0, stdout), "PreToolUse")
    assert (said.outcome, said.block, said.decision, said.updated_input) == ("error", None, None, None)
    assert why in said.note


def test_the_hooks_of_one_event_answer_together() -> None:
    allow = interpret(ran(0, decision_json("allow")), "PreToolUse")
    ask = interpret(ran(0, decision_json("ask", "sure?")), "PreToolUse")
    block = interpret(ran(2, stderr="no"), "PreToolUse")
    assert combine([allow, ask]).decision == "ask"
    assert combine([allow, ask]).reason == "sure?"
    assert combine([allow, block]).blocks == ("no",)


# -- running one -------------------------------------------------------------------------------------------


@pytest.fixture
def hook_ctx(tmp_path: Path) -> Confinement:
    workspace = tmp_path / "project"
    workspace.mkdir()
    run_dir = tmp_path / "home" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    return Confinement(workspace=workspace, run_dir=run_dir)


def run_one(text: str, ctx: Confinement, payload: dict[str, Any] | None = None, **kw: Any) -> Ran:
    hook = Hook("PreToolUse", "", text, kw.pop("timeout", 10.0), "project", Path("/p"))
    return asyncio.run(run_hook(hook, payload or {}, ctx, **kw))


@needs_bwrap
def test_a_hook_gets_the_event_on_stdin_in_the_workspace(hook_ctx: Confinement) -> None:
    payload = {"tool_name": "Bash", "tool_input": {"command": "ls"}}
    done = run_one('cat > got.json; echo "$CLAUDE_PROJECT_DIR $PWD"', hook_ctx, payload)
    assert (done.code, done.stdout.split()) == (0, [str(hook_ctx.workspace)] * 2)
    assert json.loads((hook_ctx.workspace / "got.json").read_text()) == payload


@needs_bwrap
@pytest.mark.hostile
def test_attack_tool_input_never_reaches_the_hooks_shell(hook_ctx: Confinement) -> None:
    """What the model writes is data on stdin: substitutions, quotes and newlines in it run nothing."""
    attack = {
        "command": "$(touch pwned1)",
        "file_path": "`touch pwned2`",
        "content": "'; touch pwned3; '\n$(id)",
    }
    payload = {"tool_name": "Write", "tool_input": attack}
    done = run_one('cat > got.json; env > env.txt; jq -r .tool_input.file_path got.json 2>/dev/null; true',
                   hook_ctx, payload)  # fmt: skip
    assert done.code == 0
    assert not list(hook_ctx.workspace.glob("pwned*"))
    assert json.loads((hook_ctx.workspace / "got.json").read_text())["tool_input"] == attack
    assert "touch" not in (hook_ctx.workspace / "env.txt").read_text()


@needs_bwrap
@pytest.mark.hostile
def test_attack_a_hook_is_confined_like_bash(hook_ctx: Confinement, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("launch codes\n")
    done = run_one(
        f"echo changed > {secret}; rm -f {secret}; echo x > {outside}/new; cat ~/.ssh/id_rsa", hook_ctx
    )
    assert done.code != 0
    assert secret.read_text() == "launch codes\n"
    assert not (outside / "new").exists()


@needs_bwrap
@pytest.mark.hostile
def test_attack_a_hook_that_hangs_is_killed_at_its_timeout_with_all_it_started(hook_ctx: Confinement) -> None:
    seconds = f"300.{os.getpid()}{secrets.randbelow(10**6):06}"  # only this test's sleeps have it
    began = time.monotonic()
    done = run_one(f"sleep {seconds} & (setsid sleep {seconds} &) ; sleep {seconds}", hook_ctx, timeout=1.0)
    # A ceiling far above the 1 s timeout (idle: about 1.1 s) and far below the sleeps' 300 s: it bounds a
    # hook that was not killed at all.
    assert time.monotonic() - began < 100
    assert (done.code, done.timed_out) == (None, True)
    assert interpret(done, "PreToolUse").outcome == "timeout"
    assert sleepers(seconds) == [], "the hook's sleeps, the one in a session of its own too, are gone"


def sleepers(seconds: str) -> list[int]:
    """The live ``sleep <seconds>`` processes on the machine."""
    found = []
    for entry in os.scandir("/proc"):
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                if f.read() == f"sleep\0{seconds}\0".encode() and _state(int(entry.name)) != "Z":
                    found.append(int(entry.name))
        except OSError:  # not a process, or gone
            continue
    return found


@pytest.mark.hostile
def test_attack_an_unconfined_hooks_group_is_killed_at_its_timeout(hook_ctx: Confinement) -> None:
    """Without bubblewrap (a run that opted in) the group is the unit of cleanup: its background child
    dies with it."""
    ctx = Confinement(
        workspace=hook_ctx.workspace, run_dir=hook_ctx.run_dir, policy=SandboxPolicy(unconfined=True)
    )
    done = run_one("sleep 300 & echo $! > child.pid; sleep 300", ctx, timeout=1.0, sandbox=Sandbox(None))
    assert done.timed_out
    child = int((hook_ctx.workspace / "child.pid").read_text())
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{child}") and _state(child) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}") or _state(child) == "Z"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


@needs_bwrap
@pytest.mark.hostile
def test_attack_a_hook_that_prints_10_mb_and_never_reads_its_stdin(hook_ctx: Confinement) -> None:
    text = "head -c 10000000 /dev/zero | tr '\\0' x; head -c 10000000 /dev/zero | tr '\\0' y >&2; exit 2"
    done = run_one(text, hook_ctx, {"content": "z" * 5_000_000})  # more than a pipe holds
    assert (done.code, done.timed_out) == (2, False), "it ended by itself, not stuck until its timeout"
    assert KEPT_BYTES < len(done.stderr) < KEPT_BYTES + 100
    assert "bytes more not kept" in done.stderr
    block = interpret(done, "PreToolUse").block
    assert block is not None and len(block) < TEXT_CHARS + 100 and block.startswith("yyyy")


def test_a_hook_is_not_run_where_the_sandbox_refuses_it(hook_ctx: Confinement) -> None:
    done = run_one("touch ran", hook_ctx, sandbox=Sandbox(None))
    assert (done.code, done.failure.startswith("not run: bubblewrap")) == (None, True)
    assert not (hook_ctx.workspace / "ran").exists()


# -- in a run ----------------------------------------------------------------------------------------------


@dataclass
class Project:
    root: Path
    """The lead's workspace and the current directory; teamrt's home is its ``.teamrt``."""
    tmp: Path
    monkeypatch: pytest.MonkeyPatch

    def settings(self, data: dict[str, Any], name: str = "settings.json") -> Path:
        path = self.root / ".claude" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data))
        return path

    def user_settings(self, data: dict[str, Any]) -> None:
        home = self.tmp / "claude-home"
        home.mkdir(exist_ok=True)
        (home / "settings.json").write_text(json.dumps(data))
        self.monkeypatch.setenv(CONFIG_DIR_ENV, str(home))

    def script(self, name: str, text: str) -> str:
        """A hook script in ``.claude/hooks`` (read-only to agents); its command."""
        path = self.root / ".claude" / "hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/bash\n" + text)
        path.chmod(0o755)
        return f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{name}'

    def trust(self) -> None:
        digest = trust.hooks_digest(read_settings_files(self.root))
        assert digest is not None
        trust.trust(self.root, digest)


@dataclass
class Run:
    outcome: Outcome
    model: ScriptedModel
    events: list[EventRecord]
    notices: list[str]

    def hook_events(self, event: str | None = None) -> list[dict[str, Any]]:
        return [e.data for e in self.events if e.kind == HOOK_EVENT and event in (None, e.data.get("event"))]

    def said_to_model(self, call: int) -> str:
        """All the text of the last user turn of the model's ``call``-th request (1-based)."""
        return _text(self.model.requests[call - 1].messages[-1])


def _text(message: dict[str, Any]) -> str:
    parts = []
    for block in message["content"]:
        content = block.get("content", block.get("text", ""))
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A project whose runs' hooks run in the sandbox (skipped where bubblewrap is missing, as
    ``needs_bwrap`` skips)."""
    if not default_sandbox().confined and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed here; install the bubblewrap package to test hooks")
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    monkeypatch.chdir(root)
    return Project(root, tmp_path, monkeypatch)


def run_lead(
    project: Project, *steps: Any, mode: str = "bypassPermissions", prompt: str = "go", **team: Any
) -> Run:
    model = ScriptedModel(list(steps))
    lead = Role("lead", "lead", None, None, None, None, mode)
    spec = Team(path=project.root / "team.toml", name="hooked", lead=lead, **team)
    run_dir = project.root / ".teamrt" / "runs" / f"r{len(list(project.root.glob('.teamrt/runs/*')))}"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, run_dir.name, task=prompt, workdir=str(project.root),
                         settings={"team": team_to_json(spec)})  # fmt: skip
    notices: list[str] = []

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=spec, definitions=load_definitions(project.root),
            project=project.root, settings=FAST, models={"sim": model},
            hooks=load_hooks(project.root, notices.append),
        )  # fmt: skip
        return await asyncio.wait_for(supervisor.run(prompt), 60)

    try:
        outcome = asyncio.run(go())
        events = store.reader.events()
    finally:
        store.close()
    return Run(outcome, model, events, notices)


def result_of(request: ModelRequest) -> str:
    return "\n".join(b["content"] for b in request.messages[-1]["content"] if b.get("type") == "tool_result")


@pytest.mark.hostile
def test_untrusted_repository_hooks_do_not_run_until_trusted_and_lapse_when_changed(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    touch = project.script("touch.sh", 'touch "$CLAUDE_PROJECT_DIR/hook-ran"\n')
    path = project.settings(hooks_of("SessionStart", (None, [command(touch)])))
    first = run_lead(project, Reply().say("done"))
    assert not (project.root / "hook-ran").exists()
    assert first.hook_events() == []
    [notice] = [n for n in first.notices if "not trusted" in n]
    assert str(path) in notice and "teamrt trust" in notice

    assert main(["trust"]) == 0
    out = capsys.readouterr().out
    assert f"teamrt trusts the hooks of {project.root}" in out and "SessionStart (project): " in out
    second = run_lead(project, Reply().say("done"))
    assert (project.root / "hook-ran").exists()
    assert [e["outcome"] for e in second.hook_events("SessionStart")] == ["ok"]
    assert not [n for n in second.notices if "not trusted" in n]

    (project.root / "hook-ran").unlink()
    project.settings(hooks_of("SessionStart", (None, [command(touch + " --again")])))
    third = run_lead(project, Reply().say("done"))
    assert not (project.root / "hook-ran").exists()
    assert [n for n in third.notices if "not trusted" in n]
    assert main(["trust", "--list"]) == 0
    assert f"{project.root}  trusted " in (listed := capsys.readouterr().out) and listed.endswith(
        ": lapsed\n"
    )
    assert main(["trust", "--revoke"]) == 0
    assert trust.trusted_projects() == {}


def test_the_local_settings_hooks_need_trust_too(project: Project) -> None:
    project.settings(hooks_of("SessionStart", (None, [command("touch local-ran")])), "settings.local.json")
    assert not run_lead(project, Reply().say("done")).hook_events()
    project.trust()
    run_lead(project, Reply().say("done"))
    assert (project.root / "local-ran").exists()


def test_the_persons_own_hooks_run_without_trust(project: Project) -> None:
    project.user_settings(hooks_of("SessionStart", (None, [command("touch mine-ran")])))
    run = run_lead(project, Reply().say("done"))
    assert (project.root / "mine-ran").exists()
    assert run.hook_events()[0]["scope"] == "user"


@pytest.mark.hostile
def test_attack_a_settings_file_that_links_outside_the_repository_is_refused(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = project.tmp / "elsewhere.json"
    elsewhere.write_text(json.dumps(hooks_of("SessionStart", (None, [command("touch pwned")]))))
    (project.root / ".claude").mkdir()
    (project.root / ".claude" / "settings.json").symlink_to(elsewhere)
    assert load_hooks(project.root).hooks.hooks == (), "a file left out has no hooks (the run names it)"
    assert main(["trust"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "outside the project" in err and "nothing trusted" in err
    assert trust.trusted_projects() == {}


def test_pre_tool_use_exit_2_refuses_the_call_and_tells_the_model_why(project: Project) -> None:
    guard = project.script(
        "guard.sh", 'grep -q "rm -rf" && { echo "no rm -rf in this repository" >&2; exit 2; }\nexit 0\n'
    )
    project.settings(hooks_of("PreToolUse", ("Bash", [command(guard)])))
    project.trust()
    run = run_lead(
        project,
        Reply()
        .call("Bash", {"command": "touch made && rm -rf made"})
        .call("Bash", {"command": "touch kept"}),
        Reply().say("done"),
    )
    assert run.outcome.status == "done"
    said = result_of(run.model.requests[1])
    assert "blocked by a PreToolUse hook: no rm -rf in this repository" in said
    assert not (project.root / "made").exists() and (project.root / "kept").exists()
    assert [(e["outcome"], e["code"], e["tool"]) for e in run.hook_events("PreToolUse")] == [
        ("blocked", 2, "Bash"), ("ok", 0, "Bash"),
    ]  # fmt: skip


def test_pre_tool_use_decisions_meet_the_permission_rules(project: Project) -> None:
    project.settings(hooks_of("PreToolUse", ("Bash", [printing(decision_json("allow"))])))
    project.trust()
    # default mode would ask (and the run's policy deny); the hook's allow spares that ask
    run = run_lead(
        project, Reply().call("Bash", {"command": "touch allowed"}), Reply().say("done"), mode="default"
    )
    assert (project.root / "allowed").exists(), result_of(run.model.requests[1])
    # a deny rule, and an ask rule, still stand
    calls = Reply().call("Bash", {"command": "touch denied"}).call("Bash", {"command": "touch asked"})
    run = run_lead(
        project,
        calls,
        Reply().say("done"),
        mode="default",
        deny=("Bash(touch denied)",),
        ask=("Bash(touch asked)",),
    )
    assert not (project.root / "denied").exists() and not (project.root / "asked").exists()
    assert result_of(run.model.requests[1]).count("permission denied") == 2


def test_pre_tool_use_ask_asks_about_a_call_the_mode_would_allow(project: Project) -> None:
    project.settings(
        hooks_of("PreToolUse", ("Write", [printing(decision_json("ask", "a person should look"))]))
    )
    project.trust()
    run = run_lead(
        project, Reply().call("Write", {"file_path": "a.txt", "content": "x"}), Reply().say("done")
    )
    assert not (project.root / "a.txt").exists()
    assert "a PreToolUse hook asks for approval: a person should look" in result_of(run.model.requests[1])


def test_pre_tool_use_updated_input_is_what_the_tool_runs(project: Project) -> None:
    rewrite = project.script(
        "rewrite.sh",
        """python3 -c '
import json, sys
command = json.load(sys.stdin)["tool_input"]["command"].replace("first", "second")
print(json.dumps({"hookSpecificOutput": {"updatedInput": {"command": command}}}))'
""",
    )
    project.settings(hooks_of("PreToolUse", ("Bash", [command(rewrite)])))
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "echo first > out.txt"}), Reply().say("done"))
    assert (project.root / "out.txt").read_text() == "second\n"
    assert run.hook_events("PreToolUse")[0]["updated_input"] is True


@pytest.mark.hostile
def test_attack_a_hook_that_hangs_or_babbles_blocks_nothing(project: Project) -> None:
    project.settings({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        command("sleep 300", timeout=1), command("echo '{not json'"), command("exit 7"),
    ]}]}})  # fmt: skip
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "touch ran"}), Reply().say("done"))
    assert (project.root / "ran").exists()
    outcomes = sorted((e["outcome"], e["command"]) for e in run.hook_events("PreToolUse"))
    assert outcomes == [("error", "echo '{not json'"), ("error", "exit 7"), ("timeout", "sleep 300")]
    shown = [progress.line(e, 0.0, "r0") for e in run.events if progress.shown(e) and e.kind == HOOK_EVENT]
    assert len(shown) == 3
    assert any("PreToolUse timeout" in line and "sleep 300" in line for line in shown)
    assert any("exit 7" in line for line in shown)


def test_post_tool_use_feedback_and_context_reach_the_model_after_a_call_that_succeeded(
    project: Project,
) -> None:
    specific = {"hookEventName": "PostToolUse", "additionalContext": "ruff 0.6"}
    lint = printing(
        {"decision": "block", "reason": "line 1: missing docstring", "hookSpecificOutput": specific}
    )
    project.settings(hooks_of("PostToolUse", ("Write|Edit", [lint])))
    project.trust()
    run = run_lead(
        project,
        Reply().call("Write", {"file_path": "a.py", "content": "x = 1\n"}),
        Reply().call("Edit", {"file_path": "missing.py", "old_string": "a", "new_string": "b"}),
        Reply().say("done"),
    )
    after_write = run.said_to_model(2)
    assert "PostToolUse hook feedback on Write" in after_write and "line 1: missing docstring" in after_write
    assert "PostToolUse hook additional context:\nruff 0.6" in after_write
    assert "PostToolUse hook" not in run.said_to_model(3)  # the failed edit ran no hook
    assert len(run.hook_events("PostToolUse")) == 1


def test_session_start_and_user_prompt_submit_add_to_the_first_turn(project: Project) -> None:
    context = json.dumps({"hookSpecificOutput": {"additionalContext": "ticket ABC-7"}})
    project.settings({"hooks": {
        "SessionStart": [{"hooks": [printing("branch: main, 3 open issues")]}],
        "UserPromptSubmit": [{"hooks": [command(f"cat > prompt.json; printf '%s' {shlex.quote(context)}")]}],
    }})  # fmt: skip
    project.trust()
    run = run_lead(project, Reply().say("done"), prompt="fix the login bug")
    first = run.said_to_model(1)
    assert first.index("fix the login bug") < first.index("branch: main, 3 open issues")
    assert "UserPromptSubmit hook additional context:\nticket ABC-7" in first
    sent = json.loads((project.root / "prompt.json").read_text())
    assert sent["prompt"] == "fix the login bug" and sent["hook_event_name"] == "UserPromptSubmit"
    assert sent["session_id"] == "r0" and sent["cwd"] == str(project.root)
    assert sent["permission_mode"] == "bypassPermissions" and sent["transcript_path"] == ""


def test_user_prompt_submit_exit_2_ends_the_lead_before_any_model_call(project: Project) -> None:
    project.settings(
        hooks_of("UserPromptSubmit", (None, [command("echo 'no secrets in prompts' >&2; exit 2")]))
    )
    project.trust()
    run = run_lead(project, prompt="deploy with password hunter2")
    assert run.model.requests == []
    assert run.outcome.status == "stopped"
    assert run.outcome.reason == "a UserPromptSubmit hook blocked the task: no secrets in prompts"


def test_a_stop_hook_keeps_the_agent_going_until_it_is_satisfied(project: Project) -> None:
    tests = project.script(
        "tests.sh",
        """cat > stop.json
[ -e tests-pass ] && exit 0
echo "the tests fail: run them and fix them" >&2
exit 2
""",
    )
    project.settings(hooks_of("Stop", (None, [command(tests)])))
    project.trust()
    run = run_lead(project, Reply().say("all done"), Reply().call("Bash", {"command": "touch tests-pass"}),
                   Reply().say("now really done"))  # fmt: skip
    assert run.outcome.status == "done" and run.outcome.answer == "now really done"
    assert "Stop hook feedback:\nthe tests fail: run them and fix them" in run.said_to_model(2)
    last = json.loads((project.root / "stop.json").read_text())
    assert last["stop_hook_active"] is True and last["last_assistant_message"] == "now really done"


@pytest.mark.hostile
def test_attack_a_stop_hook_cannot_keep_an_agent_going_forever(project: Project) -> None:
    project.settings(hooks_of("Stop", (None, [command("echo 'keep going' >&2; exit 2")])))
    project.trust()
    run = run_lead(project, *[Reply().say(f"done {i}") for i in range(MAX_CONTINUATIONS + 1)])
    assert run.outcome.status == "done"
    assert len(run.model.requests) == MAX_CONTINUATIONS + 1
    assert [e["outcome"] for e in run.hook_events("Stop")][-1] == "ignored"


def test_continue_false_stops_the_agent(project: Project) -> None:
    project.settings(
        hooks_of("PreToolUse", ("Bash", [printing({"continue": False, "stopReason": "budget meeting"})]))
    )
    project.trust()
    run = run_lead(project, Reply().call("Bash", {"command": "touch ran"}))
    assert run.outcome.status == "stopped"
    assert run.outcome.reason is not None and "budget meeting" in run.outcome.reason
    assert not (project.root / "ran").exists()


def test_task_completed_exit_2_leaves_the_task_open(project: Project) -> None:
    check = project.script(
        "done.sh",
        """cat > task.json
echo "task $(python3 -c 'import json; print(json.load(open("task.json"))["task_subject"])') has no tests" >&2
exit 2
""",
    )
    project.settings(hooks_of("TaskCompleted", (None, [command(check)])))
    project.trust()
    run = run_lead(
        project,
        Reply().call("task_create", {"subject": "write the parser", "description": "in parse.py"}),
        Reply().call("task_claim", {"task_id": 1}),
        Reply().call("task_update", {"task_id": 1, "status": "done"}),
        Reply().say("done"),
    )
    said = result_of(run.model.requests[3])
    assert "task 1 is not done: a TaskCompleted hook says:\ntask write the parser has no tests" in said
    sent = json.loads((project.root / "task.json").read_text())
    assert (sent["task_id"], sent["teammate_name"], sent["team_name"]) == ("1", "lead", "hooked")
    assert not [e for e in run.events if e.kind == "task.updated" and e.data.get("status") == "done"]


def test_every_hook_run_is_journaled_and_logged(project: Project) -> None:
    project.settings(hooks_of("PreToolUse", ("Read", [command("true")])))
    project.trust()
    run = run_lead(project, Reply().call("Read", {"file_path": "README.md"}), Reply().say("done"))
    [event] = [e for e in run.events if e.kind == HOOK_EVENT]
    assert event.agent == "lead"
    data = dict(event.data)
    assert isinstance(data.pop("ms"), int) and data.pop("tool_use_id").startswith("toolu_")
    assert data == {"event": "PreToolUse", "command": "true", "scope": "project", "code": 0, "outcome": "ok",
                    "tool": "Read"}  # fmt: skip
    assert not progress.shown(event)
    assert "PreToolUse ok (exit 0, " in logs.format_event(event, 0.0)


def test_subagent_stop_and_teammate_idle_keep_a_child_working(project: Project) -> None:
    once = project.script("once.sh", """cat > "$1.json"
[ -e "$1.seen" ] && exit 0
touch "$1.seen"
echo "check your work once more" >&2
exit 2
""")  # fmt: skip
    project.settings({"hooks": {
        "SubagentStop": [{"matcher": "fork", "hooks": [command(f"{once} subagent")]}],
        "TeammateIdle": [{"hooks": [command(f"{once} idle")]}],
        "Stop": [{"matcher": "never-applies", "hooks": [command("touch lead-stop-ran")]}],
    }})  # fmt: skip
    project.trust()
    roles = {"reviewer": Role("reviewer", "reviewer", None, None, None, None, "bypassPermissions")}
    run = run_lead(
        project,
        Reply().call("spawn_agent", {"kind": "fork", "directives": ["look around"]}),
        Reply().say("fork: first look"),
        Reply().say("fork: second look"),
        Reply().call(
            "spawn_agent", {"kind": "team", "role": "reviewer", "directives": ["review"], "wait": True}
        ),
        Reply().say("reviewer: first"),
        Reply().say("reviewer: second"),
        Reply().say("done"),
        roles=roles,
    )
    assert run.outcome.status == "done", run.outcome
    texts = [_text(r.messages[-1]) for r in run.model.requests]
    assert "SubagentStop hook feedback:\ncheck your work once more" in texts[2]
    assert "TeammateIdle hook feedback:\ncheck your work once more" in texts[5]
    sub = json.loads((project.root / "subagent.json").read_text())
    assert (sub["hook_event_name"], sub["agent_type"], sub["stop_hook_active"]) == (
        "SubagentStop",
        "fork",
        True,
    )
    assert sub["agent_id"].startswith("lead-fork") and sub["last_assistant_message"] == "fork: second look"
    idle = json.loads((project.root / "idle.json").read_text())
    assert (idle["teammate_name"], idle["team_name"], idle["agent_type"]) == (
        "reviewer",
        "hooked",
        "reviewer",
    )
    assert (project.root / "lead-stop-ran").exists()  # Stop takes no matcher: it runs for the lead


def test_teamrt_run_says_the_hooks_are_untrusted_and_runs_them_once_trusted(project: Project) -> None:
    def teamrt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "teamrt", *args], cwd=project.root, capture_output=True,
                              text=True, timeout=120)  # fmt: skip

    project.settings(hooks_of("UserPromptSubmit", (None, [command("cat > prompt.json")])))
    first = teamrt("run", "--prompt", "Say hello.", "--model", "sim")
    assert first.returncode == 0, first.stderr
    assert "teamrt: warning: the hooks in " in first.stderr and "run `teamrt trust` in" in first.stderr
    assert not (project.root / "prompt.json").exists()
    assert teamrt("trust").returncode == 0
    second = teamrt("run", "--prompt", "Say hello.", "--model", "sim")
    assert second.returncode == 0, second.stderr
    assert "not trusted" not in second.stderr
    assert json.loads((project.root / "prompt.json").read_text())["prompt"] == "Say hello."
    run_id = json.loads((project.root / "prompt.json").read_text())["session_id"]
    logged = teamrt("logs", run_id).stdout
    assert "UserPromptSubmit ok (exit 0, " in logged and "cat > prompt.json" in logged


def test_a_resumed_agent_gets_session_start_resume_and_turns_still_alternate(project: Project) -> None:
    """An agent restarted by a resume whose history ends with a user turn gets the hook's context in its
    next user turn, not in a second user turn in a row."""
    hooks = parse_hooks([settings("user", {"hooks": {"SessionStart": [
        {"matcher": "resume", "hooks": [command("cat > start.json; echo 'you were resumed'")]},
    ]}})])  # fmt: skip
    run_dir = project.root / ".teamrt" / "runs" / "r9"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r9", task="t", workdir=str(project.root))
    try:
        agent = RunHooks(hooks).for_agent(store, name="lead", kind="lead", agent="lead")
        loop = cast(AgentLoop, SimpleNamespace(  # what the hooks use of a loop
            env=SimpleNamespace(hooks=agent, tools=ToolContext(workspace=project.root, run_dir=run_dir)),
            spec=SimpleNamespace(permissions=Permissions("default"), team="hooked", persistent=False),
            messages=[{"role": "user", "content": [{"type": "text", "text": "go"}]}],
        ))  # fmt: skip
        assert asyncio.run(starting(loop, None)) is None
        assert json.loads((project.root / "start.json").read_text())["source"] == "resume"
        assert context(loop) == []
        loop.messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        assert context(loop) == [
            {"type": "text", "text": "SessionStart hook additional context:\nyou were resumed"}
        ]
        assert context(loop) == []
        assert asyncio.run(starting(loop, None)) is None
        assert [e.data["event"] for e in store.reader.events() if e.kind == HOOK_EVENT] == ["SessionStart"]
    finally:
        store.close()


def test_a_repositorys_untrusted_status_line_is_said_once_as_a_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path / "project", tmp_path, monkeypatch)
    project.root.mkdir()
    monkeypatch.chdir(project.root)
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "home"))
    project.user_settings({"statusLine": command("echo mine")})
    notices: list[str] = []
    load_hooks(project.root, notices.append)
    assert notices == [], "the person's own status line needs no trust"

    path = project.settings(
        {"statusLine": command("echo repository"), **hooks_of("Stop", (None, [command("x")]))}
    )
    load_hooks(project.root, notices.append)
    [line] = [n for n in notices if "statusLine" in n]
    assert line.startswith(f"teamrt: warning: the statusLine in {path} is not shown in the TUI: ")
    assert f"run `teamrt trust` in {project.root} to let it run" in line
    assert len([n for n in notices if "not trusted" in n]) == 2, "the hooks' line and the status line's"
    capsys.readouterr()
    assert main(["run", "--model", "sim", "--prompt", "Say hello."]) == 0
    assert capsys.readouterr().err.count(f"the statusLine in {path}") == 1, "said once as the run starts"

    project.trust()
    notices.clear()
    load_hooks(project.root, notices.append)
    assert not [n for n in notices if "statusLine" in n or "not trusted" in n]
    project.settings({"statusLine": command("echo changed"), "disableAllHooks": True})
    load_hooks(project.root, notices.append)
    assert not [n for n in notices if "statusLine" in n], "off anyway: trusting it would not show it"


@pytest.mark.hostile
def test_attack_a_broken_trust_file_trusts_nothing_and_is_named(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.settings(hooks_of("SessionStart", (None, [command("touch ran")])))
    trust.trust_path().parent.mkdir(parents=True, exist_ok=True)
    trust.trust_path().write_text(json.dumps({"projects": {str(project.root): "yes"}}))
    notices: list[str] = []
    assert load_hooks(project.root, notices.append).hooks.hooks == ()
    assert any(str(trust.trust_path()) in line and "no hooks_sha256" in line for line in notices)
    assert main(["trust"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(trust.trust_path()) in err
