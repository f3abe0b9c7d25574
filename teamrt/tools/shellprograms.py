"""What a bash command runs: every program in it, wrappers looked through, or why that cannot be told.

``read`` turns a command into ``Command`` s: one for each simple command
(assignments before it dropped), and one more for each program a command runs
by name: ``command``, ``builtin``, ``exec``, ``time``, ``nohup``, ``env``,
``nice``, ``timeout``, ``stdbuf``, ``sudo``, ``doas``, ``setsid``, ``chroot``,
``ionice``, ``busybox`` and ``xargs`` run the program that follows their
options; ``find -exec`` (``-execdir``, ``-ok``, ``-okdir``) and ``git bisect
run`` run the words that follow; ``git`` with global options is also read
without them (``git -C sub push`` runs ``git push``; ``teamrt.tools.shellgit``).

The reading is *opaque*, with a reason, when the command may run something it
does not show: text run as code (``eval``, ``source``, ``trap``, any shell,
``python -c`` and other interpreters given code inline or on standard input,
``awk`` calling ``system``), a program name that is not plain text (``$X``,
a glob), a function the command defines and calls, ``alias``, ``exec``
without a program, ``git -c`` (an alias or a pager can be any program) and
git options that name a command, variables that pick what runs (``PATH=``,
``LD_PRELOAD=``, ``GIT_SSH_COMMAND=``, ...), array subscripts and arithmetic
(bash evaluates ``a[$(...)]``), and wrappers with options it does not know.

This reads a command line, not the programs it names: a script file, a
Makefile or ``npm test`` runs whatever it contains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .shellgit import git_runs
from .shelloptions import Grammar, grammar, options
from .shellparse import Script, ShellSyntaxError, Word, parse


@dataclass(frozen=True)
class Command:
    """A program the command line runs, with its arguments."""

    path: str
    """The program as written (``rm``, ``/bin/rm``)."""
    words: tuple[Word, ...]
    """Its arguments."""
    source: str
    """The text of the simple command it comes from."""

    @property
    def program(self) -> str:
        """The program's name without its directory."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def args(self) -> tuple[str, ...]:
        """The arguments up to the first that is not plain text."""
        literal = [word.literal for word in self.words]
        end = literal.index(False) if False in literal else len(literal)
        return tuple(word.text for word in self.words[:end])

    @property
    def open(self) -> bool:
        """Whether arguments the text cannot tell follow ``args``."""
        return len(self.args) < len(self.words)

    def text(self, *, path: bool = False) -> str:
        """The program (its name, or as written) and ``args``, joined by single spaces."""
        return " ".join((self.path if path else self.program, *self.args))


@dataclass(frozen=True)
class Reading:
    commands: tuple[Command, ...]
    opaque: str | None
    """Why the command may run programs that ``commands`` does not show, or None."""
    substitution: bool
    """Whether some word's value comes from a command or process substitution."""


@lru_cache(maxsize=256)
def read(command: str) -> Reading:
    """Every program ``command`` runs, as far as its text tells."""
    try:
        script = parse(command)
    except ShellSyntaxError as e:
        return Reading((), e.reason, False)
    return runs(script)


def runs(script: Script) -> Reading:
    """Every program the parsed ``script`` runs, as far as its text tells."""
    found = _Found(script.functions)
    if script.opaque:
        found.reasons.append(script.opaque)
    for simple in script.commands:
        found.add(simple.words, simple.assignments, simple.source)
    return Reading(tuple(found.commands), found.reasons[0] if found.reasons else None, script.substitution)


# --- programs --------------------------------------------------------------------------------------

MORE = Word("...", literal=False)
"""Arguments the command line does not show (what ``xargs`` adds, ``find``'s ``{}``)."""
_MAX_DEPTH = 16

Inner = tuple[Word, ...]
"""The words of a program another one runs."""
Handler = Callable[[Command], tuple[list[Inner], str | None]]
"""What a program runs by name, and why it may run something else."""

_RISKY_VARIABLES = frozenset(
    {
        "PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "EDITOR", "VISUAL",
        "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "BROWSER", "SUDO_ASKPASS", "SSH_ASKPASS",
        "NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "PYTHONSTARTUP", "GIT_SSH", "GIT_SSH_COMMAND",
        "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS",
        "GIT_EXEC_PATH", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR",
    }
)  # fmt: skip
_RISKY_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_")


