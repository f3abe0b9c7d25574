"""Agent names as Claude Code takes them: spaces, slashes, any script, longer than a role name. Each loads,
keeps its name as the agent type the model asks Task for, and gets a role name that is never a path; two
names that become one role name clash as two of one name do, with a warning naming both."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from teamrt.agents import role_name, scan_definitions
from teamrt.mailbox import is_name
from teamrt.models import Reply
from teamrt.runtime.fromproject import with_agent_roles
from teamrt.runtime.teamrun import DEFAULT_TEAM
from teamrt.sim import SimRequest, SimServer
from teamrt.team import Team, load_team
from teamrt.testing import run_on_sim
from teamrt.tools.team import task_spawn
from tests.helpers.teams import FAST


def write(path: Path, name: str, body: str = "Do the work.") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {json.dumps(name)}\ndescription: The {name} agent.\n---\n{body}\n", "utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("Python Testing Expert", "python-testing-expert"),
        ("team/reviewer", "team-reviewer"),
        ("team\\reviewer", "team-reviewer"),
        ("Code.Reviewer", "code-reviewer"),  # as before: runs kept under it resume
        ("plugin:helper", "plugin-helper"),
        ("x" * 100, "x" * 64),
    ],
)
def test_a_name_claude_code_takes_loads_and_becomes_a_role(name: str, role: str, tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "a.md", name)
    scan = scan_definitions(tmp_path)
    assert scan.skipped == () and name in scan.definitions
    team = with_agent_roles(load_team(DEFAULT_TEAM, project=tmp_path), scan)
    assert team.roles[role].agent == name
    assert (
        task_spawn({"description": "d", "prompt": "p", "subagent_type": name}, team_agents(team))[1] == role
    )


def team_agents(team: Team) -> dict[str, str]:
    return {name: role.agent for name, role in team.roles.items()}


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "..",
        "/",
        "a/../../b",
        "~/.ssh/id_rsa",
        "コードレビュアー",
        "....",
        "-_-",
        "C:\\Windows",
    ],
)
def test_a_name_never_becomes_a_path(name: str, tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "a.md", name)
    scan = scan_definitions(tmp_path)
    assert name in scan.definitions, scan.warnings
    role = role_name(name)
    assert is_name(role) and "/" not in role and "." not in role and "\\" not in role
    assert role == role_name(name), "one name, one role"
    team = with_agent_roles(load_team(DEFAULT_TEAM, project=tmp_path), scan)
    assert team.roles[role].agent == name
    assert all(is_name(r) for r in team.roles)


def test_names_of_no_letter_or_digit_get_distinct_role_names() -> None:
    roles = {role_name(n) for n in ("コードレビュアー", "テスター", "..", "...")}
    assert len(roles) == 4 and all(r.startswith("agent-") and is_name(r) for r in roles)


def test_two_of_the_persons_names_that_become_one_role_the_projects_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(user))
    mine = write(user / "agents" / "testing.md", "python-testing-expert", "The user's.")
    theirs = write(tmp_path / ".claude" / "agents" / "testing.md", "Python Testing Expert", "The project's.")
    scan = scan_definitions(tmp_path)
    assert "python-testing-expert" not in scan.definitions
    assert scan.definitions["Python Testing Expert"].prompt == "The project's."
    assert [d.source for d in scan.overridden] == [str(mine)]
    assert scan.notes == (
        f"{theirs}: agent 'Python Testing Expert' and agent 'python-testing-expert' of {mine} both become"
        " the role 'python-testing-expert'; the project agent is used",
    )
    assert scan.notes[0] in scan.warnings
    team = with_agent_roles(load_team(DEFAULT_TEAM, project=tmp_path), scan)
    assert team.roles["python-testing-expert"].agent == "Python Testing Expert"


def test_two_names_of_one_folder_that_become_one_role_the_first_by_path_loads(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    first = write(agents / "a.md", "Team Reviewer", "First.")
    second = write(agents / "b.md", "team/reviewer", "Second.")
    scan = scan_definitions(tmp_path)
    assert scan.definitions["Team Reviewer"].prompt == "First." and "team/reviewer" not in scan.definitions
    assert scan.skipped == (
        f"{second}: agent 'team/reviewer' and agent 'Team Reviewer' of {first} both become the role"
        " 'team-reviewer'",
    )


def test_a_name_that_becomes_a_built_in_role_leaves_the_built_in_in_place(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "r.md", "Reviewer")
    said: list[str] = []
    scan = scan_definitions(tmp_path)
    team = with_agent_roles(load_team(DEFAULT_TEAM, project=tmp_path), scan, said.append)
    assert team.roles["reviewer"].agent == "reviewer" and "reviewer" in scan.definitions
    assert said and "'Reviewer' is no role of the default team: the role name 'reviewer' is taken" in said[0]


def test_the_lead_asks_task_for_an_agent_by_the_name_its_file_gives(tmp_path: Path) -> None:
    """Through the real SDK on sim: Task's subagent_type is the name as written; the agent runs under its
    role name, and its mailbox is a plain folder name."""
    project = tmp_path / "project"
    write(project / ".claude" / "agents" / "testing.md", "Python Testing Expert", "You test.")
    scan = scan_definitions(project)
    team = with_agent_roles(dataclasses.replace(load_team(DEFAULT_TEAM, project=project), model="sim"), scan)

    def lead(request: SimRequest) -> Reply:
        if not request.calls("Task"):
            return Reply().call(
                "Task",
                {
                    "description": "tests",
                    "prompt": "Write the tests.",
                    "subagent_type": "Python Testing Expert",
                },
            )
        return Reply().say("done")

    def child(request: SimRequest) -> Reply:
        return Reply().say("tested")

    run_dir = project / ".teamrt" / "runs" / "r1"
    with SimServer(policies={"lead": lead, "python-testing-expert": child}) as sim:
        outcome = run_on_sim(team, "go", project=project, sim=sim, run_dir=run_dir, settings=FAST, timeout=60)
    assert outcome.status == "done", outcome
    names = {a.name for a in outcome.agents}
    assert names == {"lead", "python-testing-expert"} and all(is_name(n) for n in names)
