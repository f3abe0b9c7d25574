"""Deny rules fail closed on every indirection (issue 32, escape 1).

``read -r x < p; declare -n r="$x"; : "$r"`` removed a file with ``Bash(rm:*)`` denied: ``p`` held
``a[$(rm victim.txt)]``, and bash evaluates the subscript of a nameref's target on every use. The same
family turns text the checker cannot see into a program or into code: namerefs, indirect expansion,
arithmetic, subscripts, ``compgen -W``, ``{a[x]}>`` redirections, globs and braces as the program,
positional parameters, ``read``/``mapfile``/``printf -v``. With any Bash deny rule each is refused with
a reason naming the construct; without one, and for plain commands, nothing changes.

The end-to-end tests run each spelling through the real supervisor, tools and sandboxed bash twice: with
the rule (refused, every file kept) and without it (every file gone), which shows each spelling is a
real way to run ``rm`` as bash runs it.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from teamrt.tools.permissions import Decision, Permissions, Verdict
from teamrt.tools.shell.programs import read
from tests.helpers.hostile import Call, Said, Scene
from tests.helpers.machine import needs_bwrap

pytestmark = pytest.mark.hostile

RM = ("Bash(rm:*)",)
DENIED = "permission denied: "
NAMEREF = (
    "`declare -n` makes a name refer to another variable, and bash evaluates that variable's subscript,"
    " which can run commands"
)


def bash(command: str) -> Call:
    return ("Bash", {"command": command})


def decide(perms: Permissions, command: str) -> Decision:
    return perms.decide("Bash", {"command": command}, read_only=False, workspace=Path("/nonexistent"))


# --- the corpus: text bash turns into a program or into code ----------------------------------------

INDIRECTIONS = [
    # namerefs (the escape): bash evaluates the subscript of the name a nameref holds on every use
    ('read -r x < p; declare -n r="$x"; : "$r"', "`declare -n`"),
    ('x=$(cat p); declare -n r="$x"; : "$r"', "`declare -n`"),
    ("declare -n r; r=$(cat p); : $r", "`declare -n`"),
    ("typeset -n r=x", "`typeset -n`"),
    ('f() { local -n r="$1"; : "$r"; }; f "$(cat p)"', "`local -n`"),
    ("declare -gn r=x", "`declare -n`"),
    ("declare -rn r=x", "`declare -n`"),
    ("builtin declare -n r=x", "`declare -n`"),
    ("command typeset -n r=x", "`typeset -n`"),
    ("declare $o r=x", "`declare` evaluates the subscript in `$o`"),
    ("declare -$o r=x", "`declare` evaluates the subscript in `-$o`"),
    # indirect expansion and transformations
    ('x=$(cat p); : "${!x}"', "`${!x}`"),
    ("x=a; a=rm; ${!x} v", "`${!x}`"),
    ('echo "${!prefix@}"', "`${!prefix@}`"),
    ("echo ${x@P}", "`${x@P}`"),
    ("echo ${x@E}", "`${x@E}`"),
    # arithmetic: a variable's value is evaluated as an expression, subscripts and all
    ("x=$(cat p); : $((x))", "cannot parse (arithmetic expansion)"),
    ("echo $[x]", "cannot parse (arithmetic substitution)"),
    ("(( x ))", "`((...))` evaluates arithmetic"),
    ("for ((i=x; i<0; i++)); do :; done", "cannot parse"),
    ("let x", "`let` evaluates arithmetic"),
    ("x=$(cat p); declare -i n; n=x", "`declare -i` evaluates arithmetic"),
    ("local -ai n", "`local -i` evaluates arithmetic"),
    ("[[ $x -eq 1 ]]", "cannot parse"),
    ("case 1 in $((x))) ;; esac", "cannot parse (`$((x))`)"),
    ("echo ${s:x}", "`${s:x}`"),
    ("echo ${s:0:$n}", "`${s:0:$n}`"),
    # subscripts, wherever a name is taken
    ("x=$(cat p); a[x]=1", "the program `a[x]=1` is not plain text"),
    ('x=$(cat p); : "${a[x]}"', "`${a[x]}`"),
    ("echo ${#a[x]}", "`${#a[x]}`"),
    ('x=$(cat p); test -v "$x"', "`test` evaluates the subscript in `$x`"),
    ('x=$(cat p); [ -v "$x" ]', "`[` evaluates the subscript in `$x`"),
    ('x=$(cat p); printf -v "$x" 1', "`printf` evaluates the subscript in `$x`"),
    ("declare 'a[x]=1'", "`declare` evaluates the subscript in `a[x]=1`"),
    # a word that may turn out to be an option or an operator that takes a name
    ("printf -v'a[x]' 1", "`printf` evaluates the subscript in `a[x]`"),
    ('printf -v"$x" 1', "cannot tell whether `printf` sets a variable: `-v$x` may be an option"),
    ('x=-v$(cat p); printf "$x" 1', "cannot tell whether `printf` sets a variable: `$x` may be an option"),
    ('printf -v y "$fmt" 1', "`$fmt` may be an option"),
    ("printf $fmt", "`$fmt` may be an option"),
    ('o=-v; x=$(cat p); [ "$o" "$x" ]', "cannot tell what `[` tests: `$o` may be an operator such as `-v`"),
    ('x=$(cat p); test ! "$o" "$x"', "cannot tell what `test` tests: `$o` may be an operator"),
    ('[ -n "$o" "$x" ]', "`$x` may be an operator such as `-v`"),
    ("IFS=,; y=-v,$(cat p); [ $y ]", "cannot tell what `[` tests: `$y` may become several words"),
    ("[ ! $y ]", "`$y` may become several words, such as `-v` (quote it)"),
    ('f() { [ "$@" ]; }; f -v "$(cat p)"', "`$@` may become several words, such as `-v`"),
    ("test x = x -a $y", "`$y` may become several words"),
    ("[ -f *.txt ]", "`*.txt` may become several words"),
    ('unset "$x"', "`unset` evaluates the subscript in `$x`"),
    ("getopts ab 'a[x]'", "`getopts` evaluates the subscript"),
    ("x=$(cat p); : {a[x]}>/dev/null", "`{a[x]}` sets the variable it names"),
    (": 2>/dev/null {a[x]}<&0", "`{a[x]}` sets the variable it names"),
    # builtins that run or expand text
    ('compgen -W "$(cat q)" x', "`compgen -C`/`-F`/`-W`"),
    ("compgen -W '$(rm v)' x", "`compgen -C`/`-F`/`-W`"),
    ("complete -C 'rm v' x", "`complete -C`/`-F`/`-W`"),
    ("compgen -$o x", "cannot tell what `compgen` does: `-$o` is not plain text"),
    ("bind -x '\"a\": rm v'", "`bind -x`"),
    ("history -s 'rm v'; fc -s", "`history -s`"),
    ("fc -s rm", "`fc` runs commands again"),
    ("mapfile -C 'rm v' -c 1 a < p", "`mapfile -C`"),
    ("hash -p /bin/rm ls; ls v", "`hash -p`"),
    ("enable -f ./x.so rm", "`enable`"),
    ("shopt -s expand_aliases; alias x='rm v'\nx", "`alias` defines commands"),
    ("trap 'rm v' EXIT", "`trap` runs text as a command"),
    ("eval 'r''m v'", "`eval`"),
    ("source <(echo 'rm v')", "`source` runs a script"),
    (". ./s", "`.` runs a script"),
    ("coproc $(cat n) v; wait", "cannot parse (`coproc`)"),
    ("select x in rm; do $x v; break; done", "cannot parse (`select`)"),
    # programs that run text given in their own arguments
    ("echo x | sed -n '1e rm v'", "`sed`'s `e` command"),
    ("echo 'rm v' | sed 's/.*/&/e'", "`sed`'s `e` command"),
    ("sed -e 's/a/b/' -e '$!e rm v' f", "`sed`'s `e` command"),
    ('sed -i "s/x/$y/" f', "its script `s/x/$y/` is not plain text"),
    ('sed "$o" f', "cannot tell what `sed` runs: `$o` may be an option"),
    ("sed -nf s.sed f", "`sed -f` runs a script"),
    ("tar -xf t.tar --to-command='rm v'", "`tar --to-command` runs a command"),
    ("tar -I 'rm v' -cf t.tgz f", "`tar -I` runs a command"),
    ("tar -xf t.tar --to-c='rm v'", "`tar --to-c` runs a command"),
    ("tar xIf 'rm v' t.tar", "`tar xIf` runs a command"),
    ("echo x | sed --expr='1e rm v'", "`sed`'s `e` command"),
    ("git rebase --exe='rm v' HEAD~1", "`git rebase --exec` runs a command"),
    ("git push --receive-p='rm v' origin", "`git push --receive-pack` runs a command"),
    ("sort --compress-program=rm big", "`sort --compress-program` runs a command"),
    ("rsync -e 'rm v' a b", "`rsync -e` runs a command"),
    ("sqlite3 x.db '.shell rm v'", "cannot tell what `sqlite3` runs"),
    ("echo '.shell rm v' | sqlite3 x.db", "`sqlite3` without SQL reads commands"),
    ("vim -c '!rm v' f", "`vim` runs a program"),
    ("setpriv --reuid=0 rm v", "`setpriv` runs a program"),
    # a program named by text the checker cannot see
    ("read -r c < n; $c v", "the program `$c` is not plain text"),
    ('mapfile -t c < n; "${c[@]}" v', "`${c[@]}`"),
    ("readarray -t c < n; $c v", "the program `$c` is not plain text"),
    ('printf -v c %s "$(cat n)"; $c v', "the program `$c` is not plain text"),
    ('set -- "$(cat n)" v; "$@"', "the program `$@` is not plain text"),
    ('"${@}" v', "the program `${@}` is not plain text"),
    ("$* v", "the program `$*` is not plain text"),
    ("$1 v", "the program `$1` is not plain text"),
    ('"$0" -c "rm v"', "the program `$0` is not plain text"),
    (": rm; $_ v", "the program `$_` is not plain text"),
    ("for c in $(cat n); do $c v; done", "the program `$c` is not plain text"),
    ("for f in *.py; do $f; done", "the program `$f` is not plain text"),
    ("$(cat n) v", "the program `$(cat n)` is not plain text"),
    ("`cat n` v", "the program ``cat n`` is not plain text"),
    ("x=; ${x:-rm} v", "the program `${x:-rm}` is not plain text"),
    ("x=Xm; ${x/X/r} v", "the program `${x/X/r}` is not plain text"),
    ("IFS=X; x=rmXv; $x", "the program `$x` is not plain text"),
    ("$'\\x72m' v", "is not plain text"),
    ('x=/bin/rm; "${x}" v', "the program `${x}` is not plain text"),
    ('"$HOME"/rm v', "the program `$HOME/rm` is not plain text"),
    ("~/rm v", "the program `~/rm` is not plain text"),
    ('a=(rm v); "${a[@]}"', "cannot parse"),
    # globs and braces as the program: bash expands them before it looks the program up
    ("/bin/r? v", "the program `/bin/r?` is not plain text"),
    ("/bin/r[m] v", "the program `/bin/r[m]` is not plain text"),
    ("/???/rm v", "the program `/???/rm` is not plain text"),
    ("touch rm; [r]m v", "the program `[r]m` is not plain text"),
    ("touch rm; r* v", "the program `r*` is not plain text"),
    ("* v", "the program `*` is not plain text"),
    ("{rm,v}", "the program `{rm,v}` is not plain text"),
    ("r{m,} v", "the program `r{m,}` is not plain text"),
    # wrappers handed a program the checker cannot see
    ('exec "$(cat n)" v', "cannot tell what `exec` runs"),
    ('command "$x" v', "cannot tell what `command` runs"),
    ('command -p "$x" v', "cannot tell what `command` runs"),
    ('builtin "$x" v', "cannot tell what `builtin` runs"),
    ('sudo "$x" v', "cannot tell what `sudo` runs"),
    ('env "$x" v', "cannot tell what `env` runs"),
    ('nohup "$x" v', "cannot tell what `nohup` runs"),
    ('timeout 5 "$x" v', "the program `$x` is not plain text"),
    ('nice -n 5 "$x" v', "cannot tell what `nice` runs"),
    ('xargs "$x" < p', "cannot tell what `xargs` runs"),
    ('find . -exec "$x" {} +', "cannot tell what `find` runs"),
    # variables that pick what runs, however they are set
    ("for PATH in /tmp/evil; do ls; done", "`PATH=` changes which programs run"),
    ("unset PATH; : ${PATH:=.}; ls", "`PATH=` changes which programs run"),
    ("unset PATH; ls", "`PATH=` changes which programs run"),
    ("f() { local PATH; ls; }; f", "`PATH=` changes which programs run"),
    (': "${LD_PRELOAD=./e.so}"', "`LD_PRELOAD=` changes which programs run"),
    (": {PATH}>/dev/null; ls", "`PATH=` changes which programs run"),
    ("read PATH < p; ls", "`PATH=` changes which programs run"),
    ("getopts a PATH", "`PATH=` changes which programs run"),
    ("printf -v PATH %s /tmp/evil; ls", "`PATH=` changes which programs run"),
    ("PROMPT_COMMAND='rm v' bash -i", "`PROMPT_COMMAND=` changes which programs run"),
    ("BASH_ENV=./e bash -c :", "`BASH_ENV=` changes which programs run"),
    ("declare BASH_CMDS[ls]=/bin/rm; ls v", "`declare` evaluates the subscript"),
    ("BASH_CMDS[ls]=/bin/rm; ls v", "the program `BASH_CMDS[ls]=/bin/rm` is not plain text"),
    ("export BASH_ALIASES=x", "`BASH_ALIASES=` changes which programs run"),
    ("cat <<EOF\n${PATH:=/tmp/evil}\nEOF\nls", "`PATH=` changes which programs run"),
    # lines that read data the checker cannot see, even with nothing visibly using it
    ('while read -r f; do wc -l "$f"; done < list', "`read` puts text the checker cannot see"),
    ('git ls-files | while IFS= read -r f; do cat "$f"; done', "`read` puts text the checker cannot see"),
    ("mapfile -t lines < list", "`mapfile` puts text the checker cannot see"),
    ("printf -v x %s 1", "`printf -v` puts text into a variable by name"),
]


@pytest.mark.parametrize(("command", "named"), INDIRECTIONS)
def test_an_indirection_is_denied_naming_it_when_a_bash_deny_rule_exists(command: str, named: str) -> None:
    decision = decide(Permissions("bypassPermissions", deny=RM), command)
    assert decision.verdict is Verdict.DENY
    assert named in decision.reason
    assert decision.reason.startswith("cannot tell what this command runs (")
    assert decision.reason.endswith(', so rule "Bash(rm:*)" may forbid it; write the command out plainly')


@pytest.mark.parametrize(("command", "named"), INDIRECTIONS)
def test_an_indirection_is_never_allowed_by_allow_rules(command: str, named: str) -> None:
    """Even with an allow rule for every program the line shows, it is asked about (denied in dontAsk)."""
    rules = [f"Bash({found.program}:*)" for found in read(command).commands] or ["Bash(ls:*)"]
    assert decide(Permissions("default", allow=rules), command).verdict is Verdict.ASK
    assert decide(Permissions("dontAsk", allow=rules), command).verdict is Verdict.DENY


def test_an_ask_rule_asks_about_an_indirection() -> None:
    decision = decide(Permissions("bypassPermissions", ask=["Bash(git push:*)"]), INDIRECTIONS[0][0])
    assert decision == Decision(
        Verdict.ASK,
        f'cannot tell what this command runs ({NAMEREF}), so rule "Bash(git push:*)" may apply',
    )


@pytest.mark.parametrize("rule", ["Bash(curl:*)", "Bash(git push:*)", "Bash(npm publish)", "Bash(docker:*)"])
def test_any_bash_deny_rule_makes_an_indirection_fail_closed(rule: str) -> None:
    decision = decide(Permissions("bypassPermissions", deny=[rule]), INDIRECTIONS[0][0])
    assert decision == Decision(
        Verdict.DENY,
        f'cannot tell what this command runs ({NAMEREF}), so rule "{rule}" may forbid it;'
        " write the command out plainly",
    )


@pytest.mark.parametrize(
    "command",
    [
        "ls() { rm -f v; }; ls",
        'command() { rm "$@"; }; command v',
        'cat <<< "$(rm v)"',
        "cat <(rm v)",
        "diff <(ls) >(rm v)",
        "x=$(rm v)",
        "command -p rm v",
        "builtin exec rm v",
        "exec rm v",
        "nohup nice -n 1 timeout 5 rm v",
        "PATH=/bin rm v",
    ],
)
def test_rm_written_anywhere_is_denied_by_the_rule(command: str) -> None:
    """A function that shadows a name, a here-string, a process substitution: their commands are read."""
    assert decide(Permissions("bypassPermissions", deny=RM), command).verdict is Verdict.DENY


@pytest.mark.parametrize(
    "command", ['read -r x < p; declare -n r="$x"; : "$r"', "x=rm; $x v", "/bin/r? v", "read -r f < list"]
)
def test_without_a_bash_deny_rule_an_indirection_is_left_to_the_mode(command: str) -> None:
    assert decide(Permissions("bypassPermissions"), command).verdict is Verdict.ALLOW
    assert decide(Permissions("bypassPermissions", deny=["Read(.env)"]), command).verdict is Verdict.ALLOW
    assert decide(Permissions("default"), command).verdict is Verdict.ASK


@pytest.mark.parametrize(
    ("script", "runs"),
    [
        ("1e rm v", True),
        ("$!e rm v", True),
        ("/x/ e", True),
        ("s|a|b|ge", True),
        ("s/a/b/;e", True),
        ("1{e rm v\n}", True),
        ("a hello\ne rm v", True),
        ("s/x/y/w out\ne rm v", True),
        ("\\%s%e rm v #%%", True),
        ("y/abc/efg/;e rm v", True),
        ("1,3 ! e", True),
        ("k", True),
        ("s/a/b", True),
        ("s/hello/world/g", False),
        ("s/a\\/e/b/", False),
        ("s/x/y/w /dev/stderr", False),
        ("/^e/d", False),
        ("1!G;h;$!d", False),
        (":a;N;$!ba;s/\\n/ /g", False),
        ("a hello; e rm v", False),
        ("$a\\\ntext e", False),
        ("0,/x/d", False),
        ("/x/I,+3d", False),
        ("y/abc/efg/", False),
    ],
)
def test_a_sed_script_runs_text_only_with_e(script: str, runs: bool) -> None:
    """GNU sed's ``e`` command and ``s///e`` flag run text; the script is read as sed reads it, so text
    after ``a`` or inside a regex is not a command, and what does not read cleanly counts as running."""
    reason = read(shlex.join(["sed", script, "f"])).opaque
    assert (reason is not None) is runs, reason


# --- what a rule checks: the program, and for a longer rule the words it names ------------------------

PUSH = ("Bash(git push:*)",)


@pytest.mark.parametrize(
    "command",
    [
        "git $sub",
        'x=push; git "$x" origin',
        'set -- push; git "$1"',
        "git ${x:-push}",
        'git "${@}"',
        "git pu?h",
        "git p[u]sh",
        "git {push,}",
        'git "$(echo push)"',
        "git `echo push`",
        "git -C . $sub",
        "for s in push; do git $s; done",
        'read -r s < p; git "$s"',
    ],
)
def test_an_argument_a_deny_rule_checks_may_not_come_from_a_variable(command: str) -> None:
    assert decide(Permissions("bypassPermissions", deny=PUSH), command).verdict is Verdict.DENY


@pytest.mark.parametrize(
    "command", ['git status "$x"', 'git log -n "$n" --oneline', "git add *.py", 'git commit -m "$msg"']
)
def test_an_argument_no_deny_rule_checks_may_come_from_a_variable(command: str) -> None:
    assert decide(Permissions("bypassPermissions", deny=PUSH), command).verdict is Verdict.ALLOW


# --- plain commands are untouched --------------------------------------------------------------------

PLAIN = [
    "ls -la",
    "git status",
    "git status --short && git diff --stat",
    'x=1; echo "$x"',
    'x=$(git rev-parse HEAD); echo "$x"',
    "python -m pytest -q",
    "python3 -m pytest -q tests/test_x.py 2>&1 | tail -5",
    "ls | wc -l",
    'for f in *.py; do wc -l "$f"; done',
    "for i in 1 2 3; do echo $i; done",
    'if [ -n "$x" ]; then echo yes; fi',
    "test -f setup.py && cat setup.py",
    "[ -d build ] || mkdir build",
    "cd src && make",
    "grep -rn TODO . | head",
    "find . -name '*.py' -exec wc -l {} +",
    'echo "${x:-default}" ${#x} $HOME ~',
    'export A=1 B="$C"',
    "declare -a list",
    "export -n A",
    '[ -f "$f" ] && [ -n "$x" ] && [ "$a" = "$b" ] && [ "$n" -gt 0 ]',
    'test -f "$f" -a -r "$f"',
    '[ "$x" ]',
    'printf "Value: $x\\n"',
    "printf '%s\\n' \"$x\"",
    "printf '%s\\n' a b",
    "cat <<'EOF'\n$(not run) ${a[$i]}\nEOF",
    "cat <<EOF\n$HOME ${USER:-me}\nEOF",
    "echo {a,b}.txt",
    "cat {fd}>log",
    "sed -n '1,20p' f && sed -i.bak 's/foo/bar/g' src/a.py && sed -E '/^e/d' f",
    "sed 's/a/b/' -- \"$f\"",
    "tar -xzf x.tgz -C out && tar xzf x.tgz && tar -czf out.tgz src",
    "git push --tags origin && git rebase -i main",
    "sort -k 2 f | uniq -c",
    "sqlite3 x.db 'select count(*) from t'",
]


@pytest.mark.parametrize("command", PLAIN)
def test_a_plain_command_is_not_denied_by_a_rule_it_does_not_match(command: str) -> None:
    assert decide(Permissions("bypassPermissions", deny=RM), command) == Decision(
        Verdict.ALLOW, "Bash is allowed in bypassPermissions mode"
    )
    assert read(command).hidden is None


def test_reading_data_is_indirect_not_opaque() -> None:
    """``read`` runs nothing unseen (``opaque`` is None) but puts unseen text into a variable."""
    reading = read("read -r line < list")
    assert reading.opaque is None
    assert reading.indirect == reading.hidden
    assert (
        reading.hidden
        == "`read` puts text the checker cannot see into variables, which may later name a program"
    )
    assert read("declare -n r=x; read -r r").hidden == NAMEREF, "what can run code is named first"


# --- end to end: the issue's escape, and the family, through real bash in the sandbox ---------------

ESCAPE = 'read -r x < p; declare -n r="$x"; : "$r"'


def plant_escape(scene: Scene) -> Path:
    victim = scene.project / "victim.txt"
    victim.write_text("keep me\n")
    (scene.project / "p").write_text("a[$(rm victim.txt)]\n")
    return victim


def test_the_issues_nameref_escape_is_refused_and_the_file_kept(scene: Scene) -> None:
    victim = plant_escape(scene)
    said, after = scene.attack(bash(ESCAPE), bash("cat victim.txt"), deny=RM)
    assert said == Said(
        f'{DENIED}cannot tell what this command runs ({NAMEREF}), so rule "Bash(rm:*)" may forbid it;'
        " write the command out plainly",
        True,
    )
    assert after == Said("keep me\n", False)
    assert victim.read_text() == "keep me\n"
    scene.untouched()


@needs_bwrap
def test_the_issues_nameref_escape_removes_the_file_without_the_rule(scene: Scene) -> None:
    """The attack is real: bash in the sandbox runs the subscript's ``rm``."""
    victim = plant_escape(scene)
    (said,) = scene.attack(bash(ESCAPE))
    assert not said.is_error, said
    assert not victim.exists()
    scene.untouched()


