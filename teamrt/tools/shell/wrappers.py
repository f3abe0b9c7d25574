"""Programs that run another program named in their arguments: ``command``, ``exec``, ``nohup``, ``env``,
``nice``, ``timeout``, ``sudo``, ``xargs``, ``find -exec`` and the like.

Each is read past its own options (``teamrt.tools.shell.options``) to the
program it runs, which is read in turn; a wrapper with an option that runs a
shell or text, or with options the grammar does not know, is opaque.
"""

from __future__ import annotations

from dataclasses import dataclass

from teamrt.tools.shell.command import MORE, Command, Handler, Inner, has_option, risky_assignment
from teamrt.tools.shell.options import Grammar, grammar, options


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
    if has_option(command, "v") or has_option(command, "V"):
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


WRAPPERS: dict[str, Handler] = {
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
}
