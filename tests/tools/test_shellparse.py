"""Reading bash: the simple commands in a command (shellparse) and the programs it runs (shellprograms)."""

from __future__ import annotations

import pytest

from teamrt.tools.shell.command import MORE, Command
from teamrt.tools.shell.git import GIT
from teamrt.tools.shell.options import Grammar, options
from teamrt.tools.shell.parse import MAX_CHARS, ShellSyntaxError, Simple, Word, parse
from teamrt.tools.shell.programs import read


def words(command: str) -> list[list[str]]:
    """The words of each simple command in ``command``."""
    return [[word.text for word in simple.words] for simple in parse(command).commands]


def runs(command: str) -> list[str]:
    """The text of each program ``command`` runs, `` …`` after one whose arguments go on unseen."""
    return [found.text(path=True) + (" …" if found.open else "") for found in read(command).commands]


def opaque(command: str) -> str:
    reason = read(command).opaque
    assert reason is not None, f"{command!r} reads as plain"
    return reason


# --- words -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm x", ["rm", "x"]),
        ("\\rm x", ["rm", "x"]),
        ("r''m x", ["rm", "x"]),
        ('"r"m x', ["rm", "x"]),
        ("r\\\nm x", ["rm", "x"]),
        ("  rm\t 'a b'  ", ["rm", "a b"]),
        ("echo a\\;rm x", ["echo", "a;rm", "x"]),
        ("echo 'a; b | c'", ["echo", "a; b | c"]),
        ("echo x # rm y", ["echo", "x"]),
    ],
)
def test_quotes_and_backslashes_are_removed(command: str, expected: list[str]) -> None:
    assert words(command) == [expected]


@pytest.mark.parametrize(
    ("word", "literal"),
    [
        ("plain", True),
        ("'a b'", True),
        ("'*.py'", True),
        ('"a*"', True),
        ("\\*", True),
        ("'$HOME'", True),
        ("[", True),
        ("'{a,b}'", True),
        ("$HOME", False),
        ('"$HOME"', False),
        ("a$(date)", False),
        ("`date`", False),
        ("*.py", False),
        ("a?", False),
        ("[ab]", False),
        ("{a,b}", False),
        ("x{1..3}", False),
        ("~/bin", False),
        ("$'\\x72m'", False),
    ],
)
def test_a_word_is_literal_when_bash_passes_it_on_unchanged(word: str, literal: bool) -> None:
    assert parse(f"echo {word}").commands[-1].words[1].literal is literal


def test_assignments_and_redirections_are_not_words() -> None:
    (simple,) = parse("A=1 B='two' npm test 2>&1 > out.txt < in").commands
    assert simple == Simple(
        (Word("npm", True), Word("test", True)),
        (Word("A=1", True), Word("B=two", True)),
        "A=1 B='two' npm test 2>&1 > out.txt < in",
    )
    assert parse("X=1").commands[0].words == ()


# --- compound commands -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("a && b || c; d & e\nf", ["a", "b", "c", "d", "e", "f"]),
        ("a | b |& c", ["a", "b", "c"]),
        ("{ a; b; } > out", ["a", "b"]),
        ("(a; (b))", ["a", "b"]),
        ("if a; then b; elif c; then d; else e; fi", ["a", "b", "c", "d", "e"]),
        ("while a; do b; done; until c; do d; done", ["a", "b", "c", "d"]),
        ("for x in $(a); do b; done", ["a", "b"]),
        ("f() { a; }; function g { b; }", ["a", "b"]),
        ("! a", ["a"]),
        ("echo $(a) `b` <(c) >(d)", ["a", "b", "c", "d", "echo"]),
        ('echo "x $(a "$(b)")"', ["b", "a", "echo"]),
        ("x=$(a) y=`b`", ["a", "b"]),
        ("ls > $(a) 2> >(b)", ["a", "b", "ls"]),
        ("cat <<EOF\nhello\nEOF\nb", ["cat", "b"]),
    ],
)
def test_every_simple_command_is_found(command: str, expected: list[str]) -> None:
    assert sorted(w[0] for w in words(command) if w) == sorted(expected)