SPELLINGS = [
    'read -r x < P; declare -n r="$x"; : "$r"',
    'x=$(cat P); declare -n r="$x"; : "$r"',
    'typeset -n r="$(cat P)"; : "$r"',
    'f() { local -n r="$1"; : "$r"; }; f "$(cat P)"',
    'x=$(cat P); : "${!x}"',
    "x=$(cat P); : $((x))",
    "x=$(cat P); a[x]=1",
    'x=$(cat P); : "${a[x]}"',
    'x=$(cat P); test -v "$x"',
    'x=$(cat P); printf -v "$x" 1',
    "x=$(cat P); declare -i n; n=x",
    "x=$(cat P); let x",
    "x=$(cat P); : {a[x]}>/dev/null",
    'x=$(cat P); o=-v; [ "$o" "$x" ]',
    "IFS=,; y=-v,$(cat P); [ $y ]",
    'x=-v$(cat P); printf "$x" 1',
    'x=$(cat P); printf -v"$x" 1',
    'set -- -v "$(cat P)"; [ "$@" ]',
    'compgen -W "$(cat Q)" x',
    "read -r c < N; $c V",
    'mapfile -t c < N; "${c[@]}" V',
    'printf -v c %s "$(cat N)"; $c V',
    'set -- "$(cat N)" V; "$@"',
    "for c in $(cat N); do $c V; done",
    "$(cat N) V",
    'exec "$(cat N)" V',
    'command "$(cat N)" V',
    "x=; ${x:-rm} V",
    "x=Xm; ${x/X/r} V",
    "IFS=X; x=rmXV; $x",
    "$'\\x72m' V",
    '"$0" -c "rm V"',
    ": rm; $_ V",
    "/bin/r? V",
    "/bin/r[m] V",
    "/???/rm V",
    "touch rm; [r]m V",
    "touch rm; r* V",
    "{rm,V}",
    "hash -p /bin/rm ls; ls V",
    "BASH_CMDS[ls]=/bin/rm; ls V",
    'history -s "rm V"; fc -s',
    'shopt -s expand_aliases; alias x="rm V"\nx',
    'trap "rm V" EXIT',
    'echo x | sed -n "1e rm V"',
    'echo "rm V" | sed "s/.*/&/e"',
    'tar -cf t.tar README.md && tar -xf t.tar --to-command="rm V"',
    'tar -cf t.tar README.md && tar -xf t.tar --to-c="rm V"',
    'echo x | sed --expr="1e rm V"',
]
"""Each removes the file ``V`` as bash runs it: ``P`` holds ``a[$(rm V)]``, ``Q`` ``$(rm V)``, N ``rm``."""


