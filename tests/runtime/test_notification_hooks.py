"""Claude Code's ``Notification`` hooks in a run: trusted, sandboxed and journaled like every hook, run
when an ask waits for a person (``permission_prompt``) and when the run ends (``idle_prompt``), with the
input Claude Code documents; one that fails stops nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from teamrt.agents import load_definitions
from teamrt.claudecode import trust
from teamrt.claudecode.settings import read_settings_files
from teamrt.models import Reply, ScriptedModel
from teamrt.runtime import notify
from teamrt.runtime.agent import Outcome
from teamrt.runtime.hooks import HOOK_EVENT, load_hooks
from teamrt.runtime.supervisor import Supervisor
from teamrt.sandbox.bwrap import default_sandbox
from teamrt.store import EventRecord, create_store
from teamrt.team import Role, Team, team_to_json
from tests.helpers.teams import FAST

DEADLINE = 60.0
"""Bounds a hang only."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose hooks run in the sandbox (skipped where bubblewrap is missing, as the other hook
    tests are)."""
    if not default_sandbox().confined and not os.environ.get("CI"):
        pytest.skip("bubblewrap (bwrap) is not installed here; install the bubblewrap package to test hooks")
    monkeypatch.setattr(notify, "POLL_S", 0.02)
    root = tmp_path / "project"
    (root / ".claude" / "hooks").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root


def hooked(project: Path, groups: dict[str, str], *, trusted: bool = True) -> None:
    """``.claude/settings.json`` with a ``Notification`` hook per matcher (its script's text); trusted."""
    entries = []
    for i, (matcher, text) in enumerate(groups.items()):
        script = project / ".claude" / "hooks" / f"hook{i}.sh"
        script.write_text("#!/bin/bash\n" + text)
        script.chmod(0o755)
        command = {"type": "command", "command": f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/hook{i}.sh'}
        entries.append({"matcher": matcher, "hooks": [command]})
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"Notification": entries}}))
    if trusted:
        digest = trust.hooks_digest(read_settings_files(project))
        assert digest is not None
        trust.trust(project, digest)


def written(project: Path, name: str) -> list[dict[str, Any]]:
    path = project / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_lead(
    project: Path, steps: list[Reply], answered_when: str | None = None
) -> tuple[Outcome, list[EventRecord]]:
    """The lead alone in ``project``, asking (mode default) with an hour to wait; the ask is allowed once
    the file ``answered_when`` holds a line (a hook was told of it)."""
    lead = Role("lead", "lead", None, None, None, None, "default")
    spec = Team(path=project / "team.toml", name="notified", lead=lead, ask_wait=3600.0)
    run_dir = project.parent / "home" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    kept = {"team": team_to_json(spec)}
    store = create_store(run_dir, "r1", task="go", workdir=str(project), settings=kept)

    async def answer(supervisor: Supervisor) -> None:
        assert answered_when is not None
        while not written(project, answered_when):
            await asyncio.sleep(0.01)
        told = written(project, answered_when)[0]
        assert supervisor.asker.answer(told["teamrt"]["ask_id"], True, by="user")

    async def go() -> Outcome:
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=spec, definitions=load_definitions(project), project=project,
            settings=FAST, models={"sim": ScriptedModel(steps)}, hooks=load_hooks(project),
        )  # fmt: skip
        beside = asyncio.create_task(answer(supervisor)) if answered_when else None
        try:
            return await asyncio.wait_for(supervisor.run("go"), DEADLINE)
        finally:
            if beside is not None:
                beside.cancel()

    try:
        return asyncio.run(go()), store.reader.events()
    finally:
        store.close()


def test_notification_hooks_get_claude_codes_input_on_an_ask_and_at_the_end(project: Path) -> None:
    append = 'cat >> "$CLAUDE_PROJECT_DIR/{}"; echo >> "$CLAUDE_PROJECT_DIR/{}"\n'
    hooked(project, {
        "permission_prompt": append.format("asks.jsonl", "asks.jsonl"),
        "": append.format("all.jsonl", "all.jsonl"),
        "idle_prompt": "echo 'failing on purpose' >&2; exit 1\n",
    })  # fmt: skip
    steps = [Reply().call("Write", {"file_path": "notes.txt", "content": "x"}), Reply().say("all done")]
    outcome, events = run_lead(project, steps, answered_when="asks.jsonl")
    assert outcome.status == "done" and (project / "notes.txt").read_text() == "x"
    [ask] = written(project, "asks.jsonl")
    ask_id = next(e.data["id"] for e in events if e.kind == "ask")
    assert ask == {
        "session_id": "r1", "transcript_path": "", "cwd": str(project), "hook_event_name": "Notification",
        "message": f"lead asks to use Write: notes.txt (teamrt answer r1 {ask_id} allow|deny)",
        "title": "teamrt r1: permission needed", "notification_type": "permission_prompt",
        "teamrt": {"run_id": "r1", "what": "ask", "ask_id": ask_id, "agent": "lead", "tool": "Write"},
    }  # fmt: skip
    every = written(project, "all.jsonl")
    assert [e["notification_type"] for e in every] == ["permission_prompt", "idle_prompt"]
    assert (every[1]["title"], every[1]["message"]) == ("teamrt r1: done", "the run done")
    journal = [(e.data["outcome"], e.data["code"]) for e in events if e.kind == HOOK_EVENT]
    assert sorted(journal) == [("error", 1), ("ok", 0), ("ok", 0), ("ok", 0)], (
        "the failing hook stopped nothing"
    )
    [failed] = [e.data for e in events if e.kind == HOOK_EVENT and e.data["outcome"] == "error"]
    assert (failed["event"], failed["note"]) == ("Notification", "exit code 1: failing on purpose")


@pytest.mark.hostile
def test_attack_an_untrusted_repositorys_notification_hooks_do_not_run(project: Path) -> None:
    hooked(project, {"": 'touch "$CLAUDE_PROJECT_DIR/pwned"\n'}, trusted=False)
    outcome, events = run_lead(project, [Reply().say("done")])
    assert outcome.status == "done"
    assert not (project / "pwned").exists()
    assert not [e for e in events if e.kind == HOOK_EVENT]


@pytest.mark.hostile
def test_attack_a_notification_hook_is_confined_like_bash(project: Path) -> None:
    """A trusted hook still runs in the sandbox of Bash: it cannot write outside the project."""
    outside = project.parent / "outside"
    hooked(project, {"": f'touch "{outside}"; touch "$CLAUDE_PROJECT_DIR/inside"\n'})
    outcome, _ = run_lead(project, [Reply().say("done")])
    assert outcome.status == "done"
    assert (project / "inside").exists() and not outside.exists()