def test_functions_and_substitutions_are_noted() -> None:
    script = parse("f() { a; }; function g { b; }; echo $(c)")
    assert script.functions == {"f", "g"}
    assert script.substitution
    assert not parse("echo '$(c)' \"\\$(d)\"").substitution


@pytest.mark.parametrize(
    "command",
    [
        "cat <<'EOF'\n$(rm x) `rm y` ${a[$(rm z)]}\nEOF",
        'cat <<"EOF"\n$(rm x)\nEOF',
        "cat <<\\EOF\n$(rm x)\nEOF",
        "cat <<-'EOF'\n\t$(rm x)\n\tEOF",
        "git commit -F - <<'EOF'\nfix: $(this) is text\nEOF",
        "cat <<EOF\nplain $HOME ${USER} ${x:-default}\nEOF",
        "echo \"<<'EOF'\"",
        "cat <<< $'a\\tb'",
    ],
)
def test_a_quoted_or_plain_here_document_is_text(command: str) -> None:
    assert parse(command).opaque is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("cat <<EOF\n$(rm x)\nEOF", "here-document expands a substitution"),
        ("cat <<EOF\n`rm x`\nEOF", "here-document"),
        ("cat <<EOF\n${a[$i]}\nEOF", "here-document"),
        ("cat <<'A' <<B\n$(x)\nA\n$(rm y)\nB", "here-document"),
        ("(( x ))", "`((...))` evaluates arithmetic"),
        ("echo ${a[1]}", "`${a[1]}`"),
        ("echo ${!ref}", "`${!ref}`"),
        ("echo ${x:1:2}", "`${x:1:2}`"),
        ("echo ${x@P}", "`${x@P}`"),
        ("echo ${x:-$(rm y)}", "`${x:-$(rm y)}`"),
    ],
)
@pytest.mark.hostile
def test_what_the_reader_cannot_follow_makes_the_script_opaque(command: str, why: str) -> None:
    assert why in (parse(command).opaque or "")


@pytest.mark.parametrize(
    "command",
    [
        "echo 'unterminated",
        'echo "unterminated',
        "ls &&",
        "time ls",
        "case x in x) ls;; esac",
        "[[ -f x ]]",
        "a=(1 2)",
        "echo $((1 + 2))",
        "cat <<EOF",
        "echo " + "$(" * 400 + "x" + ")" * 400,
    ],
)
@pytest.mark.hostile
def test_text_bashlex_cannot_read_raises(command: str) -> None:
    with pytest.raises(ShellSyntaxError) as caught:
        parse(command)
    assert caught.value.reason.startswith("bash the checker cannot parse (")


@pytest.mark.hostile
def test_a_command_too_long_to_read_quickly_raises() -> None:
    with pytest.raises(ShellSyntaxError) as caught:
        parse("x" * (MAX_CHARS + 1))
    assert caught.value.reason == f"longer than the checker reads ({MAX_CHARS} characters)"


# --- programs --------------------------------------------------------------------------------------


