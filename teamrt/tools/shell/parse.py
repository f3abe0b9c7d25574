"""Read a bash command with a real parser (bashlex): the simple commands in it, word by word.

Every simple command is found: in lists and pipelines, ``{ }`` groups and
subshells, the conditions and bodies of ``if``, ``while``, ``until`` and
``for``, function bodies, and command and process substitutions wherever they
appear (arguments, assignments, redirections). A word's text has its quotes and
backslashes removed (``r''m`` and ``\\rm`` read ``rm``); it is *literal* when
bash passes that text on unchanged, with no expansion, glob or brace in it.

What the reader cannot follow makes the script *opaque*, with a reason:
arithmetic (``(( ))``), a ``${...}`` expansion beyond a plain variable (array
subscripts, indirection, substrings and ``@P`` can run commands), a
here-document whose body has a substitution, and a ``{a[x]}>file`` redirection
(bash stores the descriptor in the variable it names, evaluating the
subscript). The variables a script sets other than by a ``NAME=value`` word (a
``for`` loop's, ``${NAME:=value}``, ``{NAME}>file``) are noted, so that a
variable that picks what runs (``PATH``) is seen however it is set. Text
bashlex does not parse (it also refuses some valid bash: ``time``, ``case``,
``[[ ]]``, arrays, ``coproc``, ``select``) raises ``ShellSyntaxError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import bashlex

from teamrt.errors import TeamrtError


class ShellSyntaxError(TeamrtError, ValueError):
    """Text the parser cannot read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Word:
    text: str
    """The word with its quotes and backslashes removed; expansions are left as written (``$HOME``)."""
    literal: bool
    """Whether bash passes ``text`` on as it is: no expansion, glob or brace."""
    splits: bool = False
    """Whether bash may make it several words or none: an unquoted expansion, glob or brace."""


@dataclass(frozen=True)
class Simple:
    """One simple command as written."""

    words: tuple[Word, ...]
    """The program and its arguments; redirections are left out."""
    assignments: tuple[Word, ...]
    """The ``NAME=value`` words before the program (or alone)."""
    source: str
    """The command's text."""


@dataclass(frozen=True)
class Script:
    commands: tuple[Simple, ...]
    """Every simple command, in the order they appear (a substitution's before its command's)."""
    functions: frozenset[str]
    """The names the script defines as functions."""
    substitution: bool
    """Whether some word's value comes from a command or process substitution."""
    opaque: str | None
    """Why the script may run commands that ``commands`` does not show, or None."""
    assigned: tuple[str, ...] = ()
    """The variables set by a ``for`` loop or a ``${NAME:=value}`` expansion, as written."""


MAX_CHARS = 100_000
"""Longer commands are not parsed (parsing takes about a second for every 30,000 words)."""


def parse(command: str) -> Script:
    """The simple commands in ``command``; raises ``ShellSyntaxError`` when it cannot be read."""
    if len(command) > MAX_CHARS:
        raise ShellSyntaxError(f"longer than the checker reads ({MAX_CHARS} characters)")
    text, quoted = command, frozenset[int]()
    try:
        try:
            nodes = bashlex.parse(text)
        except bashlex.errors.ParsingError as e:
            if "here-document" not in e.message:
                raise
            # bashlex looks for a quoted delimiter (<<'EOF') with its quotes: unquote it, same length
            text, quoted = _unquote_delimiters(command)
            nodes = bashlex.parse(text)
    except Exception as e:  # bashlex raises assorted errors, NotImplementedError among them
        raise ShellSyntaxError(f"bash the checker cannot parse ({_unparsed(e)})") from None
    reader = _Reader(text, quoted)
    try:
        for node in nodes:
            reader.visit(node)
    except RecursionError:
        raise ShellSyntaxError("bash nested too deeply to read") from None
    return Script(
        tuple(reader.commands),
        frozenset(reader.functions),
        reader.substitution,
        reader.reasons[0] if reader.reasons else None,
        tuple(reader.assigned),
    )


def _unparsed(error: Exception) -> str:
    """bashlex's complaint on one line; for what it does not implement (``coproc``, ``select``, ``case``
    patterns), the token rather than its internal nodes."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    token = re.search(r"token = \{([^}]*)\}", text)
    return f"`{token[1]}`" if text.startswith("type = {") and token else text


_QUOTED_DELIMITER = re.compile(r"<<-?[ \t]*(?:'(\w+)'|\"(\w+)\"|\\(\w+))(?=[\s;&|<>()]|$)")


def _unquote_delimiters(command: str) -> tuple[str, frozenset[int]]:
    """``command`` with each quoted here-document delimiter's quotes blanked, and where those words start."""
    chars, starts = list(command), set()
    for match in _QUOTED_DELIMITER.finditer(command):
        group = next(g for g in (1, 2, 3) if match[g] is not None)
        start, end = match.span(group)
        for i in range(match.start(group) - 1, match.end(0)):
            if not start <= i < end:
                chars[i] = " "
        starts.add(start)
    return "".join(chars), frozenset(starts)


_NAME = r"(?:[A-Za-z_]\w*|[0-9]+|[@*#?$!-])"
_PLAIN_PARAMETER = re.compile(rf"#?{_NAME}|{_NAME}(?::?[-=?+]|##?|%%?|//?|/#|/%|\^\^?|,,?)[^$`\[\](){{}}]*")
"""``${...}`` forms that only substitute text: no subscript, indirection, substring or transformation."""
_DESCRIPTOR = re.compile(r"\{[^{}\s'\"\\]+\}")
"""The ``{NAME}`` before a redirection that stores the descriptor bash opens in ``NAME``."""
_ASSIGNING = re.compile(r"([A-Za-z_]\w*):?=")
"""The start of a ``${NAME:=value}`` (or ``${NAME=value}``) expansion, which sets ``NAME``."""


