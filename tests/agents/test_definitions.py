"""Agent definition files: fields, lenient YAML, tools, models, sources and their precedence, broken and
hostile files, ``teamrt agents``, and agents as roles of the built-in team on ``sim``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from teamrt.agents import (
    PERMISSION_MODES,
    AgentDefinition,
    DefinitionError,
    builtin_definitions,
    choose_model,
    load_definitions,
    one_line,
    parse_definition,
    role_name,
    scan_definitions,
)
from teamrt.agents import definitions as definitions_module
from teamrt.agents.definitions import PROJECT, TEAM_TOOLS, TEAMRT, USER
from teamrt.mailbox import is_name
from teamrt.models import Reply, open_model
from teamrt.runtime.fromproject import tell_agents, with_agent_roles
from teamrt.runtime.supervisor import Supervisor
from teamrt.runtime.teamrun import DEFAULT_TEAM, Choices, single_team, team_from_file
from teamrt.sim import SimRequest, SimServer
from teamrt.store import create_store, open_store
from teamrt.team import TeamFileError, load_team, team_to_json
from teamrt.testing import run_on_sim
from teamrt.tools.names import canonical
from teamrt.tools.team import team_tools
from tests.helpers.teams import FAST

FULL = """---
name: code-reviewer
description: Reviews code for quality.
tools: Read, Grep, Glob, Bash, WebFetch, NotebookEdit
disallowedTools: Write, Edit
model: sonnet
permissionMode: plan
maxTurns: 12
---

You review code.

