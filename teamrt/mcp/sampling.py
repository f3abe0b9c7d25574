"""A server's ``sampling/createMessage`` read into a model request teamrt may send, and its answer back.

A server that samples spends the run's money with text of its own choosing, so
what it asks is checked before anything is asked of a person or a model:

- the conversation: at most ``MAX_MESSAGES`` messages of text and images (the
  types the Messages API reads), roles alternating from a user's turn, at most
  ``MAX_PROMPT_CHARS`` characters of text in all; audio, tool use and tool
  results are refused (teamrt does not declare ``sampling.tools``: a sampled
  model never gets tools, the agent's or the server's);
- ``maxTokens`` is cut to ``MAX_TOKENS_CAP`` (and to the model's own limit);
- ``modelPreferences`` hints are matched, in order, as substrings of the models
  the team file names (``allowed``); the first that matches one is used, else
  the agent's own model. A server never reaches a model the team does not use.
  Numeric priorities are advisory (the spec's word) and not used.
- ``includeContext`` is ignored: no other context is ever attached.

The model's answer goes back as text only, cleaned of control characters
(``teamrt.terminal.clean``) and cut to ``MAX_REPLY_CHARS``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from teamrt.errors import TeamrtError
from teamrt.models.types import Block, Message
from teamrt.terminal import clean

MAX_TOKENS_CAP: Final = 4096
"""The most output tokens a server's sampling request gets, whatever it asks."""
MAX_MESSAGES: Final = 50
MAX_PROMPT_CHARS: Final = 100_000
"""Text of a sampling request's messages and system prompt, in all."""
MAX_IMAGES: Final = 5
MAX_IMAGE_CHARS: Final = 5 * 1024 * 1024
MAX_REPLY_CHARS: Final = 100_000
MAX_STOP_SEQUENCES: Final = 8
IMAGE_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")
STOP_REASONS: Final = {"end_turn": "endTurn", "stop_sequence": "stopSequence", "max_tokens": "maxTokens"}


class SamplingRefused(TeamrtError):
    """A sampling request teamrt does not run; the message, one line, goes back to the server."""


@dataclass(frozen=True)
class SampleRequest:
    """A server's sampling request as teamrt sends it."""

    messages: list[Message]
    system: str
    max_tokens: int
    """Already capped (``MAX_TOKENS_CAP``)."""
    asked_tokens: int
    """What the server asked for."""
    hints: tuple[str, ...] = ()
    temperature: float | None = None
    stop_sequences: list[str] = field(default_factory=list)

    def preview(self) -> dict[str, Any]:
        """The request as an ask shows it: its system prompt and last message, cut."""
        last = self.messages[-1]["content"] if self.messages else []
        text = " ".join(b["text"] for b in last if isinstance(b, dict) and b.get("type") == "text")
        return {
            "messages": len(self.messages),
            "last": _cut(text, 500),
            "system": _cut(self.system, 300),
            "max_tokens": self.max_tokens,
        }


