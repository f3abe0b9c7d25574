"""The size of an agent's next request, from the token counts the API returned.

teamrt's own count (``teamrt.models.tokens``: 4 bytes a token) is exact on ``sim`` but not on Claude,
whose tokenizers run denser (about 30% on Sonnet 5.x, a third-party figure). So the size is built from
what the API said:

    next request = prompt_tokens of the last response (exact: everything it was sent)
                 + output_tokens of that response (the reply, sent back next)
                 + teamrt's estimate of what was added since x ``ESTIMATE_MARGIN``

Only the small part added since the last response is estimated, with a margin that covers a denser
tokenizer. With no count to start from (a fresh agent, a resume, a history just replaced) the whole
request is estimated with the margin; the loop asks ``count_tokens`` before compacting on such an
estimate alone (``uncertain``), so a margin never compacts a history that fits.
"""

from __future__ import annotations

import math
from typing import Any

from teamrt.models.tokens import message_tokens
from teamrt.models.types import Usage

ESTIMATE_MARGIN = 1.3
"""teamrt counts tokens approximately; a real model's count may be this much higher."""


class RequestSizer:
    """Tracks the next request's input tokens for one agent. ``margin`` 1.0 with ``measured`` False is
    the legacy bare estimate (the API's counts ignored)."""

    def __init__(self, fixed: int, messages: list[Any], *, measured: bool = True) -> None:
        self._fixed = fixed  # system and tools, by teamrt's estimate
        self._measured = measured
        self._margin = ESTIMATE_MARGIN if measured else 1.0
        self._known: int | None = None  # the API's count of the history up to the last response
        self._added = 0  # teamrt's estimate of what came after it
        self._estimate = sum(message_tokens(m) for m in messages)  # the whole history, teamrt's estimate

    @property
    def fixed(self) -> int:
        """The system prompt and tools, by teamrt's estimate with its margin."""
        return math.ceil(self._fixed * self._margin)

    @property
    def size(self) -> int:
        """The next request's input tokens, erring high."""
        if self._known is not None:
            return self._known + math.ceil(self._added * self._margin)
        return math.ceil((self._fixed + self._estimate) * self._margin)

    @property
    def uncertain(self) -> bool:
        """Whether an exact count could change the answer: the size leans on the margin."""
        return self._measured and (self._known is None or self._added > 0)

    def added(self, message: dict[str, Any]) -> None:
        """A message was appended to the history."""
        tokens = message_tokens(message)
        self._estimate += tokens
        self._added += tokens

    def answered(self, usage: Usage) -> None:
        """The agent's request was answered (its reply already ``added``): the API's count replaces the
        estimate."""
        if not self._measured or usage.prompt_tokens <= 0:
            return
        self._known = usage.prompt_tokens + usage.output_tokens
        self._added = 0

    def counted(self, tokens: int) -> None:
        """``count_tokens`` (or a "prompt is too long" answer) said the whole next request is ``tokens``."""
        if self._measured:
            self._known, self._added = tokens, 0

    def replaced(self, messages: list[Any]) -> None:
        """The history was replaced (compacted): nothing the API counted still holds."""
        self._known, self._added = None, 0
        self._estimate = sum(message_tokens(m) for m in messages)