Be specific.
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def agent_file(name: str, body: str = "Do the work.", **fields: str) -> str:
    lines = [f"name: {name}", f"description: The {name} agent."]
    lines += [f"{key}: {value}" for key, value in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body + "\n"


def parse(text: str) -> AgentDefinition:
    return parse_definition(text, "x.md")


def problems(definition: AgentDefinition) -> list[str]:
    """Its warnings without the ``x.md: `` each starts with."""
    assert all(w.startswith("x.md: ") for w in definition.warnings)
    return [w.removeprefix("x.md: ") for w in definition.warnings]


def skipped(text: str, tmp_path: Path, file_name: str = "broken-agent.md") -> str:
    """The one line ``scan_definitions`` gives for a project holding only this file (and a good one)."""
    agents = tmp_path / ".claude" / "agents"
    write(agents / file_name, text)
    write(agents / "zz-good.md", agent_file("good"))
    scan = scan_definitions(tmp_path)
    assert "good" in scan.definitions, "a broken file never keeps the others from loading"
    [line] = scan.skipped
    assert line in scan.warnings
    assert "\n" not in line and "\r" not in line
    assert line.startswith(one_line(str(agents / file_name)) + ": ")
    return line


# -- fields ----------------------------------------------------------------------------


def test_every_field_is_read() -> None:
    definition = parse(FULL)
    assert dataclasses.replace(definition, warnings=()) == AgentDefinition(
        name="code-reviewer",
        description="Reviews code for quality.",
        prompt="You review code.\n\nBe specific.",
        tools=("Read", "Grep", "Glob", "Bash", "WebFetch"),
        disallowed_tools=("Write", "Edit"),
        model="sonnet",
        permission_mode="plan",
        max_turns=12,
        source="x.md",
        scope="project",
    )
    assert problems(definition) == ["tools: 'NotebookEdit' is not available in teamrt yet; left out"]


def test_optional_fields_default_to_inherit_and_all_tools() -> None:
    definition = parse(agent_file("plain"))
    assert definition.tools is None
    assert definition.disallowed_tools == ()
    assert definition.model is None
    assert definition.permission_mode is None
    assert definition.max_turns is None
    assert definition.warnings == ()


def test_tools_as_yaml_lists_in_any_case_and_team_tools() -> None:
    text = "---\nname: a\ndescription: d\ntools:\n  - read\n  - BASH\n  - send_message\n  - Agent\n"
    text += "disallowedTools: [edit, spawn_agent]\n---\nGo."
    definition = parse(text)
    assert definition.tools == ("Read", "Bash", "send_message", "Task")
    assert definition.disallowed_tools == ("Edit", "spawn_agent")
    assert definition.warnings == ()


@pytest.mark.parametrize("tools", ["'*'", '"*"', "*", "['*']", "Read, *"])
def test_a_star_means_every_tool(tools: str) -> None:
    assert parse(agent_file("a", tools=tools)).tools is None


def test_empty_tools_mean_none_and_repeats_collapse() -> None:
    assert parse(agent_file("a", tools="[]")).tools == ()
    assert parse(agent_file("a", tools="''")).tools == ()
    assert parse(agent_file("a", tools="[]")).warnings == ()
    assert parse(agent_file("a", tools="Read, read, ,Grep")).tools == ("Read", "Grep")


def test_tools_teamrt_lacks_are_warned_about_never_dropped_silently() -> None:
    text = agent_file(
        "a", tools="Read, NotebookEdit, mcp__github__create_issue, Frobnicate, Bash(git diff:*)"
    )
    definition = parse(text)
    assert definition.tools == ("Read", "mcp__github__create_issue")
    assert problems(definition) == [
        "tools: 'NotebookEdit' is not available in teamrt yet; left out",
        "tools: no such tool 'Frobnicate'; left out",
        "tools: 'Bash(git diff:*)': a tool with a rule in parentheses is not supported in a definition;"
        " left out (put the rule in the team file's [permissions])",
    ]


def test_a_definition_left_with_no_tool_says_so() -> None:
    definition = parse(agent_file("a", tools="NotebookEdit, KillShell"))
    assert definition.tools == ()
    assert problems(definition)[-1] == "none of the tools it names is available: it has only the team tools"


def test_disallowed_tools_teamrt_lacks_are_warned_about() -> None:
    definition = parse(agent_file("a", disallowedTools="NotebookEdit, Nope, Write"))
    assert definition.disallowed_tools == ("Write",)
    assert problems(definition) == [
        "disallowedTools: 'NotebookEdit' is not available in teamrt yet; left out",
        "disallowedTools: no such tool 'Nope'; left out",
    ]


def test_team_tool_names_are_the_team_tools() -> None:
    names = team_tools(None)  # type: ignore[arg-type]  # the names only
    assert set(TEAM_TOOLS) == {name for name in names if canonical(name) is None}, "Claude's Task aside"


def test_model_as_written_and_inherit() -> None:
    assert parse(agent_file("a", model="inherit")).model is None
    for model in ("claude-sonnet-5-5", "sim", "opus", "haiku", "claude-opus-4-8-20260415", "sim:haiku"):
        definition = parse(agent_file("a", model=model))
        assert (definition.model, definition.warnings) == (model, ())


def test_an_unknown_model_is_kept_with_a_warning() -> None:
    definition = parse(agent_file("a", model="gpt-4o"))
    assert definition.model == "gpt-4o"
    assert problems(definition) == [
        "model 'gpt-4o' is not one teamrt knows (teamrt models lists them); the agent runs on the team's"
        " model"
    ]


def test_a_retired_model_is_passed_over_for_the_team_s_with_a_warning() -> None:
    definition = parse(agent_file("a", model="claude-opus-4-1-20250805"))
    assert problems(definition) == [
        "model 'claude-opus-4-1-20250805' was retired on 2026-08-05 (the API answers 404 for it); the agent"
        " runs on the team's model"
    ]
    assert choose_model(None, definition, "claude-sonnet-5-5") == "claude-sonnet-5-5"
    assert choose_model(None, definition, "sim") == "sim"


@pytest.mark.parametrize("mode", PERMISSION_MODES)
def test_each_permission_mode(mode: str) -> None:
    definition = parse_definition(agent_file("a", permissionMode=mode), "x.md", scope=USER)
    assert (definition.permission_mode, definition.warnings) == (mode, ())


@pytest.mark.parametrize("scope", [PROJECT, TEAMRT])
@pytest.mark.parametrize("mode", ["bypassPermissions", "auto"])
@pytest.mark.hostile
def test_a_repositorys_agent_file_may_not_lift_the_checks(mode: str, scope: str) -> None:
    definition = parse_definition(agent_file("a", permissionMode=mode), "x.md", scope=scope)
    assert definition.permission_mode is None
    [warning] = problems(definition)
    assert warning.startswith(f"permissionMode {mode!r} ignored: a repository's agent file")


def test_six_modes_and_manual_is_default() -> None:
    assert PERMISSION_MODES == ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
    assert parse(agent_file("a", permissionMode="manual")).permission_mode == "default"


@pytest.mark.parametrize("mode", ["yolo", "AcceptEdits", "[plan]", "3"])
def test_an_unknown_permission_mode_is_ignored_with_a_warning(mode: str) -> None:
    definition = parse(agent_file("a", permissionMode=mode))
    assert definition.permission_mode is None
    [warning] = problems(definition)
    assert warning.startswith("permissionMode ") and "is not one of default, acceptEdits" in warning
    assert warning.endswith("; ignored, as Claude Code ignores it")


def test_crlf_gives_the_same_definition_as_lf() -> None:
    assert "\r" not in FULL
    assert parse(FULL.replace("\n", "\r\n")) == parse(FULL)


def test_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / ".teamrt" / "agents" / "bom.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xef\xbb\xbf" + FULL.replace("\n", "\r\n").encode())
    loaded = load_definitions(tmp_path)["code-reviewer"]
    assert loaded == parse_definition(FULL, str(path), scope="teamrt")


def test_unknown_fields_warn_claude_codes_unused_ones_say_so_and_color_is_silent() -> None:
    text = agent_file("a", color="cyan", hooks="{}", flavour="mint", effort="high")
    definition = parse_definition(text, "agents/a.md")
    assert definition.warnings == (
        "agents/a.md: Claude Code's field 'hooks' is not used by teamrt",
        "agents/a.md: unknown field 'flavour' ignored",
    )
    plain = parse_definition(agent_file("a"), "agents/a.md")
    assert dataclasses.replace(definition, warnings=()) == dataclasses.replace(plain, effort="high")


def test_effort_is_read_and_a_level_the_api_lacks_is_a_warning() -> None:
    assert parse_definition(agent_file("a", effort="low"), "agents/a.md").effort == "low"
    hostile = parse_definition(agent_file("a", effort="ultra"), "agents/a.md")
    assert hostile.effort is None
    assert hostile.warnings == (
        "agents/a.md: effort 'ultra' is not one of low, medium, high, xhigh, max; left out",
    )


