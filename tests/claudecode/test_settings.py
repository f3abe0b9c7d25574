"""Claude Code's settings files: read (as JSON with comments) and merged by its precedence; what cannot
be used is one warning line each and never stops a run; deny rules fail closed; and in a run on ``sim``:
their rules decide calls the team file's do not, their env reaches commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from teamrt.api import RunResult
from teamrt.claudecode import trust
from teamrt.claudecode.envknobs import Knobs, knob_tools
from teamrt.claudecode.settings import (
    MAX_BYTES,
    ClaudeSettings,
    SettingsError,
    load_claude_settings,
    read_settings_files,
)
from teamrt.models import Reply
from teamrt.settings import SettingsError as TeamrtSettingsError
from teamrt.sim import SimRequest, SimServer
from teamrt.tools.permissions import Permissions, Verdict
from teamrt.tools.shell.bash import Bash, BashLimits
from tests.helpers.machine import needs_bwrap
from tests.helpers.teams import supervise
from tests.helpers.waiting import within


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's Claude folder (``CLAUDE_CONFIG_DIR``), empty."""
    home = tmp_path / "claude-home"
    home.mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".claude").mkdir(parents=True)
    return path


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def warned(project: Path) -> tuple[ClaudeSettings, str]:
    """The settings of ``project`` (loading never raises) and their one warning, which is one line."""
    settings = load_claude_settings(project)
    assert len(settings.warnings) == 1, settings.warnings
    line = settings.warnings[0]
    assert "\n" not in line and len(line) < 400, line
    return settings, line


# -- reading and merging -----------------------------------------------------------


def test_no_files_no_settings(project: Path, user: Path) -> None:
    settings = load_claude_settings(project)
    assert read_settings_files(project) == []
    assert (settings.rules.allow, settings.default_mode, dict(settings.env), settings.warnings) == (
        (),
        None,
        {},
        (),
    )


def test_files_merge_by_claude_codes_precedence(project: Path, user: Path) -> None:
    write(user / "settings.json", {
        "permissions": {"allow": ["Read"], "deny": ["Bash(curl:*)"], "defaultMode": "plan"},
        "env": {"A": "user", "TZ": "UTC"},
    })  # fmt: skip
    write(project / ".claude" / "settings.json", {
        "permissions": {
            "allow": ["Bash(npm test)"], "ask": ["Bash(git push:*)"], "defaultMode": "acceptEdits"
        },
        "env": {"TZ": "Europe/Paris", "CI": 3},
        "model": "opus", "statusLine": {"type": "command", "command": "x"},
    })  # fmt: skip
    write(
        project / ".claude" / "settings.local.json",
        {"permissions": {"deny": ["Read(.env)"]}, "env": {"CI": "local"}},
    )
    trust.trust(project, None, allow=trust.allow_digest(read_settings_files(project)))  # its allow rules
    files = read_settings_files(project)
    assert [(f.scope, f.path) for f in files] == [
        ("user", user / "settings.json"),
        ("project", project / ".claude" / "settings.json"),
        ("local", project / ".claude" / "settings.local.json"),
    ]
    settings = load_claude_settings(project)
    assert [r.text for r in settings.rules.allow] == ["Read", "Bash(npm test)"]
    assert [r.text for r in settings.rules.deny] == ["Bash(curl:*)", "Read(.env)"]
    assert [(r.text, r.origin) for r in settings.rules.ask] == [("Bash(git push:*)", ".claude/settings.json")]
    assert settings.rules.deny[0].origin == str(user / "settings.json")
    assert settings.default_mode == "acceptEdits", "the later file's scalar wins"
    assert dict(settings.env) == {"A": "user", "TZ": "Europe/Paris", "CI": "local"}
    assert settings.warnings == (
        ".claude/settings.json: not used by teamrt: model (the team file chooses models)",
    ), "keys teamrt does not use are named once, in one line"


def test_a_bom_and_unicode_are_fine(project: Path, user: Path) -> None:
    (user / "settings.json").write_bytes(
        "\ufeff".encode() + json.dumps({"env": {"GREETING": "héllo ✓"}}, ensure_ascii=False).encode()
    )
    assert dict(load_claude_settings(project).env) == {"GREETING": "héllo ✓"}


