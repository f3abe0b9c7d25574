"""How teamrt reaches an MCP server at a URL: streamable HTTP, or the deprecated HTTP+SSE transport.

Both are the SDK's clients (``mcp.client.streamable_http``, ``mcp.client.sse``)
with the configured headers, through WebFetch's address checks
(``teamrt.tools.web.address``): the URL's host is resolved once, every address
must be public unless the team file names the host (``[mcp] private_hosts`` or
``[web] private_hosts``), and every request connects to the address checked
(``_pinned_transport``), to that origin only.

MCP deprecated HTTP+SSE (a GET event stream, messages POSTed to the endpoint
it names) in 2025 for streamable HTTP, but Claude Code still takes ``"type":
"sse"`` and set-ups in the wild still write it, so teamrt speaks it too, under
the same checks.

An answer's size is bounded: a JSON answer by ``max_message`` bytes, an event
of a stream by the same (the SDK's ``max_sse_event_size`` for streamable HTTP;
``_pinned_transport`` counts an SSE stream's bytes between events).

A server answering 401 wants OAuth: Claude Code runs the sign-in in a browser
(``/mcp``); teamrt runs unattended and does not, so the request fails with one
line naming OAuth and what to do instead (``oauth_line``): a token in the
entry's ``headers``, ``"Authorization": "Bearer ${TOKEN}"``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from teamrt.errors import TeamrtError, UserError
from teamrt.mcp.config import ServerConfig
from teamrt.terminal import clean_line
from teamrt.tools.base import ToolError
from teamrt.tools.web.address import IPAddress, Target, resolve, target

if TYPE_CHECKING:
    import httpx2
    from mcp.client._transport import TransportStreams

_TIMEOUT, _READ_TIMEOUT = 30.0, 300.0
"""The SDK's own: connecting and writing, and reading (a response stream may stay open)."""
UNAUTHORIZED = 401
OAUTH_CODE = -32001
"""The JSON-RPC error code of a request the server refused for want of credentials (a server's own range)."""

MCP_RULE = (
    "an HTTP MCP server is reached only at public addresses unless the team file's [mcp] private_hosts"
    " names the host"
)


class AddressRefused(TeamrtError, ValueError):
    """An HTTP server's URL that teamrt does not connect to; the message says why, in one line."""


class OAuthRequired(UserError):
    """A server that answered 401: it wants OAuth, which teamrt does not run (``oauth_line``)."""


def oauth_line(challenge: str) -> str:
    """What a 401 means, in one line: ``challenge`` is the server's ``WWW-Authenticate`` (may be '')."""
    said = clean_line(challenge).strip()
    said = said if len(said) <= 80 else said[:77] + "..."
    return (
        "the server answered 401 Unauthorized" + (f" (WWW-Authenticate: {said})" if said else "")
        + ": it wants an OAuth sign-in, which teamrt does not run; give it a token in the entry's headers"
        + ', e.g. "headers": {"Authorization": "Bearer ${TOKEN}"} with TOKEN set in your environment'
    )  # fmt: skip


async def checked_address(url: str, private_hosts: tuple[str, ...]) -> tuple[Target, IPAddress]:
    """``url`` read as WebFetch reads it and its host resolved once: the address to connect to. Every
    address the name has must be public unless ``private_hosts`` names the host (``name``, ``name:port``);
    raises ``AddressRefused``."""
    try:
        found = target(url)
    except ToolError as e:
        raise AddressRefused(str(e).removeprefix("WebFetch: ")) from None
    return found, await resolve(found, private_hosts, refusal=AddressRefused, rule=MCP_RULE)


