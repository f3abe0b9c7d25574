"""``teamrt serve``: the TUI in a browser (``teamrt.tui.serve``), on loopback unless told otherwise.

The token comes from the environment only (``TOKEN_ENV``), never from the command line, which every
user of the machine can read (``ps``). It is taken out of the environment at once, so the ``teamrt
tui`` of each page, and whatever that starts, never holds it. Any address but loopback needs one.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
from typing import NoReturn
from urllib.parse import urlsplit

from teamrt.errors import UserError

TOKEN_ENV = "TEAMRT_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
MAKE_TOKEN = "export TEAMRT_SERVE_TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"


class ServeRefused(UserError):
    """``teamrt serve`` will not start as asked."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return host == ""


def netloc(host: str, port: int) -> str:
    """``host:port`` as a URL and a Host header write it (port 80 written or left out)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_names(host: str, port: int) -> set[str]:
    """The Host headers that name this server: every loopback name when bound to loopback."""
    names = {host}
    if is_loopback(host):
        names |= {"127.0.0.1", "localhost", "::1"}
    written = {netloc(h, port) for h in names}
    return written | ({f"[{h}]" if ":" in h else h for h in names} if port == 80 else set())


def take_token() -> str | None:
    """The token, out of the environment; refused when too short to be one."""
    token = os.environ.pop(TOKEN_ENV, None) or None
    if token is not None and (len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token):
        raise ServeRefused(
            f"{TOKEN_ENV} must be at least {MIN_TOKEN_CHARS} printable characters, no spaces: {MAKE_TOKEN}"
        )
    return token


def public_url_of(args: argparse.Namespace) -> str:
    if args.public_url is None:
        if is_wildcard(args.host):
            raise ServeRefused(
                f"bound to every address ({args.host or 'all'}), the page cannot tell the browser where its"
                " websocket is: give --public-url (the address people open) or a --host of its own"
            )
        return f"http://{netloc(args.host, args.port)}"
    parts = urlsplit(args.public_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ServeRefused(f"--public-url must be an http:// or https:// address: {args.public_url!r}")
    return str(args.public_url).rstrip("/")


def check_free(host: str, port: int) -> None:
    """Refused in one line, before the start line is printed, when the address cannot be listened on."""
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
                probe.bind(address)
    except OSError as e:
        raise ServeRefused(f"cannot listen on {netloc(host, port)}: {e.strerror or e}") from None


def refuse_without_token(where: str) -> NoReturn:
    raise ServeRefused(
        f"refusing to serve on {where}, not a loopback address, without a token: set {TOKEN_ENV}"
        f" ({MAKE_TOKEN})"
    )


def handle(args: argparse.Namespace) -> int:
    token = take_token()
    if token is None and not is_loopback(args.host):
        refuse_without_token(args.host)
    public_url = public_url_of(args)
    public_host = urlsplit(public_url).hostname or ""
    if token is None and not is_loopback(public_host):  # behind a proxy: as open as its address
        refuse_without_token(public_host)
    check_free(args.host, args.port)
    hosts = host_names(args.host, args.port)
    from teamrt.tui.serve import TuiServer  # textual-serve and aiohttp: only once serving

    server = TuiServer(host=args.host, port=args.port, public_url=public_url, hosts=hosts, token=token)
    server.serve()
    print("teamrt: stopped serving", file=sys.stderr)
    return 0
