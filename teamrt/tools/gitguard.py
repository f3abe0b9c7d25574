"""Refuse a command that points git outside the workspace: ``git -C``, ``--git-dir``, ``GIT_DIR=``.

The sandbox is the boundary: outside the workspace everything is read-only,
so ``git -C /elsewhere commit`` fails there anyway, as does ``cd /elsewhere &&
git commit``. This check reads the command's text to refuse the plain cases
with a clear reason before anything runs, and is the only guard on a machine
without bubblewrap. A path it cannot read (``git -C "$D"``) is refused too.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

PATH_OPTIONS = ("-C", "--git-dir", "--work-tree", "--namespace")
PATH_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
)
_TAKES_VALUE = ("-c", "--config-env")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})


def git_escape(command: str, workspace: Path) -> str | None:
    """Why ``command`` points git outside ``workspace``, or None when it does not (as far as text tells)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: bash will refuse the command itself
        return None
    root = os.path.realpath(workspace)
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if eq and name in PATH_VARIABLES:
            return _outside(f"{name}={value}", value, root)
        if word == "git" or word.endswith("/git"):
            why = _git_options(words[i + 1 :], root)
            if why:
                return why
    return None


def _git_options(words: list[str], root: str) -> str | None:
    """Check the options of one git invocation, up to its subcommand or the command's end."""
    cwd = root
    i = 0
    while i < len(words) and words[i] not in _SEPARATORS and words[i].startswith("-"):
        option, eq, value = words[i].partition("=")
        if option in PATH_OPTIONS:
            if not eq:
                i += 1
                value = words[i] if i < len(words) else ""
            shown = f"git {option} {value}"
            if option == "-C":
                cwd = os.path.join(cwd, value)
                why = _outside(shown, cwd, root)
            else:
                why = _outside(shown, os.path.join(cwd, value), root)
            if why:
                return why
        elif option in _TAKES_VALUE and not eq:
            i += 1
        i += 1
    return None


def _outside(shown: str, path: str, root: str) -> str | None:
    if not path or any(c in path for c in "$`*?"):
        return f"`{shown}`: git may only be pointed at a literal path inside your workspace"
    real = os.path.realpath(os.path.join(root, path))
    if real == root or Path(real).is_relative_to(root):
        return None
    return f"`{shown}` points git outside your workspace ({root}); git may only work on your own checkout"
