"""A repository set up for Claude Code (``tests/data/claude_project``) runs under teamrt as it is.

The fixture holds what a Claude Code user commits: agent files in subfolders
(one of them broken), a ``CLAUDE.md`` importing another file, a personal
``CLAUDE.local.md``, ``.claude/settings.json`` with allow, deny and ask rules,
a default mode, ``env`` and hooks. A team runs on ``sim`` through the real SDK;
the checks read what the simulator received and what the run journaled.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from teamrt import sim as sim_package
from teamrt.claudecode.settings import read_settings_files
from teamrt.claudecode.trust import allow_digest, hooks_digest, trust
from teamrt.models.reply import Reply
from teamrt.runtime.teamrun import Choices, RunSummary, run_team_file, team_file_of
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest
from teamrt.store import open_reader
from tests.helpers.git import git
from tests.helpers.machine import needs_bwrap

FIXTURE = Path(__file__).parents[1] / "data" / "claude_project"
LEAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Bash", {"command": 'echo "env=$WIDGET_ENV"'}),
    ("Bash", {"command": "git push origin main"}),
    ("Bash", {"command": "curl -s http://127.0.0.1:9/"}),
    ("Read", {"file_path": "secrets/token.txt"}),
    ("Write", {"file_path": "docs/notes.md", "content": "Widgets are made by make_widget.\n"}),
]


def lead(request: SimRequest) -> Reply:
    """Tries what the settings and hooks decide, asks the project's reviewer, then tries to stop."""
    if request.turns == 0:
        reply = Reply().say("Checking what this repository allows.")
        for name, args in LEAD_CALLS:
            reply.call(name, args)
        return reply
    if request.calls("Task") == 0:
        review = {
            "description": "review notes",
            "prompt": "Review docs/notes.md",
            "subagent_type": "code-reviewer",
        }
        return Reply().call("Task", review)
    if "FIXTURE-STOP-42" in request.last_user_text and request.calls("Bash") == len(
        [c for c in LEAD_CALLS if c[0] == "Bash"]
    ):
        return Reply().call("Bash", {"command": "python -m unittest"})
    return Reply().say("Done: notes written and reviewed.")


def reviewer(request: SimRequest) -> Reply:
    return Reply().say("LGTM: docs/notes.md reads well.")


def project_copy(tmp_path: Path) -> Path:
    project = tmp_path / "widgets"
    shutil.copytree(FIXTURE, project, symlinks=True)
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a Claude Code project")
    return project


def run(project: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> tuple[RunSummary, list[str]]:
    monkeypatch.setenv("TEAMRT_HOME", str(project.parent / "home"))
    monkeypatch.setattr(sim_package, "_shared", sim)
    notices: list[str] = []
    summary = asyncio.run(
        run_team_file(
            team_file_of(project), prompt="Document the widget module", project=project,
            choices=Choices(model="sim"), on_notice=notices.append,
        )
    )  # fmt: skip
    return summary, notices


def requests_of(sim: SimServer, agent: str) -> list[dict[str, Any]]:
    return [json.loads(body) for who, body in sim.bodies if who == agent]


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or ""
    return system if isinstance(system, str) else "\n".join(b.get("text", "") for b in system)


def results_by_call(body: dict[str, Any]) -> dict[str, str]:
    """Each tool call of the conversation (``name:first input value``) with its result's text."""
    calls: dict[str, str] = {}
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_use":
                calls[block["id"]] = f"{block['name']}:{next(iter(block['input'].values()), '')}"
    results: dict[str, str] = {}
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)
                results[calls[block["tool_use_id"]]] = text
    return results


