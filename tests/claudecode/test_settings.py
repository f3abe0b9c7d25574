"""Claude Code's settings files: read and merged by its precedence, refused in one line when unusable,
and in a run on ``sim``: their rules decide calls the team file's do not, their env reaches commands."""

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
from teamrt.claudecode.settings import (
    MAX_BYTES,
    SettingsError,
    load_claude_settings,
    read_settings_files,
)
from teamrt.models import Reply
from teamrt.settings import SettingsError as TeamrtSettingsError
from teamrt.sim import SimRequest, SimServer
from teamrt.tools.permissions import Permissions, Verdict
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


def refusal(project: Path) -> str:
    with pytest.raises(SettingsError) as caught:
        load_claude_settings(project)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 300, message
    return message


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
    assert settings.warnings == (), "keys teamrt does not use (model, statusLine) are ignored quietly"


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
    warnings = load_claude_settings(project).warnings
    assert len(warnings) == 2
    assert warnings[0].startswith(f".claude/settings.json: {key!r} is not used by teamrt (")
    assert "'permissions.additionalDirectories' is not used by teamrt" in warnings[1]


# -- one line for each file that cannot be used ------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"permissions": {"allow": ["Bash"],}}', "invalid JSON at line 1 column"),
        ("[1, 2]", "must hold a JSON object, not a list"),
        ('"text"', "must hold a JSON object, not a string"),
        ("", "invalid JSON"),
        ('{"permissions": ["Bash"]}', "'permissions' must be an object, not a list"),
        ('{"permissions": {"allow": "Bash"}}', "'permissions.allow' must be a list of strings"),
        ('{"permissions": {"deny": [1]}}', "'permissions.deny' must be a list of strings"),
        ('{"permissions": {"deny": ["Bash(rm"]}}', 'bad permission rule "Bash(rm": unbalanced'),
        ('{"permissions": {"ask": ["Bash()"]}}', "empty parentheses"),
        ('{"permissions": {"defaultMode": "yolo"}}', "'permissions.defaultMode' must be one of default,"),
        ('{"permissions": {"defaultMode": 1}}', "must be one of"),
        ('{"env": ["A=1"]}', "'env' must be an object, not a list"),
        ('{"env": {"A": {"b": 1}}}', "env A must be a string, not an object"),
        ('{"env": {"A": true}}', "env A must be a string, not a boolean"),
        ('{"env": {"A": "x\\u0000y"}}', "env A holds a NUL character"),
        ('{"env": {"A=B": "x"}}', 'env name "A=B" is not a variable name'),
        ('{"env": {"": "x"}}', "is not a variable name"),
    ],
)
def test_a_broken_file_is_one_line_naming_it(project: Path, user: Path, content: str, problem: str) -> None:
    path = write(project / ".claude" / "settings.local.json", content)
    message = refusal(project)
    assert message.startswith(f"settings file {path}: ") and problem in message, message


@pytest.mark.hostile
def test_not_utf8_and_too_deep_and_too_big(project: Path, user: Path) -> None:
    path = project / ".claude" / "settings.json"
    path.write_bytes(b'{"env": {"A": "\xff"}}')
    assert "not UTF-8" in refusal(project)
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in refusal(project)
    path.write_text('{"env": {"A": "' + "x" * MAX_BYTES + '"}}')
    assert "larger than 1024 KiB" in refusal(project)


def test_the_error_is_teamrts_settings_error_so_the_cli_says_it_in_one_line() -> None:
    assert issubclass(SettingsError, TeamrtSettingsError)


# -- hostile files ----------------------------------------------------------------------


@pytest.mark.hostile
def test_a_fifo_is_refused_without_blocking(project: Path, user: Path) -> None:
    os.mkfifo(project / ".claude" / "settings.json")
    assert "not a regular file" in within(30, lambda: refusal(project))


@pytest.mark.hostile
def test_a_directory_is_refused(project: Path, user: Path) -> None:
    (project / ".claude" / "settings.local.json").mkdir()
    assert "not a regular file" in refusal(project)


@pytest.mark.hostile
def test_a_device_is_refused(project: Path, user: Path) -> None:
    (project / ".claude" / "settings.json").symlink_to(project / "dev-zero")
    (project / "dev-zero").symlink_to("/dev/zero")
    assert "outside the project" in refusal(project), "a link out of the project, however it goes"
    (user / "settings.json").symlink_to("/dev/zero")
    (project / ".claude" / "settings.json").unlink()
    assert "not a regular file" in refusal(project), "the user's own file may be a link, but to a file"


@pytest.mark.hostile
def test_a_project_file_linking_outside_is_refused(tmp_path: Path, project: Path, user: Path) -> None:
    outside = write(tmp_path / "elsewhere.json", {"permissions": {"allow": ["Bash"]}})
    (project / ".claude" / "settings.json").symlink_to(outside)
    message = refusal(project)
    assert f"a link to {outside.resolve()}, outside the project" in message


@pytest.mark.hostile
def test_a_claude_folder_linking_outside_is_refused(tmp_path: Path, user: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    write(tmp_path / "theirs" / "settings.json", {"permissions": {"defaultMode": "acceptEdits"}})
    (project / ".claude").symlink_to(tmp_path / "theirs")
    assert "outside the project" in refusal(project)


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
        "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "anthropic_auth_token", "TEAMRT_DB", "TEAMRT_HOME",
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
    assert dict(settings.env) == {"DEBUG": "1"} and len(settings.warnings) == 1


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


def test_a_broken_settings_file_stops_teamrt_run_in_one_line_and_makes_no_run(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / ".claude" / "settings.json", '{"permissions": {"deny": ["Bash(rm:*)"]')
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "run", "--prompt", "x", "--model", "sim"],
        env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt")},
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "settings.json" in result.stderr and "invalid JSON" in result.stderr
    runs = project / ".teamrt" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_warnings_reach_teamrt_run(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(
        project / ".claude" / "settings.json", {"env": {"LD_PRELOAD": "/x.so"}, "sandbox": {"enabled": True}}
    )
    result = subprocess.run(
        [sys.executable, "-m", "teamrt", "run", "--prompt", "x", "--model", "sim"],
        env={**os.environ, "TEAMRT_HOME": str(project / ".teamrt")},
        cwd=project, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "teamrt: warning: .claude/settings.json: env LD_PRELOAD ignored" in result.stderr
    assert "teamrt: warning: .claude/settings.json: 'sandbox' is not used by teamrt" in result.stderr