# -- lenient YAML ----------------------------------------------------------------------


def test_an_unquoted_description_with_colons_loads_as_claude_code_loads_it() -> None:
    text = (
        "---\nname: helper\ndescription: Use this agent when: the user asks. Example: fix it\n"
        "tools: [Read, Grep]\nmaxTurns: 5\nmodel: haiku\n---\nHelp.\n"
    )
    definition = parse(text)
    assert definition.description == "Use this agent when: the user asks. Example: fix it"
    assert (definition.tools, definition.max_turns, definition.model) == (("Read", "Grep"), 5, "haiku")
    assert definition.warnings == ()


def test_indented_lines_continue_a_value_examples_included() -> None:
    text = (
        "---\nname: helper\ndescription: Use this agent when: reviewing.\n  Examples:\n\n"
        "  <example>\n  Context: a PR\n  user: review it\n  </example>\ntools: Read\n---\nHelp.\n"
    )
    definition = parse(text)
    assert definition.description == (
        "Use this agent when: reviewing.\nExamples:\n\n<example>\nContext: a PR\nuser: review it\n</example>"
    )
    assert definition.tools == ("Read",)


def test_valid_yaml_is_read_as_yaml() -> None:
    text = "---\nname: a\ndescription: >\n  Folded\n  text: here\ntools: Read\n---\nGo.\n"
    assert parse(text).description == "Folded text: here"


def test_comments_in_front_matter_are_skipped_in_lenient_reading() -> None:
    text = "---\n# a comment\nname: a\ndescription: Use when: x\n# tools: Bash\n---\nGo.\n"
    definition = parse(text)
    assert (definition.description, definition.tools) == ("Use when: x", None)


# -- names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("code-reviewer", "code-reviewer"),
        ("Code.Reviewer", "code-reviewer"),
        ("python_pro", "python_pro"),
        ("ML-Engineer.v2", "ml-engineer-v2"),
        ("_private", "private"),
        ("-dash", "dash"),
        ("réviseur", "r-viseur"),
        ("api:designer", "api-designer"),
    ],
)
def test_claude_code_names_load_and_get_a_role_name(name: str, role: str) -> None:
    assert parse(agent_file(name)).name == name
    assert role_name(name) == role
    assert is_name(role), "a role name is a mailbox name"


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name", ["tab\there", "bell\x07", "rtl\u202eoverride", "line\u2028break", "esc\x1b[31m", "x" * 129]
)
def test_names_that_cannot_be_shown_on_one_line_are_refused(name: str, tmp_path: Path) -> None:
    line = skipped(f"---\nname: {json.dumps(name)}\ndescription: d\n---\nGo.\n", tmp_path)
    assert "field 'name' must be 1-128 printable characters on one line" in line
    assert "\x1b" not in line and "\u202e" not in line and "\u2028" not in line


# -- broken files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("You are an agent.\n", "no front matter"),
        ("", "no front matter"),
        ("\n---\nname: a\ndescription: d\n---\nGo.\n", "no front matter"),
        ("---\nname: a\ndescription: d\nYou are an agent.\n", "not closed"),
        ("---\nname: a\ndescription: d\ntools: [Read\n---\nGo.\n", "line 4: YAML error"),
        ('---\nname: a\ndescription: "unclosed: quote\n---\nGo.\n', "line 3: YAML error"),
        ("---\nname: a\ndescription: d\nthis line is prose\n---\nGo.\n", "line 4: YAML error: not a 'key"),
        ("---\n  name: a\ndescription: d: e\n---\nGo.\n", "line 2: YAML error: an indented line"),
        ("---\n- name\n- description\n---\nGo.\n", "must be a mapping"),
        ("---\njust a string\n---\nGo.\n", "must be a mapping"),
        ("---\nname: a\ndescription: d\n---\n\n  \n", "empty body"),
        ("---\ndescription: d\n---\nGo.\n", "missing required field 'name'"),
        ("---\nname: a\n---\nGo.\n", "missing required field 'description'"),
        ("---\n---\nGo.\n", "missing required field 'name'"),
        ("---\nname: a\ndescription: ''\n---\nGo.\n", "'description' must be a non-empty string"),
        ("---\nname: a\ndescription: [d]\n---\nGo.\n", "'description' must be a non-empty string"),
        ("---\nname: a\ndescription:\n  - one\n  - two\n---\nGo.\n", "'description' must be a non-empty"),
        ("---\nname: 7\ndescription: d\n---\nGo.\n", "'name' must be a non-empty string"),
        ("---\nname: a\ndescription: d\ntools: 3\n---\nGo.\n", "'tools' must be a comma-separated string"),
        ("---\nname: a\ndescription: d\ntools: [Read, 3]\n---\nGo.\n", "'tools' must be a comma-separated"),
        ("---\nname: a\ndescription: d\ndisallowedTools: {a: 1}\n---\nGo.\n", "'disallowedTools' must be"),
        ("---\nname: a\ndescription: d\nmodel: 4\n---\nGo.\n", "'model' must be a non-empty string"),
        ("---\nname: a\ndescription: d\nmodel: [opus]\n---\nGo.\n", "'model' must be a non-empty string"),
        ("---\nname: a\ndescription: d\nmaxTurns: 0\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\ndescription: d\nmaxTurns: '5'\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\ndescription: d\nmaxTurns: true\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\nname: b\ndescription: d\n---\nGo.\n", "line 3: YAML error: key 'name' given twice"),
        (
            "---\nname: a\ndescription: x: y\nname: b\n---\nGo.\n",
            "line 4: YAML error: key 'name' given twice",
        ),
    ],
)
def test_a_broken_file_is_skipped_with_one_line_naming_it(text: str, problem: str, tmp_path: Path) -> None:
    assert problem in skipped(text, tmp_path)


