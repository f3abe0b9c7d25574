"""Skills in a run, through the real SDK on ``sim``: the model is shown names and descriptions until it
loads a skill, then that skill's body; the request's prefix (system prompt and tools) never changes.

A repository set up as Claude Code users set it up: a trusted ``.claude/skills/release`` with a
reference file beside its SKILL.md, a user's own skill, a skill the model may not invoke, and the lead's
agent file naming a skill in ``skills`` (preloaded into its context at the start).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from teamrt import sim as sim_package
from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.claudecode.skills import skills_digest
from teamrt.claudecode.trust import trust
from teamrt.models.reply import Reply
from teamrt.runtime.teamrun import Choices, RunSummary, run_team_file, team_file_of
from teamrt.sim import SimServer
from teamrt.sim.policy import SimRequest
from tests.helpers.git import git

RELEASE_BODY = "RELEASE-BODY-4471: bump the version to $ARGUMENTS, then read reference.md."
REFERENCE = "REFERENCE-FILE-9120: tags are signed."
STYLE_BODY = "STYLE-BODY-5531: write short commit messages."
MANUAL_BODY = "MANUAL-BODY-8080"
TEAM = """[team]
name = "skills"
model = "sim"

[lead]
agent = "releaser"
permission_mode = "bypassPermissions"  # no rule stops the Write below: only the folder's confinement does
"""
AGENT = """---
name: releaser
description: Cuts releases
skills: [style, missing-skill]
---
You cut releases.
"""


def skill(root: Path, name: str, front: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n")
    return folder


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "app"
    skills = project / ".claude" / "skills"
    release = skill(skills, "release", "description: Cut a release of this project", RELEASE_BODY)
    (release / "reference.md").write_text(REFERENCE)
    skill(skills, "deploy", "description: Deploy by hand\ndisable-model-invocation: true", MANUAL_BODY)
    user = Path(os.environ[CONFIG_DIR_ENV]) / "skills"
    skill(user, "style", "description: House style for commits", STYLE_BODY)
    (project / ".claude" / "agents").mkdir()
    (project / ".claude" / "agents" / "releaser.md").write_text(AGENT)
    (project / ".teamrt").mkdir()
    (project / ".teamrt" / "team.toml").write_text(TEAM)
    (project / "VERSION").write_text("1.0\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a project with skills")
    return project


def user_style() -> Path:
    return Path(os.environ[CONFIG_DIR_ENV]) / "skills" / "style" / "SKILL.md"


def base_directory(request: SimRequest) -> str:
    found = re.search(r"Base directory for this skill: (\S+)", request.all_text())
    assert found is not None
    return found.group(1)


def lead(request: SimRequest) -> Reply:
    """Loads the release skill, reads the file beside it, tries to change it, then answers."""
    if request.turns == 0:
        return Reply().say("A release: loading its skill.").call("Skill", {"skill": "release", "args": "2.0"})
    if request.calls("Read") == 0:
        folder = base_directory(request)
        return (
            Reply()
            .call("Read", {"file_path": f"{folder}/reference.md"})
            .call("Write", {"file_path": f"{folder}/reference.md", "content": "changed"})
            .call("Skill", {"skill": "deploy"})
            .call("Edit", {"file_path": str(user_style()), "old_string": "STYLE", "new_string": "OWNED"})
        )
    return Reply().say("Released 2.0.")


def run(project: Path, sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> tuple[RunSummary, list[str]]:
    monkeypatch.setenv("TEAMRT_HOME", str(project.parent / "home"))
    monkeypatch.setattr(sim_package, "_shared", sim)
    notices: list[str] = []
    summary = asyncio.run(
        run_team_file(
            team_file_of(project), prompt="Release version 2.0", project=project,
            choices=Choices(model="sim"), on_notice=notices.append,
        )
    )  # fmt: skip
    return summary, notices


def requests_of(sim: SimServer, agent: str) -> list[dict[str, Any]]:
    return [json.loads(body) for who, body in sim.bodies if who == agent]


def tool_results(body: dict[str, Any]) -> list[str]:
    found = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                found.append(content if isinstance(content, str) else json.dumps(content))
    return found


def test_skills_show_names_until_used_then_the_body_and_the_prefix_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path)
    digest = skills_digest(project)
    assert digest is not None
    trust(project, None, skills=digest)  # what `teamrt trust` records once the person has read them
    with SimServer({"lead": lead}, record=True) as sim:
        summary, notices = run(project, sim, monkeypatch)
        assert summary.outcome.status == "done", summary
        requests = requests_of(sim, "lead")
    assert len(requests) == 3
    first, second, last = requests

    # before the Skill call: names and descriptions only
    skill_tool = next(t for t in first["tools"] if t["name"] == "Skill")
    assert "- release: Cut a release of this project" in skill_tool["description"]
    assert "- style: House style for commits" in skill_tool["description"]
    assert "deploy" not in skill_tool["description"]  # disable-model-invocation: not shown to the model
    assert "RELEASE-BODY-4471" not in json.dumps(first) and REFERENCE not in json.dumps(first)

    # the call's result is the body, arguments in, with its base directory; later requests keep it
    (loaded,) = tool_results(second)
    assert "RELEASE-BODY-4471: bump the version to 2.0" in loaded
    assert f"Base directory for this skill: {os.path.realpath(project / '.claude/skills/release')}" in loaded
    assert any("RELEASE-BODY-4471" in text for text in tool_results(last))

    # its folder is readable, never writable; a skill the model may not invoke stays closed
    results = tool_results(last)[1:]
    assert REFERENCE in results[0]
    assert "read-only" in results[1] or "protected" in results[1], results[1]
    assert (project / ".claude/skills/release/reference.md").read_text() == REFERENCE
    assert "no skill 'deploy'" in results[2] and MANUAL_BODY not in json.dumps(last)
    assert "read-only directory" in results[3] and "STYLE-BODY" in user_style().read_text()  # the user's too

    # the agent file's `skills`: the style skill's body from the start, in the system prompt
    assert all(STYLE_BODY in json.dumps(r["system"]) for r in requests)
    assert any("missing-skill" in line and "not loaded" in line for line in notices), notices

    # the cached prefix: system prompt and tools byte-identical on every request
    assert len({json.dumps(r["system"], sort_keys=True) for r in requests}) == 1
    assert len({json.dumps(r["tools"], sort_keys=True) for r in requests}) == 1


def test_an_untrusted_repositorys_skills_are_left_out_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = make_project(tmp_path)
    with SimServer({"lead": lambda r: Reply().say("nothing to do")}, record=True) as sim:
        summary, notices = run(project, sim, monkeypatch)
        assert summary.outcome.status == "done"
        (first,) = requests_of(sim, "lead")
    said = [line for line in notices if "skills" in line and "teamrt trust" in line]
    assert len(said) == 1 and "2 skills" in said[0], notices
    skill_tool = next(t for t in first["tools"] if t["name"] == "Skill")
    assert "release" not in skill_tool["description"]  # the repository's are out
    assert "- style: House style" in skill_tool["description"]  # the user's own need no trust
