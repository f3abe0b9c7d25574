"""Permission rules and modes, on the real filesystem (paths and symlinks are resolved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamrt.tools.permissions import Decision, Mode, Permissions, Rule, RuleError, Verdict

ALLOW, DENY, ASK = Verdict.ALLOW, Verdict.DENY, Verdict.ASK
READ_ONLY = {"read", "glob", "grep"}


def decide(
    perms: Permissions, tool: str, input: dict[str, Any], workspace: Path, read_only: bool | None = None
) -> Decision:
    if read_only is None:
        read_only = tool.lower() in READ_ONLY
    return perms.decide(tool, input, read_only=read_only, workspace=workspace)


def bash(perms: Permissions, command: str, workspace: Path) -> Decision:
    return decide(perms, "bash", {"command": command}, workspace)


# --- parsing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tool", "specifier"),
    [
        ("Bash", "bash", None),
        ("Bash(*)", "bash", None),
        ("Bash(npm run test:*)", "bash", "npm run test:*"),
        ("  Edit( src/** )  ", "edit", "src/**"),
        ("Read(//etc/**)", "read", "//etc/**"),
        ("spawn_agent", "spawn_agent", None),
        ("mcp__github__create-issue", "mcp__github__create-issue", None),
        ("mcp__github__*", "mcp__github__*", None),
        ('Bash(git commit -m "a; b")', "bash", 'git commit -m "a; b"'),
    ],
)
def test_rules_parse(text: str, tool: str, specifier: str | None) -> None:
    assert Rule.parse(text) == Rule(tool, specifier, text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("Bash(", "unbalanced"),
        ("Bash)", "unbalanced"),
        ("(x)", "no tool name"),
        ("Bash()", "empty parentheses; write Bash"),
        ("Bash( )", "empty parentheses"),
        ("Two words", "not a tool name"),
        ("Bash(npm test && rm -rf x)", "one simple command"),
        ("Bash(echo $(date))", "one simple command"),
        ("spawn_agent(explorer)", "take a specifier"),
    ],
)
def test_bad_rules_say_which_and_why(text: str, problem: str) -> None:
    with pytest.raises(RuleError) as caught:
        Permissions(allow=["Bash", text])
    message = str(caught.value)
    assert caught.value.text == text
    assert f'"{text}"' in message and problem in message
    assert "\n" not in message


def test_an_unknown_mode_lists_the_modes() -> None:
    with pytest.raises(ValueError) as caught:
        Permissions("auto")
    assert not isinstance(caught.value, RuleError)
    assert str(caught.value) == (
        "unknown permission mode 'auto'; use one of: default, acceptEdits, plan, bypassPermissions"
    )


def test_a_mode_is_given_by_its_settings_name() -> None:
    assert Permissions("acceptEdits").mode is Mode.ACCEPT_EDITS
    assert Permissions(Mode.PLAN).mode is Mode.PLAN


# --- modes -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "tool", "input", "verdict"),
    [
        ("default", "read", {"file_path": "a.py"}, ALLOW),
        ("default", "grep", {"pattern": "x"}, ALLOW),
        ("default", "edit", {"file_path": "a.py"}, ASK),
        ("default", "bash", {"command": "ls"}, ASK),
        ("default", "spawn_agent", {}, ASK),
        ("acceptEdits", "glob", {"pattern": "*"}, ALLOW),
        ("acceptEdits", "edit", {"file_path": "a.py"}, ALLOW),
        ("acceptEdits", "write", {"file_path": "src/new.py"}, ALLOW),
        ("acceptEdits", "write", {"file_path": "../outside.py"}, ASK),
        ("acceptEdits", "edit", {"file_path": "/etc/hosts"}, ASK),
        ("acceptEdits", "edit", {}, ASK),
        ("acceptEdits", "bash", {"command": "ls"}, ASK),
        ("acceptEdits", "send_message", {}, ASK),
        ("plan", "read", {"file_path": "a.py"}, ALLOW),
        ("plan", "edit", {"file_path": "a.py"}, DENY),
        ("plan", "bash", {"command": "ls"}, DENY),
        ("plan", "task_create", {}, DENY),
        ("bypassPermissions", "bash", {"command": "rm -rf x"}, ALLOW),
        ("bypassPermissions", "edit", {"file_path": "/etc/hosts"}, ALLOW),
    ],
)
def test_modes_decide_when_no_rule_matches(
    tmp_path: Path, mode: str, tool: str, input: dict[str, Any], verdict: Verdict
) -> None:
    assert decide(Permissions(mode), tool, input, tmp_path).verdict is verdict


def test_mode_reasons_name_the_mode(tmp_path: Path) -> None:
    assert decide(Permissions("plan"), "write", {"file_path": "a"}, tmp_path) == Decision(
        DENY, "plan mode is read-only: write is not allowed"
    )
    assert (
        decide(Permissions(), "bash", {"command": "ls"}, tmp_path).reason
        == "bash needs approval in default mode"
    )
    outside = decide(Permissions("acceptEdits"), "edit", {"file_path": "/etc/hosts"}, tmp_path)
    assert outside.reason == "edit outside the workspace needs approval in acceptEdits mode"


def test_a_read_only_tool_is_allowed_by_the_callers_flag_not_its_name(tmp_path: Path) -> None:
    assert decide(Permissions(), "mcp__docs__search", {}, tmp_path, read_only=True).verdict is ALLOW
    assert decide(Permissions("plan"), "read", {"file_path": "a"}, tmp_path, read_only=False).verdict is DENY


# --- precedence ------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "rules", "verdict", "reason"),
    [
        ("default", {"allow": ["Bash"]}, ALLOW, 'allowed by rule "Bash"'),
        ("default", {"allow": ["Bash"], "deny": ["Bash(rm:*)"]}, DENY, 'denied by rule "Bash(rm:*)"'),
        (
            "default",
            {"allow": ["Bash"], "ask": ["Bash(rm *)"]},
            ASK,
            'approval required by rule "Bash(rm *)"',
        ),
        ("default", {"ask": ["Bash"], "deny": ["bash"]}, DENY, 'denied by rule "bash"'),
        ("bypassPermissions", {"deny": ["Bash(rm:*)"]}, DENY, 'denied by rule "Bash(rm:*)"'),
        ("bypassPermissions", {"ask": ["Bash(rm:*)"]}, ASK, 'approval required by rule "Bash(rm:*)"'),
        ("plan", {"allow": ["Bash(rm:*)"]}, ALLOW, 'allowed by rule "Bash(rm:*)"'),
    ],
)
def test_deny_then_ask_then_allow_then_the_mode(
    tmp_path: Path, mode: str, rules: dict[str, list[str]], verdict: Verdict, reason: str
) -> None:
    assert bash(Permissions(mode, **rules), "rm -rf build", tmp_path) == Decision(verdict, reason)


def test_deny_rules_apply_to_read_only_tools(tmp_path: Path) -> None:
    perms = Permissions("bypassPermissions", deny=["Read(.env)"])
    assert decide(perms, "read", {"file_path": ".env"}, tmp_path).verdict is DENY


# --- bash ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "command", "verdict"),
    [
        # exact
        (["Bash(npm test)"], "npm test", ALLOW),
        (["Bash(npm test)"], "  npm   test ", ALLOW),
        (["Bash(npm test)"], "npm test --watch", ASK),
        (["Bash(npm test)"], "npm tests", ASK),
        # prefix at a word boundary, old and new spelling
        (["Bash(npm run test:*)"], "npm run test", ALLOW),
        (["Bash(npm run test:*)"], "npm run test -- --watch", ALLOW),
        (["Bash(npm run test:*)"], "npm run test 2>&1", ALLOW),
        (["Bash(npm run test:*)"], "npm run tests", ASK),
        (["Bash(npm run test:*)"], "npm run", ASK),
        (["Bash(ls *)"], "ls -la", ALLOW),
        (["Bash(ls *)"], "lsof", ASK),
        (["Bash(ls*)"], "lsof", ALLOW),
        (["Bash(git * main)"], "git checkout main", ALLOW),
        (["Bash(git * main)"], "git checkout dev", ASK),
        (["Bash(*)"], "curl x | sh", ALLOW),
        (["Bash"], "echo $(id)", ALLOW),
        # compound: every part must be allowed
        (["Bash(npm test)", "Bash(git status)"], "npm test && git status", ALLOW),
        (["Bash(npm test)", "Bash(git status)"], "npm test; git status\ngit status", ALLOW),
        (["Bash(npm test)"], "npm test && rm -rf x", ASK),
        (["Bash(npm test:*)"], "npm test || curl x", ASK),
        (["Bash(npm test:*)"], "npm test | sh", ASK),
        (["Bash(npm test:*)"], "npm test & rm x", ASK),
        (["Bash(npm test:*)", "Bash(head:*)"], "npm test 2>&1 | head -5", ALLOW),
        (["Bash(cd:*)", "Bash(make:*)"], "(cd lib && make)", ALLOW),
        (["Bash(cd:*)"], "(cd lib && make)", ASK),
        # quotes hide separators
        (["Bash(echo:*)"], 'echo "a && rm -rf x"', ALLOW),
        (["Bash(echo:*)"], "echo 'a; b | c'", ALLOW),
        (["Bash(echo:*)"], "echo a\\;rm x", ALLOW),
        # substitutions are never allowed by a specifier
        (["Bash(echo:*)"], "echo $(rm -rf x)", ASK),
        (["Bash(echo:*)", "Bash(rm:*)"], "echo $(rm -rf x)", ASK),
        (["Bash(echo:*)", "Bash(id)"], "echo `id`", ASK),
        # each part of the next two is allowed on its own; the substitution is not
        (["Bash(echo *)", "Bash(date)", 'Bash(")'], 'echo "today is $(date)"', ASK),
        (["Bash(echo:*)"], "echo $((1 + 2))", ASK),
        (["Bash(diff:*)", "Bash(ls:*)"], "diff <(ls a) <(ls b)", ASK),
        (["Bash(echo:*)"], "echo '$(not run)'", ALLOW),
        (["Bash(echo:*)"], "", ASK),
    ],
)
def test_bash_allow_rules(tmp_path: Path, rules: list[str], command: str, verdict: Verdict) -> None:
    assert bash(Permissions(allow=rules), command, tmp_path).verdict is verdict


@pytest.mark.parametrize(
    ("command", "verdict"),
    [
        ("rm -rf x", DENY),
        ("rm", DENY),
        ("ls && rm -rf x", DENY),
        ("ls;rm x", DENY),
        ("ls | rm x", DENY),
        ("(rm -rf x)", DENY),
        ("echo $(rm -rf x)", DENY),
        ('echo "`rm x`"', DENY),
        ("ls\nrm x", DENY),
        ("rmdir x", ALLOW),
        ("echo 'ls; rm -rf x'", ALLOW),
        ("echo rm x", ALLOW),
    ],
)
def test_a_bash_deny_rule_matches_any_part(tmp_path: Path, command: str, verdict: Verdict) -> None:
    assert bash(Permissions(allow=["Bash"], deny=["Bash(rm:*)"]), command, tmp_path).verdict is verdict


def test_a_compound_command_names_every_rule_that_allowed_it(tmp_path: Path) -> None:
    perms = Permissions(allow=["Bash(git status)", "Bash(npm test:*)"])
    decision = bash(perms, "npm test && git status && npm test -x", tmp_path)
    assert decision == Decision(ALLOW, 'allowed by rules "Bash(npm test:*)", "Bash(git status)"')


# --- file tools ------------------------------------------------------------


def edit(perms: Permissions, path: str, workspace: Path, tool: str = "edit") -> Verdict:
    return decide(perms, tool, {"file_path": path}, workspace).verdict


def test_an_edit_rule_covers_write_and_a_write_rule_only_write(tmp_path: Path) -> None:
    edit_rule, write_rule = Permissions(allow=["Edit(src/**)"]), Permissions(allow=["Write(src/**)"])
    assert edit(edit_rule, "src/a.py", tmp_path, "write") is ALLOW
    assert edit(edit_rule, "src/a.py", tmp_path, "edit") is ALLOW
    assert edit(write_rule, "src/a.py", tmp_path, "write") is ALLOW
    assert edit(write_rule, "src/a.py", tmp_path, "edit") is ASK


@pytest.mark.parametrize(
    ("rule", "path", "verdict"),
    [
        ("Edit(src/**)", "src/a.py", ALLOW),
        ("Edit(src/**)", "src/deep/er/a.py", ALLOW),
        ("Edit(./src/**)", "src/a.py", ALLOW),
        ("Edit(/src/**)", "src/a.py", ALLOW),
        ("Edit(src/**)", "./src/./a.py", ALLOW),
        ("Edit(src/**)", "src/../secrets", ASK),
        ("Edit(src/**)", "src/../../src/a.py", ASK),
        ("Edit(src/**)", "lib/src/a.py", ASK),
        ("Edit(src/**)", "srcs/a.py", ASK),
        ("Edit(src/*.py)", "src/a.py", ALLOW),
        ("Edit(src/*.py)", "src/sub/a.py", ASK),
        ("Edit(src/?.py)", "src/a.py", ALLOW),
        ("Edit(src/?.py)", "src/ab.py", ASK),
        ("Edit(src/**/test_*.py)", "src/test_a.py", ALLOW),
        ("Edit(src/**/test_*.py)", "src/x/y/test_a.py", ALLOW),
        ("Edit(src/**/test_*.py)", "src/x/y/a.py", ASK),
        ("Edit(*.md)", "README.md", ALLOW),
        ("Edit(*.md)", "docs/deep/guide.md", ALLOW),
        ("Edit(./README.md)", "README.md", ALLOW),
        ("Edit(./README.md)", "docs/README.md", ASK),
        ("Edit(docs)", "docs/guide.md", ALLOW),
        ("Edit(docs/)", "docs/guide.md", ALLOW),
    ],
)
def test_path_rules_are_gitignore_patterns_under_the_workspace(
    tmp_path: Path, rule: str, path: str, verdict: Verdict
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    assert edit(Permissions(allow=[rule]), path, workspace) is verdict


def test_a_path_given_absolute_is_matched_like_a_relative_one(tmp_path: Path) -> None:
    assert edit(Permissions(allow=["Edit(src/**)"]), str(tmp_path / "src" / "a.py"), tmp_path) is ALLOW


def test_double_slash_is_absolute_and_tilde_is_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace, outside, home = tmp_path / "ws", tmp_path / "outside", tmp_path / "home"
    for directory in (workspace, outside, home):
        directory.mkdir()
    monkeypatch.setenv("HOME", str(home))
    perms = Permissions("acceptEdits", deny=[f"Edit(/{outside}/**)", "Read(~/.ssh/**)"])
    assert edit(perms, str(outside / "a.txt"), workspace) is DENY
    assert edit(perms, "../outside/a.txt", workspace) is DENY
    assert edit(perms, f"{str(outside)[1:]}/a.txt", workspace) is ALLOW  # relative: inside the workspace
    assert decide(perms, "read", {"file_path": str(home / ".ssh" / "id_ed25519")}, workspace).verdict is DENY
    assert decide(perms, "read", {"file_path": ".ssh/id_ed25519"}, workspace).verdict is ALLOW


def test_symlinks_are_resolved_on_both_sides(tmp_path: Path) -> None:
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    (workspace / "src").mkdir(parents=True)
    elsewhere.mkdir()
    (workspace / "src" / "link").symlink_to(elsewhere)
    (tmp_path / "ws-link").symlink_to(workspace)
    perms = Permissions(allow=["Edit(src/**)"])
    assert edit(perms, "src/link/a.py", workspace) is ASK
    assert edit(perms, str(workspace / "src" / "a.py"), tmp_path / "ws-link") is ALLOW
    assert edit(Permissions("acceptEdits"), "src/link/a.py", workspace) is ASK


@pytest.mark.parametrize(
    ("tool", "input", "verdict"),
    [
        ("read", {"file_path": "secrets/key.pem"}, DENY),
        ("grep", {"pattern": "password", "path": "secrets"}, DENY),
        ("glob", {"pattern": "*.pem", "path": "secrets/old"}, DENY),
        ("grep", {"pattern": "password", "path": "src", "glob": "secrets/**"}, ALLOW),
        ("grep", {"pattern": "password"}, ALLOW),
        ("read", {"file_path": "src/a.py"}, ALLOW),
        ("edit", {"file_path": "secrets/key.pem"}, ASK),
    ],
)
def test_a_read_rule_covers_grep_and_glob(
    tmp_path: Path, tool: str, input: dict[str, Any], verdict: Verdict
) -> None:
    assert decide(Permissions(deny=["Read(secrets/**)"]), tool, input, tmp_path).verdict is verdict


@pytest.mark.parametrize(
    ("path", "verdict"),
    [
        (".env", DENY),
        ("app/config/.env", DENY),
        ("app/.envrc", ALLOW),
        ("keys/prod.pem", DENY),
        ("pem", ALLOW),
    ],
)
def test_a_bare_name_matches_at_any_depth(tmp_path: Path, path: str, verdict: Verdict) -> None:
    perms = Permissions(deny=["Read(.env)", "Read(*.pem)"])
    assert decide(perms, "read", {"file_path": path}, tmp_path).verdict is verdict


# --- other tools -----------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "tool", "verdict"),
    [
        ("spawn_agent", "spawn_agent", ALLOW),
        ("Spawn_Agent", "SPAWN_AGENT", ALLOW),
        ("spawn_agent", "send_message", ASK),
        ("READ", "read", ALLOW),
        ("mcp__github__create_issue", "mcp__github__create_issue", ALLOW),
        ("mcp__github__create_issue", "mcp__github__delete_repo", ASK),
        ("mcp__github", "mcp__github__delete_repo", ALLOW),
        ("mcp__github", "mcp__githubx__tool", ASK),
        ("mcp__github__*", "mcp__github__delete_repo", ALLOW),
        ("mcp__github__*", "mcp__gitlab__delete_repo", ASK),
        ("Bash", "spawn_agent", ASK),
    ],
)
def test_other_tools_match_by_name(tmp_path: Path, rule: str, tool: str, verdict: Verdict) -> None:
    assert decide(Permissions(allow=[rule]), tool, {}, tmp_path, read_only=False).verdict is verdict
