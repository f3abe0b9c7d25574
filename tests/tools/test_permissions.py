"""Permission rules and modes, on the real filesystem (paths and symlinks are resolved)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teamrt.team import load_team
from teamrt.tools.permissions import MODE_NAMES, Decision, Mode, Permissions, Rule, RuleError, Rules, Verdict

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
        ("Bash(f() { ls; })", "one simple command"),
        ("Bash(echo 'unterminated)", "cannot parse"),
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
        Permissions("yolo")
    assert not isinstance(caught.value, RuleError)
    assert str(caught.value) == (
        "unknown permission mode 'yolo'; use one of: default, acceptEdits, plan, bypassPermissions,"
        " dontAsk, auto, manual"
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
    assert decide(Permissions(), "send_message", {}, tmp_path, read_only=True).verdict is ALLOW
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
    permissions = Permissions(
        mode, allow=rules.get("allow", ()), deny=rules.get("deny", ()), ask=rules.get("ask", ())
    )
    assert bash(permissions, "rm -rf build", tmp_path) == Decision(verdict, reason)


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
        (["Bash(echo *)", "Bash(date)"], 'echo "today is $(date)"', ASK),
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


# --- fail-closed bash rules -------------------------------------------------

DENY_RM = Permissions("bypassPermissions", deny=["Bash(rm:*)"])


@pytest.mark.parametrize(
    "command",
    [
        "FOO=1 rm victim.txt",
        "/bin/rm victim.txt",
        "command rm victim.txt",
        "builtin command rm victim.txt",
        "\\rm victim.txt",
        "r''m victim.txt",
        '"rm" victim.txt',
        "r\\\nm victim.txt",
        "{ rm victim.txt; }",
        "if true; then rm victim.txt; fi",
        "if rm victim.txt; then :; fi",
        "while true; do rm victim.txt; break; done",
        "for f in victim.txt; do rm $f; done",
        "f() { rm victim.txt; }",
        "! rm victim.txt",
        "echo $(rm victim.txt)",
        "x=$(rm victim.txt)",
        "cat <(rm victim.txt)",
        "ls > >(rm victim.txt)",
        "exec rm victim.txt",
        "nohup rm victim.txt",
        "\\time rm victim.txt",
        "/usr/bin/time -v rm victim.txt",
        "env rm victim.txt",
        "env -i FOO=1 rm victim.txt",
        "nice -n 5 rm victim.txt",
        "nice -5 rm victim.txt",
        "timeout 5 rm victim.txt",
        "timeout -s KILL -k 1 5 rm victim.txt",
        "stdbuf -oL rm victim.txt",
        "setsid rm victim.txt",
        "sudo rm victim.txt",
        "sudo -u root -E rm victim.txt",
        "doas rm victim.txt",
        "busybox rm victim.txt",
        "chroot / rm victim.txt",
        "echo victim.txt | xargs rm",
        "echo victim.txt | xargs -0 -n 1 rm -f",
        "ls | xargs -I{} rm {}",
        "find . -name victim.txt -exec rm {} \\;",
        "find . -name victim.txt -execdir rm -f {} +",
        "nice timeout 5 env sudo rm victim.txt",
        "git bisect run rm victim.txt",
    ],
)
@pytest.mark.hostile
def test_a_deny_rule_catches_the_program_however_it_is_spelled(tmp_path: Path, command: str) -> None:
    assert bash(DENY_RM, command, tmp_path) == Decision(DENY, 'denied by rule "Bash(rm:*)"')


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("time rm victim.txt", "cannot parse"),
        ("case x in x) rm victim.txt;; esac", "cannot parse"),
        ("[[ -f x ]] && rm victim.txt", "cannot parse"),
        ("echo 'unterminated", "cannot parse"),
        ("eval rm victim.txt", "`eval` runs its arguments"),
        ('eval "$(echo cm0K | base64 -d) victim.txt"', "`eval` runs its arguments"),
        ("source ./script.sh", "`source` runs a script"),
        (". ./script.sh", "`.` runs a script"),
        ("bash -c 'rm victim.txt'", "`bash` runs a script"),
        ("sh script.sh", "`sh` runs a script"),
        ("echo 'rm victim.txt' | sh", "`sh` runs a script"),
        ("env -S 'rm victim.txt'", "`env -S`"),
        ("sudo -s", "`sudo -s`"),
        ("xargs sh -c 'rm victim.txt'", "`sh` runs a script"),
        ("find . -exec sh -c 'rm {}' \\;", "`sh` runs a script"),
        ("python3 -c 'import os; os.remove(\"victim.txt\")'", "`python3 -c` runs code given inline"),
        ("perl -ne 'unlink'", "`perl -e` runs code given inline"),
        ("echo 'import os' | python3", "`python3` without a script"),
        ("awk 'BEGIN { system(\"rm victim.txt\") }'", "`awk`"),
        ("$CMD victim.txt", "the program `$CMD` is not plain text"),
        ("$(echo rm) victim.txt", "the program `$(echo rm)` is not plain text"),
        ("r*m victim.txt", "the program `r*m` is not plain text"),
        ("{rm,victim.txt}", "the program `{rm,victim.txt}` is not plain text"),
        ("~/bin/x victim.txt", "is not plain text"),
        ("f() { ls; }; f", "`f` is a function the command defines"),
        ("alias ls=rm", "`alias` defines commands"),
        ("exec > log", "`exec` without a program"),
        ("trap 'rm victim.txt' EXIT", "`trap` runs text"),
        ("PATH=. ls", "`PATH=` changes which programs run"),
        ("LD_PRELOAD=./x.so ls", "`LD_PRELOAD=`"),
        ("export PATH=.:$PATH; ls", "`PATH=`"),
        ("env BASH_ENV=./x ls", "`BASH_ENV=`"),
        ("git -c alias.x='!rm victim.txt' x", "`git -c` can make git run any program"),
        ("git --config-env=alias.x=CMD x", "`git --config-env`"),
        ("git rebase -x 'rm victim.txt' main", "`git rebase -x` runs a command"),
        ("git config alias.x '!rm victim.txt'", "`git config`"),
        ("git submodule foreach 'rm victim.txt'", "`git submodule` runs shell text"),
        ("strace rm victim.txt", "`strace` runs a program"),
        ("cat <<EOF\n$(rm victim.txt)\nEOF", "here-document"),
        ("(( x ))", "evaluates arithmetic"),
        ("echo ${a[$i]}", "`${a[$i]}`"),
        ("echo ${!name}", "`${!name}`"),
        ("read 'a[$i]'", "evaluates the subscript"),
        ("declare -i n=x", "`declare -i`"),
        ("timeout $T rm victim.txt", "cannot tell what `timeout` runs: `$T` is not plain text"),
        ("nice --frobnicate rm victim.txt", "`--frobnicate` is an option the checker does not know"),
    ],
)
@pytest.mark.hostile
def test_a_command_that_cannot_be_read_is_denied_naming_why(tmp_path: Path, command: str, why: str) -> None:
    decision = bash(DENY_RM, command, tmp_path)
    assert decision.verdict is DENY
    assert decision.reason.startswith("cannot tell what this command runs (")
    assert why in decision.reason
    assert decision.reason.endswith(', so rule "Bash(rm:*)" may forbid it; write the command out plainly')


@pytest.mark.parametrize(
    "command",
    [
        "rmdir x",
        "echo rm x",
        "grep -r 'rm x' .",
        "ls $HOME",
        "git status",
        "git -C sub log",
        "command -v rm",
        "find . -name '*.py' -exec grep -l TODO {} +",
        "python3 -m pytest -q",
        "python3 script.py",
        "awk '{print $1}' file",
        "cat <<'EOF'\n$(rm victim.txt)\nEOF",
        "git commit -m \"$(cat <<'EOF'\nthe message\nEOF\n)\"",
        "echo ${HOME:-/} ${x%.py} $1",
        "[ -f x ] && echo yes",
        "printf '[%s]\\n' x",
        "export FOO=$BAR",
    ],
)
def test_what_the_reader_sees_through_passes_a_deny_rule(tmp_path: Path, command: str) -> None:
    assert bash(DENY_RM, command, tmp_path).verdict is ALLOW


def test_a_command_that_cannot_be_read_passes_when_no_bash_rule_has_a_specifier(tmp_path: Path) -> None:
    assert bash(Permissions("bypassPermissions", deny=["Read(.env)"]), "eval rm x", tmp_path).verdict is ALLOW
    assert bash(Permissions(allow=["Bash"]), "eval rm x", tmp_path).verdict is ALLOW
    assert bash(Permissions("bypassPermissions", deny=["Bash"]), "ls", tmp_path).verdict is DENY


def test_an_ask_rule_asks_about_a_command_that_cannot_be_read(tmp_path: Path) -> None:
    perms = Permissions("bypassPermissions", ask=["Bash(git push:*)"])
    assert bash(perms, "git push", tmp_path) == Decision(ASK, 'approval required by rule "Bash(git push:*)"')
    decision = bash(perms, "eval git push", tmp_path)
    assert decision.verdict is ASK
    assert decision.reason == (
        "cannot tell what this command runs (`eval` runs its arguments as a command),"
        ' so rule "Bash(git push:*)" may apply'
    )
    assert bash(perms, "git status", tmp_path).verdict is ALLOW
    denying = Permissions("bypassPermissions", ask=["Bash(git push:*)"], deny=["Bash(curl:*)"])
    assert bash(denying, "eval git push", tmp_path).verdict is DENY


@pytest.mark.parametrize(
    ("rule", "command", "verdict"),
    [
        ("Bash(git push:*)", "git push origin main", DENY),
        ("Bash(git push:*)", "git -C . push", DENY),
        ("Bash(git push:*)", "git --no-pager -C sub push --force", DENY),
        ("Bash(git push:*)", "git $X", DENY),
        ("Bash(git push:*)", "git pu*", DENY),
        ("Bash(git push:*)", "git status $X", ALLOW),
        ("Bash(git push:*)", "git pushy", ALLOW),
        ("Bash(rm -rf /)", "rm -rf / 2>/dev/null", DENY),
        ("Bash(rm -rf /)", "rm -rf $DIR", DENY),
        ("Bash(rm -rf /)", "rm -f $DIR", ALLOW),
        ("Bash(/bin/rm:*)", "rm x", DENY),
        ("Bash(/bin/rm:*)", "/usr/bin/rm x", DENY),
        ("Bash(* --force)", "git push $X", DENY),
        ("Bash(sudo:*)", "sudo rm x", DENY),
    ],
)
@pytest.mark.hostile
def test_a_deny_rule_matches_what_the_command_may_run(
    tmp_path: Path, rule: str, command: str, verdict: Verdict
) -> None:
    assert bash(Permissions("bypassPermissions", deny=[rule]), command, tmp_path).verdict is verdict


@pytest.mark.hostile
def test_a_command_that_may_match_a_deny_rule_is_denied_saying_so(tmp_path: Path) -> None:
    decision = bash(Permissions("bypassPermissions", deny=["Bash(git push:*)"]), "git $SUB", tmp_path)
    assert decision == Decision(
        DENY, 'denied by rule "Bash(git push:*)" (`git $SUB` may match it: not all its words are plain text)'
    )


@pytest.mark.parametrize(
    ("rules", "command", "verdict"),
    [
        # every program a wrapper runs must be allowed too
        (["Bash(rm:*)"], "sudo rm x", ASK),
        (["Bash(sudo rm:*)"], "sudo rm x", ASK),
        (["Bash(sudo rm:*)", "Bash(rm:*)"], "sudo rm x", ALLOW),
        (["Bash(timeout:*)", "Bash(npm test)"], "timeout 60 npm test", ALLOW),
        (["Bash(find:*)"], "find . -exec rm {} \\;", ASK),
        (["Bash(find:*)", "Bash(grep:*)"], "find . -exec grep -l x {} +", ALLOW),
        (["Bash(xargs:*)"], "xargs rm", ASK),
        (["Bash(xargs:*)", "Bash(rm:*)"], "xargs rm", ALLOW),
        (["Bash(xargs:*)", "Bash(rm x)"], "xargs rm x", ASK),
        # what cannot be read is never allowed by a rule with a specifier
        (["Bash(git:*)"], "git -c alias.x='!touch P' x", ASK),
        (["Bash(git:*)"], "git status", ALLOW),
        (["Bash(git:*)"], "git -C sub status", ALLOW),
        (["Bash(eval:*)"], "eval ls", ASK),
        (["Bash(bash:*)"], "bash -c ls", ASK),
        (["Bash(echo:*)"], "time echo", ASK),
        (["Bash(ls:*)"], "f() { ls; }; f", ASK),
        # a program written with a directory is allowed only by a rule that writes it so
        (["Bash(rm:*)"], "/tmp/evil/rm x", ASK),
        (["Bash(./deploy.sh)"], "./deploy.sh", ALLOW),
        (["Bash(./deploy.sh)"], "deploy.sh", ASK),
        (["Bash(/usr/bin/*:*)"], "/usr/bin/make all", ALLOW),
        # an argument that is not plain text must match whatever it turns out to be
        (["Bash(npm test:*)"], "npm test $ARGS", ALLOW),
        (["Bash(npm test *)"], "npm test -- *.js", ALLOW),
        (["Bash(cat README.md)"], "cat $FILE", ASK),
        (["Bash(cat *.md)"], "cat $FILE", ASK),
        (["Bash(cat *)"], "cat $FILE", ALLOW),
        (["Bash(git * main)"], "git $X main", ASK),
        # quotes and assignments are not part of what a rule sees
        (["Bash(npm test)"], "CI=1 npm 'test'", ALLOW),
        (["Bash(git commit -m *)"], 'git commit -m "fix: it"', ALLOW),
    ],
)
@pytest.mark.hostile
def test_an_allow_rule_must_cover_everything_the_command_runs(
    tmp_path: Path, rules: list[str], command: str, verdict: Verdict
) -> None:
    assert bash(Permissions(allow=rules), command, tmp_path).verdict is verdict


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


@pytest.mark.parametrize("tool", ["read", "grep", "glob"])
def test_a_read_family_call_without_a_path_is_about_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    home, workspace = tmp_path / "home", tmp_path / "home" / "ws"
    workspace.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert decide(Permissions(deny=["Read(~/**)"]), tool, {"pattern": "x"}, workspace).verdict is DENY
    assert (
        decide(Permissions(deny=[f"Read(/{workspace})"]), tool, {"pattern": "x"}, workspace).verdict is DENY
    )
    assert decide(Permissions(deny=["Read(ws/**)"]), tool, {"pattern": "x"}, workspace).verdict is ALLOW


def test_read_denial_names_the_read_rule_that_forbids_a_path(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "secrets" / "old").mkdir(parents=True)
    (workspace / "src").mkdir()
    perms = Permissions(
        "bypassPermissions", deny=["Edit(src/**)", "Grep(src/**)", "Read(secrets/**)", "Read(*.pem)"]
    )
    real = workspace.resolve()
    assert perms.read_denial(real / "secrets" / "old" / "key", workspace) == "Read(secrets/**)"
    assert perms.read_denial(real / "secrets", workspace) == "Read(secrets/**)"
    assert perms.read_denial(real / "src" / "deploy.pem", workspace) == "Read(*.pem)"
    assert perms.read_denial(real / "src" / "app.py", workspace) is None
    assert perms.read_denial(real / "secrets.txt", workspace) is None
    assert Permissions(deny=["read"]).read_denial(real / "src" / "app.py", workspace) == "read"
    assert Permissions(ask=["Read(src/**)"]).read_denial(real / "src" / "app.py", workspace) is None


def test_read_denial_sees_the_canonical_path_behind_a_symlink(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "secrets").mkdir(parents=True)
    (tmp_path / "ws-link").symlink_to(workspace)
    perms = Permissions(deny=["Read(secrets/**)"])
    assert (
        perms.read_denial(workspace.resolve() / "secrets" / "k", tmp_path / "ws-link") == "Read(secrets/**)"
    )


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


# --- Claude Code's modes and tool names ----------------------------------------


@pytest.mark.parametrize(
    ("mode", "tool", "input", "verdict"),
    [
        ("dontAsk", "Read", {"file_path": "a.py"}, ALLOW),
        ("dontAsk", "Edit", {"file_path": "a.py"}, DENY),
        ("dontAsk", "Bash", {"command": "ls"}, DENY),
        ("dontAsk", "spawn_agent", {}, DENY),
        ("auto", "Edit", {"file_path": "a.py"}, ALLOW),
        ("auto", "MultiEdit", {"file_path": "a.py", "edits": []}, ALLOW),
        ("auto", "Write", {"file_path": "/etc/hosts"}, ASK),
        ("auto", "Bash", {"command": "ls"}, ASK),
        ("manual", "Edit", {"file_path": "a.py"}, ASK),
        ("manual", "LS", {"path": "."}, ALLOW),
        ("acceptEdits", "MultiEdit", {"file_path": "src/a.py", "edits": []}, ALLOW),
        ("acceptEdits", "multiedit", {"file_path": "../a.py", "edits": []}, ASK),
    ],
)
def test_claude_codes_modes(
    tmp_path: Path, mode: str, tool: str, input: dict[str, Any], verdict: Verdict
) -> None:
    read_only = tool.lower() in {"read", "glob", "grep", "ls"}
    assert decide(Permissions(mode), tool, input, tmp_path, read_only=read_only).verdict is verdict


def test_manual_is_default_and_every_mode_has_a_name() -> None:
    assert Permissions("manual").mode is Mode.DEFAULT
    assert {Permissions(name).mode for name in MODE_NAMES} == set(Mode)


def test_dont_ask_denies_what_an_ask_rule_would_ask_and_says_so(tmp_path: Path) -> None:
    perms = Permissions("dontAsk", allow=["Bash"], ask=["Bash(git push:*)"])
    assert bash(perms, "git status", tmp_path).verdict is ALLOW
    decision = bash(perms, "git push origin main", tmp_path)
    assert decision == Decision(
        DENY, 'approval required by rule "Bash(git push:*)"; dontAsk mode denies what it would ask'
    )
    assert "dontAsk" in decide(Permissions("dontAsk"), "Write", {"file_path": "a"}, tmp_path).reason


def test_auto_mode_says_teamrt_asks_where_claude_code_has_a_classifier(tmp_path: Path) -> None:
    decision = decide(Permissions("auto"), "Bash", {"command": "ls"}, tmp_path)
    assert decision == Decision(ASK, "Bash needs approval in auto mode (teamrt has no classifier)")


@pytest.mark.parametrize(
    ("rule", "tool", "input", "verdict"),
    [
        ("Read", "Read", {"file_path": "a"}, DENY),
        ("Read", "Glob", {"pattern": "*"}, DENY),
        ("Read", "Grep", {"pattern": "x"}, DENY),
        ("Read", "LS", {"path": "."}, DENY),
        ("Read", "Write", {"file_path": "a"}, ALLOW),
        ("Read(secrets/**)", "LS", {"path": "secrets"}, DENY),
        ("Read(secrets/**)", "LS", {"path": "src"}, ALLOW),
        ("Edit", "Edit", {"file_path": "a"}, DENY),
        ("Edit", "Write", {"file_path": "a"}, DENY),
        ("Edit", "MultiEdit", {"file_path": "a", "edits": []}, DENY),
        ("Edit", "Read", {"file_path": "a"}, ALLOW),
        ("Edit(src/**)", "MultiEdit", {"file_path": "src/a.py", "edits": []}, DENY),
        ("Edit(src/**)", "MultiEdit", {"file_path": "docs/a.md", "edits": []}, ALLOW),
        ("Write", "Edit", {"file_path": "a"}, ALLOW),
        ("edit", "multiedit", {"file_path": "a"}, DENY),
        ("READ", "ls", {}, DENY),
        ("bash", "Bash", {"command": "ls"}, DENY),
        ("Bash(rm:*)", "bash", {"command": "rm x"}, DENY),
        ("Agent", "Task", {"prompt": "p"}, DENY),
        ("Task", "Agent", {"prompt": "p"}, DENY),
        ("Task(reviewer)", "Task", {"prompt": "p", "subagent_type": "Reviewer"}, DENY),
        ("Task(reviewer)", "Task", {"prompt": "p", "subagent_type": "coder"}, ALLOW),
        ("Task(general-purpose)", "Task", {"prompt": "p"}, DENY),
        ("TodoWrite", "TodoWrite", {"todos": []}, DENY),
    ],
)
def test_rules_cover_claude_codes_tool_names_in_any_case(
    tmp_path: Path, rule: str, tool: str, input: dict[str, Any], verdict: Verdict
) -> None:
    perms = Permissions("bypassPermissions", deny=[rule])
    assert decide(perms, tool, input, tmp_path, read_only=False).verdict is verdict


@pytest.mark.parametrize("rule", ["WebSearch(x)", "NotebookEdit(x)", "mcp__github__issue(x)"])
@pytest.mark.hostile
def test_specifiers_teamrt_cannot_check_deny_every_use_and_allow_none(tmp_path: Path, rule: str) -> None:
    tool = rule.split("(")[0]
    denied = decide(Permissions("bypassPermissions", deny=[rule]), tool, {"url": "https://x"}, tmp_path)
    assert denied.verdict is DENY and "cannot check its specifier" in denied.reason
    asked = decide(Permissions("bypassPermissions", ask=[rule]), tool, {}, tmp_path)
    assert asked.verdict is ASK
    assert decide(Permissions(allow=[rule]), tool, {"url": "https://example.com"}, tmp_path).verdict is ASK


# --- WebFetch's domains, and tools that reach off the machine -------------------------


def fetch(perms: Permissions, url: object, workspace: Path) -> Decision:
    return perms.decide("WebFetch", {"url": url, "prompt": "p"}, read_only=True, workspace=workspace)


@pytest.mark.parametrize(
    ("url", "verdict"),
    [
        ("https://docs.python.org/3/library/", ALLOW),
        ("http://DOCS.Python.org./x", ALLOW),  # as WebFetch reads it: lower case, no trailing dot
        ("https://python.org/", ASK),
        ("https://docs.python.org.evil.com/", ASK),
        ("https://api.example.com/v1", ALLOW),
        ("https://a.b.example.com/", ALLOW),
        ("https://example.com/", ASK),  # *.example.com is its subdomains, not example.com itself
        ("https://badexample.com/", ASK),
        ("https://secret.example.com/", DENY),
        ("https://SECRET.example.com:8443/", DENY),
        ("https://user@secret.example.com/", DENY),  # a url WebFetch refuses still meets the deny rule
        ("https://wiki.internal.test/", ASK),
        ("https://xn--bcher-kva.de/", ALLOW),
    ],
)
def test_webfetch_rules_match_the_host_fetched(tmp_path: Path, url: str, verdict: Verdict) -> None:
    perms = Permissions(
        allow=[
            "WebFetch(domain:docs.python.org)",
            "WebFetch(domain:*.example.com)",
            "WebFetch(domain:Bücher.de)",
        ],
        deny=["WebFetch(domain:secret.example.com)"],
        ask=["WebFetch(domain:*.internal.test)"],
    )
    assert fetch(perms, url, tmp_path).verdict is verdict


def test_a_webfetch_rule_whose_host_is_not_a_name_says_so() -> None:
    with pytest.raises(RuleError, match=r"'☃\.com' is not a host name"):
        Rule.parse("WebFetch(domain:☃.com)")


def test_webfetch_rules_name_the_rule_that_decided(tmp_path: Path) -> None:
    perms = Permissions(
        "bypassPermissions", deny=["WebFetch(domain:evil.test)"], ask=["WebFetch(domain:*.ask.test)"]
    )
    assert fetch(perms, "https://evil.test/x", tmp_path) == Decision(
        DENY, 'denied by rule "WebFetch(domain:evil.test)"'
    )
    assert fetch(perms, "https://a.ask.test/", tmp_path).reason == (
        'approval required by rule "WebFetch(domain:*.ask.test)"'
    )
    assert fetch(perms, "https://fine.test/", tmp_path).verdict is ALLOW


@pytest.mark.parametrize("url", ["not a url", "", 5, None, "ftp://evil.test/", "https://[::1/"])
@pytest.mark.hostile
def test_a_url_webfetch_cannot_read_meets_every_deny_and_ask_rule_and_no_allow_rule(
    tmp_path: Path, url: object
) -> None:
    denied = fetch(Permissions("bypassPermissions", deny=["WebFetch(domain:evil.test)"]), url, tmp_path)
    assert denied.verdict is DENY and "not one WebFetch can read" in denied.reason
    assert fetch(Permissions(allow=["WebFetch(domain:evil.test)"]), url, tmp_path).verdict is ASK


@pytest.mark.parametrize(
    "text",
    [
        "WebFetch(example.com)",
        "WebFetch(domain:)",
        "WebFetch(url:https://example.com)",
        "WebFetch(domain:example.com/path)",
        "WebFetch(domain:example.com:443)",
        "WebFetch(domain:*)",
        "WebFetch(domain:*example.com)",
        "WebFetch(domain:a.*.example.com)",
        "WebFetch(domain:user@example.com)",
        "WebFetch(domain:two words)",
    ],
)
def test_a_webfetch_rule_that_names_no_host_says_how_to_write_one(text: str) -> None:
    with pytest.raises(RuleError, match=r"names a host: WebFetch\(domain:example.com\)"):
        Permissions(allow=[text])


@pytest.mark.parametrize(
    ("mode", "verdict"),
    [
        ("default", ASK),
        ("acceptEdits", ASK),
        ("auto", ASK),
        ("plan", ASK),
        ("dontAsk", DENY),
        ("bypassPermissions", ALLOW),
    ],
)
@pytest.mark.parametrize("tool", ["WebFetch", "mcp__docs__search"])
@pytest.mark.hostile
def test_tools_that_reach_off_the_machine_are_not_allowed_for_being_read_only(
    tmp_path: Path, mode: str, verdict: Verdict, tool: str
) -> None:
    decision = decide(Permissions(mode), tool, {"url": "https://example.com/"}, tmp_path, read_only=True)
    assert decision.verdict is verdict
    if verdict is ASK:
        assert decision.reason == f"{tool} reaches off the machine: it needs approval in {mode} mode"
    allowed = Permissions(mode, allow=["WebFetch", "mcp__docs"])
    assert decide(allowed, tool, {"url": "https://example.com/"}, tmp_path, read_only=True).verdict is ALLOW


def test_websearch_is_read_only_and_only_a_deny_rule_keeps_it_away(tmp_path: Path) -> None:
    for mode in ("default", "plan", "dontAsk"):
        assert decide(Permissions(mode), "WebSearch", {}, tmp_path, read_only=True).verdict is ALLOW
    assert decide(Permissions(deny=["WebSearch"]), "WebSearch", {}, tmp_path, read_only=True).verdict is DENY


@pytest.mark.parametrize("text", ["TodoWrite(x)", "spawn_agent(explorer)", "Made_Up(x)"])
def test_teamrts_other_tools_take_no_specifier(text: str) -> None:
    with pytest.raises(RuleError, match="take a specifier"):
        Rule.parse(text)


# --- sources pooled: a deny from any source beats an allow from any, as in Claude Code ------

SETTINGS = Rules.parse(
    allow=["Bash(npm test)"], deny=["Bash(rm:*)", "Read(.env)"], ask=["Bash(git push:*)"],
    origin=".claude/settings.json",
)  # fmt: skip


@pytest.mark.parametrize(
    ("team", "command", "decision"),
    [
        ({}, "rm -rf x", Decision(DENY, 'denied by rule "Bash(rm:*)" in .claude/settings.json')),
        ({}, "npm test", Decision(ALLOW, 'allowed by rule "Bash(npm test)" in .claude/settings.json')),
        (
            {},
            "git push",
            Decision(ASK, 'approval required by rule "Bash(git push:*)" in .claude/settings.json'),
        ),
        ({}, "ls", Decision(ASK, "Bash needs approval in default mode")),
        (
            {"allow": ["Bash(rm:*)"]},
            "rm -rf x",
            Decision(DENY, 'denied by rule "Bash(rm:*)" in .claude/settings.json'),
        ),
        ({"deny": ["Bash(npm:*)"]}, "npm test", Decision(DENY, 'denied by rule "Bash(npm:*)"')),
        (
            {"allow": ["Bash(git push:*)"]},
            "git push",
            Decision(ASK, 'approval required by rule "Bash(git push:*)" in .claude/settings.json'),
        ),
        (
            {"allow": ["Bash(ls)"]},
            "rm x",
            Decision(DENY, 'denied by rule "Bash(rm:*)" in .claude/settings.json'),
        ),
    ],
)
def test_the_team_files_and_the_settings_rules_are_pooled_deny_then_ask_then_allow(
    tmp_path: Path, team: dict[str, list[str]], command: str, decision: Decision
) -> None:
    permissions = Permissions(
        allow=team.get("allow", ()), deny=team.get("deny", ()), ask=team.get("ask", ()), then=SETTINGS
    )
    assert decide(permissions, "Bash", {"command": command}, tmp_path) == decision


def test_read_denial_takes_a_deny_of_any_source(tmp_path: Path) -> None:
    real = tmp_path.resolve()
    assert (
        Permissions(then=SETTINGS).read_denial(real / ".env", tmp_path)
        == "Read(.env) in .claude/settings.json"
    )
    assert (
        Permissions(allow=["Read(.env)"], then=SETTINGS).read_denial(real / ".env", tmp_path)
        == "Read(.env) in .claude/settings.json"
    ), "the team file's allow does not lift the settings' deny"
    assert Permissions(deny=["Read"], then=SETTINGS).read_denial(real / "a.py", tmp_path) == "Read"
    assert Permissions(then=SETTINGS).read_denial(real / "a.py", tmp_path) is None


@pytest.mark.hostile
def test_an_opaque_command_is_denied_by_a_settings_deny_rule(tmp_path: Path) -> None:
    decision = decide(
        Permissions("bypassPermissions", then=SETTINGS), "Bash", {"command": "eval x"}, tmp_path
    )
    assert decision.verdict is DENY and "in .claude/settings.json" in decision.reason


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_a_team_file_takes_every_mode_name(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "team.toml"
    path.write_text(f'[roles.critic]\nagent = "reviewer"\npermission_mode = "{mode}"\n')
    role = load_team(path, project=tmp_path).roles["critic"]
    assert Permissions(role.permission_mode or "").mode is Permissions(mode).mode


def test_a_skill_rule_covers_every_skill_call_when_it_restricts_and_none_when_it_allows(
    tmp_path: Path,
) -> None:
    """``Skill(name)``'s name is not checked: a deny naming one skill denies them all (fail closed), an
    allow naming one grants nothing (Skill is read-only and needs none)."""
    denied = Permissions(deny=("Skill(deploy)",))
    for skill in ("deploy", "other"):
        assert decide(denied, "Skill", {"skill": skill}, tmp_path, read_only=True).verdict is DENY
    allowed = Permissions("dontAsk", allow=("Skill(deploy)",))
    assert decide(allowed, "Skill", {"skill": "deploy"}, tmp_path, read_only=True).verdict is ALLOW
    assert decide(allowed, "Skill", {"skill": "deploy"}, tmp_path, read_only=False).verdict is DENY
