"""Front matter: the YAML block between a Markdown file's first two ``---`` lines, read as Claude Code does.

The file must open with a ``---`` line; the block ends at the next line made
of three dashes or more: Claude Code 2.1 loads files whose front matter a
longer rule (``-----``) closes, so teamrt does too.

Strict YAML comes first (PyYAML's safe loader, a key given twice refused).
Hand-written agent files are often not valid YAML: an unquoted description
holding ``": "`` (``description: Use this agent when: ...``) is the common
case, and Claude Code loads them. So when strict YAML fails, a line reader
takes the block as top-level ``key: value`` lines: the value is the rest of
the line, colons included, and the indented (or blank) lines after it
continue it. Each value is still read as YAML on its own where it can be
(``tools: [Read, Grep]``, ``maxTurns: 5``); only values YAML refuses become
plain text. What neither reader can take is an error naming its line.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import yaml

from teamrt.errors import TeamrtError

DELIMITER = "---"
_CLOSING = re.compile(r"-{3,}")
"""A line that closes the front matter: three dashes or more (trailing blanks aside)."""
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?[ \t]*")
_INDICATORS = tuple("[{\"'|>!&%@`")
"""Characters that give a YAML value a structure: a value starting with one is not taken as plain text."""


class FrontMatterError(TeamrtError, ValueError):
    """Front matter that cannot be read; the message is the problem, without the file's name."""


@dataclass(frozen=True)
class Document:
    header: str
    """The YAML text between the delimiters."""
    body: str
    """Everything after the closing delimiter."""


def split(text: str) -> Document:
    """The front matter and the body of ``text``, a byte-order mark and CRLF line ends undone."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != DELIMITER:
        raise FrontMatterError(f"no front matter: the file must start with a {DELIMITER!r} line")
    for end in range(1, len(lines)):
        if _CLOSING.fullmatch(lines[end].rstrip()):
            return Document("\n".join(lines[1:end]), "\n".join(lines[end + 1 :]))
    raise FrontMatterError(f"front matter not closed: no {DELIMITER!r} line after the first")


def parse(header: str) -> dict[str, Any]:
    """The fields of a front matter block (``split``'s header); line numbers in errors count from the
    file's top, whose line 1 is the opening delimiter."""
    try:
        fields = _strict(header)
    except yaml.YAMLError:
        return _lenient(header)
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise FrontMatterError(f"front matter must be a mapping of fields, not a {type(fields).__name__}")
    return {str(key): value for key, value in fields.items()}


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error, not last-wins."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key.value!r} given twice", key.start_mark
                    )
                seen.add(key.value)
        return super().construct_mapping(node, deep)


def _strict(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except RecursionError:  # nesting deep enough to exhaust the stack
        raise yaml.YAMLError("nested too deeply") from None


def _lenient(header: str) -> dict[str, Any]:
    """``header`` read as top-level ``key: value`` lines, each value YAML where YAML takes it."""
    fields: dict[str, Any] = {}
    for first, lines in _blocks(header):
        match = _KEY_LINE.fullmatch(lines[0])
        assert match is not None  # _blocks starts a block only at such a line
        key, rest = match.group(1), (match.group(2) or "").strip()
        if key in fields:
            raise FrontMatterError(f"line {first}: YAML error: key {key!r} given twice")
        fields[key] = _value(lines, rest, first)
    return fields


def _blocks(header: str) -> list[tuple[int, list[str]]]:
    """The header's top-level keys, each as (its line in the file, its lines with their continuation).

    A continuation line is indented or blank; a top-level ``#`` line is a comment."""
    blocks: list[tuple[int, list[str]]] = []
    for number, line in enumerate(header.split("\n"), start=2):  # line 1 is the opening '---'
        if line.startswith("#"):
            continue
        if not line.strip() or line[:1].isspace():
            if blocks:
                blocks[-1][1].append(line)
            elif line.strip():
                raise FrontMatterError(f"line {number}: YAML error: an indented line before the first field")
        elif _KEY_LINE.fullmatch(line):
            blocks.append((number, [line]))
        else:
            raise FrontMatterError(
                f"line {number}: YAML error: not a 'key: value' line, nor indented under one"
            )
    return blocks


def _value(lines: list[str], rest: str, first: int) -> Any:
    """One field's value: its lines as YAML, else (when YAML refuses them) their text."""
    try:
        parsed = _strict("\n".join(lines))
    except yaml.YAMLError as error:
        if rest.startswith(_INDICATORS):  # meant as YAML structure, and broken: not plain text
            raise _problem(error, offset=first - 2) from None
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1:
        return next(iter(parsed.values()))
    return "\n".join(line.strip() for line in [rest, *lines[1:]]).strip()


def _problem(error: yaml.YAMLError, *, offset: int) -> FrontMatterError:
    """``error`` as one line, ``line N: YAML error: ...``, N counted from the file's top (``offset``: the
    lines of the header before the text YAML read)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        where = f"line {error.problem_mark.line + 2 + offset}: "  # 0-based, after the opening '---'
        return FrontMatterError(f"{where}YAML error: {error.problem or error.context or 'invalid YAML'}")
    return FrontMatterError(f"YAML error: {error}")
