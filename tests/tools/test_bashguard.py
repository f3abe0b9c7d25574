"""The built-in team's read-only commands, and what keeps them read-only: a ``Read`` deny rule binds the
files a command names or may read, a redirection that writes is asked about (``teamrt.tools.bashguard``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teamrt.runtime.teamrun import DEFAULT_TEAM
from teamrt.team import load_team
from teamrt.tools.permissions import Mode, Permissions, Verdict


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    top = tmp_path / "ws"
    (top / "src" / "sub").mkdir(parents=True)
    for name in (".env", "src/sub/.env", "src/app.py", "README.md"):
        (top / name).write_text("x\n")
    return top


def default_team(mode: Mode = Mode.DEFAULT) -> Permissions:
    team = load_team(DEFAULT_TEAM, project=DEFAULT_TEAM.parent)
    return Permissions(mode, allow=team.allow, deny=team.deny, ask=team.ask)


def verdict(command: str, workspace: Path, permissions: Permissions | None = None) -> Verdict:
    decided = (permissions or default_team()).decide(
        "Bash", {"command": command}, read_only=False, workspace=workspace
    )
    return decided.verdict


@pytest.mark.parametrize(
    "command",
    [
        "ls -la src", "cat README.md", "head -n 5 src/app.py", "tail -n 3 README.md", "wc -l src/*.py",
        "rg -n hello", "rg hello src", "grep -n hello src/app.py", "find . -name '*.py'", "pwd",
        "git status", "git status --short", "git diff", "git diff --stat HEAD~1", "git log --oneline -5",
        "git show HEAD", "cat README.md 2>/dev/null | head -n 1", "ls 2>&1",
    ],
)  # fmt: skip
def test_the_built_in_team_allows_commands_that_only_look(workspace: Path, command: str) -> None:
    assert verdict(command, workspace) is Verdict.ALLOW


@pytest.mark.parametrize(
    "command",
    [
        "find . -exec rm {} +", "find . -delete", "find . -execdir cat {} ;", "find . -fprint out",
        "find . -ok rm {} ;", "rg --pre ./evil hello", "rg --pre=sh x", "rg --hostname-bin=./x x",
        "git diff --output=src/app.py", "git log --out=x", "ls > src/app.py", "cat README.md >> x",
        "git diff &> patch", "head README.md >| f", "cat README.md 1<>f", "ls >&file",
        "ls; rm -rf src", "cat README.md | sh", "git push", "git commit -m x",
    ],
)  # fmt: skip
def test_what_writes_runs_or_deletes_is_not_allowed(workspace: Path, command: str) -> None:
    assert verdict(command, workspace) is not Verdict.ALLOW


def test_a_refusal_says_which_rule_and_why(workspace: Path) -> None:
    decided = default_team().decide("Bash", {"command": "ls > out"}, read_only=False, workspace=workspace)
    assert decided.verdict is Verdict.ASK
    assert decided.reason.startswith('allowed by rule "Bash(ls:*)", but not this command: it writes `out`')
    decided = default_team().decide("Bash", {"command": "cat .env"}, read_only=False, workspace=workspace)
    assert decided.verdict is Verdict.DENY
    assert decided.reason == 'denied by rule "Read(.env)": the command names `.env`, which it forbids reading'


@pytest.mark.hostile
@pytest.mark.parametrize(
    "command",
    [
        "cat .env", "head .env", "tail -n1 .env", "wc -c .env", "cat ./.env", "cat src/../.env",
        "cat src/sub/.env", "cat '.e'\"nv\"", "cat \\.env", "cat < .env", "{ cat; } < .env",
        "cat README.md .env", "grep -f.env README.md", "grep --file=.env README.md", "git show HEAD:.env",
        "cat \"$PWD/.env\"", "ls && cat .env", "rg x .env", "cat .env | head",
    ],
)  # fmt: skip
def test_a_read_deny_rule_stops_reading_the_file_through_bash(workspace: Path, command: str) -> None:
    """``Read(.env)`` is in the built-in team: allowing ``cat`` must not let ``cat .env`` by, in any mode
    but bypassPermissions either."""
    assert verdict(command, workspace) is Verdict.DENY
    assert verdict(command, workspace, default_team(Mode.BYPASS)) is Verdict.DENY
    assert verdict(command, workspace, default_team(Mode.ACCEPT_EDITS)) is Verdict.DENY


@pytest.mark.hostile
@pytest.mark.parametrize(
    "command",
    [
        "cat .en?", "cat .e*", "cat .*", "head src/sub/.e[n]v", "cd src/sub && cat .en?", "F=.env; cat $F",
        "cat ${HOME}", "cat `echo .env`", "cat .{env,x}", "grep -r x .", "grep -R x", "grep -rn x src",
        "grep --recursive x .", "grep -d recurse x .", "rg --hidden x", "rg -uu x", "rg -. x",
        "find . -exec cat {} +",
    ],
)  # fmt: skip
def test_a_command_that_may_read_a_denied_file_unnamed_is_asked_about(workspace: Path, command: str) -> None:
    assert verdict(command, workspace) in (Verdict.ASK, Verdict.DENY)


def test_a_glob_that_reaches_no_denied_file_stays_allowed(workspace: Path) -> None:
    assert verdict("cat src/*.py", workspace) is Verdict.ALLOW
    assert verdict("cat *", workspace) is Verdict.ALLOW, "bash's * skips dotfiles"


def test_rg_skips_hidden_files_so_a_non_hidden_denied_file_makes_it_ask(workspace: Path) -> None:
    hidden = Permissions(allow=["Bash(rg:*)"], deny=["Read(.env)"])
    plain = Permissions(allow=["Bash(rg:*)"], deny=["Read(secrets/**)"])
    assert verdict("rg token", workspace, hidden) is Verdict.ALLOW
    assert verdict("rg token", workspace, plain) is Verdict.ASK
    assert verdict("rg token secrets", workspace, plain) is Verdict.DENY


def test_without_read_deny_rules_only_redirections_are_judged(workspace: Path) -> None:
    permissions = Permissions(allow=["Bash(cat:*)", "Bash(grep:*)"])
    assert verdict("cat .env", workspace, permissions) is Verdict.ALLOW
    assert verdict("grep -r x .", workspace, permissions) is Verdict.ALLOW
    assert verdict("cat x > y", workspace, permissions) is Verdict.ASK


def test_a_rule_for_every_command_allows_what_any_command_does(workspace: Path) -> None:
    everything = Permissions(allow=["Bash"], deny=["Read(.env)"])
    assert verdict("cat x > y", workspace, everything) is Verdict.ALLOW
    assert verdict("grep -r x .", workspace, everything) is Verdict.ALLOW
    assert verdict("cat .env", workspace, everything) is Verdict.DENY, "a deny rule still beats it"


def test_a_variable_given_to_a_program_that_opens_no_file_stays_allowed(workspace: Path) -> None:
    permissions = Permissions(allow=["Bash(echo:*)", "Bash(cat:*)"], deny=["Read(.env)"])
    assert verdict('echo "env=$WIDGET_ENV"', workspace, permissions) is Verdict.ALLOW
    assert verdict('cat "$WIDGET_ENV"', workspace, permissions) is Verdict.ASK
