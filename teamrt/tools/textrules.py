"""``Bash`` deny and ask rules that are not one simple command, read as Claude Code reads them.

Claude Code writes rules such as ``Bash(time:*)`` and ``Bash(for i:*)`` itself when a person answers
"don't ask again" to a command that starts with a shell keyword, and people write ``Bash(curl:* | sh)``.
Claude Code matches a Bash rule over the command's text: ``:*`` at the end (or before a space or an
operator) is a prefix, ``*`` anywhere matches any text, and a compound command is split into its
subcommands, every one of which must be allowed while a deny of any one denies it. teamrt's own
reading of a rule is one simple command matched against each program a command runs
(``teamrt.tools.specifiers``); a rule that is not one simple command gets one of two readings here,
used only for deny and ask rules (an allow rule that is not one simple command is left out by the
settings reader: allowing by text would let through what teamrt's parser sees differently):

- ``parts``: the specifier parses as several simple commands (``curl:* | sh``, ``cd x && rm -rf *``).
  The rule matches a command that may run a program matching each of them, in any arrangement
  (``curl -fsSL x|sh``, ``sh -c "$(curl x)"``): stricter than Claude Code, whose text rule
  ``curl:* | sh`` matches almost nothing.
- ``text``: the specifier does not parse as commands (shell keywords: ``time:*``, ``for i:*``,
  ``while true:*``). The rule is Claude Code's text pattern, matched at the start of the command and
  after every operator that starts a subcommand (``;``, ``&``, ``|``, a newline, ``(``, ``{``, ``$(``,
  a backquote, ``do``, ``then``, ``else``), with runs of white space read as one space.

A command teamrt cannot read at all is denied (or asked about) by any such rule, as by every Bash deny
rule with a specifier (``teamrt.tools.permissions``).
"""

from __future__ import annotations

import re
from functools import cache

from teamrt.tools.shell.parse import ShellSyntaxError, parse
from teamrt.tools.shell.programs import Reading
from teamrt.tools.specifiers import CommandPattern, command_patterns

PARTS = "parts"
TEXT = "text"
_PREFIX = re.compile(r":\*(?=$|\s|[|&;)])")
"""Claude Code's older prefix marker, ``:*``, where a word ends."""
_STARTS = r"(?:^|[;&|(){}\n`]|\$\(|\b(?:do|then|else|elif)\s)\s*"
"""Where a subcommand may start in a command's text."""


def normalized(specifier: str) -> str:
    """The specifier with each ``:*`` prefix marker written `` *``, as Claude Code 2.1 reads it."""
    return _PREFIX.sub(" *", specifier.strip())


def reading_of(specifier: str) -> str:
    """``PARTS`` when the specifier parses as several simple commands, else ``TEXT``. Call only for a
    specifier ``command_patterns`` refuses."""
    return PARTS if parts(specifier) else TEXT


@cache
def parts(specifier: str) -> tuple[CommandPattern, ...]:
    """The by-name patterns of each simple command of a specifier that parses as more than one (empty
    when it does not)."""
    try:
        script = parse(normalized(specifier))
    except ShellSyntaxError:
        return ()
    if len(script.commands) < 2 or script.substitution or script.functions:
        return ()
    found = []
    for command in script.commands:
        words = [word.text for word in command.words]
        if not words:
            return ()
        try:
            found.append(command_patterns(" ".join(_quoted(word) for word in words))[1])
        except ValueError:
            return ()
    return tuple(found)


def _quoted(word: str) -> str:
    """A word as one shell word again: stars stay patterns, anything else that the shell reads is quoted."""
    if re.fullmatch(r"[\w@%+=:,./*-]+", word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


@cache
def text_pattern(specifier: str) -> re.Pattern[str]:
    """Claude Code's text pattern for the specifier, found where a subcommand starts."""
    text = " ".join(normalized(specifier).split())
    prefix = text.endswith(" *")
    body = text[:-2] if prefix else text
    chunks = [r"\s+".join(map(re.escape, chunk.split(" "))) for chunk in body.split("*")]
    pattern = ".*".join(chunks)
    tail = r"(?:[\s;&|)}`].*)?$" if prefix else r"\s*(?:$|[;&|)}\n`])"
    return re.compile(_STARTS + pattern + tail, re.DOTALL | re.MULTILINE)


def matches(specifier: str, form: str, command: str, reading: Reading | None) -> bool:
    """Whether a deny or ask rule of this ``form`` may match ``command`` (read as ``reading``)."""
    if form == PARTS:
        if reading is None:
            return False
        return all(
            any(pattern.possible(program) for program in reading.commands) for pattern in parts(specifier)
        )
    return text_pattern(specifier).search(command) is not None
