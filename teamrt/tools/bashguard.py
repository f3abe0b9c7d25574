"""What a ``Bash`` command reaches besides the programs it names: the files it names or may read that a
``Read`` deny rule forbids, and the files its redirections write.

Permission rules judge the programs a command runs (``teamrt.tools.specifiers``), so ``Bash(cat:*)`` alone
would let ``cat .env`` through a ``Read(.env)`` deny rule, and ``Bash(ls:*)`` would let ``ls > src/app.py``
write a file. ``teamrt.tools.permissions`` asks this module two things about a command:

- ``named``: a word of it (an argument, an option's value, a redirection's file, a here-document's text)
  that names a path a ``Read`` deny rule covers. Such a command is denied, whatever allows it: ``cat
  .env``, ``head -n1 ./.env``, ``cat < .env``, ``grep -f.env x``, ``git show HEAD:.env``, ``cat
  "$PWD/.env"``. A word that merely mentions the name (a commit message saying ``see config/.env``) is
  refused too: the check reads words, not intentions.
- ``unseen``: why a command that allow rules let through may still read such a file without naming it,
  or write a file: a word that is not plain text (``$F``, ``{a,b}``, a backquote; given to a program
  that may open files, not ``echo``) or a glob that matches a denied file now, a recursive search
  (``grep -r``; ``rg`` when a denied file is not hidden, or with
  ``--hidden``, ``-.`` or ``-uu``), an output redirection to a file (``> out``, ``>> log``, ``&> f``;
  ``/dev/null`` is fine). Such a command is not allowed by the rule: the permission mode decides (it is
  asked about in the default mode). A rule for every command (``Bash``) allows what any command does.

Words are read the way the shell splits them, quotes removed (``shlex``, whose punctuation marks the
redirections); a command it cannot split reads as unsure. This is the command line's text, not what its
programs do: a script, a Makefile or ``python3 x.py`` reads whatever it opens, and only the sandbox
confines that. Bare ``Read`` deny rules (every file) take no part here: every command names some file.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from teamrt.tools.shell.command import MORE, Command, has_option
from teamrt.tools.shell.programs import Reading

Denial = Callable[[Path], str | None]
"""The deny rule (as a reason names it) that forbids reading a canonical path, or None."""

_WRITES = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
"""Redirection operators that open a file for writing (``>&`` when a file, not a descriptor, follows)."""
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_EXPANDS = re.compile(r"[$`]|\{[^}]*(,|\.\.)[^}]*\}")
"""A variable, a substitution, a backquote or a brace expansion: text the shell makes into other text."""
_MAX_GLOB = 10_000
"""Paths a glob is expanded to, at most, before it reads as unsure."""
_NO_FILES = frozenset(
    {"echo", "printf", "true", "false", "test", "[", "basename", "dirname", "seq", "expr", "sleep", "date",
     "export", "cd", "pushd", "popd", "pwd", "exit", "return"}
)  # fmt: skip
"""Programs that open no file their arguments name (``printf -v`` is judged as indirect elsewhere)."""
_MOVES = frozenset({"cd", "pushd", "popd"})
"""Programs after which a relative path is no longer relative to the workspace."""
_GREPS = frozenset({"grep", "egrep", "fgrep", "zgrep", "rgrep"})
_RECURSE = ("--recursive", "--dereference-recursive", "--directories=recurse", "--d=recurse")
_RG_HIDDEN = ("--hidden", "--unrestricted")


def named(command: str, denial: Denial, workspace: Path) -> str | None:
    """Why ``command`` names a file a deny rule forbids reading (the word and the rule), or None."""
    words = _words(command)
    if words is None:
        return (
            None  # the rule-checker's parser reads it as opaque, which no allow rule with a specifier lets by
        )
    for word in words:
        for candidate in _candidates(word):
            rule = denial(_resolved(candidate, workspace))
            if rule is not None:
                return f"denied by rule {rule}: the command names `{_brief(word)}`, which it forbids reading"
    return None


def unseen(
    command: str, reading: Reading, denial: Denial, specifiers: Sequence[str], workspace: Path
) -> str | None:
    """Why ``command``, which allow rules let through, may still read a denied file without naming it, or
    write a file through a redirection; None when it can do neither. ``specifiers``: the ``Read`` deny
    rules' specifiers (empty when there are none: only redirections count then)."""
    words = _words(command)
    if words is None:
        return "teamrt cannot split it into words"
    for operator, target in itertools.pairwise(words):
        if operator in _WRITES and not _descriptor(operator, target) and target not in _HARMLESS_TARGETS:
            return f"it writes `{_brief(target)}` through a redirection"
    if not specifiers:
        return None
    read = [target for operator, target in itertools.pairwise(words) if operator in ("<", "<&")]
    moves = any(program.program in _MOVES for program in reading.commands)
    for text in (
        *read,
        *(
            word.text
            for program in reading.commands
            if program.program not in _NO_FILES
            for word in program.words
            if not word.literal
        ),
    ):
        why = _unsure(text, denial, workspace, moves)
        if why:
            return why
    hidden = all(_hidden(specifier) for specifier in specifiers)
    for program in reading.commands:
        why = _searches(program, hidden)
        if why:
            return f"{why}, which may read a file a Read deny rule forbids"
    return None