@pytest.mark.hostile
def test_yaml_tags_that_would_run_code_are_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"---\nname: a\ndescription: d\nx: !!python/object/apply:os.system ['touch {marker}']\n---\nGo.\n"
    assert "line 4: YAML error: could not determine a constructor" in skipped(text, tmp_path)
    assert "line 4: YAML error" in skipped(text.replace("description: d", "description: d: e"), tmp_path)
    assert not marker.exists()


@pytest.mark.hostile
def test_yaml_bombs_stay_cheap(tmp_path: Path) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    definition = parse(f"---\nname: a\ndescription: d\n{laughs}---\nGo.\n")
    assert definition.warnings[0] == "x.md: unknown field 'a' ignored"
    deep = "tools: " + "[" * 5000 + "]" * 5000 + "\n"
    assert "YAML error" in skipped(f"---\nname: a\ndescription: d\n{deep}---\nGo.\n", tmp_path)


def test_a_file_that_is_not_utf8_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / ".teamrt" / "agents" / "latin.md", "")
    path.write_bytes(b"---\nname: a\ndescription: caf\xe9\n---\nGo.\n")
    [line] = scan_definitions(tmp_path).skipped
    assert line == f"{path}: not UTF-8 text (byte 28)"


@pytest.mark.hostile
def test_a_hostile_file_name_still_gives_one_line_with_no_escape_sequence(tmp_path: Path) -> None:
    line = skipped("no front matter\n", tmp_path, file_name="evil\nname\r\x1b]0;pwned\x07.md")
    assert "evil\\nname\\r\\x1b]0;pwned\\x07.md" in line
    assert not any(ord(c) < 32 for c in line)


def test_definition_error_has_fields() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition("---\nname: a\n---\nGo.", "a.md")
    assert caught.value.source == "a.md"
    assert caught.value.problem == "missing required field 'description'"
    assert isinstance(caught.value, ValueError)


def test_every_broken_file_is_named_and_the_rest_load(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "a-bad.md", "no front matter\n")
    write(agents / "b-good.md", agent_file("b"))
    write(agents / "c-bad.md", "---\nname: c\n---\nGo.\n")
    write(agents / "d-good.md", agent_file("d"))
    scan = scan_definitions(tmp_path)
    assert {"b", "d"} <= set(scan.definitions)
    assert [line.split(": ")[0] for line in scan.skipped] == [
        str(agents / "a-bad.md"),
        str(agents / "c-bad.md"),
    ]


# -- sources and precedence ------------------------------------------------------------


def test_subfolders_load_and_hidden_ones_do_not(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "engineering" / "backend" / "api.md", agent_file("api-designer"))
    write(agents / "top.md", agent_file("top"))
    write(agents / ".git" / "hidden.md", agent_file("hidden"))
    write(agents / ".draft.md", "not even front matter")
    write(agents / "notes.txt", "not an agent")
    (agents / "dir.md").mkdir()
    scan = scan_definitions(tmp_path)
    assert set(scan.definitions) == set(builtin_definitions()) | {"api-designer", "top"}
    assert scan.definitions["api-designer"].source == str(agents / "engineering" / "backend" / "api.md")
    assert scan.warnings == ()


def test_two_files_of_one_source_with_one_name_the_first_by_path_loads(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "b" / "second.md", agent_file("helper", body="Second."))
    write(agents / "a" / "first.md", agent_file("helper", body="First."))
    scan = scan_definitions(tmp_path)
    assert scan.definitions["helper"].prompt == "First."
    assert scan.skipped == (
        f"{agents / 'b' / 'second.md'}: agent 'helper' is defined already in {agents / 'a' / 'first.md'}",
    )


def test_name_need_not_match_the_file_stem(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "whatever.md", agent_file("helper"))
    loaded = load_definitions(tmp_path)
    assert loaded["helper"].source == str(tmp_path / ".claude" / "agents" / "whatever.md")
    assert "whatever" not in loaded