def risky_assignment(word: Word) -> str | None:
    """Why an assignment (``NAME=value``) changes which program runs or what it runs, or None."""
    name = word.text.partition("=")[0].removesuffix("+")
    if name in _RISKY_VARIABLES or name.startswith(_RISKY_PREFIXES):
        return f"`{name}=` changes which programs run"
    return None


@dataclass
class _Found:
    functions: frozenset[str]
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, words: Sequence[Word], assignments: Sequence[Word], source: str, depth: int = 0) -> None:
        self.reasons.extend(filter(None, map(risky_assignment, assignments)))
        if not words:
            return
        if depth > _MAX_DEPTH:
            self.reasons.append("wrappers nested too deeply")
            return
        head = words[0]
        if not head.literal:
            self.reasons.append(f"the program `{head.text}` is not plain text")
            return
        command = Command(head.text, tuple(words[1:]), source)
        self.commands.append(command)
        if depth == 0 and head.text in self.functions:
            self.reasons.append(f"`{head.text}` is a function the command defines")
        inner, reason = _handler(command.program)(command)
        if reason:
            self.reasons.append(reason)
        for run in inner:
            self.add(run, (), source, depth + 1)


def _handler(program: str) -> Handler:
    if program in _HANDLERS:
        return _HANDLERS[program]
    if program in _SHELLS:
        return _fixed(f"`{program}` runs a script or command text the rules cannot read")
    if program in _RUNNERS:
        return _fixed(f"`{program}` runs a program the checker cannot find in its arguments")
    for names, inline in _INTERPRETERS:
        if names.fullmatch(program):
            return lambda command: ([], _interpreter(command, inline))
    return lambda command: ([], None)


def _fixed(reason: str) -> Handler:
    return lambda command: ([], reason)


def _has_option(command: Command, letter: str) -> bool:
    """Whether a short option cluster among the arguments has ``letter``."""
    return any(
        word.text.startswith("-") and not word.text.startswith("--") and letter in word.text[1:]
        for word in command.words
    )


# wrappers: a program run after the wrapper's own options


@dataclass(frozen=True)
class _Wrapper:
    grammar: Grammar
    operands: int = 0
    """Words between the options and the program (``timeout``'s duration, ``chroot``'s root)."""
    shell_options: frozenset[str] = frozenset()
    """Options that make it run a shell, an editor or text as a command."""
    bare: str | None = None
    """Why it runs something unseen when no program follows, or None."""

    def __call__(self, command: Command) -> tuple[list[Inner], str | None]:
        name = command.program
        parsed = options(command.words, self.grammar)
        if parsed.problem:
            return [], f"cannot tell what `{name}` runs: {parsed.problem}"
        shell = next((option for option, _ in parsed.seen if option in self.shell_options), None)
        if shell:
            return [], f"`{name} {shell}` runs a shell or text as a command"
        start = parsed.end + self.operands
        if start >= len(command.words):
            return [], self.bare
        return [command.words[start:]], None


_SUDO = grammar(
    "AbEHnPSkKlvNsie",
    "ugCDprtUTR",
    long_flags="askpass background preserve-env set-home non-interactive preserve-groups stdin"
    " reset-timestamp remove-timestamp list validate bell no-update shell login edit",
    long_values="user group close-from chdir prompt role type other-user command-timeout chroot",
)
_SUDO_SHELLS = frozenset({"-s", "-i", "-e", "--shell", "--login", "--edit"})


_ENV = grammar(
    "i0v",
    "uCS",
    long_flags="ignore-environment null debug default-signal ignore-signal block-signal list-signal-handling",
    long_values="unset chdir split-string",
)


def _env(command: Command) -> tuple[list[Inner], str | None]:
    """``env [options] [NAME=value]... [program]``: a risky variable is a reason, as before a command."""
    words = [word for word in command.words if word.text != "-"]  # a lone - is -i
    parsed = options(words, _ENV)
    if parsed.problem:
        return [], f"cannot tell what `env` runs: {parsed.problem}"
    if any(option in ("-S", "--split-string") for option, _ in parsed.seen):
        return [], "`env -S` splits text into a command"
    rest = words[parsed.end :]
    while rest and "=" in rest[0].text and not rest[0].text.startswith("="):
        if not rest[0].literal:
            return [], f"cannot tell what `env` runs: `{rest[0].text}` is not plain text"
        reason = risky_assignment(rest[0])
        if reason:
            return [], reason
        rest = rest[1:]
    return ([tuple(rest)] if rest else []), None