@dataclass
class _Reader:
    text: str
    quoted_heredocs: frozenset[int]
    commands: list[Simple] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    substitution: bool = False
    reasons: list[str] = field(default_factory=list)
    assigned: list[str] = field(default_factory=list)

    def visit(self, node: Any) -> None:
        kind = node.kind
        if kind == "for":
            self.assigned.append(getattr(node.parts[1], "word", ""))  # for NAME in ...
        if kind in ("list", "pipeline", "if", "while", "until", "for"):
            for part in node.parts:
                self.visit(part)
        elif kind == "compound":
            if self.text.startswith("((", node.pos[0]):
                self.reasons.append("`((...))` evaluates arithmetic, which can run commands")
            for part in [*node.list, *getattr(node, "redirects", [])]:
                self.visit(part)
        elif kind == "function":
            self.functions.add(node.name.word)
            self.visit(node.body)
        elif kind == "command":
            self._command(node)
        elif kind in ("word", "assignment"):
            self._expansions(node)
        elif kind == "redirect":
            self._redirect(node)
        elif kind not in ("reservedword", "operator", "pipe"):
            self.reasons.append(f"bash the checker does not know ({kind})")

    def _command(self, node: Any) -> None:
        words: list[Word] = []
        assignments: list[Word] = []
        for i, part in enumerate(node.parts):
            if part.kind == "redirect":
                self._redirect(part)
                continue
            if self._names_a_descriptor(part, node.parts[i + 1 : i + 2]):
                continue
            self._expansions(part)
            bare = _bare(self._source(part))
            literal = not part.parts and not _globs(bare)
            splits = not literal and (_globs(bare) or "$" in bare or "`" in bare or _all_parameters(part))
            word = Word(getattr(part, "word", ""), literal, splits)
            (assignments if part.kind == "assignment" else words).append(word)
        self.commands.append(Simple(tuple(words), tuple(assignments), self._source(node)))

    def _names_a_descriptor(self, part: Any, after: list[Any]) -> bool:
        """Whether ``part`` is the ``{NAME}`` of a ``{NAME}>file`` redirection, which sets ``NAME`` to the
        descriptor bash opens (evaluating a subscript in it); the variable is noted or the script made
        opaque."""
        source = self._source(part)
        if not (after and after[0].kind == "redirect" and after[0].pos[0] == part.pos[1]):
            return False
        if not _DESCRIPTOR.fullmatch(source):
            return False
        name = source[1:-1]
        if re.fullmatch(r"[A-Za-z_]\w*", name):
            self.assigned.append(name)
        else:
            self.reasons.append(f"`{source}` sets the variable it names, evaluating its subscript")
        return True

    def _expansions(self, word: Any) -> None:
        for part in word.parts:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                self.substitution = True
                self.visit(part.command)
            elif part.kind == "parameter":
                value = getattr(part, "value", "")  # none for $'...' and $"..."
                if value and not _PLAIN_PARAMETER.fullmatch(value):
                    self.reasons.append(f"the checker cannot tell what `${{{value}}}` runs")
                self._assigns(value)
            elif part.kind != "tilde":
                self.reasons.append(f"bash the checker does not know ({part.kind})")

    def _redirect(self, node: Any) -> None:
        target = node.output
        if not isinstance(target, int | str):
            self._expansions(target)
        heredoc = getattr(node, "heredoc", None)
        body = "" if heredoc is None or target.pos[0] in self.quoted_heredocs else heredoc.value
        if not _plain_heredoc(body):
            self.reasons.append(
                "a here-document expands a substitution; quote its delimiter (<<'EOF') to keep it text"
            )
        for match in re.finditer(r"\$\{([^}]*)\}?", body):
            self._assigns(match[1])

    def _assigns(self, parameter: str) -> None:
        """Note the variable a ``${NAME:=value}`` expansion sets (``parameter`` is what is inside)."""
        match = _ASSIGNING.match(parameter)
        if match:
            self.assigned.append(match[1])

    def _source(self, node: Any) -> str:
        start, end = node.pos
        return str(self.text[start:end])


def _plain_heredoc(body: str) -> bool:
    """Whether an unquoted here-document's expansions are plain variables only."""
    if "$(" in body or "`" in body or "$[" in body:
        return False
    return all(_PLAIN_PARAMETER.fullmatch(m[1]) for m in re.finditer(r"\$\{([^}]*)\}?", body))


def _all_parameters(word: Any) -> bool:
    """Whether the word has ``"$@"`` (or ``"${@}"``), which is as many words as there are parameters."""
    return any(part.kind == "parameter" and getattr(part, "value", "") == "@" for part in word.parts)


def _bare(source: str) -> str:
    """The characters of a word as written that no quote or backslash protects."""
    bare: list[str] = []
    quote, i = "", 0
    while i < len(source):
        c = source[i]
        if quote:
            if quote == '"' and c == "\\":
                i += 1  # an escaped character inside double quotes
            elif c == quote:
                quote = ""
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        else:
            bare.append(c)
        i += 1
    return "".join(bare)


def _globs(text: str) -> bool:
    """Whether unquoted ``text`` has a glob (``*``, ``?``, ``[...]``) or a brace expansion."""
    glob = "*" in text or "?" in text or ("[" in text and "]" in text[text.index("[") :])
    return glob or ("{" in text and ("," in text or ".." in text))