def test_precedence_built_in_user_project_teamrt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "claude-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(user))
    project = tmp_path / "project"
    claude, teamrt = project / ".claude" / "agents", project / ".teamrt" / "agents"
    write(user / "agents" / "researcher.md", agent_file("researcher", body="User researcher."))
    write(user / "agents" / "mine.md", agent_file("mine", body="User mine."))
    write(user / "agents" / "shared.md", agent_file("shared", body="User shared."))
    write(claude / "shared.md", agent_file("shared", body="Project shared."))
    write(claude / "coder.md", agent_file("coder", body="Project coder."))
    write(teamrt / "coder.md", agent_file("coder", body="Teamrt coder."))
    scan = scan_definitions(project)
    loaded = scan.definitions
    builtins = builtin_definitions()
    assert set(loaded) == set(builtins) | {"mine", "shared"}
    assert loaded["lead"] == builtins["lead"]
    assert (loaded["researcher"].prompt, loaded["researcher"].scope) == ("User researcher.", "user")
    assert (loaded["mine"].prompt, loaded["mine"].scope) == ("User mine.", "user")
    assert (loaded["shared"].prompt, loaded["shared"].scope) == ("Project shared.", "project")
    assert (loaded["coder"].prompt, loaded["coder"].scope) == ("Teamrt coder.", "teamrt")
    assert loaded["coder"].source == str(teamrt / "coder.md")
    replaced = {(d.name, d.scope) for d in scan.overridden}
    assert replaced == {
        ("researcher", "built-in"),
        ("shared", "user"),
        ("coder", "built-in"),
        ("coder", "project"),
    }


def test_without_a_user_folder_nothing_of_the_users_loads(tmp_path: Path) -> None:
    assert not (tmp_path / "no-claude-home").exists(), "the suite never reads the real ~/.claude"
    assert scan_definitions(tmp_path).definitions == builtin_definitions()


# -- hostile files and folders ---------------------------------------------------------


@pytest.mark.hostile
def test_a_project_link_to_a_file_outside_is_not_read(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.md", agent_file("stolen"))
    project = tmp_path / "project"
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "link.md").symlink_to(outside)
    scan = scan_definitions(project)
    assert "stolen" not in scan.definitions
    assert scan.skipped == (
        f"{project / '.claude/agents/link.md'}: a link to a file outside the project; not read",
    )


@pytest.mark.hostile
def test_a_project_link_to_a_folder_outside_is_not_walked(tmp_path: Path) -> None:
    write(tmp_path / "outside" / "stolen.md", agent_file("stolen"))
    project = tmp_path / "project"
    (project / ".claude" / "agents").mkdir(parents=True)
    (project / ".claude" / "agents" / "more").symlink_to(tmp_path / "outside")
    (project / ".claude" / "agents" / "root").symlink_to("/")
    scan = scan_definitions(project)
    assert "stolen" not in scan.definitions
    assert scan.warnings == tuple(
        f"{project / '.claude/agents' / name}: a link to a folder outside the project; not read"
        for name in ("more", "root")
    )


@pytest.mark.hostile
def test_a_project_agents_folder_linked_outside_is_not_walked(tmp_path: Path) -> None:
    write(tmp_path / "outside" / "stolen.md", agent_file("stolen"))
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "agents").symlink_to(tmp_path / "outside")
    scan = scan_definitions(project)
    assert "stolen" not in scan.definitions
    assert scan.warnings == (
        f"{project / '.claude/agents'}: a link to a folder outside the project; not read",
    )


def test_links_inside_the_project_and_loops_load_once(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "real" / "one.md", agent_file("one"))
    (agents / "alias").symlink_to(agents / "real")
    (agents / "real" / "loop").symlink_to(agents)
    scan = scan_definitions(tmp_path)
    assert "one" in scan.definitions
    assert scan.warnings == (), "a folder reached twice is walked once: no duplicate"


def test_the_users_links_may_point_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dotfiles = write(tmp_path / "dotfiles" / "agents" / "mine.md", agent_file("mine"))
    user = tmp_path / "claude-home"
    (user / "agents").mkdir(parents=True)
    (user / "agents" / "mine.md").symlink_to(dotfiles)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(user))
    assert scan_definitions(tmp_path / "project").definitions["mine"].scope == "user"


@pytest.mark.hostile
def test_a_fifo_is_skipped_without_blocking(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    os.mkfifo(agents / "pipe.md")
    (agents / "zero.md").symlink_to("/dev/zero")
    lines = set(scan_definitions(tmp_path).skipped)
    assert f"{agents / 'pipe.md'}: not a regular file" in lines
    assert f"{agents / 'zero.md'}: a link to a file outside the project; not read" in lines


@pytest.mark.hostile
def test_a_huge_file_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "agents" / "huge.md"
    path.parent.mkdir(parents=True)
    with path.open("wb") as f:
        f.truncate(50 * 1024 * 1024)  # sparse: 50 MB that cost nothing
    assert scan_definitions(tmp_path).skipped == (
        f"{path}: over 512 KiB; an agent file is a short Markdown file",
    )


def test_an_unreadable_file_is_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / ".claude" / "agents" / "locked.md", agent_file("locked"))
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: permissions do not stop reads")
    assert scan_definitions(tmp_path).skipped == (f"{path}: cannot read: Permission denied",)


def test_a_folder_with_too_many_files_is_cut_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(definitions_module, "MAX_FILES", 3)
    agents = tmp_path / ".claude" / "agents"
    for i in range(6):
        write(agents / f"a{i}.md", agent_file(f"a{i}"))
    scan = scan_definitions(tmp_path)
    assert {"a0", "a1", "a2"} <= set(scan.definitions) and "a5" not in scan.definitions
    assert scan.notes == (f"{agents}: too many files; only some of its agent files were looked at",)
    assert scan.notes[0] in scan.warnings