def _command(command: Command) -> tuple[list[Inner], str | None]:
    """``command -v``/``-V`` only describe the program; otherwise ``command`` runs it."""
    if _has_option(command, "v") or _has_option(command, "V"):
        return [], None
    return _Wrapper(grammar("pvV"))(command)


_XARGS = grammar(
    "0prtxo",
    "adEILnPs",
    "eil",
    long_flags="null no-run-if-empty verbose interactive exit open-tty show-limits eof replace max-lines",
    long_values="arg-file delimiter max-args max-procs max-chars process-slot-var",
)


def _xargs(command: Command) -> tuple[list[Inner], str | None]:
    """``xargs`` runs its program with arguments read from its input."""
    parsed = options(command.words, _XARGS)
    if parsed.problem:
        return [], f"cannot tell what `xargs` runs: {parsed.problem}"
    rest = command.words[parsed.end :]
    if not rest:
        return [], None
    if any(option in ("-I", "-i", "--replace") for option, _ in parsed.seen):
        return [(rest[0], MORE)], None  # every argument may have the input put in it
    return [(*rest, MORE)], None


def _find(command: Command) -> tuple[list[Inner], str | None]:
    """``find ... -exec program args ;`` (or ``+``; also ``-execdir``, ``-ok``, ``-okdir``)."""
    if not all(word.literal for word in command.words):
        return [], "cannot tell what `find` runs: not every argument is plain text"
    inner: list[Inner] = []
    words = command.words
    for i, word in enumerate(words):
        if word.text in ("-exec", "-execdir", "-ok", "-okdir"):
            end = next((j for j in range(i + 1, len(words)) if words[j].text in (";", "+")), len(words))
            inner.append(tuple(MORE if w.text == "{}" else w for w in words[i + 1 : end]))
    return [run for run in inner if run], None


_INTERPRETERS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"i?python[0-9.]*|pypy[0-9.]*"), ("-c",)),
    (re.compile(r"perl[0-9.]*"), ("-e", "-E")),
    (re.compile(r"j?ruby[0-9.]*"), ("-e",)),
    (re.compile(r"node|nodejs|bun"), ("-e", "-p", "--eval", "--print")),
    (re.compile(r"php[0-9.]*"), ("-r",)),
    (re.compile(r"lua[0-9.]*|luajit|Rscript|julia|osascript"), ("-e", "-E")),
    (re.compile(r"tclsh[0-9.]*|wish[0-9.]*"), ()),
)
_ONLY_DESCRIBE = frozenset({"--version", "--help", "-V", "-h"})


def _interpreter(command: Command, inline: tuple[str, ...]) -> str | None:
    """Why an interpreter runs code that is not in a file: given inline, or read from standard input."""
    name = command.program
    for word in command.words:
        text = word.text
        if not word.literal:
            return f"cannot tell what code `{name}` runs: `{text}` is not plain text"
        if text in _ONLY_DESCRIBE:
            return None
        if not text.startswith("-"):
            return None  # a script or a module: its own arguments follow
        if text == "-":
            return f"`{name} -` runs code from standard input"
        for flag in inline:
            long = flag.startswith("--") and text.partition("=")[0] == flag
            if long or (not flag.startswith("--") and not text.startswith("--") and flag[1] in text[1:]):
                return f"`{name} {flag}` runs code given inline"
    return f"`{name}` without a script runs code from standard input"


def _awk(command: Command) -> tuple[list[Inner], str | None]:
    for word in command.words:
        if not word.literal or "system" in word.text or "|" in word.text:
            return [], "cannot tell what `awk` runs: its program may call `system` or a pipe"
    return [], None


_VARIABLE_BUILTINS = frozenset(
    {"read", "unset", "getopts", "wait", "mapfile", "readarray", "declare", "typeset", "local", "export",
     "readonly", "printf", "test", "["}
)  # fmt: skip
_DECLARES = frozenset({"declare", "typeset", "local", "export", "readonly"})


