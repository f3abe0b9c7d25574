"""What a bash command runs: every program in it, wrappers looked through, or why that cannot be told.

``read`` turns a command into ``Command`` s: one for each simple command
(assignments before it dropped), and one more for each program a command runs
by name: ``command``, ``builtin``, ``exec``, ``time``, ``nohup``, ``env``,
``nice``, ``timeout``, ``stdbuf``, ``sudo``, ``doas``, ``setsid``, ``chroot``,
``ionice``, ``busybox`` and ``xargs`` run the program that follows their
options; ``find -exec`` (``-execdir``, ``-ok``, ``-okdir``) and ``git bisect
run`` run the words that follow; ``git`` with global options is also read
without them (``git -C sub push`` runs ``git push``; ``teamrt.tools.shell.git``).

The reading is *opaque*, with a reason, when the command may run something it
does not show: text run as code (``eval``, ``source``, ``trap``, any shell,
``python -c`` and other interpreters given code inline or on standard input,
``awk`` calling ``system``, ``sed``'s ``e``, ``sqlite3``'s dot-commands, editors,
options that name a command such as ``tar --to-command`` or ``sort
--compress-program``, abbreviated or not), a program name that is not plain text (``$X``,
a glob), a function the command defines and calls, ``alias``, ``exec``
without a program, ``git -c`` (an alias or a pager can be any program) and
git options that name a command, variables that pick what runs (``PATH=``,
``LD_PRELOAD=``, ``GIT_SSH_COMMAND=``, ...), array subscripts and arithmetic
(bash evaluates ``a[$(...)]``), and wrappers with options it does not know.

The reading is *indirect*, with a reason, when the command puts text the
checker cannot see into a variable by name (``read``, ``mapfile``,
``readarray``, ``printf -v``): nothing it shows runs that text, but the
checker does not follow values from one command to the next, so under a deny
rule such a line fails closed too. What bash turns from a variable's value into
code is opaque wherever it appears: a nameref (``declare -n``, whose target's
subscript bash evaluates on every use), indirection, subscripts, arithmetic,
``compgen -W`` (which expands its word list), a word that may turn out to be
such an option (``printf "$x"``, ``[ "$o" "$x" ]``, an unquoted ``[ $y ]``),
and any way of setting a variable that picks what runs (``read PATH``, ``for
PATH in``, ``${PATH:=...}``, ``unset PATH``).

This reads a command line, not the programs it names: a script file, a
Makefile or ``npm test`` runs whatever it contains.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from teamrt.tools.shell.git import git_runs
from teamrt.tools.shell.options import Grammar, grammar, options
from teamrt.tools.shell.parse import Script, ShellSyntaxError, Word, parse


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
    indirect: str | None = None
    """Why a variable may hold text the checker cannot see (``read``, ``mapfile``, ``printf -v``), or None."""

    @property
    def hidden(self) -> str | None:
        """Why rules cannot judge the command from its text (``opaque``, else ``indirect``), or None."""
        return self.opaque or self.indirect


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
    found.reasons.extend(filter(None, map(risky_name, script.assigned)))
    for simple in script.commands:
        found.add(simple.words, simple.assignments, simple.source)
    return Reading(
        tuple(found.commands),
        found.reasons[0] if found.reasons else None,
        script.substitution,
        found.indirect[0] if found.indirect else None,
    )


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
_RISKY_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_", "BASH_ALIASES", "BASH_CMDS")


def risky_assignment(word: Word) -> str | None:
    """Why an assignment (``NAME=value``) changes which program runs or what it runs, or None."""
    return risky_name(word.text.partition("=")[0].removesuffix("+"))


def risky_name(name: str) -> str | None:
    """Why setting the variable ``name`` (however it is set) changes which programs run, or None."""
    if name in _RISKY_VARIABLES or name.startswith(_RISKY_PREFIXES):
        return f"`{name}=` changes which programs run"
    return None


@dataclass
class _Found:
    functions: frozenset[str]
    commands: list[Command] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    indirect: list[str] = field(default_factory=list)

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
        fills = _fills(command)
        if fills:
            self.indirect.append(fills)
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


def _fills(command: Command) -> str | None:
    """Why the builtin puts text the checker cannot see into a variable by name, or None."""
    name = command.program
    if name in ("read", "mapfile", "readarray"):
        return f"`{name}` puts text the checker cannot see into variables, which may later name a program"
    if name == "printf" and _printf_options(command.words)[0]:
        return "`printf -v` puts text into a variable by name, which may later name a program"
    return None


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


# programs whose own options or scripts run commands


def _sed_executes(script: str) -> bool:
    """Whether a sed script runs text: GNU sed's ``e`` command or ``s///e`` flag. The script is read as sed
    reads it (addresses, then a command and its arguments); what does not read cleanly counts as running."""
    try:
        return _SedReader(script).executes()
    except (IndexError, ValueError):
        return True


@dataclass
class _SedReader:
    text: str
    i: int = 0

    def executes(self) -> bool:
        while self._skip(" \t\n;{}!"):
            self._address()
            if self._skip(","):
                self._address()
            self._skip(" \t!")
            if self.i == len(self.text):
                return False
            command = self._next()
            if command == "e" or (command == "s" and self._substitute()):
                return True
            if command != "s":
                self._arguments(command)
        return False

    def _next(self) -> str:
        char = self.text[self.i]
        self.i += 1
        return char

    def _skip(self, chars: str) -> bool:
        """Skip ``chars``; whether text is left."""
        while self.i < len(self.text) and self.text[self.i] in chars:
            self.i += 1
        return self.i < len(self.text)

    def _address(self) -> None:
        char = self.text[self.i]
        if char.isdigit() or char in "$+~":
            self.i += 1
            while self.i < len(self.text) and (self.text[self.i].isdigit() or self.text[self.i] == "~"):
                self.i += 1
        elif char in "/\\":
            self.i += 1
            self._delimited(self._next() if char == "\\" else "/")
            while self.i < len(self.text) and self.text[self.i] in "IM":
                self.i += 1

    def _delimited(self, delimiter: str) -> None:
        """Move past text ending at an unescaped ``delimiter``."""
        if delimiter in "\\\n":
            raise ValueError("a backslash or a newline as a delimiter")
        while (char := self._next()) != delimiter:
            if char == "\\":
                self.i += 1
            elif char == "\n":
                raise ValueError("an unterminated expression")

    def _substitute(self) -> bool:
        """Read ``s/regex/replacement/flags``; whether a flag is ``e``."""
        delimiter = self._next()
        self._delimited(delimiter)
        self._delimited(delimiter)
        while self.i < len(self.text) and self.text[self.i] in "gpiImMe0123456789":
            if self._next() == "e":
                return True
        if self.i < len(self.text) and self.text[self.i] == "w":
            self._line()
        return False

    def _arguments(self, command: str) -> None:
        if command == "y":
            delimiter = self._next()
            self._delimited(delimiter)
            self._delimited(delimiter)
        elif command in "aicrRwW:#":
            self._line()
        elif command in "btTqQlLv":
            while self.i < len(self.text) and self.text[self.i] not in ";}\n":
                self.i += 1
        elif command not in "=dDgGhHnNpPxzF":
            raise ValueError(f"a command sed may not know ({command})")

    def _line(self) -> None:
        """Move past the rest of the line, backslash-newline continuations included."""
        while self.i < len(self.text) and self.text[self.i] != "\n":
            self.i += 2 if self.text[self.i] == "\\" else 1


def _sed(command: Command) -> tuple[list[Inner], str | None]:
    """``sed``: its script (``-e``, or the first operand) may run commands with ``e``; ``-f`` reads one
    from a file; a word the checker cannot read may be such an option. ``--sandbox`` forbids ``e``."""
    words = command.words
    if any(word.literal and word.text == "--sandbox" for word in words):
        return [], None
    scripts: list[Word] = []
    operands: list[Word] = []
    i, ended = 0, False
    while i < len(words):
        word, text = words[i], words[i].text
        i += 1
        if ended or (word.literal and (text == "-" or not text.startswith("-"))):
            operands.append(word)
        elif not word.literal:
            if text[:1] in _MAY_BE_OPTION:
                return [], f"cannot tell what `sed` runs: `{text}` may be an option"
            operands.append(word)
        elif text == "--":
            ended = True
        elif _long("--file", text):
            return [], "`sed --file` runs a script the checker does not read"
        elif _long("--expression", text) and "=" in text:
            scripts.append(Word(text.partition("=")[2], True))
        elif _long("--expression", text):
            scripts.append(words[i] if i < len(words) else MORE)
            i += 1
        elif not text.startswith("--"):
            letter, rest = _sed_cluster(text)
            if letter == "f":
                return [], "`sed -f` runs a script the checker does not read"
            takes_next = letter in ("e", "l") and not rest
            value = (words[i] if i < len(words) else MORE) if takes_next else Word(rest, True)
            i += 1 if takes_next else 0
            if letter == "e":
                scripts.append(value)
    for script in scripts or operands[:1]:
        if not script.literal:
            return [], f"cannot tell what `sed` runs: its script `{script.text}` is not plain text"
        if _sed_executes(script.text):
            return [], "`sed`'s `e` command (or `s///e`) runs text as a command"
    return [], None


def _long(option: str, word: str) -> bool:
    """Whether ``word`` is the long ``option``, with a value after ``=`` or not, or an abbreviation of it
    (``--expr`` for ``--expression``: getopt and git take any unambiguous start)."""
    name = word.partition("=")[0]
    return name.startswith("--") and len(name) > 2 and option.startswith(name)


def _sed_cluster(text: str) -> tuple[str, str]:
    """The option of a short cluster (``-nE``, ``-ne1p``, ``-i.bak``) that takes a value, and its attached
    value: ``e`` (a script), ``f`` (a script file), ``l`` (a length), ``i`` (a suffix), or ``""``."""
    for j, letter in enumerate(text[1:], start=2):
        if letter in "efli":
            return letter, text[j:]
    return "", ""


@dataclass(frozen=True)
class _CodeOptions:
    """A program some of whose options name a command to run; a word the checker cannot read may be one,
    unless it is the value of an option that takes one."""

    long: tuple[str, ...]
    """Long options (or their starts) that run a command."""
    short: str = ""
    """Short option letters that run a command."""
    values: str = ""
    """Short option letters that take the next word as their value."""
    bare: bool = False
    """Whether the first word may be a cluster of short options without a dash."""

    def __call__(self, command: Command) -> tuple[list[Inner], str | None]:
        name, words = command.program, command.words
        for i, word in enumerate(words):
            text = word.text
            if text == "--" and word.literal:
                return [], None
            if not word.literal:
                before = words[i - 1].text if i else ""
                value = before.startswith("-") and not before.startswith("--") and before[-1:] in self.values
                if text[:1] in _MAY_BE_OPTION and not value:
                    return [], f"cannot tell what `{name}` runs: `{text}` may be an option"
            elif self._runs(text, first=i == 0):
                return [], f"`{name} {text.partition('=')[0]}` runs a command"
        return [], None

    def _runs(self, text: str, *, first: bool) -> bool:
        """Whether the plain word is an option that runs a command (``tar``'s first word may be a cluster
        without its dash, ``tar xIf``)."""
        if any(
            _long(option, text) if option.startswith("--") else text.startswith(option)
            for option in self.long
        ):
            return True
        if text.startswith("-") and not text.startswith("--"):
            cluster = text[1:]
        else:
            cluster = text if first and self.bare else ""
        return bool(set(self.short) & set(cluster))


_CODE_OPTIONS: dict[str, _CodeOptions] = {
    "tar": _CodeOptions(
        ("--to-command", "--checkpoint-action", "--use-compress-program", "--info-script",
         "--new-volume-script", "--rsh-command", "--rmt-command"),
        short="IF",
        values="fCTXbHKNgVL",
        bare=True,
    ),
    "sort": _CodeOptions(("--compress-program",), values="kotTS"),
    "rsync": _CodeOptions(("--rsh", "--rsync-path", "-e"), short="e", values="fBT"),
    "zip": _CodeOptions(("--unzip-command", "-TT"), values="bntx"),
    "scp": _CodeOptions(("-S", "-o"), short="So", values="cFiJlP"),
    "sftp": _CodeOptions(("-S", "-o", "-D"), short="SoD", values="bBcFiJlPR"),
}  # fmt: skip
_SQLITE = _CodeOptions(("-cmd", "-init", "."))


def _sqlite(command: Command) -> tuple[list[Inner], str | None]:
    """``sqlite3 DB SQL``: dot-commands (``.shell``, ``.system``, ``.output |cmd``, ``.load``) run
    programs; without SQL it reads them from standard input."""
    operands = [word for word in command.words if not word.text.startswith("-")]
    if len(operands) < 2:
        return [], "`sqlite3` without SQL reads commands (which can run programs) from standard input"
    for word in operands[1:]:
        if not word.literal or any(line.lstrip().startswith(".") for line in word.text.splitlines()):
            return [], "cannot tell what `sqlite3` runs: its commands may run programs"
    return _SQLITE(command)


_VARIABLE_BUILTINS = frozenset(
    {"read", "unset", "getopts", "wait", "mapfile", "readarray", "declare", "typeset", "local", "export",
     "readonly", "printf", "test", "["}
)  # fmt: skip
_DECLARES = frozenset({"declare", "typeset", "local", "export", "readonly"})
_NAMEREFS = frozenset({"declare", "typeset", "local"})
"""The builtins whose ``-n`` makes a nameref (``export -n`` only unexports)."""
_SETS_NAMED = frozenset({"read", "mapfile", "readarray", "getopts", "wait", "printf", "unset"})
"""Builtins that set (or unset) the variables their arguments name, whatever the value: ``unset PATH``
makes bash look programs up in the current directory."""


def _variables(command: Command) -> tuple[list[Inner], str | None]:
    """Builtins that take variable names: bash evaluates a name's subscript (``a[$(...)]``) as arithmetic,
    and on every use of a nameref the subscript of the name it holds."""
    name = command.program
    if name == "printf":
        return _printf(command)
    if name in ("test", "["):
        return _test(command)
    if name in _DECLARES and _has_option(command, "i"):
        return [], f"`{name} -i` evaluates arithmetic, which can run commands"
    if name in _NAMEREFS and _has_option(command, "n"):
        return [], (
            f"`{name} -n` makes a name refer to another variable, and bash evaluates that variable's"
            " subscript, which can run commands"
        )
    if name in ("mapfile", "readarray") and _has_option(command, "C"):
        return [], f"`{name} -C` runs text as a command"
    return [], _names(name, command.words, _set_names(command))


def _names(name: str, names: Sequence[Word], sets: Sequence[Word]) -> str | None:
    """Why the builtin ``name`` given the variable ``names`` (setting ``sets``) may run a command, or None."""
    for word in names:
        target = word.text.partition("=")[0]
        if "[" in target or (not word.literal and ("$" in target or "`" in target)):
            return f"`{name}` evaluates the subscript in `{word.text}`, which can run commands"
    return next(filter(None, map(risky_assignment, sets)), None)


def _set_names(command: Command) -> list[Word]:
    """The words naming variables the builtin sets (``NAME=value`` for ``export`` and ``readonly``; any
    name for ``declare``, ``typeset`` and ``local``, which in a function make it local and empty)."""
    name, words = command.program, command.words
    if name in _NAMEREFS:
        return [word for word in words if word.literal or "=" in word.text]
    if name in _DECLARES:
        return [word for word in words if "=" in word.text]
    return [word for word in words if word.literal] if name in _SETS_NAMED else []


def _printf_options(words: Sequence[Word]) -> tuple[list[Word], Word | None]:
    """The variables ``printf -v NAME`` (or ``-vNAME``) sets, and the first word after its options."""
    targets: list[Word] = []
    i = 0
    while i < len(words) and words[i].literal and words[i].text.startswith("-v"):
        rest = words[i].text[2:]
        targets.append(Word(rest, True) if rest else words[i + 1] if i + 1 < len(words) else Word("", True))
        i += 1 if rest else 2
    return targets, words[i] if i < len(words) else None


def _printf(command: Command) -> tuple[list[Inner], str | None]:
    """``printf -v NAME``: a subscript in ``NAME`` is evaluated; a first word the checker cannot read may be
    such an option (``printf "$x"`` with ``x='-va[$(...)]'``)."""
    targets, first = _printf_options(command.words)
    if first is not None and not first.literal and first.text[:1] in _MAY_BE_OPTION:
        return [], f"cannot tell whether `printf` sets a variable: `{first.text}` may be an option"
    return [], _names("printf", targets, targets)


_MAY_BE_OPTION = frozenset("-$`*?[{~")
"""How a word that is not plain text may start when it can turn out to begin with ``-``."""
_TEST_BINARY = frozenset(
    {"=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef"}
)
_TEST_OPERATORS = _TEST_BINARY | {
    "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-p", "-r", "-s", "-t", "-u", "-w", "-x",
    "-G", "-L", "-N", "-O", "-S", "-z", "-n", "-R",
}  # fmt: skip
"""The ``test`` operators after which a word is an operand (``-a``, ``-o``, ``!`` and ``(`` start a new
test, where a word may be an operator)."""


def _test(command: Command) -> tuple[list[Inner], str | None]:
    """``test``/``[``: ``-v NAME`` evaluates a subscript in ``NAME``; a word the checker cannot read may
    turn out to be ``-v`` (or, unquoted, several words) unless its place makes it an operand."""
    name, words = command.program, list(command.words)
    if name == "[" and words and words[-1].literal and words[-1].text == "]":
        words.pop()
    after_v = [words[i + 1] for i, word in enumerate(words[:-1]) if word.text == "-v"]
    reason = _names(name, after_v, ())
    if reason:
        return [], reason
    for i, word in enumerate(words):
        if word.literal:
            continue
        if word.splits:
            advice = "" if "$@" in word.text or "${@" in word.text else " (quote it)"
            several = f"`{word.text}` may become several words, such as `-v`{advice}"
            return [], f"cannot tell what `{name}` tests: {several}"
        before = words[i - 1] if i else None
        after = words[i + 1] if i + 1 < len(words) else None
        if len(words) == 1 or (before is not None and before.literal and before.text in _TEST_OPERATORS):
            continue
        if after is not None and after.literal and after.text in _TEST_BINARY:
            continue
        return [], f"cannot tell what `{name}` tests: `{word.text}` may be an operator such as `-v`"
    return [], None


def _when(letters: str, reason: str) -> Handler:
    """A builtin that runs text as a command when given one of the option ``letters`` (or options the
    checker cannot read)."""

    def handler(command: Command) -> tuple[list[Inner], str | None]:
        if any(_has_option(command, c) for c in letters):
            return [], reason
        unread = next((word.text for word in command.words if not word.literal), None)
        if unread is not None:
            return [], f"cannot tell what `{command.program}` does: `{unread}` is not plain text"
        return [], None

    return handler


_SHELLS = frozenset(
    {"sh", "bash", "rbash", "dash", "ash", "zsh", "ksh", "mksh", "pdksh", "oksh", "yash", "fish", "csh",
     "tcsh", "elvish", "nu", "xonsh", "pwsh", "powershell"}
)  # fmt: skip
_RUNNERS = frozenset(
    {"strace", "ltrace", "watch", "flock", "unshare", "nsenter", "firejail", "bwrap", "proxychains",
     "proxychains4", "torsocks", "valgrind", "gdb", "lldb", "script", "su", "runuser", "sudoedit", "ssh",
     "parallel", "systemd-run", "tmux", "screen", "expect", "unbuffer", "faketime", "fakeroot", "chronic",
     "entr", "taskset", "chrt", "numactl", "catchsegv", "dbus-run-session", "run-parts", "xvfb-run", "sg",
     "pkexec", "deno", "perf", "caffeinate", "setpriv", "runcon", "setarch", "linux32", "linux64", "prlimit",
     "rlwrap", "ccache", "sshpass", "ssh-agent", "dbus-launch", "xterm", "at", "batch", "cpulimit", "cgexec",
     "capsh", "proot", "newgrp", "ed", "ex", "vi", "vim", "nvim", "view", "emacs", "dc", "m4", "gnuplot"}
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
    "complete": _when("CFW", "`complete -C`/`-F`/`-W` runs a command or expands text"),
    "compgen": _when("CFW", "`compgen -C`/`-F`/`-W` runs a command or expands text"),
    "jobs": _when("x", "`jobs -x` runs a command"),
    "bind": _when("x", "`bind -x` binds a key to a command"),
    "history": _when("snr", "`history -s`/`-r`/`-n` puts text in the history, which `fc` runs"),
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
    "sed": _sed,
    "gsed": _sed,
    "sqlite3": _sqlite,
    **_CODE_OPTIONS,
}
