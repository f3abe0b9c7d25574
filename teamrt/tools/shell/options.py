"""Reading a program's options the way it does, up to its first operand: clusters (``-an5``), values
attached or in the next word, ``--name=value``, ``--``. What it does not know, it does not guess."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from teamrt.tools.shell.parse import Word


@dataclass(frozen=True)
class Grammar:
    """How a program's options are written, up to its first operand."""

    flags: str = ""
    """Short options without a value."""
    values: str = ""
    """Short options with a value, attached (``-n5``) or the next word."""
    attached: str = ""
    """Short options whose value, if any, is attached (``xargs -i{}``)."""
    long_flags: frozenset[str] = frozenset()
    """Long options without a value, or with one only after ``=``."""
    long_values: frozenset[str] = frozenset()
    """Long options with a value, after ``=`` or the next word."""


@dataclass(frozen=True)
class Options:
    seen: tuple[tuple[str, Word | None], ...]
    """Each option (``-C``, ``--git-dir``) and its value."""
    end: int
    """The index of the first word after the options."""
    problem: str | None
    """Why the options could not be read to their end, or None."""


def options(words: Sequence[Word], grammar: Grammar) -> Options:
    """Read the options at the start of ``words``."""
    seen: list[tuple[str, Word | None]] = []
    i = 0

    def stop(problem: str | None) -> Options:
        return Options(tuple(seen), i, problem)

    while i < len(words):
        word = words[i]
        text = word.text
        if text == "--" and word.literal:
            i += 1
            return stop(None)
        if not text.startswith("-") or text == "-":
            return stop(None if word.literal else f"`{text}` is not plain text")
        name, takes_next = text, False
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            if name not in grammar.long_flags | grammar.long_values:
                return stop(f"`{name}` is an option the checker does not know")
            takes_next = not eq and name in grammar.long_values
            seen.append((name, Word(value, word.literal) if eq else None))
        else:
            for j, letter in enumerate(text[1:], start=2):
                name = "-" + letter
                if letter in grammar.values + grammar.attached:
                    rest = text[j:]
                    takes_next = not rest and letter in grammar.values
                    seen.append((name, Word(rest, word.literal) if rest else None))
                    break
                if letter not in grammar.flags:
                    return stop(f"`{name}` is an option the checker does not know")
                seen.append((name, None))
        if not word.literal:
            return stop(f"`{text}` is not plain text")
        i += 1
        if takes_next:
            if i == len(words):
                return stop(f"`{name}` needs a value")
            seen[-1] = (name, words[i])
            i += 1
            if not words[i - 1].literal:
                return stop(f"`{words[i - 1].text}` is not plain text")
    return stop(None)


def grammar(flags: str = "", values: str = "", attached: str = "", **long: str) -> Grammar:
    """A grammar from option letters and, in ``long_flags`` and ``long_values``, space-separated long
    option names without their dashes."""
    sets = {key: frozenset(f"--{name}" for name in names.split()) for key, names in long.items()}
    return Grammar(flags, values, attached, **sets)