def test_a_command_is_its_program_and_literal_arguments() -> None:
    (found,) = read("A=1 /bin/rm -f 'a b' $X c").commands
    assert found == Command("/bin/rm", found.words, "A=1 /bin/rm -f 'a b' $X c")
    assert (found.program, found.args, found.open) == ("rm", ("-f", "a b"), True)
    assert found.text() == "rm -f a b"
    assert found.text(path=True) == "/bin/rm -f a b"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("command rm x", ["command rm x", "rm x"]),
        ("command -v rm", ["command -v rm"]),
        ("builtin cd x", ["builtin cd x", "cd x"]),
        ("exec -a name rm x", ["exec -a name rm x", "rm x"]),
        ("\\time -f %e rm x", ["time -f %e rm x", "rm x"]),
        ("nohup rm x", ["nohup rm x", "rm x"]),
        ("env -u HOME A=1 rm x", ["env -u HOME A=1 rm x", "rm x"]),
        ("env - rm x", ["env - rm x", "rm x"]),
        ("env", ["env"]),
        ("nice -n5 rm x", ["nice -n5 rm x", "rm x"]),
        ("timeout --signal=KILL 5s rm x", ["timeout --signal=KILL 5s rm x", "rm x"]),
        ("stdbuf -o L rm x", ["stdbuf -o L rm x", "rm x"]),
        ("sudo -Eu root -- rm x", ["sudo -Eu root -- rm x", "rm x"]),
        ("ionice -c 3 rm x", ["ionice -c 3 rm x", "rm x"]),
        ("chroot --userspec=a /r rm x", ["chroot --userspec=a /r rm x", "rm x"]),
        ("xargs", ["xargs"]),
        ("xargs -n 1 rm -f", ["xargs -n 1 rm -f", "rm -f …"]),
        ("xargs -I {} cp {} dst", ["xargs -I {} cp {} dst", "cp …"]),
        (
            "find . -exec rm -f {} \\; -ok mv {} d +",
            ["find . -exec rm -f {} ; -ok mv {} d +", "rm -f …", "mv …"],
        ),
        ("git -C sub push -f", ["git -C sub push -f", "git push -f"]),
        ("git status", ["git status"]),
        ("git bisect run make test", ["git bisect run make test", "make test"]),
        ("sudo nice rm x", ["sudo nice rm x", "nice rm x", "rm x"]),
    ],
)
def test_wrappers_are_looked_through(command: str, expected: list[str]) -> None:
    assert runs(command) == expected
    assert read(command).opaque is None


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("eval ls", "`eval` runs its arguments as a command"),
        ("builtin eval ls", "`eval`"),
        ("sudo bash", "`bash` runs a script or command text"),
        ("/bin/sh -c ls", "`sh` runs a script"),
        ("zsh script.zsh", "`zsh`"),
        ("python3 -c pass", "`python3 -c` runs code given inline"),
        ("python3 -Ic pass", "`python3 -c`"),
        ("python3", "`python3` without a script runs code from standard input"),
        ("python3 - < x.py", "`python3 -` runs code from standard input"),
        ("node --eval=1", "`node --eval` runs code given inline"),
        ("ruby -e 1", "`ruby -e`"),
        ("php -r 1", "`php -r`"),
        ("awk '{ print | \"sh\" }'", "`awk`"),
        ("$X", "the program `$X` is not plain text"),
        ("a[i]=1", "is not plain text"),
        ("f() { :; }; f x", "`f` is a function the command defines"),
        ("exec", "`exec` without a program"),
        ("chroot /r", "`chroot` without a program runs a shell"),
        ("sudo -i", "`sudo -i` runs a shell"),
        ("env -S 'rm x'", "`env -S` splits text into a command"),
        ("env PATH=. ls", "`PATH=` changes which programs run"),
        ("GIT_SSH_COMMAND='rm x' git fetch", "`GIT_SSH_COMMAND=`"),
        ("GIT_CONFIG_COUNT=1 git x", "`GIT_CONFIG_COUNT=`"),
        ("declare -x LD_PRELOAD=x.so", "`LD_PRELOAD=`"),
        ("hash -p /bin/rm ls", "`hash -p`"),
        ("mapfile -C 'rm x' a", "`mapfile -C`"),
        ("compgen -C 'rm x' a", "`compgen -C`/`-F`"),
        ("jobs -x rm x", "`jobs -x`"),
        ("let x=1", "`let`"),
        ("printf -v 'a[$(rm x)]' y", "evaluates the subscript"),
        ("test -v 'a[$(rm x)]'", "evaluates the subscript"),
        ("unset $name", "evaluates the subscript in `$name`"),
        ("git -c core.pager=rm log", "`git -c`"),
        ("git --exec-path=/tmp x", "`git --exec-path=`"),
        ("git $SUB", "cannot tell what `git` runs: `$SUB` is not plain text"),
        ("git --frob status", "`--frob` is an option the checker does not know"),
        ("git clone -u 'rm x' url", "`git clone -u` runs a command"),
        ("git push --receive-pack=x", "`git push --receive-pack`"),
        ("git grep -O x", "`git grep -O`"),
        ("git difftool --extcmd=x", "`git difftool --extcmd`"),
        ("git rebase $OPTS", "cannot tell what `git rebase` runs"),
        ("git filter-branch --tree-filter x", "`git filter-branch` runs shell text"),
        ("git config --global core.editor x", "`git config` can make later git commands run any program"),
        ("find $DIR -name x", "cannot tell what `find` runs"),
        ("find . -exec {} \\;", "the program `...` is not plain text"),
        ("xargs $CMD", "cannot tell what `xargs` runs"),
        ("xargs --frob rm", "`--frob` is an option the checker does not know"),
        ("nice -n", "`-n` needs a value"),
        ("timeout 5 $CMD", "the program `$CMD` is not plain text"),
        ("strace -f rm x", "`strace` runs a program the checker cannot find"),
        ("nice " * 20 + "ls", "wrappers nested too deeply"),
        ("time ls", "cannot parse"),
    ],
)
@pytest.mark.hostile
def test_what_may_run_unseen_makes_the_reading_opaque(command: str, why: str) -> None:
    assert why in opaque(command)