def _pinned_transport(
    found: Target, address: IPAddress, max_message: int, *, sse_events: bool = False
) -> httpx2.AsyncBaseTransport:
    """An httpx2 transport that sends every request to ``address`` (the one checked), keeping the name in
    ``Host`` and TLS's server name, and refuses a request to any other origin (a redirect elsewhere). A
    JSON answer over ``max_message`` bytes fails as one the SDK cannot parse; an event stream's events
    are bounded by the SDK's ``max_sse_event_size`` (streamable HTTP), or here when ``sse_events`` (the
    SSE client has no bound of its own). A 401 to a JSON-RPC request becomes that request's error,
    ``oauth_line``'s, which the SDK passes on as the server's answer."""
    import httpx2

    class TooLarge(httpx2.StreamError):
        """An answer over the limit: the SDK turns it into the request's error."""

    def too_large() -> TooLarge:
        return TooLarge(
            f"the server sent an answer of more than {max_message:,} bytes, the most teamrt reads"
        )

    class Capped(httpx2.AsyncByteStream):
        def __init__(self, stream: Any) -> None:
            self.stream = stream

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self.stream:
                seen += len(chunk)
                if seen > max_message:
                    raise too_large()
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    class Events(Capped):
        """An event stream whose every event (up to its blank line) is at most ``max_message`` bytes."""

        async def __aiter__(self) -> AsyncIterator[bytes]:
            pending, tail = 0, b""
            async for chunk in self.stream:
                seen = tail + chunk  # a blank line split between chunks is still found
                ends = [seen.rfind(sep) + len(sep) for sep in (b"\n\n", b"\r\r", b"\r\n\r\n") if sep in seen]
                pending = len(seen) - max(ends) if ends else pending + len(chunk)
                if pending > max_message:
                    raise too_large()
                tail = seen[-3:]
                yield chunk

    class Pinned(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport(trust_env=False)

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            host = url.raw_host.decode("ascii").lower().removesuffix(".")
            if (url.scheme, host, url.port or found.port) != (found.url.scheme, found.host, found.port):
                raise httpx2.ConnectError(f"refused: {url.scheme}://{host} is not the server's origin")
            request.url = url.copy_with(host=str(address))
            if url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": found.host}
            response = await self.inner.handle_async_request(request)
            if response.status_code == UNAUTHORIZED:
                return await _unauthorized(request, response)
            if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
                if not sse_events:
                    return response
                stream: httpx2.AsyncByteStream = Events(response.stream)
            else:
                stream = Capped(response.stream)
            return httpx2.Response(
                response.status_code, headers=response.headers, stream=stream, extensions=response.extensions
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Pinned()


async def _unauthorized(request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
    """A 401 answer made the JSON-RPC error of the request it answers (``oauth_line``'s), so that the call
    or the start fails saying what to do; a 401 to anything else (the SSE stream's GET) keeps its status,
    and ``sse_transport`` says the same line."""
    import httpx2

    challenge = response.headers.get("www-authenticate", "")
    await response.aclose()
    message_id = None
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        sent = json.loads(request.content) if request.method == "POST" else None
        message_id = sent.get("id") if isinstance(sent, dict) else None
    if not isinstance(message_id, int | str) or isinstance(message_id, bool):
        return httpx2.Response(UNAUTHORIZED, headers={"www-authenticate": challenge}, request=request)
    error = {"code": OAUTH_CODE, "message": oauth_line(challenge)}
    return httpx2.Response(UNAUTHORIZED, json={"jsonrpc": "2.0", "id": message_id, "error": error},
                           request=request)  # fmt: skip


def _client(config: ServerConfig, private_transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncClient:
    import httpx2

    return httpx2.AsyncClient(
        headers=dict(config.headers), timeout=httpx2.Timeout(_TIMEOUT, read=_READ_TIMEOUT), trust_env=False,
        transport=private_transport,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def http_transport(
    config: ServerConfig, private_hosts: tuple[str, ...], max_message: int
) -> AsyncIterator[TransportStreams]:
    """The SDK's streamable HTTP client for ``config.url``, sending ``config.headers`` with each request,
    connected only to the address ``checked_address`` allows; answers of at most ``max_message`` bytes."""
    from mcp.client.streamable_http import streamable_http_client

    found, address = await checked_address(config.url, private_hosts)
    client = _client(config, _pinned_transport(found, address, max_message))
    reading = streamable_http_client(config.url, http_client=client, max_sse_event_size=max_message)
    async with client, reading as streams:
        yield streams


@contextlib.asynccontextmanager
async def sse_transport(
    config: ServerConfig, private_hosts: tuple[str, ...], max_message: int
) -> AsyncIterator[TransportStreams]:
    """The SDK's HTTP+SSE client for ``config.url`` (the event stream's address), under the same checks
    as ``http_transport``: the endpoint it is told to POST to must be of the same origin (the SDK's check),
    and the pinned transport refuses any other."""
    import httpx2
    from mcp.client.sse import sse_client

    found, address = await checked_address(config.url, private_hosts)

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None
    ) -> httpx2.AsyncClient:
        return _client(config, _pinned_transport(found, address, max_message, sse_events=True))

    try:
        async with sse_client(
            config.url, timeout=_TIMEOUT, sse_read_timeout=_READ_TIMEOUT, httpx_client_factory=factory
        ) as streams:
            yield streams
    except httpx2.HTTPStatusError as e:
        if e.response.status_code != UNAUTHORIZED:
            raise
        raise OAuthRequired(oauth_line(e.response.headers.get("www-authenticate", ""))) from None
