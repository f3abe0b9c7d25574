"""A small HTTP/1.1 server on loopback, run in a thread of its own.

Just what the anthropic SDK needs: keep-alive connections, requests with a
``Content-Length`` body, JSON responses and chunked (streamed) responses, and
the means to misbehave on purpose (stall, cut the connection). The standard
library's ``http.server`` adds ~40 ms per request (Nagle against delayed
ACKs); here every socket has ``TCP_NODELAY`` and a response goes out in as
few writes as it can.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
"""The Messages API's request size limit (32 MB): a larger body is answered 413 ``request_too_large``."""
MAX_DRAINED_BYTES = 256 * 1024 * 1024
"""A body over the limit is read and dropped up to this size, so the client gets its 413 rather than a
reset; past it the connection is closed unread."""
_TOO_LARGE = {"type": "error", "error": {"type": "request_too_large",
              "message": "Request exceeds the maximum allowed number of bytes."}}  # fmt: skip
"""The API's 413 (api/errors: "request_too_large: Request exceeds the maximum allowed number of bytes"),
which its edge answers before the request reaches the API servers, so before the body is parsed."""
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            413: "Request Entity Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
            529: "Overloaded"}  # fmt: skip


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class HttpResponse:
    """Write one response: ``json`` whole, or ``start_stream`` + ``chunk``... + ``end_stream``."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.aborted = False

    async def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        head = _head(
            status, {"content-type": "application/json", "content-length": str(len(data)), **(headers or {})}
        )
        self._writer.write(head + data)
        await self._writer.drain()

    async def start_stream(self, headers: dict[str, str]) -> None:
        self._writer.write(_head(200, {**headers, "transfer-encoding": "chunked"}))

    async def chunk(self, data: bytes, *, flush: bool = True) -> None:
        self._writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        if flush:
            await self._writer.drain()

    async def end_stream(self) -> None:
        self._writer.write(b"0\r\n\r\n")
        await self._writer.drain()

    def abort(self) -> None:
        """Drop the connection at once (a reset, as a network cut looks to the client)."""
        self.aborted = True
        self._writer.transport.abort()


Handler = Callable[[HttpRequest, HttpResponse], Awaitable[None]]


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class LoopbackServer:
    """Serve ``handler`` on 127.0.0.1 (a free port) from a daemon thread until ``close``."""

    def __init__(self, handler: Handler, *, name: str = "teamrt-http") -> None:
        self._handler = handler
        self._loop = asyncio.new_event_loop()
        self._connections: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._server: asyncio.Server | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._server is None:
            raise OSError("the loopback server could not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the server's thread."""
        self._loop.call_soon_threadsafe(callback)

    def close(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD_BYTES)
            self.port = self._server.sockets[0].getsockname()[1]
        finally:
            self._ready.set()
        async with self._server:
            await self._stop.wait()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:  # the server is closing: end this connection quietly
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection is done."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        request_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        response = HttpResponse(writer)
        if length > MAX_BODY_BYTES:
            if length <= MAX_DRAINED_BYTES:
                while length > 0:
                    length -= len(await reader.readexactly(min(length, 1 << 20)))
            await response.json(413, _TOO_LARGE, {"connection": "close"})
            return False
        body = await reader.readexactly(length) if length else b""
        await self._handler(HttpRequest(method, path.split("?", 1)[0], headers, body), response)
        return not response.aborted and headers.get("connection", "").lower() != "close"
