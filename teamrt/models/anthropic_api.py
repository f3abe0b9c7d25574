"""The ``anthropic`` provider: Claude (or any Anthropic-compatible server) through the real SDK.

Retries are split the way the API fails. Before a response starts (429, 529,
5xx, a connection refused, no headers within the stall limit) the SDK retries,
obeying ``retry-after``. Once a stream has begun the SDK does not: a stream
cut mid-way, silent for longer than the stall limit (httpx's read timeout,
set to that limit, fires between two chunks), or ended by an ``overloaded`` /
``api_error`` event is retried here, a bounded number of times, from the
start. That is safe because nothing is done with a response until it is
complete and persisted. ``on_restart`` tells a text listener to drop what it
was shown.

A request that names betas goes through ``client.beta.messages`` (the SDK
sends the ``anthropic-beta`` header); any other through ``client.messages``.
Before each attempt the process's ``Pacer`` for this account (``pacing``) may
hold the call back until the rate-limit buckets can take it; the figures of
each response (and of each error response) go back to it.

This module imports the SDK (about 1.5 s); import it only to call a model.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anthropic
import httpx2

from teamrt.models import errors
from teamrt.models.catalog import ModelInfo, lookup
from teamrt.models.pacing import Pacer, RateLimits, Ticket, pacer_for
from teamrt.models.params import request_params
from teamrt.models.prefixes import PromptShape, memory_for, prompt_shape
from teamrt.models.pricing import DEFAULT_MIN_CACHE_TOKENS, cost_usd
from teamrt.models.stream import StreamAssembler
from teamrt.models.types import ModelRequest, ModelResponse, OnRestart, OnText
from teamrt.settings import ModelSettings

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
CONNECT_TIMEOUT_S = 10.0
STREAM_RETRY_MAX_S = 16.0
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error"})


class _StreamBroken(Exception):
    def __init__(self, reason: str, *, stalled: bool = False) -> None:
        super().__init__(reason)
        self.stalled = stalled


class AnthropicModel:
    """A ``Model`` over ``AsyncAnthropic``. ``labels`` sends the agent, role and team as headers
    (only to the simulator, which picks its policy by them)."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        prices: Mapping[str, ModelInfo] | None = None,
        labels: bool = False,
    ) -> None:
        refuse_real_models(name, base_url)
        self.name = name
        self._settings = settings or ModelSettings()
        self._info = lookup(name, dict(prices) if prices is not None else None)
        self._labels = labels
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=self._settings.sdk_retries,
            timeout=httpx2.Timeout(self._settings.stall_seconds, connect=CONNECT_TIMEOUT_S),
        )
        account = (str(self._client.base_url), self._client.api_key or self._client.auth_token)
        self._pacer: Pacer = pacer_for(*account)
        self._prefixes = memory_for(*account)
        self._min_cache = self._info.min_cache_tokens if self._info is not None else DEFAULT_MIN_CACHE_TOKENS

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        params = request_params(request)
        headers = (
            {"teamrt-agent": request.agent, "teamrt-role": request.role, "teamrt-team": request.team}
            if self._labels
            else None
        )
        shape = prompt_shape(params)
        retries = self._settings.stream_retries
        attempt = 1
        while True:
            try:
                return await self._attempt(params, headers, on_text, attempt, shape)
            except _StreamBroken as e:
                if attempt > retries:
                    kind = errors.ModelStalled if e.stalled else errors.ModelStreamCut
                    raise kind(f"{self.name}: {e} on all {attempt} attempts", attempts=attempt) from e
            if on_restart is not None:
                on_restart()
            delay = min(self._settings.stream_retry_delay * 2 ** (attempt - 1), STREAM_RETRY_MAX_S)
            await asyncio.sleep(delay * (1 - 0.25 * random.random()))
            attempt += 1

    async def _attempt(
        self,
        params: dict[str, Any],
        headers: dict[str, str] | None,
        on_text: OnText | None,
        attempt: int,
        shape: PromptShape,
    ) -> ModelResponse:
        """One paced attempt: the input the rate limit will count is the prompt less what the cache likely
        serves (``prefixes``); output is reserved at ``max_tokens``, as the API reserves it."""
        uncached = shape.tokens - self._prefixes.cached(shape, self._min_cache)
        ticket = await self._pacer.admit(uncached, params["max_tokens"])
        try:
            return await self._paced_attempt(params, headers, on_text, attempt, ticket, shape)
        finally:
            self._pacer.release(ticket)

    async def _paced_attempt(
        self,
        params: dict[str, Any],
        headers: dict[str, str] | None,
        on_text: OnText | None,
        attempt: int,
        ticket: Ticket,
        shape: PromptShape,
    ) -> ModelResponse:
        create = self._client.beta.messages.create if "betas" in params else self._client.messages.create
        try:
            stream: Any = await create(**params, stream=True, extra_headers=headers)
        except anthropic.APIError as e:
            if isinstance(e, anthropic.APIStatusError):
                self._pacer.observe(ticket, RateLimits.from_headers(e.response.headers))
            raise _mapped(self.name, e) from e
        limits = RateLimits.from_headers(stream.response.headers)
        self._pacer.observe(ticket, limits)
        self._prefixes.remember(shape, self._min_cache)  # the response began: its entries are visible
        assembler = StreamAssembler(on_text)
        try:
            async for event in stream:
                assembler.add(event)
        except httpx2.TimeoutException as e:
            raise _StreamBroken(
                f"stream stalled (silent for over {self._settings.stall_seconds:g}s)", stalled=True
            ) from e
        except (httpx2.TransportError, anthropic.APIConnectionError) as e:
            raise _StreamBroken(f"stream cut ({type(e).__name__})") from e
        except anthropic.APIStatusError as e:  # an error event inside a 200 stream
            if e.type in _RETRYABLE_STREAM_ERRORS:
                raise _StreamBroken(f"stream ended by {e.type}") from e
            raise _mapped(self.name, e) from e
        finally:
            await stream.close()
        if not assembler.complete:
            raise _StreamBroken("stream ended before message_stop")
        usage = assembler.usage()
        return ModelResponse(
            id=assembler.id,
            model=assembler.model,
            content=assembler.content,
            stop_reason=assembler.stop_reason,
            stop_sequence=assembler.stop_sequence,
            usage=usage,
            cost_usd=None if self._info is None else cost_usd(usage, self._info),
            invalid_tool_inputs=assembler.invalid_tool_inputs,
            attempts=attempt,
            request_id=stream.response.headers.get("request-id"),
            applied_edits=assembler.applied_edits,
            input_transformations=assembler.input_transformations,
            rate_limits=limits,
        )

    async def count_tokens(self, request: ModelRequest) -> int:
        params = request_params(request)
        params.pop("max_tokens")
        params.pop("stop_sequences", None)
        extra = params.pop("extra_body", {})
        extra.pop("temperature", None)  # count_tokens takes no sampling settings
        if extra:  # context_management with no beta named: the server decides
            params["extra_body"] = extra
        messages: Any = self._client.beta.messages if "betas" in params else self._client.messages
        try:
            result = await messages.count_tokens(**params)
        except anthropic.APIError as e:
            raise _mapped(self.name, e) from e
        return int(result.input_tokens)

    async def aclose(self) -> None:
        await self._client.close()


