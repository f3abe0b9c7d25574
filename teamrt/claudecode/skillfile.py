"""One SKILL.md read: its front matter, as tolerant as Claude Code's reading, and what the model is shown.

Claude Code loads hand-written front matter that strict YAML refuses (an
unquoted ``description: Use when: ...``); so does this reader, taking such a
block line by line. (``teamrt.agents.frontmatter`` reads agent files the same
way; it sits in a layer above ``claudecode`` and cannot be imported here.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from teamrt.errors import UserError

MAX_DESCRIPTION = 1536
"""Characters of description and ``when_to_use`` together that the model is shown of one skill, Claude
Code's cap (``maxSkillDescriptionChars``)."""
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CLOSING = re.compile(r"-{3,}[ \t]*")
_KEY_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?[ \t]*")


class SkillError(UserError, ValueError):
    """A skill that cannot be read or used; the message is one line."""


def split_front_matter(text: str) -> tuple[str | None, str]:
    """The front matter (None when the file has none) and the body; a closing line of more dashes closes
    it too. The same block teamrt's agent files use (``teamrt.agents.frontmatter``, a layer above)."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != "---":
        return None, text
    for end in range(1, len(lines)):
        if _CLOSING.fullmatch(lines[end]):
            return "\n".join(lines[1:end]), "\n".join(lines[end + 1 :])
    raise SkillError("front matter not closed: no '---' line after the first")


def front_matter_fields(header: str, where: str) -> dict[str, Any]:
    """The front matter's fields: strict YAML, else (hand-written files an unquoted ``: `` breaks, which
    Claude Code loads) top-level ``key: value`` lines with their indented continuations, as text."""
    try:
        fields = yaml.safe_load(header)
    except (yaml.YAMLError, RecursionError):
        return _lenient(header)
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise SkillError(f"{where}: front matter must be fields (key: value lines); left out")
    return {str(key): value for key, value in fields.items()}


def _lenient(header: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    key: str | None = None
    for line in header.split("\n"):
        match = None if line[:1].isspace() or line.startswith("#") else _KEY_LINE.fullmatch(line)
        if match is not None:
            key = match.group(1)
            fields[key] = (match.group(2) or "").strip()
        elif key is not None and (not line.strip() or line[:1].isspace()):
            fields[key] = f"{fields[key]} {line.strip()}".strip()
    return {key: _unquoted(value) for key, value in fields.items()}


def _unquoted(value: str) -> str:
    """A value YAML refused, its surrounding quotes (if it has a matching pair) taken off."""
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"" else value


def flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes"))


def description_of(fields: Mapping[str, Any], body: str) -> str:
    """What the model is shown: ``description`` (else the body's first paragraph) and ``when_to_use``, on
    one line without control characters, at most ``MAX_DESCRIPTION`` characters."""
    description = fields.get("description")
    text = description if isinstance(description, str) and description.strip() else _first_paragraph(body)
    when = fields.get("when_to_use")
    if isinstance(when, str) and when.strip():
        text = f"{text} {when}"
    one_line = " ".join(CONTROL.sub(" ", text).split())
    return one_line if len(one_line) <= MAX_DESCRIPTION else one_line[: MAX_DESCRIPTION - 1] + "…"


def _first_paragraph(body: str) -> str:
    paragraph: list[str] = []
    for line in body.strip().split("\n"):
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line.strip().lstrip("#").strip())
    return " ".join(paragraph)
