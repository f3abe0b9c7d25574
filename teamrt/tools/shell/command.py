"""A program a command line runs (``Command``), and what the readers of programs share: how a program's
handler answers (``Handler``), the risky variables, and how an option may hide in a word.

``teamrt.tools.shell.programs`` reads a command into ``Command`` s; the
handlers in ``builtins``, ``wrappers`` and ``scripts`` say what each program
runs in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from teamrt.tools.shell.parse import Word


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


MORE = Word("...", literal=False)
"""Arguments the command line does not show (what ``xargs`` adds, ``find``'s ``{}``)."""

Inner = tuple[Word, ...]
"""The words of a program another one runs."""
Handler = Callable[[Command], tuple[list[Inner], str | None]]
"""What a program runs by name, and why it may run something else."""
MAY_BE_OPTION = frozenset("-$`*?[{~")
"""How a word that is not plain text may start when it can turn out to begin with ``-``."""

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


def fixed(reason: str) -> Handler:
    """A handler that finds no program and always gives ``reason``."""
    return lambda command: ([], reason)


def has_option(command: Command, letter: str) -> bool:
    """Whether a short option cluster among the arguments has ``letter``."""
    return any(
        word.text.startswith("-") and not word.text.startswith("--") and letter in word.text[1:]
        for word in command.words
    )