def test_a_run_start_shows_ten_warnings_and_says_how_many_more(tmp_path: Path) -> None:
    for i in range(12):
        write(tmp_path / ".claude" / "agents" / f"bad{i:02}.md", "no front matter\n")
    said: list[str] = []
    tell_agents(scan_definitions(tmp_path), said.append)
    cause = "no front matter: the file must start with a '---' line"
    assert said[:10] == [
        f"teamrt: warning: {tmp_path}/.claude/agents/bad{i:02}.md: {cause}" for i in range(10)
    ]
    assert said[10:] == ["teamrt: warning: 2 more about agent files; teamrt agents lists them all"]
    tell_agents(scan_definitions(tmp_path), None)


# -- models ----------------------------------------------------------------------------


def test_choose_model_role_then_definition_then_team() -> None:
    opus = parse(agent_file("a", model="opus"))
    inherit = parse(agent_file("a", model="inherit"))
    unknown = parse(agent_file("a", model="gpt-4o"))
    assert choose_model("claude-haiku-5-5", opus, "claude-sonnet-5-5") == "claude-haiku-5-5"
    assert choose_model(None, opus, "claude-sonnet-5-5") == "claude-opus-5-5"
    assert choose_model(None, inherit, "claude-sonnet-5-5") == "claude-sonnet-5-5"
    assert choose_model(None, unknown, "claude-sonnet-5-5") == "claude-sonnet-5-5"
    assert choose_model(None, opus, "sim") == "sim:claude-opus-5-5", "a sim team stays offline"
    assert (
        choose_model(None, parse(agent_file("a", model="claude-haiku-4-5")), "sim") == "sim:claude-haiku-4-5"
    )
    assert choose_model(None, parse(agent_file("a", model="sim")), "claude-sonnet-5-5") == "sim"
    assert choose_model(None, unknown, "sim") == "sim"


def test_the_command_lines_model_is_the_teams_and_an_agent_files_stays_offline_on_sim(
    tmp_path: Path,
) -> None:
    write(tmp_path / ".claude" / "agents" / "fast.md", agent_file("Fast.One", model="haiku"))
    write(tmp_path / ".teamrt" / "team.toml", '[team]\nmodel = "sim"\n[roles.fast]\nagent = "Fast.One"\n'
          'model = "sim:opus"\n')  # fmt: skip
    team, _ = team_from_file(tmp_path / ".teamrt" / "team.toml", prompt="x", project=tmp_path,
                             choices=Choices(model="claude-sonnet-5-5"))  # fmt: skip
    assert team.model == "claude-sonnet-5-5" and team.roles["fast"].model is None  # over the team file's
    definition = load_definitions(tmp_path)["Fast.One"]
    assert choose_model(None, definition, team.model) == "claude-haiku-5-5"  # the agent file's still counts
    assert choose_model(None, definition, "sim") == "sim:claude-haiku-5-5"  # offline, priced as Haiku
    assert choose_model("opus", definition, "sim") == "sim:claude-opus-5-5"  # a role's model stays offline
    lead, _ = single_team("fast-one", project=tmp_path, choices=Choices(model="sim"))
    assert (lead.lead.agent, lead.lead.model) == ("Fast.One", "sim"), "--agent takes a role name too"


# -- the built-in team -----------------------------------------------------------------


def test_the_built_in_team_has_a_role_per_user_and_project_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "claude-home"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(user))
    project = tmp_path / "project"
    write(user / "agents" / "mine.md", agent_file("Mine.Too"))
    write(project / ".claude" / "agents" / "sec.md", agent_file("security_auditor"))
    write(project / ".claude" / "agents" / "coder.md", agent_file("coder", body="Our coder."))
    write(project / ".claude" / "agents" / "Coder.md", agent_file("CODER"))
    write(project / ".claude" / "agents" / "user.md", agent_file("user"))
    write(project / ".teamrt" / "agents" / "lead.md", agent_file("lead", body="Our lead."))
    notices: list[str] = []
    team, _ = team_from_file(
        DEFAULT_TEAM, prompt="x", project=project, choices=Choices(model="sim"), on_notice=notices.append
    )
    assert set(team.roles) == {"coder", "reviewer", "mine-too", "security_auditor"}
    assert team.roles["mine-too"].agent == "Mine.Too"
    assert team.roles["coder"].agent == "coder"
    assert notices == [
        f"teamrt: warning: {project / '.claude/agents/Coder.md'}: agent 'CODER' is no role of the default"
        " team: the role name 'coder' is taken",
        f"teamrt: warning: {project / '.claude/agents/user.md'}: agent 'user' is no role of the default"
        " team: the role name 'user' is taken",
    ]
    own = write(project / "team.toml", '[team]\nmodel = "sim"\n[roles.reviewer]\n')
    assert set(team_from_file(own, prompt="x", project=project)[0].roles) == {"reviewer"}, (
        "a team file decides"
    )


