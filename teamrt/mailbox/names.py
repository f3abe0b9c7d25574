"""The allowlist for agent and run names.

A name becomes a directory name, so it is checked against a pattern that
cannot express a path: no separators, no dots, no colons, no leading '-'.
"""

from __future__ import annotations

import re

from teamrt.mailbox.errors import InvalidName

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def is_name(value: object) -> bool:
    return isinstance(value, str) and NAME_RE.fullmatch(value) is not None


def check_name(value: str, what: str = "agent") -> str:
    """Return ``value`` if it is an allowed name, else raise :class:`InvalidName`."""
    if not is_name(value):
        raise InvalidName(str(value), what)
    return value