def test_rules_for_tools_teamrt_lacks_load(project: Path, user: Path) -> None:
    write(user / "settings.json", {"permissions": {
        "allow": ["WebFetch(domain:github.com)", "WebSearch", "mcp__github__get_issue", "Agent(Explore)"],
        "deny": ["NotebookEdit(//etc/**)"],
    }})  # fmt: skip
    settings = load_claude_settings(project)
    assert [r.tool for r in settings.rules.allow] == [
        "webfetch",
        "websearch",
        "mcp__github__get_issue",
        "task",
    ]


@pytest.mark.parametrize(
    ("key", "value"),
    [("sandbox", {"enabled": True}), ("apiKeyHelper", "/bin/get-key")],
)
def test_settings_a_person_may_count_on_get_a_warning(
    project: Path, user: Path, key: str, value: Any
) -> None:
    write(
        project / ".claude" / "settings.json",
        {key: value, "permissions": {"additionalDirectories": ["../x"]}},
    )
    _, line = warned(project)
    assert line.startswith(f".claude/settings.json: not used by teamrt: {key} (")
    assert line.endswith(", permissions.additionalDirectories (agents work only in their workspace)")


# -- one line for each problem; no file stops a run ------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            "[1, 2]",
            "settings.local.json: holds a list, not a JSON object: left out, as Claude Code leaves it",
        ),
        ('"text"', "holds a string, not a JSON object"),
        ("", "not valid JSON (line 1 column 1: Expecting value): left out"),
        ('{"permissions": ["Bash"]}', "'permissions' is a list, not an object: left out (its deny and ask"),
        (
            '{"permissions": {"allow": "Bash"}}',
            "'permissions.allow' is a string, not a list of rules: left out",
        ),
        ('{"permissions": {"deny": [1]}}', "'permissions.deny' holds 1 item that is not a rule (a number)"),
        ('{"permissions": {"deny": ["Bash(rm"]}}', 'rule "Bash(rm" cannot be read (unbalanced parentheses'),
        ('{"permissions": {"ask": ["Bash()"]}}', "cannot be read (empty parentheses; write Bash"),
        (
            '{"permissions": {"defaultMode": "yolo"}}',
            "'permissions.defaultMode' \"yolo\" is not one of default,",
        ),
        ('{"permissions": {"defaultMode": 1}}', "'permissions.defaultMode' 1 is not one of"),
        ('{"env": ["A=1"]}', "'env' is a list, not an object: left out"),
        ('{"env": {"A": {"b": 1}}}', "env entries left out: A (an object, not a string)"),
        ('{"env": {"A": true}}', "env entries left out: A (a boolean, not a string)"),
        ('{"env": {"A": "x\\u0000y"}}', "env entries left out: A (holds a NUL character)"),
        ('{"env": {"A=B": "x"}}', 'env entries left out: "A=B" (not a variable name)'),
        ('{"env": {"": "x"}}', 'env entries left out: "" (not a variable name)'),
    ],
)
def test_a_broken_file_is_one_line_naming_it_and_loads(
    project: Path, user: Path, content: str, problem: str
) -> None:
    write(project / ".claude" / "settings.local.json", content)
    _, line = warned(project)
    assert line.startswith(".claude/settings.local.json: ") and problem in line, line


def test_every_problem_of_a_file_is_named_at_once(project: Path, user: Path) -> None:
    write(project / ".claude" / "settings.local.json", {
        "permissions": {"allow": ["Bash(time:*)", "Delete(x)", "Bash(ls:*)"], "deny": ["Bash(rm -r /)*"],
                        "defaultMode": "yolo"},
        "env": {"A": True, "BASH_MAX_TIMEOUT_MS": "lots"}, "frobnicate": 1,
    })  # fmt: skip
    settings = load_claude_settings(project)
    starts = [
        "unknown keys, left alone: frobnicate",
        'permissions.allow rule "Bash(time:*)" left out',
        'permissions.allow rule "Delete(x)" left out',
        'permissions.deny rule "Bash(rm -r /)*" cannot be read',
        "'permissions.defaultMode' \"yolo\" is not one of",
        "env entries left out: A (a boolean, not a string)",
        'env BASH_MAX_TIMEOUT_MS "lots" is not a whole number',
    ]
    assert len(settings.warnings) == len(starts), settings.warnings
    for line, start in zip(settings.warnings, starts, strict=True):
        assert line.startswith(f".claude/settings.local.json: {start}"), line
    assert [r.text for r in settings.rules.allow] == ["Bash(ls:*)"]


