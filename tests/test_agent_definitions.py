"""Agent definition files: fields, encodings, broken files, directories and the built-ins."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from teamrt.agents import (
    PERMISSION_MODES,
    AgentDefinition,
    DefinitionError,
    builtin_definitions,
    load_definitions,
    parse_definition,
)

FULL = """---
name: code-reviewer
description: Reviews code for quality.
tools: Read, Grep, Glob, Bash, WebFetch
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


def broken(text: str, tmp_path: Path, file_name: str = "broken-agent.md") -> str:
    """The one-line message load_definitions gives for a project holding only this file."""
    write(tmp_path / ".claude" / "agents" / file_name, text)
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message
    assert file_name.replace("\n", "\\n").replace("\r", "\\r") in message
    return message


def test_every_field_is_read() -> None:
    definition = parse_definition(FULL, "x.md")
    assert definition == AgentDefinition(
        name="code-reviewer",
        description="Reviews code for quality.",
        prompt="You review code.\n\nBe specific.",
        tools=("read", "grep", "glob", "bash", "WebFetch"),
        disallowed_tools=("write", "edit"),
        model="sonnet",
        permission_mode="plan",
        max_turns=12,
        source="x.md",
    )


def test_optional_fields_default_to_inherit_and_all_tools() -> None:
    definition = parse_definition(agent_file("plain"), "x.md")
    assert definition.tools is None
    assert definition.disallowed_tools == ()
    assert definition.model is None
    assert definition.permission_mode is None
    assert definition.max_turns is None
    assert definition.warnings == ()


def test_tools_as_yaml_lists() -> None:
    text = "---\nname: a\ndescription: d\ntools:\n  - Read\n  - Bash\n  - send_message\n"
    text += "disallowedTools: [Edit]\n---\nGo."
    definition = parse_definition(text, "x.md")
    assert definition.tools == ("read", "bash", "send_message")
    assert definition.disallowed_tools == ("edit",)


def test_tools_empty_list_means_no_tools_and_repeats_collapse() -> None:
    assert parse_definition(agent_file("a", tools="[]"), "x.md").tools == ()
    assert parse_definition(agent_file("a", tools="Read, read, ,Grep"), "x.md").tools == ("read", "grep")


def test_model_as_written_and_inherit() -> None:
    assert parse_definition(agent_file("a", model="inherit"), "x.md").model is None
    assert parse_definition(agent_file("a", model="claude-sonnet-5-5"), "x.md").model == "claude-sonnet-5-5"
    assert parse_definition(agent_file("a", model="sim"), "x.md").model == "sim"


@pytest.mark.parametrize("mode", PERMISSION_MODES)
def test_each_permission_mode(mode: str) -> None:
    assert parse_definition(agent_file("a", permissionMode=mode), "x.md").permission_mode == mode


def test_crlf_gives_the_same_definition_as_lf() -> None:
    assert "\r" not in FULL
    assert parse_definition(FULL.replace("\n", "\r\n"), "x.md") == parse_definition(FULL, "x.md")


def test_bom_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / ".teamrt" / "agents" / "bom.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xef\xbb\xbf" + FULL.replace("\n", "\r\n").encode())
    assert load_definitions(tmp_path)["code-reviewer"] == parse_definition(FULL, str(path))


def test_unknown_fields_warn_and_are_ignored() -> None:
    text = agent_file("a", color="cyan", skills="[one, two]", hooks="{}")
    definition = parse_definition(text, "agents/a.md")
    assert definition.warnings == (
        "agents/a.md: unknown field 'color' ignored",
        "agents/a.md: unknown field 'skills' ignored",
        "agents/a.md: unknown field 'hooks' ignored",
    )
    assert dataclasses.replace(definition, warnings=()) == parse_definition(agent_file("a"), "agents/a.md")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("You are an agent.\n", "no front matter"),
        ("", "no front matter"),
        ("---\nname: a\ndescription: d\nYou are an agent.\n", "not closed"),
        ("---\nname: a\ndescription: d\ntools: [Read\n---\nGo.\n", "line 4"),
        ("---\nname: a\n  description: d: e\n---\nGo.\n", "line 3"),
        ("---\n- name\n- description\n---\nGo.\n", "must be a mapping"),
        ("---\njust a string\n---\nGo.\n", "must be a mapping"),
        ("---\nname: a\ndescription: d\n---\n\n  \n", "empty body"),
        ("---\ndescription: d\n---\nGo.\n", "missing required field 'name'"),
        ("---\nname: a\n---\nGo.\n", "missing required field 'description'"),
        ("---\n---\nGo.\n", "missing required field 'name'"),
        ("---\nname: a\ndescription: ''\n---\nGo.\n", "'description' must be a non-empty string"),
        ("---\nname: a\ndescription: [d]\n---\nGo.\n", "'description' must be a non-empty string"),
        ("---\nname: 7\ndescription: d\n---\nGo.\n", "'name' must be a non-empty string"),
        ("---\nname: Code Reviewer\ndescription: d\n---\nGo.\n", "'name' must be 1-64 of lowercase"),
        ("---\nname: ../etc\ndescription: d\n---\nGo.\n", "'name' must be 1-64 of lowercase"),
        ("---\nname: a\ndescription: d\ntools: 3\n---\nGo.\n", "'tools' must be a comma-separated string"),
        ("---\nname: a\ndescription: d\ntools: [Read, 3]\n---\nGo.\n", "'tools' must be a comma-separated"),
        ("---\nname: a\ndescription: d\ndisallowedTools: {a: 1}\n---\nGo.\n", "'disallowedTools' must be"),
        ("---\nname: a\ndescription: d\nmodel: 4\n---\nGo.\n", "'model' must be a non-empty string"),
        ("---\nname: a\ndescription: d\npermissionMode: yolo\n---\nGo.\n", "'permissionMode' must be one of"),
        ("---\nname: a\ndescription: d\nmaxTurns: 0\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\ndescription: d\nmaxTurns: '5'\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\ndescription: d\nmaxTurns: true\n---\nGo.\n", "'maxTurns' must be a positive integer"),
        ("---\nname: a\nname: b\ndescription: d\n---\nGo.\n", "line 3: YAML error: key 'name' given twice"),
        ("---\nname: a\ndescription: d\nx: !!python/object:os.system ls\n---\nGo.\n", "line 4: YAML error"),
    ],
)
def test_broken_file_gives_one_line_naming_it(text: str, problem: str, tmp_path: Path) -> None:
    message = broken(text, tmp_path)
    assert problem in message
    assert message.startswith(str(tmp_path / ".claude" / "agents" / "broken-agent.md") + ": ")


