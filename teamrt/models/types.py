"""The one seam between an agent and a model: a Messages API request in, a response out.

Content blocks stay plain JSON objects (``dict``) exactly as the Messages API
defines them, so they go into the store, back into the next request and into a
fork's prefix unchanged, byte for byte: thinking blocks and their signatures
included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from teamrt.models.pacing import RateLimits

Block = dict[str, Any]
"""A content block (``text``, ``thinking``, ``tool_use``, ``tool_result`` ...) as JSON."""

Message = dict[str, Any]
"""``{"role": "user" | "assistant", "content": str | [Block, ...]}``."""

CacheTTL = Literal["5m", "1h"]

OnText = Callable[[str], None]
"""Receives each piece of assistant text as it streams."""

OnRestart = Callable[[], None]
"""Called when a cut stream is retried: the text received so far will be sent again."""


@dataclass(frozen=True)
class ModelRequest:
    """One Messages API call. ``agent``, ``role`` and ``team`` label it for logs and for the simulator."""

    model: str
    messages: list[Message]
    max_tokens: int
    system: str | list[Block] = ""
    tools: list[Block] = field(default_factory=list)
    thinking: dict[str, Any] | None = None
    tool_choice: dict[str, Any] | None = None
    temperature: float | None = None
    stop_sequences: list[str] = field(default_factory=list)
    cache_ttl: CacheTTL = "5m"
    context_management: dict[str, Any] | None = None
    """The API's ``context_management`` (server-side context editing and compaction), sent as it is."""
    effort: str | None = None
    """Sent as ``output_config.effort`` (None: the model's default)."""
    compaction: dict[str, Any] | None = None
    """The API's ``compaction`` parameter (compaction on demand, beta ``compact-2026-09-04``): the request
    is answered with a ``compaction`` block alone; never with ``context_management``."""
    betas: tuple[str, ...] = ()
    """Beta features the request uses, sent in the ``anthropic-beta`` header."""
    agent: str = ""
    role: str = ""
    team: str = ""


@dataclass(frozen=True)
class Usage:
    """Tokens of one call, as the API reports them.

    ``input_tokens`` counts only the input that was neither read from nor
    written to the cache; ``cache_creation_input_tokens`` is split by lifetime
    in ``cache_write_5m`` and ``cache_write_1h``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    web_search_requests: int = 0
    """Searches the API's web search tool ran for the call (``usage.server_tool_use``), billed apiece."""
    compaction: tuple[Usage, ...] = ()
    """The usage of each server-side compaction the call ran (``usage.iterations`` of type
    ``compaction``): billed on top, since the API leaves them out of the fields above, and never part of
    ``prompt_tokens`` (a compaction's input is the context it closed, not the one the call sent)."""

    @property
    def prompt_tokens(self) -> int:
        """Every input token of the call, cached or not."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


@dataclass(frozen=True)
class ModelResponse:
    """A complete response. ``cost_usd`` is None for a model with no known price.

    ``invalid_tool_inputs`` maps the id of a ``tool_use`` block whose streamed
    input was not valid JSON to the parse error; that block's ``input`` is
    ``{}``, so the conversation stays valid and the caller answers the call with
    an error result instead of running it.
    """

    id: str
    model: str
    content: list[Block]
    stop_reason: str | None
    usage: Usage
    cost_usd: float | None = None
    stop_sequence: str | None = None
    invalid_tool_inputs: dict[str, str] = field(default_factory=dict)
    attempts: int = 1
    request_id: str | None = None
    applied_edits: list[dict[str, Any]] = field(default_factory=list)
    """What the API's context editing cleared before the model read the request
    (``context_management.applied_edits``)."""
    input_transformations: list[dict[str, Any]] = field(default_factory=list)
    """Thinking blocks of the request the API dropped (or let through) under its binding rules."""
    rate_limits: RateLimits | None = None
    """The account's rate-limit figures the response carried (None: it carried none)."""

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.content if b.get("type") == "text")

    @property
    def tool_uses(self) -> list[Block]:
        """The client tool calls, which teamrt runs; ``server_tool_use`` blocks were run by the API and
        carry their results in the same response."""
        return [b for b in self.content if b.get("type") == "tool_use"]


class Model(Protocol):
    """What the agent loop calls. Implemented by the anthropic provider (also used for
    ``sim``) and by ``ScriptedModel``."""

    name: str

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        """Run one call, streaming underneath; raises a ``ModelError`` subclass on failure."""
        ...

    async def count_tokens(self, request: ModelRequest) -> int:
        """The input tokens ``request`` would use."""
        ...

    async def aclose(self) -> None: ...