def user_texts(body: dict[str, Any]) -> str:
    return "\n".join(
        block.get("text", "")
        for message in body["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "text"
    )


@needs_bwrap
def test_a_claude_code_project_runs_as_is_on_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = project_copy(tmp_path)
    # the person's own untracked settings set what the repository's may not (WIDGET_ENV is refused there)
    (project / ".claude" / "settings.local.json").write_text(
        '{"env": {"WIDGET_ENV": "from-claude-settings"}}'
    )
    files = read_settings_files(project)
    digest = hooks_digest(files)
    assert digest is not None
    # what `teamrt trust` records, once the person has read the hooks and the allow rules
    trust(project, digest, allow=allow_digest(files))
    with SimServer({"lead": lead, "code-reviewer": reviewer}, record=True) as sim:
        summary, notices = run(project, sim, monkeypatch)
        assert summary.outcome.status == "done", summary
        said = "\n".join(notices)
        assert "broken.md" in said and "front matter" in said  # the broken agent file is named
        assert "NotebookEdit" in said  # docs.writer's tool teamrt lacks is a warning, not a silent drop
        assert ".claude/settings.json: env WIDGET_ENV ignored: a repository's settings" in said

        lead_requests = requests_of(sim, "lead")
        first, last = lead_requests[0], lead_requests[-1]
        system = system_text(first)
        # memory: CLAUDE.md, its import and the personal file, in every request of the lead
        for marker in ("Widget service", "FIXTURE-CONVENTIONS-7731", "FIXTURE-LOCAL-5150"):
            assert all(marker in system_text(r) for r in lead_requests), marker
        # the project's agents are the lead's to spawn; the broken one is not
        assert "code-reviewer" in system and "docs-writer" in system and "broken" not in system
        # Claude Code's tool names are the ones the model sees
        assert {"Read", "Write", "Edit", "Glob", "Grep", "Bash", "Task"} <= {
            t["name"] for t in first["tools"]
        }

        # UserPromptSubmit added its context to the task
        assert "FIXTURE-PROMPT-CONTEXT-2718" in user_texts(first)

        results = results_by_call(last)
        assert "env=from-claude-settings" in results['Bash:echo "env=$WIDGET_ENV"']  # settings env
        assert "Bash(git push:*)" in results["Bash:git push origin main"]  # a settings deny rule
        assert "denied" in results["Bash:git push origin main"]
        assert "FIXTURE-BLOCKED-31" in results["Bash:curl -s http://127.0.0.1:9/"]  # PreToolUse, exit 2
        assert "denied" in results["Read:secrets/token.txt"] and "not-for-agents" not in str(last)
        assert not results["Write:docs/notes.md"].startswith("permission")  # acceptEdits, from defaultMode
        assert "FIXTURE-POST-CONTEXT-1618" in user_texts(last)  # PostToolUse's context, after the results
        assert (project / "docs" / "notes.md").read_text() == "Widgets are made by make_widget.\n"
        assert "LGTM" in results["Task:review notes"]  # the project's reviewer answered
        # Stop sent the lead back once, with the hook's words; then it ran the tests and stopped
        assert "FIXTURE-STOP-42" in user_texts(last)
        assert "Ran 0 tests" in results["Bash:python -m unittest"]

        reviewer_requests = requests_of(sim, next(a for a, _ in sim.bodies if a.startswith("code-reviewer")))
        assert reviewer_requests[0]["model"] == "sim:claude-haiku-5-5"  # its agent file's `model: haiku`
        assert "FIXTURE-CONVENTIONS-7731" in system_text(reviewer_requests[0])
        assert "careful code reviewer" in system_text(reviewer_requests[0])

    reader = open_reader(project.parent / "home" / "runs" / summary.run_id, summary.run_id)
    try:
        hooks = [e.data for e in reader.events(kinds=("hook",))]
    finally:
        reader.close()
    events = {h.get("event") for h in hooks}
    assert {"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"} <= events, hooks


def test_the_repositorys_hooks_do_not_run_until_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = project_copy(tmp_path)
    with SimServer({"lead": lambda r: Reply().say("nothing to do")}, record=True) as sim:
        summary, notices = run(project, sim, monkeypatch)
        assert summary.outcome.status == "done"
        assert any("teamrt trust" in line for line in notices), notices
        first = requests_of(sim, "lead")[0]
        assert "FIXTURE-PROMPT-CONTEXT-2718" not in user_texts(first)  # UserPromptSubmit did not run
        assert "FIXTURE-CONVENTIONS-7731" in system_text(first)  # memory needs no trust: it is text