def test_yaml_error_line_counts_from_the_top_of_the_file(tmp_path: Path) -> None:
    text = "---\nname: a\ndescription: d\nmodel: sonnet: 5\ncolor: red\n---\nGo.\n"
    message = broken(text, tmp_path)
    assert "line 4: YAML error: mapping values are not allowed here" in message
    assert broken(text.replace("\n", "\r\n"), tmp_path) == message


def test_undecodable_file_gives_one_line(tmp_path: Path) -> None:
    path = write(tmp_path / ".teamrt" / "agents" / "latin.md", "")
    path.write_bytes(b"---\nname: a\ndescription: caf\xe9\n---\nGo.\n")
    with pytest.raises(DefinitionError, match=r"latin\.md: not UTF-8"):
        load_definitions(tmp_path)


def test_hostile_file_name_still_gives_one_line(tmp_path: Path) -> None:
    message = broken("no front matter\n", tmp_path, file_name="evil\nname\r.md")
    assert "evil\\nname\\r.md" in message


def test_definition_error_has_fields() -> None:
    with pytest.raises(DefinitionError) as caught:
        parse_definition("---\nname: a\n---\nGo.", "a.md")
    assert caught.value.source == "a.md"
    assert caught.value.problem == "missing required field 'description'"
    assert isinstance(caught.value, ValueError)


def test_duplicate_name_in_one_directory_names_both_files(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "first.md", agent_file("helper"))
    write(agents / "second.md", agent_file("helper"))
    with pytest.raises(DefinitionError) as caught:
        load_definitions(tmp_path)
    message = str(caught.value)
    assert "first.md" in message and "second.md" in message and "'helper'" in message
    assert "\n" not in message


def test_name_need_not_match_the_file_stem(tmp_path: Path) -> None:
    write(tmp_path / ".claude" / "agents" / "whatever.md", agent_file("helper"))
    loaded = load_definitions(tmp_path)
    assert loaded["helper"].source == str(tmp_path / ".claude" / "agents" / "whatever.md")
    assert "whatever" not in loaded


def test_override_order(tmp_path: Path) -> None:
    claude = tmp_path / ".claude" / "agents"
    teamrt = tmp_path / ".teamrt" / "agents"
    write(claude / "researcher.md", agent_file("researcher", body="Claude-dir researcher."))
    write(claude / "coder.md", agent_file("coder", body="Claude-dir coder."))
    write(claude / "extra.md", agent_file("extra", body="Claude-dir extra."))
    write(teamrt / "coder.md", agent_file("coder", body="Teamrt-dir coder."))
    loaded = load_definitions(tmp_path)
    builtins = builtin_definitions()
    assert set(loaded) == set(builtins) | {"extra"}
    assert loaded["lead"] == builtins["lead"]
    assert loaded["researcher"].prompt == "Claude-dir researcher."
    assert loaded["coder"].prompt == "Teamrt-dir coder."
    assert loaded["coder"].source == str(teamrt / "coder.md")
    assert loaded["extra"].prompt == "Claude-dir extra."


def test_only_visible_md_files_are_loaded(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents / "notes.txt", "not an agent")
    write(agents / ".draft.md", "not even front matter")
    write(agents / "README", "nor this")
    (agents / "dir.md").mkdir()
    assert load_definitions(tmp_path) == builtin_definitions()


def test_builtins_parse_cleanly() -> None:
    builtins = builtin_definitions()
    assert set(builtins) == {"lead", "researcher", "coder", "reviewer"}
    for name, definition in builtins.items():
        assert definition.name == name
        assert definition.source == "built-in"
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
    assert builtins["researcher"].tools == ("read", "glob", "grep", "bash")
    assert builtins["researcher"].permission_mode == "default"
    assert "path:line" in builtins["researcher"].prompt
    assert builtins["coder"].tools == ("read", "write", "edit", "glob", "grep", "bash")
    assert builtins["coder"].permission_mode == "acceptEdits"
    reviewer = builtins["reviewer"]
    assert reviewer.tools is not None and "bash" in reviewer.tools
    assert not {"write", "edit"} & set(reviewer.tools)


def test_builtins_are_fresh_copies() -> None:
    builtin_definitions().pop("lead")
    assert "lead" in builtin_definitions()


def test_importing_agents_does_not_import_the_sdk() -> None:
    code = "import sys, teamrt.agents; sys.exit('anthropic' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