@pytest.mark.parametrize(
    "command",
    [
        "python3 script.py -c x",
        "python3 -m pytest -c pytest.ini",
        "python3 --version",
        "perl script.pl",
        "awk -F: '{print $1}' /etc/passwd",
        "git config user.name",
        "git config --get core.editor",
        "git rebase -i main",
        "git cherry-pick -x abc",
        "git clone --depth 1 url",
        "printf '[%s]\\n' x",
        "test -f '[x]'",
        "read -r line",
        "export A=1 B=$C",
        "declare -a list",
        "hash",
        "command -V rm",
        "GIT_AUTHOR_NAME=x git commit -m y",
    ],
)
def test_ordinary_commands_read_plainly(command: str) -> None:
    assert read(command).opaque is None


# --- options ---------------------------------------------------------------------------------------

W = Grammar(
    flags="ab", values="nC", attached="i", long_flags=frozenset({"--all"}), long_values=frozenset({"--dir"})
)


def lit(*texts: str) -> tuple[Word, ...]:
    return tuple(Word(text, True) for text in texts)


@pytest.mark.parametrize(
    ("args", "seen", "end"),
    [
        (("-ab", "x"), [("-a", None), ("-b", None)], 1),
        (("-an5", "x"), [("-a", None), ("-n", "5")], 1),
        (("-n", "5", "x"), [("-n", "5")], 2),
        (("-i", "-i{}", "x"), [("-i", None), ("-i", "{}")], 2),
        (("--all", "--dir=d", "--dir", "e", "x"), [("--all", None), ("--dir", "d"), ("--dir", "e")], 4),
        (("-a", "--", "-b"), [("-a", None)], 2),
        (("-", "x"), [], 0),
        ((), [], 0),
    ],
)
def test_options_read_clusters_values_and_the_end(
    args: tuple[str, ...], seen: list[tuple[str, str | None]], end: int
) -> None:
    parsed = options(lit(*args), W)
    assert [(name, value.text if value else None) for name, value in parsed.seen] == seen
    assert parsed.end == end
    assert parsed.problem is None


def test_options_stop_at_what_they_cannot_read() -> None:
    assert options(lit("-az"), W).problem == "`-z` is an option the checker does not know"
    assert options(lit("--nope"), W).problem == "`--nope` is an option the checker does not know"
    assert options(lit("-n"), W).problem == "`-n` needs a value"
    unread = options((Word("-C", True), Word("$D", False), Word("x", True)), W)
    assert unread.problem == "`$D` is not plain text"
    assert unread.seen == (("-C", Word("$D", False)),)


def test_gits_global_options_end_at_the_subcommand() -> None:
    parsed = options(lit("-C", "sub", "--git-dir=.git", "--no-pager", "log", "-C"), GIT)
    assert [name for name, _ in parsed.seen] == ["-C", "--git-dir", "--no-pager"]
    assert parsed.end == 4
    assert MORE.literal is False
