"""Shell builtins that run text as a command (``eval``, ``source``, ``trap``, ``let``, ``hash -p``, ...) or
take variables by name (``read``, ``declare``, ``printf -v``, ``test -v``, ...).

Bash evaluates a name's subscript (``a[$(...)]``) as arithmetic, and on every
use of a nameref the subscript of the name it holds, so such a builtin makes the
reading opaque; one that puts text the checker cannot see into a variable by
name makes it indirect (``indirect``).
"""

from __future__ import annotations

from collections.abc import Sequence

from teamrt.tools.shell.command import (
    MAY_BE_OPTION,
    Command,
    Handler,
    Inner,
    fixed,
    has_option,
    risky_assignment,
)
from teamrt.tools.shell.parse import Word


def indirect(command: Command) -> str | None:
    """Why the builtin puts text the checker cannot see into a variable by name, or None."""
    name = command.program
    if name in ("read", "mapfile", "readarray"):
        return f"`{name}` puts text the checker cannot see into variables, which may later name a program"
    if name == "printf" and printf_options(command.words)[0]:
        return "`printf -v` puts text into a variable by name, which may later name a program"
    return None


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
    if name in _DECLARES and has_option(command, "i"):
        return [], f"`{name} -i` evaluates arithmetic, which can run commands"
    if name in _NAMEREFS and has_option(command, "n"):
        return [], (
            f"`{name} -n` makes a name refer to another variable, and bash evaluates that variable's"
            " subscript, which can run commands"
        )
    if name in ("mapfile", "readarray") and has_option(command, "C"):
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


def printf_options(words: Sequence[Word]) -> tuple[list[Word], Word | None]:
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
    targets, first = printf_options(command.words)
    if first is not None and not first.literal and first.text[:1] in MAY_BE_OPTION:
        return [], f"cannot tell whether `printf` sets a variable: `{first.text}` may be an option"
    return [], _names("printf", targets, targets)


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
        if any(has_option(command, c) for c in letters):
            return [], reason
        unread = next((word.text for word in command.words if not word.literal), None)
        if unread is not None:
            return [], f"cannot tell what `{command.program}` does: `{unread}` is not plain text"
        return [], None

    return handler


BUILTINS: dict[str, Handler] = {
    "eval": fixed("`eval` runs its arguments as a command"),
    "source": fixed("`source` runs a script"),
    ".": fixed("`.` runs a script"),
    "trap": fixed("`trap` runs text as a command"),
    "alias": fixed("`alias` defines commands"),
    "enable": fixed("`enable` changes the shell's builtins"),
    "fc": fixed("`fc` runs commands again"),
    "let": fixed("`let` evaluates arithmetic, which can run commands"),
    "hash": _when("p", "`hash -p` makes a name run another program"),
    "complete": _when("CFW", "`complete -C`/`-F`/`-W` runs a command or expands text"),
    "compgen": _when("CFW", "`compgen -C`/`-F`/`-W` runs a command or expands text"),
    "jobs": _when("x", "`jobs -x` runs a command"),
    "bind": _when("x", "`bind -x` binds a key to a command"),
    "history": _when("snr", "`history -s`/`-r`/`-n` puts text in the history, which `fc` runs"),
    **dict.fromkeys(_VARIABLE_BUILTINS, _variables),
}