def test_with_agent_roles_leaves_out_built_ins() -> None:
    team = load_team(DEFAULT_TEAM, project=Path("/nonexistent"))
    scan = scan_definitions(Path("/nonexistent"))
    assert with_agent_roles(team, scan).roles == team.roles


def test_a_team_file_role_whose_agent_did_not_load_says_so(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "critic.md", "---\nname: critic\n---\nNo description.\n")
    (tmp_path / "team.toml").write_text("[roles.critic]\n")
    with pytest.raises(TeamFileError) as caught:
        load_team(tmp_path / "team.toml", project=tmp_path)
    assert "agent 'critic' has no definition (1 agent file(s) did not load; teamrt agents says why)" in str(
        caught.value
    )


REVIEWER = """---
name: Code.Reviewer
description: Use this agent when: a change needs review. It reads and greps.
tools: Read, Grep, NotebookEdit
model: opus
---
You review changes.
"""

GUESSER = """---
name: guesser
description: Guesses.
model: gpt-4o
---
You guess.
"""


def test_a_run_on_sim_spawns_a_project_agent_on_its_own_model(tmp_path: Path) -> None:
    """The built-in team on sim: the lead sees the project's agents as roles and spawns one; it runs on
    its definition's model (simulated), with its tools; an unknown model falls back to the team's."""
    project = tmp_path / "project"
    write(project / ".claude" / "agents" / "review" / "reviewer.md", REVIEWER)
    write(project / ".claude" / "agents" / "guesser.md", GUESSER)
    team = dataclasses.replace(load_team(DEFAULT_TEAM, project=project), model="sim")
    scan = scan_definitions(project)
    team = with_agent_roles(team, scan)

    def lead(request: SimRequest) -> Reply:
        if not request.calls("spawn_agent"):
            return Reply().call(
                "spawn_agent",
                {"kind": "team", "role": "code-reviewer", "directives": ["Review."], "wait": True},
            )
        if request.calls("spawn_agent") == 1:
            return Reply().call(
                "spawn_agent", {"kind": "team", "role": "guesser", "directives": ["Guess."], "wait": True}
            )
        return Reply().say("done")

    def child(request: SimRequest) -> Reply:
        return Reply().say(f"{request.model} with {sorted(request.tool_names)}")

    run_dir = project / ".teamrt" / "runs" / "r1"
    with SimServer(record=True, policies={"lead": lead, "code-reviewer": child, "guesser": child}) as sim:
        outcome = run_on_sim(team, "go", project=project, sim=sim, run_dir=run_dir, settings=FAST, timeout=90)
        models = {a.name: a.model for a in outcome.agents}
        lead_system = next(r.system for r in map(request_of, sim.bodies) if r.agent == "lead")
        reviewer_tools = next(r.tool_names for r in map(request_of, sim.bodies) if r.agent == "code-reviewer")
    assert outcome.status == "done", outcome
    assert models == {"lead": "sim", "code-reviewer": "sim:claude-opus-5-5", "guesser": "sim"}
    assert "- code-reviewer: Use this agent when: a change needs review. It reads and greps." in lead_system
    assert "- guesser: Guesses." in lead_system
    builtin = sorted(canonical(name) or name for name in reviewer_tools if name not in TEAM_TOOLS)
    assert builtin == ["Grep", "Read"]


def request_of(recorded: tuple[str, bytes]) -> SimRequest:
    agent, body = recorded
    return SimRequest(json.loads(body), agent)


# -- teamrt agents ---------------------------------------------------------------------


def teamrt_agents(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "teamrt", "agents", *args],
        cwd=project, capture_output=True, text=True, timeout=60, env=os.environ.copy(),
    )  # fmt: skip