def test_jsonc_reads_as_claude_code_reads_it(project: Path, user: Path) -> None:
    write(
        user / "settings.json",
        """{
      // the person's own notes
      "permissions": {
        "allow": ["Bash(npm test)", /* for now */ "Read",],
        "deny": ["Read(./.env)",],  // "deny": ["nothing"] in a comment is no rule
      },
      "env": {"URL": "http://example.com/a//b", "STAR": "/* not a comment */"},
    }""",
    )
    settings = load_claude_settings(project)
    assert [r.text for r in settings.rules.allow] == ["Bash(npm test)", "Read"]
    assert [r.text for r in settings.rules.deny] == ["Read(./.env)"]
    assert dict(settings.env) == {"URL": "http://example.com/a//b", "STAR": "/* not a comment */"}
    assert settings.warnings == ()


def test_a_key_named_twice_keeps_its_last_value_and_is_named(project: Path, user: Path) -> None:
    write(
        user / "settings.json",
        '{"env": {"CI": "1", "CI": "2"}, "permissions": {"deny": ["Read"], "deny": ["Bash"]}}',
    )
    settings = load_claude_settings(project)
    assert dict(settings.env) == {"CI": "2"} and [r.text for r in settings.rules.deny] == ["Bash"]
    assert [w.split(": ", 1)[1] for w in settings.warnings] == [
        'key "CI" is named twice in one object: the last value counts, as in Claude Code',
        'key "deny" is named twice in one object: the last value counts, as in Claude Code',
    ]


def test_a_file_that_is_not_json_still_denies_what_its_text_denies(project: Path, user: Path) -> None:
    write(
        project / ".claude" / "settings.json",
        '{"permissions": {"deny": ["Bash(rm:*)", "Read(./.env)"], "ask": ["Bash(git push:*)"],'
        ' "allow": ["Bash"]',
    )
    settings, line = warned(project)
    assert line == (
        ".claude/settings.json: not valid JSON (line 1 column 104: Expecting ',' delimiter): left out,"
        " as Claude Code leaves it out; the 3 deny and ask rules found in its text still apply"
    )
    assert [r.text for r in settings.rules.deny] == ["Bash(rm:*)", "Read(./.env)"]
    assert [r.text for r in settings.rules.ask] == ["Bash(git push:*)"] and settings.rules.allow == ()
    decision = Permissions("bypassPermissions", then=settings.rules).decide(
        "Bash", {"command": "rm -rf /"}, read_only=False, workspace=project
    )
    assert decision.verdict is Verdict.DENY


