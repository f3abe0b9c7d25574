"""What git runs besides itself: git read without its global options (``git -C sub push`` is also
``git push``), ``git bisect run``'s program, and why git may run a program its command line does not show
(``-c``, aliases, options and subcommands that take a command)."""

from __future__ import annotations

from collections.abc import Sequence

from teamrt.tools.shell.options import grammar, options
from teamrt.tools.shell.parse import Word

GIT = grammar(
    "pPvh",
    "Cc",
    long_flags="bare no-replace-objects no-lazy-fetch no-optional-locks no-advice literal-pathspecs"
    " glob-pathspecs noglob-pathspecs icase-pathspecs paginate no-pager exec-path html-path man-path"
    " info-path version help list-cmds",
    long_values="git-dir work-tree namespace super-prefix config-env attr-source",
)
"""git's options before its subcommand."""
_GIT_RUNS = {
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "clone": ("-u", "--upload-pack", "--template", "-c", "--config"),
    "init": ("--template",),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec",),
    "grep": ("-O", "--open-files-in-pager"),
}
"""Subcommand options whose value is a command (or hooks and config that name commands)."""
_GIT_CONFIG_READS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list"}
)


def git_runs(path: str, words: tuple[Word, ...]) -> tuple[list[tuple[Word, ...]], str | None]:
    """What ``git words`` runs besides itself, and why it may run a program it does not show."""
    parsed = options(words, GIT)
    for option, value in parsed.seen:
        if option in ("-c", "--config-env"):
            return [], f"`git {option}` can make git run any program (an alias, a pager, an editor)"
        if option == "--exec-path" and value is not None:
            return [], "`git --exec-path=` makes git run programs from another directory"
    if parsed.problem:
        return [], f"cannot tell what `git` runs: {parsed.problem}"
    rest = words[parsed.end :]
    inner = [(Word(path, True), *rest)] if parsed.end and rest else []  # as if without its options
    if not rest:
        return inner, None
    sub, args = rest[0].text, rest[1:]
    if sub == "bisect" and args and args[0].text == "run":
        return [*inner, args[1:]], None
    return inner, _git_subcommand(sub, args)


def _abbreviates(word: str, option: str) -> bool:
    """Whether ``word`` is the long ``option`` or a start of it: git takes any unambiguous abbreviation
    (``git rebase --exe`` is ``--exec``)."""
    name = word.partition("=")[0]
    if not option.startswith("--"):
        return name == option
    return name.startswith("--") and len(name) > 2 and option.startswith(name)


def _git_subcommand(sub: str, args: Sequence[Word]) -> str | None:
    """Why ``git sub args`` may run a command it names, or None."""
    if sub == "filter-branch" or (sub == "submodule" and any(word.text == "foreach" for word in args)):
        return f"`git {sub}` runs shell text"
    if sub == "config":
        operands = [word for word in args if not word.text.startswith("-")]
        if not any(word.text in _GIT_CONFIG_READS for word in args) and len(operands) != 1:
            return "`git config` can make later git commands run any program"
    if sub not in _GIT_RUNS:
        return None
    for word in args:
        if not word.literal:
            return f"cannot tell what `git {sub}` runs: `{word.text}` is not plain text"
        for option in _GIT_RUNS[sub]:
            short = len(option) == 2 and word.text.startswith("-") and not word.text.startswith("--")
            if _abbreviates(word.text, option) or (short and option[1] in word.text[1:]):
                return f"`git {sub} {option}` runs a command it is given"
    return None
