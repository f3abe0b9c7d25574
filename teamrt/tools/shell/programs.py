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
Makefile or ``npm test`` runs whatever it contains. What each program runs is
its handler's to say: in ``teamrt.tools.shell.builtins``, ``wrappers``,
``scripts`` and ``git``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from teamrt.tools.shell.builtins import BUILTINS, indirect
from teamrt.tools.shell.command import Command, Handler, fixed, risky_assignment, risky_name
from teamrt.tools.shell.git import git_runs
from teamrt.tools.shell.parse import Script, ShellSyntaxError, Word, parse
from teamrt.tools.shell.scripts import INTERPRETERS, SCRIPTS, interpreter
from teamrt.tools.shell.wrappers import WRAPPERS

_MAX_DEPTH = 16


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
        fills = indirect(command)
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
        return fixed(f"`{program}` runs a script or command text the rules cannot read")
    if program in _RUNNERS:
        return fixed(f"`{program}` runs a program the checker cannot find in its arguments")
    for names, inline in INTERPRETERS:
        if names.fullmatch(program):
            return lambda command: ([], interpreter(command, inline))
    return lambda command: ([], None)


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
    **BUILTINS,
    **WRAPPERS,
    "git": lambda command: git_runs(command.path, command.words),
    **SCRIPTS,
}
"""What each program known by name runs, and why it may run something else."""