def _words(command: str) -> list[str] | None:
    """``command``'s words as the shell splits them, quotes removed, each redirection operator a word."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.commenters = ""  # a `#` inside a word is text; reading a comment's words costs nothing
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote
        return None


def _candidates(word: str) -> list[str]:
    """The paths a word may name: itself, an option's value (``--file=x``, ``-fx``), a git object's path
    (``HEAD:x``)."""
    found = [word]
    if word.startswith("-") and "=" in word:
        found.append(word.partition("=")[2])
    elif word.startswith("-") and not word.startswith("--") and len(word) > 2:
        found.append(word[2:])
    if ":" in word:
        found.append(word.rpartition(":")[2])
    return [candidate for candidate in found if candidate and "\0" not in candidate]


def _resolved(word: str, workspace: Path) -> Path:
    """The canonical path a word names, relative ones under ``workspace`` (where commands start)."""
    return Path(os.path.realpath(os.path.join(workspace, os.path.expanduser(word))))


def _descriptor(operator: str, target: str) -> bool:
    """Whether ``>&`` duplicates or closes a descriptor (``2>&1``, ``>&-``) rather than opening a file."""
    return operator == ">&" and (target.isdigit() or target == "-")


def _unsure(text: str, denial: Denial, workspace: Path, moves: bool) -> str | None:
    """Why a word that is not plain text (or a file read through ``<``) may name a denied file, or None:
    an expansion may be anything; a glob (or ``~``) is expanded here to what it matches now, in the
    workspace, unless the command changes directory (``moves``) first."""
    if text == MORE.text or _EXPANDS.search(text) or (moves and not os.path.isabs(os.path.expanduser(text))):
        return f"`{_brief(text)}` is not plain text, so it may name a file a Read deny rule forbids"
    if _glob_reaches(text, denial, workspace):
        return f"`{_brief(text)}` matches a file a Read deny rule forbids"
    return None


def _glob_reaches(word: str, denial: Denial, workspace: Path) -> bool:
    """Whether the glob ``word`` matches a denied file now (as bash expands it: ``*`` skips dotfiles), or
    matches more paths than are looked at."""
    pattern = os.path.join(workspace, os.path.expanduser(word))
    matches = list(itertools.islice(glob.iglob(pattern), _MAX_GLOB + 1)) if "\0" not in pattern else []
    if len(matches) > _MAX_GLOB:
        return True
    return any(denial(Path(os.path.realpath(match))) is not None for match in matches)


def _hidden(specifier: str) -> bool:
    """Whether every path the specifier matches has a hidden part (a name starting with a dot), so that
    ripgrep's walk skips it by default."""
    return any(part.startswith(".") and part not in (".", "..") for part in specifier.split("/"))


def _searches(program: Command, hidden: bool) -> str | None:
    """Why a program walks directories reading the files in them, or None."""
    name = program.program
    if name in _GREPS:
        recursive = name == "rgrep" or has_option(program, "r") or has_option(program, "R")
        if recursive or any(word.text.startswith(_RECURSE) for word in program.words):
            return f"`{name}` searches directories recursively"
        words = [word.text for word in program.words]
        if any(a in ("-d", "--directories") and b == "recurse" for a, b in itertools.pairwise(words)):
            return f"`{name}` searches directories recursively"
        return None
    if name != "rg":
        return None
    if not hidden:
        return "`rg` searches directories"
    shown = any(word.text.startswith(_RG_HIDDEN) for word in program.words) or has_option(program, ".")
    twice = sum(
        word.text[1:].count("u") for word in program.words if word.text[:2] != "--" and word.text[:1] == "-"
    )
    if shown or twice >= 2:
        return "`rg` searches hidden files"
    return None


def _brief(text: str, limit: int = 60) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
