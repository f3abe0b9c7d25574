"""Mutation repair, the coder's way of fixing a bug on ``sim``: small edits to the suspect
function (a comparison flipped, ``and``/``or`` swapped, an off-by-one undone), each tried by
running the failing test; the first that fixes it and breaks nothing is kept.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

OPERATORS: list[tuple[str, str]] = [
    (r"(?<![<>=!])<(?![<=])", "<="),
    (r"<=", "<"),
    (r"(?<![<>=!-])>(?![>=])", ">="),
    (r">=", ">"),
    (r"==", "!="),
    (r"!=", "=="),
    (r"\band\b", "or"),
    (r"\bor\b", "and"),
    (r"\+ 1\b", "- 1"),
    (r"- 1\b", "+ 1"),
    (r" [+-] 1\b", ""),
]


@dataclass(frozen=True)
class Candidate:
    line: int
    """1-based."""
    before: str
    after: str


def source_lines(read_output: str) -> list[str]:
    """The file's lines from ``read``'s numbered output."""
    return [line.partition("\t")[2] for line in read_output.splitlines() if re.match(r"^\s*\d+\t", line)]


def function_span(lines: list[str], name: str) -> range:
    """The lines (0-based) of the body of ``def name``, after its docstring; empty if not found."""
    start = next((i for i, line in enumerate(lines) if re.match(rf"\s*(async\s+)?def {name}\(", line)), None)
    if start is None:
        return range(0)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (
        not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
    ):
        end += 1
    body = start + 1
    while (
        body < end
        and lines[body].rstrip().endswith(":")
        and not lines[body]
        .strip()
        .startswith(("if", "for", "while", "with", "return", "else", "elif", "try", "except"))
    ):  # the rest of a signature split over lines
        body += 1
    if body < end and lines[body].strip().startswith(('"""', "'''")):
        quote = lines[body].strip()[:3]
        closes = lines[body].strip().count(quote) >= 2
        body += 1
        while not closes and body < end:
            closes = quote in lines[body]
            body += 1
    return range(body, end)


def candidates(lines: list[str], name: str) -> list[Candidate]:
    """Every single-operator change to the body of ``name``, top to bottom."""
    found = []
    for i in function_span(lines, name):
        code = lines[i].split("#")[0]
        for pattern, replacement in OPERATORS:
            for match in re.finditer(pattern, code):
                changed = lines[i][: match.start()] + replacement + lines[i][match.end() :]
                found.append(Candidate(i + 1, lines[i].strip(), changed.strip()))
    return found


def callees(lines: list[str], name: str) -> list[str]:
    """The functions the body of ``name`` calls (builtins and methods left out), in order."""
    called = []
    for i in function_span(lines, name):
        called += re.findall(r"(?<![.\w])([a-z_]\w*)\(", lines[i].split("#")[0])
    return [c for c in dict.fromkeys(called) if c not in dir(builtins) and c != name]
