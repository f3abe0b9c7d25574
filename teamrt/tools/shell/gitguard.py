"""Refuse a command that points git outside the workspace: ``git -C``, ``--git-dir``, ``GIT_DIR=``.

The sandbox is the boundary: outside the workspace everything is read-only,
so ``git -C /elsewhere commit`` fails there anyway, as does ``cd /elsewhere &&
git commit``. This check reads the command with the shell parser
(``teamrt.tools.shell.parse``) to refuse the plain cases with a clear reason
before anything runs. It finds git behind wrappers (``sudo git``, ``env X=1
git``) and in every part of a compound command, and refuses a path it cannot
read (``git -C "$D"``) or git options it cannot read to their end. A command
the parser cannot read at all is left to bash and the sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

from teamrt.tools.shell.git import GIT
from teamrt.tools.shell.options import options
from teamrt.tools.shell.parse import ShellSyntaxError, Word, parse
from teamrt.tools.shell.programs import runs

PATH_OPTIONS = ("-C", "--git-dir", "--work-tree", "--namespace")
PATH_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
)


def git_escape(command: str, workspace: Path) -> str | None:
    """Why ``command`` points git outside ``workspace``, or None when it does not (as far as text tells)."""
    try:
        script = parse(command)
    except ShellSyntaxError:
        return None  # bash may refuse it too; if not, the sandbox holds
    root = os.path.realpath(workspace)
    for simple in script.commands:
        for word in (*simple.assignments, *simple.words):  # GIT_DIR=x git, export GIT_DIR=x, env GIT_DIR=x
            name, eq, value = word.text.partition("=")
            if eq and name in PATH_VARIABLES:
                why = _outside(f"{name}={value}", Word(value, word.literal), root)
                if why:
                    return why
    for found in runs(script).commands:
        if found.program == "git":
            why = _git_options(found.words, root)
            if why:
                return why
    return None


def _git_options(words: tuple[Word, ...], root: str) -> str | None:
    """Check the options of one git invocation, up to its subcommand."""
    cwd = root
    parsed = options(words, GIT)
    for option, value in parsed.seen:
        if option not in PATH_OPTIONS:
            continue
        value = value or Word("", literal=True)
        shown = f"git {option} {value.text}"
        if option == "-C":
            cwd = os.path.join(cwd, value.text)
            why = _outside(shown, Word(cwd, value.literal), root)
        else:
            why = _outside(shown, Word(os.path.join(cwd, value.text), value.literal), root)
        if why:
            return why
    if parsed.problem:
        return f"cannot tell where git works: {parsed.problem}; write the command more plainly"
    return None


def _outside(shown: str, path: Word, root: str) -> str | None:
    if not path.literal or not path.text:
        return f"`{shown}`: git may only be pointed at a literal path inside your workspace"
    real = os.path.realpath(os.path.join(root, path.text))
    if real == root or Path(real).is_relative_to(root):
        return None
    return f"`{shown}` points git outside your workspace ({root}); git may only work on your own checkout"