def refuse_real_models(name: str, base_url: str | None) -> None:
    """With ``TEAMRT_NO_REAL_MODELS`` set, raise ``RealModelBlocked`` for any server off loopback."""
    if not os.environ.get(errors.BLOCK_ENV):
        return
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL")
    if url is None or urlsplit(url).hostname not in _LOOPBACK:
        raise errors.RealModelBlocked(
            f"refusing to call {name} at {url or 'the Anthropic API'}: {errors.BLOCK_ENV} is set"
            " (tests use the sim or scripted models)"
        )


def _mapped(model: str, e: anthropic.APIError) -> errors.ModelError:
    """The SDK's typed error as teamrt's, after the SDK's own retries."""
    if isinstance(e, anthropic.APIStatusError):
        retries_taken = e.response.request.headers.get("x-stainless-retry-count", "0")
        attempts = int(retries_taken) + 1 if retries_taken.isdigit() else 1
        status, kind = e.status_code, e.type
        detail = e.api_message or str(e)
        cls: type[errors.ModelError]
        if errors.is_context_too_long(status, kind, detail):
            cls = errors.ModelContextTooLong
        elif status in (401, 403):
            cls = errors.ModelAuthError
        elif status == 429 or kind == "rate_limit_error":
            cls = errors.ModelRateLimited
        elif status == 529 or kind == "overloaded_error":
            cls = errors.ModelOverloaded
        elif status >= 500 or kind == "api_error":
            cls = errors.ModelServerError
        else:
            cls = errors.ModelBadRequest
        where = (
            f"HTTP {status}"
            + (f", {kind}" if kind else "")
            + (f", request {e.request_id}" if e.request_id else "")
        )
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if cls is errors.ModelContextTooLong:
            return errors.ModelContextTooLong(
                f"{model}: {detail} ({where}){tries}", status=status, error_type=kind,
                request_id=e.request_id, attempts=attempts, detail=detail,
            )  # fmt: skip
        return cls(
            f"{model}: {detail} ({where}){tries}",
            status=status,
            error_type=kind,
            request_id=e.request_id,
            attempts=attempts,
        )
    if isinstance(e, anthropic.APITimeoutError):
        return errors.ModelStalled(f"{model}: no response within the stall limit, after the SDK's retries")
    return errors.ModelConnectionError(f"{model}: {e} (after the SDK's retries)")
