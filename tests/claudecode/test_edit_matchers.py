"""Hook matchers that name Edit fire on every edit the model can make (issue 37).

Claude Code 2.1 has no MultiEdit tool: teamrt offers new agents Write and Edit, and MultiEdit only to an
agent whose run called it before (``teamrt.tools.registry.legacy_tools``). Guards written as people write
them (``Edit|Write``, ``^(Edit|Write)$``, ``.*Edit|Write``, ``Write|Edit``, ``Edit|MultiEdit|Write``), in
the project's settings and in the person's own, must fire for each: a ``.env`` guard (exit 2) blocks every
edit of ``.env``, and a PostToolUse formatter runs after every edit that succeeded. Driven through the real
agent loop with the scripted provider, over two rounds of one run: the second is the older run resumed,
whose lead called MultiEdit and so is offered it again (NotebookEdit: teamrt has none).
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from teamrt import home
from teamrt.agents import kept_definition, load_definitions, parse_definition
from teamrt.claudecode import trust
from teamrt.claudecode.hooks import parse_hooks
from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.claudecode.settings import SettingsFile, read_settings_files
from teamrt.models import Reply, ScriptedModel
from teamrt.runtime import continuing
from teamrt.runtime.hooks import HOOK_EVENT
from teamrt.runtime.teamrun import run_team
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.store import open_store
from teamrt.team import Role, Team
from teamrt.tools import builtin_tools, legacy_tools
from teamrt.tools.names import canonical, names_of
from teamrt.tools.permissions import Permissions, Verdict
from tests.helpers.teams import FAST

GUARD = """#!/bin/bash
input=$(cat)
if printf '%s' "$input" | grep -q '"file_path": "[^"]*\\.env"'; then
  echo "hands off .env" >&2
  exit 2
fi
exit 0
"""
"""A guard as public repositories write it: the call's file_path read from the hook's input, .env refused."""

FORMATTER = """#!/bin/bash
f=$(grep -o '"file_path": "[^"]*"' | head -1 | sed 's/^"file_path": "//; s/"$//')
[ -n "$f" ] && printf '# formatted\\n' >> "$f"
exit 0
"""
"""A formatter: it marks the file the call named (``tool_input.file_path``)."""

ENV = "SECRET=do-not-touch\n"
RUN = "matchers"


@dataclass
class Project:
    root: Path
    home: Path

    def script(self, name: str, text: str) -> str:
        path = self.root / ".claude" / "hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
        return f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{name}'

    def hooks(self, scope: str, matcher: str) -> None:
        guard, formatter = self.script("guard.sh", GUARD), self.script("format.sh", FORMATTER)
        data = {
            "hooks": {
                "PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": guard}]}],
                "PostToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": formatter}]}],
            }
        }
        if scope == "user":
            (self.home / "settings.json").write_text(json.dumps(data))
            return
        (self.root / ".claude" / "settings.json").write_text(json.dumps(data))
        digest = trust.hooks_digest(read_settings_files(self.root))
        assert digest is not None
        trust.trust(self.root, digest)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    if not default_sandbox().confined and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed here; install the bubblewrap package to test hooks")
    root = tmp_path / "project"
    root.mkdir()
    (root / ".env").write_text(ENV)
    (root / "a.py").write_text("x = 1\n")
    home = tmp_path / "claude-home"
    home.mkdir()
    monkeypatch.setenv(CONFIG_DIR_ENV, str(home))
    monkeypatch.setenv("TEAMRT_HOME", str(tmp_path / "teamrt-home"))
    monkeypatch.chdir(root)
    return Project(root, home)


def team(project: Project) -> Team:
    lead = Role("lead", "lead", None, None, None, None, "bypassPermissions")
    return Team(path=project.root / "team.toml", name="matched", lead=lead, model="sim")


def first_round(project: Project, *steps: Any) -> ScriptedModel:
    model = ScriptedModel(list(steps))
    work = run_team(
        team(project), "go", project=project.root, definitions=load_definitions(project.root),
        settings=FAST, models={"sim": model}, run_id=RUN,
    )  # fmt: skip
    summary = asyncio.run(asyncio.wait_for(work, 60))
    assert summary.outcome.status == "done", summary.outcome
    return model


def next_round(project: Project, *steps: Any) -> ScriptedModel:
    model = ScriptedModel(list(steps))
    work = continuing.continue_run(RUN, "go on", project=project.root, settings=FAST, models={"sim": model})
    summary = asyncio.run(asyncio.wait_for(work, 60))
    assert summary.outcome.status == "done", summary.outcome
    return model


def hook_runs(project: Project) -> list[tuple[str, str, str]]:
    """(event, tool, outcome) of each hook run of the run, in order."""
    store = open_store(home.existing_run_dir(RUN, project.root), RUN)
    try:
        events = store.reader.events(kinds=(HOOK_EVENT,))
    finally:
        store.close()
    return [(e.data["event"], e.data["tool"], e.data["outcome"]) for e in events]


def results(model: ScriptedModel, call: int) -> list[str]:
    """The tool results the model's ``call``-th request (1-based) carries."""
    return [
        b["content"]
        for b in model.requests[call - 1].messages[-1]["content"]
        if b.get("type") == "tool_result"
    ]


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"file_path": path, "old_string": old, "new_string": new}


