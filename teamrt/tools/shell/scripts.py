"""Programs that run code handed to them: interpreters given code inline or on standard input, ``awk``
calling ``system``, ``sed``'s ``e``, ``sqlite3``'s dot-commands, and options that name a command
(``tar --to-command``, ``sort --compress-program``, ``rsync -e``), abbreviated or not.

Such a program makes the reading opaque, with a reason; one given only files
to run (a script, a module) is read as running nothing more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from teamrt.tools.shell.command import MAY_BE_OPTION, MORE, Command, Handler, Inner
from teamrt.tools.shell.parse import Word

INTERPRETERS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"i?python[0-9.]*|pypy[0-9.]*"), ("-c",)),
    (re.compile(r"perl[0-9.]*"), ("-e", "-E")),
    (re.compile(r"j?ruby[0-9.]*"), ("-e",)),
    (re.compile(r"node|nodejs|bun"), ("-e", "-p", "--eval", "--print")),
    (re.compile(r"php[0-9.]*"), ("-r",)),
    (re.compile(r"lua[0-9.]*|luajit|Rscript|julia|osascript"), ("-e", "-E")),
    (re.compile(r"tclsh[0-9.]*|wish[0-9.]*"), ()),
)
_ONLY_DESCRIBE = frozenset({"--version", "--help", "-V", "-h"})


def interpreter(command: Command, inline: tuple[str, ...]) -> str | None:
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
            if text[:1] in MAY_BE_OPTION:
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
                if text[:1] in MAY_BE_OPTION and not value:
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


SCRIPTS: dict[str, Handler] = {
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "nawk": _awk,
    "sed": _sed,
    "gsed": _sed,
    "sqlite3": _sqlite,
    **_CODE_OPTIONS,
}
