"""``teamrt serve``: the TUI in a browser, by textual-serve; each page is a ``teamrt tui`` of its own.

textual-serve's ``Server`` is used as it is, with one aiohttp middleware added (``_guard``) and its
start line and logging made teamrt's. The guard refuses (403) any request whose Host is not the
server's own (a page elsewhere cannot reach it through DNS rebinding), a websocket whose Origin is not
the server's (a page elsewhere cannot drive the TUI: browsers let any page open a websocket), and,
with a token, any request without it: ``?token=`` on the first visit sets an HttpOnly, SameSite=Strict
cookie and is taken off the address at once (a redirect), so the page, its scripts and its websocket
carry the cookie. The token never reaches a log but in the one start line (``_Redact``).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import re
import shlex
from collections.abc import Awaitable, Callable
from urllib.parse import quote, urlencode, urlsplit

from aiohttp import web
from textual_serve.server import Server

from teamrt.procs import python_module, tree
from teamrt.terminal import clean

TOKEN_COOKIE = "teamrt_serve"
TOKEN_QUERY = "token"
QUIT_S = 10.0
"""On Ctrl-C, how long the pages' TUIs are given to quit."""
_TOKEN_IN_QUERY = re.compile(r"(?<=[?&]token=)[^&\s\"]*")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def tui_command() -> str:
    """The shell command textual-serve starts for each page: this interpreter's ``teamrt tui``, which
    inherits the server's environment and directory (so the same home and TEAMRT_DB)."""
    return shlex.join(python_module("teamrt", "tui"))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class _Redact(logging.Filter):
    """Every ``token=`` value in a query, and the token wherever else it appears, shown as ``[redacted]``;
    and what a client wrote (a path, a User-Agent) made inert for the terminal."""

    def __init__(self, token: str | None) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        said = _TOKEN_IN_QUERY.sub("[redacted]", record.getMessage())
        if self.token:
            said = said.replace(self.token, "[redacted]")
        record.msg, record.args = clean(said), None
        return True


class TuiServer(Server):
    """textual-serve's server, guarded (see the module's docstring).

    ``hosts``: the ``host:port`` values a request's Host may name (the public URL's is added);
    ``token``: None for none (only ever on loopback: ``teamrt.cli.serve`` decides).
    """

    def __init__(self, *, host: str, port: int, public_url: str, hosts: set[str], token: str | None) -> None:
        super().__init__(tui_command(), host=host, port=port, title="teamrt", public_url=public_url)
        self.token = token
        self.hosts = {h.lower() for h in hosts} | {urlsplit(public_url).netloc.lower()}
        self.origins = {f"http://{h}" for h in self.hosts} | {origin_of(public_url)}
        self.secure = public_url.startswith("https:")
        self._sessions: set[asyncio.Task[object]] = set()  # each page's websocket, served

    def open_url(self) -> str:
        """The address to open: the public URL, with the token on it when there is one."""
        base = self.public_url.rstrip("/") + "/"
        return f"{base}?{urlencode({TOKEN_QUERY: self.token}, quote_via=quote)}" if self.token else base

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        app.on_response_prepare.append(self._headers)
        return app

    def _has_token(self, given: str | None) -> bool:
        assert self.token is not None
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.host.lower() not in self.hosts:
            raise web.HTTPForbidden(text="teamrt serve: not this server's address\n")
        origin = request.headers.get("Origin")
        if (origin is not None or request.path == "/ws") and (origin or "").lower() not in self.origins:
            raise web.HTTPForbidden(text="teamrt serve: a page of another site\n")
        given = self.token is not None and self._has_token(request.query.get(TOKEN_QUERY))
        if given and request.path == "/" and request.method == "GET":
            raise self._without_token(request)
        if not (self.token is None or given or self._has_token(request.cookies.get(TOKEN_COOKIE))):
            raise web.HTTPForbidden(
                text="teamrt serve: open the address teamrt serve printed (with its token)\n"
            )
        if request.path == "/ws":
            return await self._session(request, handler)
        response = await handler(request)
        if given and not response.prepared:
            self._set_cookie(response)
        return response

    def _without_token(self, request: web.Request) -> web.HTTPSeeOther:
        """The first visit: the token becomes a cookie and leaves the address bar."""
        rest = [(k, v) for k, v in request.query.items() if k != TOKEN_QUERY]
        moved = web.HTTPSeeOther("./" + (f"?{urlencode(rest)}" if rest else ""))
        self._set_cookie(moved)
        return moved

    async def _session(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A page's websocket and its ``teamrt tui``, known until it ends (``on_shutdown`` ends it)."""
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        try:
            return await handler(request)
        finally:
            self._sessions.discard(task)

    def _set_cookie(self, response: web.StreamResponse) -> None:
        assert self.token is not None
        response.set_cookie(
            TOKEN_COOKIE, self.token, httponly=True, samesite="Strict", secure=self.secure, path="/"
        )

    async def _headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Not to be framed by another page (keys pressed there would reach the TUI), nor to tell
        another site where it was."""
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"

    def initialize_logging(self) -> None:
        super().initialize_logging()
        for handler in logging.getLogger().handlers:
            handler.addFilter(_Redact(self.token))

    async def on_shutdown(self, app: web.Application) -> None:
        """Ctrl-C: every page's session ends (textual-serve tells its TUI to quit), and the server waits
        for those processes to be gone, so none outlives it."""
        for task in self._sessions:
            task.cancel()
        if self._sessions:
            await asyncio.wait(self._sessions, timeout=QUIT_S)
        for _ in range(int(QUIT_S / 0.05)):
            if not tree(os.getpid()) - {os.getpid()}:
                break
            await asyncio.sleep(0.05)

    async def on_startup(self, app: web.Application) -> None:
        """teamrt's start line instead of textual-serve's banner: the one place the token is shown."""
        print(f"teamrt: serving the TUI at {self.open_url()} (Ctrl-C stops it)", flush=True)