def _cut(text: str, limit: int) -> str:
    line = " ".join(clean(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def read_request(params: Any) -> SampleRequest:
    """``params`` (the SDK's ``CreateMessageRequestParams``) as a ``SampleRequest``; raises
    ``SamplingRefused``."""
    if getattr(params, "tools", None) or getattr(params, "tool_choice", None):
        raise SamplingRefused("teamrt does not offer tools to sampled models (no sampling.tools capability)")
    listed = list(getattr(params, "messages", None) or [])
    if not listed:
        raise SamplingRefused("the sampling request has no messages")
    if len(listed) > MAX_MESSAGES:
        raise SamplingRefused(f"the sampling request has {len(listed)} messages; teamrt takes {MAX_MESSAGES}")
    system = getattr(params, "system_prompt", None) or ""
    if not isinstance(system, str):
        raise SamplingRefused("the system prompt is not text")
    chars, images = len(system), 0
    messages: list[Message] = []
    for item in listed:
        role = getattr(item, "role", None)
        if role not in ("user", "assistant"):
            raise SamplingRefused(f"a message has the role {str(role)[:20]!r}")
        content = item.content if isinstance(item.content, list) else [item.content]
        blocks: list[Block] = []
        for part in content:
            block, size = _block(part)
            chars += size
            images += block["type"] == "image"
            blocks.append(block)
        if not blocks:
            raise SamplingRefused("a message has no content")
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)  # the API wants turns to alternate
        else:
            messages.append({"role": role, "content": blocks})
    if messages[0]["role"] != "user":
        raise SamplingRefused("the conversation does not start with a user's message")
    if messages[-1]["role"] != "user":
        raise SamplingRefused("the conversation does not end with a user's message")
    if chars > MAX_PROMPT_CHARS:
        raise SamplingRefused(
            f"the request holds {chars:,} characters of text; teamrt takes {MAX_PROMPT_CHARS:,}"
        )
    if images > MAX_IMAGES:
        raise SamplingRefused(f"the request holds {images} images; teamrt takes {MAX_IMAGES}")
    asked = getattr(params, "max_tokens", None)
    if not isinstance(asked, int) or isinstance(asked, bool) or asked < 1:
        raise SamplingRefused("maxTokens is not a positive whole number")
    return SampleRequest(
        messages=messages,
        system=system,
        max_tokens=min(asked, MAX_TOKENS_CAP),
        asked_tokens=asked,
        hints=_hints(getattr(params, "model_preferences", None)),
        temperature=_temperature(getattr(params, "temperature", None)),
        stop_sequences=_stops(getattr(params, "stop_sequences", None)),
    )


def _block(part: Any) -> tuple[Block, int]:
    kind = getattr(part, "type", None)
    if kind == "text":
        text = str(part.text)
        return {"type": "text", "text": text}, len(text)
    if kind == "image":
        mime, data = str(part.mime_type), str(part.data)
        if mime not in IMAGE_TYPES:
            raise SamplingRefused(f"an image of type {mime[:40]!r}; the model reads {', '.join(IMAGE_TYPES)}")
        if len(data) > MAX_IMAGE_CHARS:
            raise SamplingRefused(
                f"an image of {len(data):,} characters of base64; teamrt takes {MAX_IMAGE_CHARS:,}"
            )
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}, 0
    raise SamplingRefused(f"a message holds {str(kind)[:30]!r} content; teamrt samples text and images only")


def _hints(preferences: Any) -> tuple[str, ...]:
    hints = getattr(preferences, "hints", None) or []
    names = [getattr(h, "name", None) for h in hints[:20]]
    return tuple(n.strip().lower()[:100] for n in names if isinstance(n, str) and n.strip())


def _temperature(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return None  # out of the API's range: the model's default, rather than a refusal from the API


def _stops(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [s for s in value if isinstance(s, str) and s.strip() and len(s) <= 100][:MAX_STOP_SEQUENCES]


def choose_model(hints: Sequence[str], own: str, allowed: Sequence[str]) -> str:
    """The model a sampling request runs on: the first of ``allowed`` a hint names (as a substring, in the
    hints' order), else ``own`` (the asking agent's model)."""
    for hint in hints:
        for name in allowed:
            if hint in name.lower():
                return name
    return own


def reply_text(content: Sequence[Block]) -> str:
    """A model's answer as the text a server gets: its text blocks, cleaned and cut (thinking and any
    other block left out)."""
    text = "\n".join(b["text"] for b in content if b.get("type") == "text" and isinstance(b.get("text"), str))
    text = clean(text)
    return text if len(text) <= MAX_REPLY_CHARS else text[: MAX_REPLY_CHARS - 1] + "…"


def stop_reason(reason: str | None) -> str:
    return STOP_REASONS.get(reason or "", "endTurn")


def shown(request: SampleRequest) -> str:
    """The request in one line, for the journal."""
    return json.dumps(request.preview(), ensure_ascii=False)[:600]