def test_teamrt_agents_lists_agents_then_warnings_and_skipped_files(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "review" / "reviewer.md", REVIEWER)
    write(agents / "README.md", "# My agents\n")
    write(tmp_path / ".teamrt" / "agents" / "researcher.md", agent_file("researcher", tools="Read"))
    result = teamrt_agents(tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["agent", "scope", "model", "tools", "file"]
    row = next(line for line in lines if line.startswith("Code.Reviewer"))
    assert row.split("  ")[0] == "Code.Reviewer"
    assert " project " in row and " opus " in row and "Read, Grep" in row
    assert row.endswith("  .claude/agents/review/reviewer.md")
    assert next(line for line in lines if line.startswith("lead ")).split()[1:4] == [
        "built-in",
        "inherit",
        "all",
    ]
    text = result.stdout
    assert "\nreplaced by a later definition:\n  researcher (built-in): built-in\n" in text
    assert f"\nwarnings:\n  {agents / 'review/reviewer.md'}: tools: 'NotebookEdit' is not available" in text
    assert f"\nskipped, did not load:\n  {agents / 'README.md'}: no front matter" in text


@pytest.mark.hostile
def test_teamrt_agents_prints_no_escape_sequence_a_file_holds(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "model.md", '---\nname: sneaky\ndescription: d\nmodel: "\\e]0;pwned\\a\\e[2J"\n---\nGo.\n')
    write(agents / "name\x1b[2J.md", "no front matter\n")
    result = teamrt_agents(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "sneaky" in result.stdout and "\\x1b]0;pwned\\x07\\x1b[2J" in result.stdout
    assert "name\\x1b[2J.md: no front matter" in result.stdout


def test_teamrt_agents_json(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "reviewer.md", REVIEWER)
    write(tmp_path / ".claude" / "agents" / "bad.md", "---\nname: bad\n")
    result = teamrt_agents(tmp_path, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    [reviewer] = [a for a in data["agents"] if a["name"] == "Code.Reviewer"]
    assert reviewer == {
        "name": "Code.Reviewer", "role": "code-reviewer", "scope": "project",
        "path": str(tmp_path / ".claude/agents/reviewer.md"),
        "description": "Use this agent when: a change needs review. It reads and greps.", "model": "opus",
        "tools": ["Read", "Grep"], "disallowed_tools": [], "permission_mode": None, "max_turns": None,
        "warnings": [f"{tmp_path / '.claude/agents/reviewer.md'}: tools: 'NotebookEdit' is not available in"
                     " teamrt yet; left out"],
    }  # fmt: skip
    assert data["skipped"] == [f"{tmp_path / '.claude/agents/bad.md'}: front matter not closed: no '---' line"
                               " after the first"]  # fmt: skip
    assert data["warnings"] == data["skipped"] + reviewer["warnings"]
    assert {a["scope"] for a in data["agents"]} == {"built-in", "project"}


# -- built-ins -------------------------------------------------------------------------


def test_builtins_parse_cleanly() -> None:
    builtins = builtin_definitions()
    assert set(builtins) == {"lead", "researcher", "coder", "reviewer"}
    for name, definition in builtins.items():
        assert definition.name == name
        assert (definition.source, definition.scope) == ("built-in", "built-in")
        assert definition.warnings == ()
        assert definition.description
        assert definition.model is None
        assert 10 <= len(definition.prompt.splitlines()) <= 30


def test_builtin_roles() -> None:
    builtins = builtin_definitions()
    lead = builtins["lead"]
    assert lead.tools is None
    assert all(
        kind in lead.prompt for kind in ("fork", "worktree", "teammate", "spawn_agent", "send_message")
    )
    assert builtins["researcher"].tools == ("Read", "Glob", "Grep", "Bash")
    assert builtins["researcher"].permission_mode == "default"
    assert "path:line" in builtins["researcher"].prompt
    assert builtins["coder"].tools == ("Read", "Write", "Edit", "Glob", "Grep", "Bash")
    assert builtins["coder"].permission_mode == "acceptEdits"
    reviewer = builtins["reviewer"]
    assert reviewer.tools is not None and "Bash" in reviewer.tools
    assert not {"Write", "Edit"} & set(reviewer.tools)


def test_builtins_are_fresh_copies() -> None:
    builtin_definitions().pop("lead")
    assert "lead" in builtin_definitions()


def test_importing_agents_does_not_import_the_sdk() -> None:
    code = "import sys, teamrt.agents; sys.exit('anthropic' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# -- a resume after an agent file stopped loading ----------------------------------------


def test_a_resume_after_an_agent_file_went_away_goes_on_with_the_kept_definition(tmp_path: Path) -> None:
    project = tmp_path / "project"
    agent = project / ".claude" / "agents" / "helper.md"
    write(agent, agent_file("helper", body="You are the KEPT-PROMPT-7 helper.", tools="Read, Grep"))
    write(project / "team.toml", '[team]\nmodel = "sim"\n[roles.helper]\n')
    team = load_team(project / "team.toml", project=project)
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    kept = {"team": team_to_json(team)}
    store = create_store(run_dir, "r1", task="go", workdir=str(project), settings=kept)
    helper = dataclasses.asdict(load_definitions(project)["helper"])

    async def record() -> None:  # the crash came after the helper was added, before its first turn
        for name, kind, definition in (("lead", "lead", {}), ("helper", "team", helper)):
            parent = None if name == "lead" else "lead"
            await store.add_agent(name, kind=kind, model="sim", role=name, parent=parent,
                                  definition=definition, workspace=str(project))  # fmt: skip
            epoch = await store.begin_epoch(name)
            await store.append_turn(name, epoch=epoch, role="user", content=[{"type": "text", "text": "go"}])

    asyncio.run(record())
    store.close()
    agent.unlink()  # the agent file is gone (or broken) by the time the run is resumed
    store = open_store(run_dir, "r1")
    with SimServer(record=True) as sim:
        try:
            supervisor = Supervisor(
                store=store, run_dir=run_dir, team=team, definitions=load_definitions(project),
                project=project, settings=FAST, models={"sim": open_model("sim", sim=sim, settings=FAST)},
            )  # fmt: skip
            outcome = asyncio.run(asyncio.wait_for(supervisor.resume(), 30))
        finally:
            store.close()
        bodies = [(agent, json.loads(body)) for agent, body in sim.bodies]
    assert outcome.status == "done"
    helper_body = next(body for who, body in bodies if who == "helper")
    assert "KEPT-PROMPT-7" in json.dumps(helper_body["system"])
    assert {t["name"] for t in helper_body["tools"]} & {"Read", "Grep", "Bash"} == {"Read", "Grep"}
    lead_body = next(body for who, body in bodies if who == "lead")
    assert "helper: (its agent file no longer loads" in json.dumps(lead_body["system"])
