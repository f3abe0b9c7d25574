"""Reading a file tool's input: each value checked, a one-line ToolError for what does not fit.

Text must be real Unicode: a lone surrogate (``"\\ud800"``, which JSON can
carry) cannot be encoded as UTF-8, neither for a file name nor a file.
"""

from __future__ import annotations

from typing import Any

from teamrt.tools.base import ToolError

PATH_BYTES = 4096
"""Longest path accepted (Linux's PATH_MAX)."""


def text(input: dict[str, Any], op: str, key: str, default: str | None = None) -> str:
    value = input.get(key, default)
    if not isinstance(value, str):
        raise ToolError(f"{op}: {key} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ToolError(
            f"{op}: {key} holds a lone surrogate (U+{ord(value[e.start]):04X}), which is not valid Unicode"
        ) from e
    return value


def path(input: dict[str, Any], op: str, key: str = "file_path") -> str:
    """A path: ``file_path`` is required, any other key defaults to the workspace ('.')."""
    value = text(input, op, key, None if key == "file_path" else ".")
    if not value or "\0" in value:
        raise ToolError(f"{op}: {key} must be a non-empty path without NUL characters")
    if len(value.encode()) > PATH_BYTES:
        raise ToolError(f"{op}: {key} is longer than {PATH_BYTES} bytes")
    return value


def whole(input: dict[str, Any], op: str, key: str, default: int, least: int = 1) -> int:
    value = input.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ToolError(f"{op}: {key} must be a whole number from {least}")
    return value


def flag(input: dict[str, Any], op: str, key: str) -> bool:
    value = input.get(key, False)
    if not isinstance(value, bool):
        raise ToolError(f"{op}: {key} must be true or false")
    return value