def plant_spellings(scene: Scene) -> tuple[list[Call], list[Path]]:
    """One victim and its payload files per spelling; the calls that attack them."""
    (scene.project / "N").write_text("rm\n")
    calls, victims = [], []
    for i, spelling in enumerate(SPELLINGS):
        victim, payload, quoted = f"v{i}.txt", f"p{i}", f"q{i}"
        (scene.project / victim).write_text("keep me\n")
        (scene.project / payload).write_text(f"a[$(rm {victim})]\n")
        (scene.project / quoted).write_text(f"$(rm {victim})\n")
        command = spelling.replace("P", payload).replace("Q", quoted).replace("V", victim)
        calls.append(bash(command))
        victims.append(scene.project / victim)
    return calls, victims


def test_every_spelling_of_the_family_is_refused_and_every_file_kept(scene: Scene) -> None:
    calls, victims = plant_spellings(scene)
    said = scene.attack(*calls, deny=RM)
    for (_, call), result in zip(calls, said, strict=True):
        assert result.is_error and result.content.startswith(DENIED), f"{call['command']!r} ran: {result}"
        assert '"Bash(rm:*)"' in result.content
    kept = [victim.name for victim in victims if victim.exists()]
    assert kept == [victim.name for victim in victims]
    scene.untouched()


@needs_bwrap
def test_every_spelling_of_the_family_removes_its_file_without_the_rule(scene: Scene) -> None:
    """Each spelling is a real way to run ``rm`` in the sandbox's bash, globs and braces included."""
    calls, victims = plant_spellings(scene)
    scene.attack(*calls)
    survivors = [call["command"] for (_, call), victim in zip(calls, victims, strict=True) if victim.exists()]
    assert survivors == []
    scene.untouched()


@needs_bwrap
def test_plain_commands_still_run_under_a_deny_rule(scene: Scene) -> None:
    (scene.project / "src" / "b.py").write_text("a = 1\nb = 2\n")
    said = scene.attack(
        bash('x=1; echo "$x"'),
        bash('for f in src/*.py; do wc -l < "$f"; done'),
        bash("ls src | wc -l"),
        bash("git status --short src"),
        deny=RM,
    )
    assert said == [
        Said("1\n", False),
        Said("1\n2\n", False),
        Said("2\n", False),
        Said("?? src/b.py\n", False),
    ]