@pytest.mark.hostile
def test_not_utf8_and_too_deep_and_too_big(project: Path, user: Path) -> None:
    path = project / ".claude" / "settings.local.json"  # not tracked by git: the person's own
    path.write_bytes(b'{"env": {"A": "\xff"}, "permissions": {"deny": ["Bash(rm:*)"]}}')
    settings, line = warned(project)
    assert "not UTF-8 text: each byte that is not was read as U+FFFD" in line
    assert dict(settings.env) == {"A": "\ufffd"} and [r.text for r in settings.rules.deny] == ["Bash(rm:*)"]
    path.write_text('{"permissions": {"deny": ["Read"]}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    settings, line = warned(project)
    assert "JSON nested too deeply: left out" in line and [r.text for r in settings.rules.deny] == ["Read"]
    path.write_text('{"permissions": {"deny": ["Bash"]}, "env": {"A": "' + "x" * MAX_BYTES + '"}}')
    settings, line = warned(project)
    assert "larger than 1024 KiB: left out" in line and [r.text for r in settings.rules.deny] == ["Bash"]


def test_the_error_class_stays_teamrts_settings_error_for_callers_that_catch_it() -> None:
    assert issubclass(SettingsError, TeamrtSettingsError)


# -- hostile files ----------------------------------------------------------------------

UNREAD = "its deny and ask rules, if it has any, are NOT in force"


@pytest.mark.hostile
def test_a_fifo_is_left_out_without_blocking(project: Path, user: Path) -> None:
    os.mkfifo(project / ".claude" / "settings.json")
    line = within(30, lambda: warned(project)[1])
    assert "not a regular file: left out" in line and UNREAD in line


@pytest.mark.hostile
def test_a_directory_is_left_out(project: Path, user: Path) -> None:
    (project / ".claude" / "settings.local.json").mkdir()
    assert "not a regular file" in warned(project)[1]


@pytest.mark.hostile
def test_a_device_is_left_out(project: Path, user: Path) -> None:
    (project / ".claude" / "settings.json").symlink_to(project / "dev-zero")
    (project / "dev-zero").symlink_to("/dev/zero")
    assert "outside the project" in warned(project)[1], "a link out of the project, however it goes"
    (user / "settings.json").symlink_to("/dev/zero")
    (project / ".claude" / "settings.json").unlink()
    assert "not a regular file" in warned(project)[1], "the user's own file may be a link, but to a file"


@pytest.mark.hostile
def test_a_project_file_linking_outside_is_left_out(tmp_path: Path, project: Path, user: Path) -> None:
    outside = write(tmp_path / "elsewhere.json", {"permissions": {"allow": ["Bash"]}})
    (project / ".claude" / "settings.json").symlink_to(outside)
    settings, line = warned(project)
    assert f"a link to {outside.resolve()}, outside the project" in line and UNREAD in line
    assert settings.rules.allow == ()


@pytest.mark.hostile
def test_a_claude_folder_linking_outside_is_left_out(tmp_path: Path, user: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    write(tmp_path / "theirs" / "settings.json", {"permissions": {"defaultMode": "acceptEdits"}})
    (project / ".claude").symlink_to(tmp_path / "theirs")
    settings, line = warned(project)
    assert "outside the project" in line and settings.default_mode is None


def test_links_inside_the_project_and_the_users_own_links_are_fine(
    tmp_path: Path, project: Path, user: Path
) -> None:
    write(project / "config" / "claude.json", {"env": {"TZ": "UTC"}})
    (project / ".claude" / "settings.json").symlink_to(project / "config" / "claude.json")
    dotfiles = write(tmp_path / "dotfiles" / "claude.json", {"env": {"B": "dotfiles"}})
    (user / "settings.json").symlink_to(dotfiles)
    assert dict(load_claude_settings(project).env) == {"B": "dotfiles", "TZ": "UTC"}


@pytest.mark.parametrize(
    "name",
    [
        "ANTHROPIC_FOO_URL", "anthropic_auth_token", "TEAMRT_DB", "TEAMRT_HOME",
        "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "PATH", "BASH_ENV", "ENV",
        "BASH_FUNC_ls%%", "SHELLOPTS", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT",
        "GIT_DIR", "GIT_SSH_COMMAND", "GIT_CONFIG_COUNT", "HOME", "IFS",
    ],
)  # fmt: skip
@pytest.mark.hostile
def test_env_that_steers_programs_or_reaches_credentials_is_refused(
    project: Path, user: Path, name: str
) -> None:
    """Even in the person's own settings (a repository's may set far less:
    tests/claudecode/test_hostile_settings.py)."""
    path = write(user / "settings.json", {"env": {name: "/tmp/evil", "NODE_ENV": "test"}})
    settings = load_claude_settings(project)
    assert dict(settings.env) == {"NODE_ENV": "test"}
    assert settings.warnings == (f"{path}: env {name} ignored: settings may not set it for tool processes",)


@pytest.mark.hostile
def test_the_users_env_is_refused_the_same_way(project: Path, user: Path) -> None:
    write(user / "settings.json", {"env": {"ANTHROPIC_BASE_URL": "http://x", "DEBUG": "1"}})
    settings = load_claude_settings(project)
    assert dict(settings.env) == {"DEBUG": "1"}
    assert settings.warnings == (
        f"{user / 'settings.json'}: env knobs of Claude Code's that teamrt does not use: ANTHROPIC_BASE_URL"
        " (read from teamrt's own environment)",
    )


@pytest.mark.parametrize("mode", ["bypassPermissions", "auto"])
@pytest.mark.hostile
def test_a_repository_cannot_choose_a_mode_that_runs_everything(project: Path, user: Path, mode: str) -> None:
    write(project / ".claude" / "settings.json", {"permissions": {"defaultMode": mode}})
    settings = load_claude_settings(project)
    assert settings.default_mode is None and f"defaultMode {mode!r} ignored" in settings.warnings[0]
    write(project / ".claude" / "settings.local.json", {"permissions": {"defaultMode": mode}})
    assert load_claude_settings(project).default_mode is None, "a clone may carry a local file too"
    write(user / "settings.json", {"permissions": {"defaultMode": mode}})
    assert load_claude_settings(project).default_mode == mode, "the person's own settings may"


def test_a_repository_may_choose_the_other_modes(project: Path, user: Path) -> None:
    write(project / ".claude" / "settings.json", {"permissions": {"defaultMode": "dontAsk"}})
    write(user / "settings.json", {"permissions": {"defaultMode": "bypassPermissions"}})
    assert load_claude_settings(project).default_mode == "dontAsk", "the project's file is above the user's"


def test_a_huge_rule_list_loads_and_decides_quickly(tmp_path: Path, project: Path, user: Path) -> None:
    rules = [f"Bash(tool{i} --flag:*)" for i in range(5000)]
    write(project / ".claude" / "settings.json", {"permissions": {"deny": rules}})
    settings = load_claude_settings(project)
    started = time.monotonic()
    decision = Permissions("bypassPermissions", then=settings.rules).decide(
        "Bash", {"command": "tool4999 --flag x"}, read_only=False, workspace=tmp_path
    )
    assert decision.verdict is Verdict.DENY
    # A ceiling far above the decision's time on a busy machine (seconds) that bounds a matcher gone
    # quadratic over the 5000 rules, which would take hours.
    assert time.monotonic() - started < 60


# -- in a run ---------------------------------------------------------------------------------

TEAM = '[team]\nmodel = "sim"\non_ask = "deny"\n'


def run(project: Path, sim: SimServer, team: str = TEAM) -> RunResult:
    (project / "team.toml").write_text(team)
    return supervise(project, sim, project.parent / "home" / "runs" / "r1")


COMMANDS = ['echo "$GREETING|${ANTHROPIC_BASE_URL-unset}|${LD_PRELOAD-unset}"', "rm -rf build", "ls"]


def commander(request: SimRequest) -> Reply:
    """Runs COMMANDS one by one, then reports every result."""
    done = request.calls("Bash")
    if done < len(COMMANDS):
        return Reply().call("Bash", {"command": COMMANDS[done]})
    return Reply().say("done")


def results(sim: SimServer) -> list[str]:
    bodies = [json.loads(body) for agent, body in sim.bodies if agent == "lead"]
    last = bodies[-1]["messages"]
    return [
        block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
        for message in last
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


@needs_bwrap
def test_settings_rules_env_and_mode_in_a_run(project: Path, user: Path, sim: SimServer) -> None:
    write(project / ".claude" / "settings.json", {
        "permissions": {"allow": ["Bash(echo:*)"], "deny": ["Bash(rm:*)"], "defaultMode": "dontAsk"},
    })  # fmt: skip
    write(project / ".claude" / "settings.local.json", {  # untracked: the person's own
        "env": {"GREETING": "hello from settings", "ANTHROPIC_BASE_URL": "http://x", "LD_PRELOAD": "/x.so"},
    })  # fmt: skip
    trust.trust(project, None, allow=trust.allow_digest(read_settings_files(project)))
    sim.policies["lead"] = commander
    outcome = run(project, sim)
    assert outcome.status == "blocked", outcome  # its one call that would act, rm, was refused
    echoed, removed, listed = results(sim)
    assert echoed.strip().endswith("hello from settings|unset|unset")
    assert removed == 'permission denied: denied by rule "Bash(rm:*)" in .claude/settings.json'
    assert listed.startswith("permission denied: no rule allows Bash, and dontAsk mode"), "the settings' mode"


@needs_bwrap
def test_the_team_files_mode_comes_first_but_its_allow_never_lifts_a_settings_deny(
    project: Path, user: Path, sim: SimServer
) -> None:
    write(project / ".claude" / "settings.json", {
        "permissions": {"allow": ["Bash(echo:*)"], "deny": ["Bash(rm:*)"], "defaultMode": "dontAsk"},
    })  # fmt: skip
    (project / "build").mkdir()
    sim.policies["lead"] = commander
    team = (
        TEAM
        + '[lead]\npermission_mode = "bypassPermissions"\n[permissions]\nallow = ["Bash(rm -rf build)"]\n'
    )
    outcome = run(project, sim, team)
    assert outcome.status == "blocked", outcome  # its one call that would act, rm, was refused
    _, removed, listed = results(sim)
    assert removed == 'permission denied: denied by rule "Bash(rm:*)" in .claude/settings.json'
    assert (project / "build").exists(), "a deny of any source beats an allow of any other (Claude Code's)"
    assert "permission denied" not in listed, "the team file's mode over the settings'"


def test_warnings_reach_teamrt_run_and_a_broken_file_stops_nothing(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / ".claude" / "settings.json", '{"permissions": {"deny": ["Bash(rm:*)"]')
    write(
        project / ".claude" / "settings.local.json",
        {"env": {"LD_PRELOAD": "/x.so"}, "sandbox": {"enabled": True}},
    )
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "run", "--prompt", "x", "--model", "sim"],
        env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt")},
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("teamrt: warning: ")]
    assert warnings == [
        "teamrt: warning: .claude/settings.json: not valid JSON (line 1 column 40: Expecting ',' delimiter):"
        " left out, as Claude Code leaves it out; the one deny or ask rule found in its text still applies",
        "teamrt: warning: .claude/settings.local.json: not used by teamrt: sandbox (teamrt's own sandbox"
        " confines commands ([sandbox] in the team file))",
        "teamrt: warning: .claude/settings.local.json: env LD_PRELOAD ignored: settings may not set it for"
        " tool processes",
    ], result.stderr


# -- Claude Code's env knobs ------------------------------------------------------------------


def test_bash_and_mcp_knobs_reach_the_tools_and_hostile_values_keep_the_defaults(
    project: Path, user: Path
) -> None:
    write(
        user / "settings.json",
        {"env": {"BASH_DEFAULT_TIMEOUT_MS": "300000", "BASH_MAX_OUTPUT_LENGTH": 50_000}},
    )
    write(
        project / ".claude" / "settings.json", {"env": {"MCP_TIMEOUT": "60000", "BASH_MAX_TIMEOUT_MS": "1e9"}}
    )
    settings = load_claude_settings(project)
    assert settings.warnings == (
        '.claude/settings.json: env BASH_MAX_TIMEOUT_MS "1e9" is not a whole number from 1 to 86,400,000; the'
        " longest Bash timeout stays teamrt's default",
    )
    knobs = settings.knobs
    assert (knobs.bash_timeout, knobs.bash_max_timeout, knobs.bash_output_chars) == (300.0, None, 50_000)
    assert knobs.mcp_start_timeout == 60.0, "a repository's file may set a limit teamrt caps"
    bash = knob_tools(knobs)["Bash"]
    assert isinstance(bash, Bash)
    assert bash.limits == BashLimits(timeout=300.0, max_timeout=600.0, output_chars=50_000)
    assert "default 300000, at most 600000" in json.dumps(bash.input_schema)
    assert "Output over 50,000 characters" in bash.description
    assert knob_tools(Knobs()) == {}, "no knob: the very same tools as without settings"


def test_mcp_tool_timeout_in_the_settings_env_times_calls_of_servers_whose_entry_names_none(
    project: Path, user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from teamrt.mcp.config import DEFAULT_TIMEOUT, mcp_config
    from teamrt.team import Role, Team

    monkeypatch.setenv("MCP_TOOL_TIMEOUT", "5000")  # the settings' value wins, as Claude Code sets its env
    write(user / "settings.json", {"env": {"MCP_TOOL_TIMEOUT": "90000"}})
    servers: dict[str, dict[str, Any]] = {
        "plain": {"command": "srv"},
        "own": {"command": "srv", "timeout": 7},
    }
    lead = Role("lead", "lead", None, None, None, None, None)
    team = Team(path=project / "team.toml", name="t", model="", lead=lead, mcp_servers=servers)
    config = mcp_config(project, team, {})
    assert (config.servers["plain"].timeout, config.servers["own"].timeout) == (90.0, 7.0)
    write(user / "settings.json", {"env": {"MCP_TOOL_TIMEOUT": "ninety"}})
    assert mcp_config(project, team, {}).servers["plain"].timeout == 5.0
    monkeypatch.delenv("MCP_TOOL_TIMEOUT")
    assert mcp_config(project, team, {}).servers["plain"].timeout == DEFAULT_TIMEOUT