def multi(path: str, old: str, new: str) -> dict[str, Any]:
    return {"file_path": path, "edits": [{"old_string": old, "new_string": new}]}


MATCHERS = [
    ("Edit|Write", "project"),  # a plain list of names
    ("^(Edit|Write)$", "project"),  # a regular expression
    (".*Edit|Write", "user"),  # the *Edit style, in the person's own settings
    ("Write|Edit", "user"),
    ("Edit|MultiEdit|Write", "project"),  # written for an older Claude Code
]


@pytest.mark.parametrize(("matcher", "scope"), MATCHERS)
def test_edit_guards_and_formatters_fire_on_every_edit_the_model_can_make(
    project: Project, matcher: str, scope: str
) -> None:
    project.hooks(scope, matcher)
    first = first_round(
        project,
        Reply()
        .call("Write", {"file_path": ".env", "content": "SECRET=stolen\n"})
        .call("Edit", edit(".env", "do-not-touch", "stolen"))
        .call(
            "MultiEdit", multi(".env", "do-not-touch", "stolen")
        )  # as a model of older Claude Code calls it
        .call("Write", {"file_path": "b.py", "content": "y = 2\n"})
        .call("Edit", edit("a.py", "x = 1", "x = 10")),
        Reply().say("done"),
    )
    offered = [t["name"] for t in first.requests[0].tools]
    assert "Edit" in offered and "Write" in offered and "MultiEdit" not in offered, "Claude Code's tools"
    said = results(first, 2)
    assert all("blocked by a PreToolUse hook: hands off .env" in r for r in said[:3]), said
    assert (project.root / ".env").read_text() == ENV
    assert (project.root / "b.py").read_text() == "y = 2\n# formatted\n"
    assert (project.root / "a.py").read_text() == "x = 10\n# formatted\n"
    assert hook_runs(project) == [
        ("PreToolUse", "Write", "blocked"),
        ("PreToolUse", "Edit", "blocked"),
        ("PreToolUse", "Edit", "blocked"),  # MultiEdit is Edit's older name: judged as an Edit
        ("PreToolUse", "Write", "ok"),
        ("PostToolUse", "Write", "ok"),
        ("PreToolUse", "Edit", "ok"),
        ("PostToolUse", "Edit", "ok"),
    ]

    # the run goes on: its lead called MultiEdit, so it is offered MultiEdit again, guarded as Edit is
    second = next_round(
        project,
        Reply()
        .call("MultiEdit", multi(".env", "do-not-touch", "stolen"))
        .call("MultiEdit", multi("a.py", "x = 10", "x = 11")),
        Reply().say("done"),
    )
    offered = [t["name"] for t in second.requests[0].tools]
    assert offered[offered.index("Edit") + 1] == "MultiEdit", "where it stood in the older runs"
    said = results(second, 2)
    assert "blocked by a PreToolUse hook: hands off .env" in said[0] and said[1].startswith("edited a.py")
    assert (project.root / ".env").read_text() == ENV
    assert (project.root / "a.py").read_text() == "x = 11\n# formatted\n# formatted\n"
    assert hook_runs(project)[7:] == [
        ("PreToolUse", "MultiEdit", "blocked"),  # tool_name as Claude Code sent it for a MultiEdit call
        ("PreToolUse", "MultiEdit", "ok"),
        ("PostToolUse", "MultiEdit", "ok"),
    ]