def _variables(command: Command) -> tuple[list[Inner], str | None]:
    """Builtins that take variable names: bash evaluates a name's subscript (``a[$(...)]``) as arithmetic."""
    name = command.program
    if name in ("printf", "test", "[") and not any(word.text == "-v" for word in command.words):
        return [], None
    if name in _DECLARES and _has_option(command, "i"):
        return [], f"`{name} -i` evaluates arithmetic, which can run commands"
    if name in ("mapfile", "readarray") and _has_option(command, "C"):
        return [], f"`{name} -C` runs text as a command"
    for word in command.words:
        target = word.text.partition("=")[0]
        if "[" in target or (not word.literal and ("$" in target or "`" in target)):
            return [], f"`{name}` evaluates the subscript in `{word.text}`, which can run commands"
        if name in _DECLARES and "=" in word.text:
            reason = risky_assignment(word)
            if reason:
                return [], reason
    return [], None


def _when(letters: str, reason: str) -> Handler:
    """A builtin that runs text as a command when given one of the option ``letters``."""
    return lambda command: ([], reason if any(_has_option(command, c) for c in letters) else None)


_SHELLS = frozenset(
    {"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "pdksh", "oksh", "yash", "fish", "csh",
     "tcsh", "elvish", "nu", "xonsh", "pwsh", "powershell"}
)  # fmt: skip
_RUNNERS = frozenset(
    {"strace", "ltrace", "watch", "flock", "unshare", "nsenter", "firejail", "bwrap", "proxychains",
     "proxychains4", "torsocks", "valgrind", "gdb", "lldb", "script", "su", "runuser", "sudoedit", "ssh",
     "parallel", "systemd-run", "tmux", "screen", "expect", "unbuffer", "faketime", "fakeroot", "chronic",
     "entr", "taskset", "chrt", "numactl", "catchsegv", "dbus-run-session", "run-parts", "xvfb-run", "sg",
     "pkexec", "deno", "perf", "caffeinate"}
)  # fmt: skip
_HANDLERS: dict[str, Handler] = {
    "eval": _fixed("`eval` runs its arguments as a command"),
    "source": _fixed("`source` runs a script"),
    ".": _fixed("`.` runs a script"),
    "trap": _fixed("`trap` runs text as a command"),
    "alias": _fixed("`alias` defines commands"),
    "enable": _fixed("`enable` changes the shell's builtins"),
    "fc": _fixed("`fc` runs commands again"),
    "let": _fixed("`let` evaluates arithmetic, which can run commands"),
    "hash": _when("p", "`hash -p` makes a name run another program"),
    "complete": _when("CF", "`complete -C`/`-F` runs a command"),
    "compgen": _when("CF", "`compgen -C`/`-F` runs a command"),
    "jobs": _when("x", "`jobs -x` runs a command"),
    **dict.fromkeys(_VARIABLE_BUILTINS, _variables),
    "command": _command,
    "builtin": _Wrapper(Grammar()),
    "exec": _Wrapper(grammar("cl", "a"), bare="`exec` without a program changes the shell itself"),
    "nohup": _Wrapper(Grammar()),
    "setsid": _Wrapper(grammar("cfw", long_flags="ctty fork wait")),
    "busybox": _Wrapper(Grammar()),
    "toybox": _Wrapper(Grammar()),
    "time": _Wrapper(
        grammar("pvqa", "fo", long_flags="portability verbose quiet append", long_values="format output")
    ),
    "nice": _Wrapper(grammar("0123456789", "n", long_values="adjustment")),
    "ionice": _Wrapper(
        grammar("t", "cnpPu", long_flags="ignore", long_values="class classdata pid pgid uid")
    ),
    "timeout": _Wrapper(
        grammar("v", "sk", long_flags="preserve-status foreground verbose", long_values="signal kill-after"),
        operands=1,
    ),
    "stdbuf": _Wrapper(grammar("", "ioe", long_values="input output error")),
    "chroot": _Wrapper(
        grammar(long_flags="skip-chdir", long_values="userspec groups"),
        operands=1,
        bare="`chroot` without a program runs a shell",
    ),
    "sudo": _Wrapper(_SUDO, shell_options=_SUDO_SHELLS),
    "doas": _Wrapper(grammar("ns", "u"), shell_options=frozenset({"-s"})),
    "env": _env,
    "xargs": _xargs,
    "find": _find,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "git": lambda command: git_runs(command.path, command.words),
}
