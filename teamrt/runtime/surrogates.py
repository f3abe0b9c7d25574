"""Lone surrogates in a model's reply, replaced before anything else sees them.

A reply is JSON, and JSON can spell a lone surrogate (``"\\ud800"``), which
Python decodes into a ``str`` that no UTF-8 file, pipe, argv or request can
carry: the first write of it raises. An injected model can send one on
purpose, so each is replaced by U+FFFD in the reply's text and tool inputs.
Thinking blocks are kept as they are: their signature covers their bytes.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from teamrt.models.types import Block, ModelResponse

_LONE = re.compile(r"[\ud800-\udfff]")


def scrub(value: Any) -> Any:
    """``value`` (JSON data) with every surrogate in its strings, keys included, replaced by U+FFFD."""
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value)
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    return value


def scrubbed(response: ModelResponse) -> ModelResponse:
    """``response`` with no lone surrogate outside its thinking blocks (the same object when it had none)."""
    content: list[Block] = [
        block if block.get("type") in ("thinking", "redacted_thinking") else scrub(block)
        for block in response.content
    ]
    if content == response.content:
        return response
    return dataclasses.replace(response, content=content)