@pytest.mark.hostile
def test_attack_no_edit_tool_name_reaches_env_past_an_edit_write_guard(project: Project) -> None:
    """A model trying every edit tool by every name it might: odd case, teamrt's older names, Claude
    Code's older and newer ones, tools teamrt lacks. Each is blocked by the guard, refused as no tool, or
    refused for its input; none writes .env, and the guard saw every one that reached a tool."""
    project.hooks("project", "Edit|Write")
    attempts = [
        ("write", {"file_path": ".env", "content": "x"}),
        ("WRITE", {"file_path": ".env", "content": "x"}),
        ("edit", edit(".env", "do-not-touch", "x")),
        ("EDIT", edit(".env", "do-not-touch", "x")),
        ("multiedit", multi(".env", "do-not-touch", "x")),
        ("MultiEdit", edit(".env", "do-not-touch", "x")),
        ("multi_edit", multi(".env", "do-not-touch", "x")),
        ("NotebookEdit", {"notebook_path": ".env", "new_source": "x"}),
        ("str_replace_based_edit_tool", {"command": "create", "path": ".env", "file_text": "x"}),
        ("Write", {"file_path": "./sub/../.env", "content": "x"}),
        ("Edit", edit(str(project.root / ".env"), "do-not-touch", "x")),
    ]
    reply = Reply()
    for name, args in attempts:
        reply = reply.call(name, args)
    first = first_round(project, reply, Reply().say("done"))
    said = results(first, 2)
    assert len(said) == len(attempts)
    for (name, _), result in zip(attempts, said, strict=True):
        assert "blocked by a PreToolUse hook" in result or "there is no tool named" in result, (name, result)
    assert (project.root / ".env").read_text() == ENV
    guarded = [
        tool for event, tool, outcome in hook_runs(project) if event == "PreToolUse" and outcome == "blocked"
    ]
    assert len(guarded) == sum("blocked by a PreToolUse hook" in r for r in said)
    assert set(guarded) <= {"Write", "Edit"}


# -- the names, the rules and the matchers, one by one ---------------------------------------------------


@pytest.mark.parametrize(
    ("matcher", "tool", "runs"),
    [
        ("Edit|Write", "MultiEdit", True),
        ("Edit", "MultiEdit", True),
        ("MultiEdit", "Edit", True),  # a guard written for MultiEdit alone guards Edit
        ("^MultiEdit$", "Edit", True),
        ("^(Edit|Write)$", "MultiEdit", True),
        (".*Edit", "MultiEdit", True),
        ("Write", "MultiEdit", False),  # as in Claude Code, Write is not Edit
        ("Edit", "Write", False),
        ("multiedit|write", "Edit", True),
        ("Notebook.*", "MultiEdit", False),
        ("^Agent$", "Task", True),
    ],
)
def test_a_matcher_naming_edit_or_its_older_name_runs_for_both(matcher: str, tool: str, runs: bool) -> None:
    group = {"matcher": matcher, "hooks": [{"type": "command", "command": "x"}]}
    found = parse_hooks([SettingsFile("user", Path("settings.json"), {"hooks": {"PreToolUse": [group]}})])
    assert found.problems == ()
    assert bool(found.matching("PreToolUse", tool)) is runs


def test_multiedit_anywhere_a_person_writes_it_means_edit(tmp_path: Path) -> None:
    assert canonical("MultiEdit") == canonical("multiedit") == "Edit"
    assert names_of("Edit") == ("Edit", "MultiEdit") and names_of("MultiEdit") == ("MultiEdit", "Edit")
    assert "MultiEdit" not in builtin_tools() and list(legacy_tools()) == ["MultiEdit"]
    written = parse_definition(
        "---\nname: a\ndescription: d\ntools: Read, MultiEdit, Edit\ndisallowedTools: multiedit\n---\nGo.\n",
        "a.md",
    )
    assert (written.tools, written.disallowed_tools, written.warnings) == (("Read", "Edit"), ("Edit",), ())
    kept = kept_definition({"name": "a", "tools": ["read", "Edit", "MultiEdit"], "disallowed_tools": []})
    assert kept.tools == ("Read", "Edit")
    rules = Permissions("default", deny=["MultiEdit(.env)"], allow=["MultiEdit(src/**)"])
    for tool in ("Edit", "Write", "MultiEdit"):
        assert (
            rules.decide(tool, {"file_path": ".env"}, read_only=False, workspace=tmp_path).verdict
            is Verdict.DENY
        )
        src = rules.decide(tool, {"file_path": "src/a.py"}, read_only=False, workspace=tmp_path)
        assert src.verdict is Verdict.ALLOW
    accepting = Permissions("acceptEdits")
    multi_call = {"file_path": "a.py", "edits": []}
    assert (
        accepting.decide("MultiEdit", multi_call, read_only=False, workspace=tmp_path).verdict
        is Verdict.ALLOW
    )
