"""Where WebFetch may go: its URLs read as the HTTP client reads them, and the addresses it may connect to.

A URL is parsed by ``httpx2`` (the client that then fetches it), so the host
a permission rule is checked against is the host fetched. A host name is
resolved once; every address it has must be public (not loopback, private,
link-local, multicast, reserved, unspecified, or one of those inside an IPv6
form: IPv4-mapped, 6to4, Teredo, NAT64), unless the run names the host in
``[web] private_hosts``. WebFetch then connects to the checked address itself,
so a name that resolves elsewhere the second time (DNS rebinding) cannot
send it anywhere else.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from teamrt.tools.base import ToolError

if TYPE_CHECKING:
    import httpx2

URL_CHARS = 2000
"""Longest URL accepted (Claude Code's limit)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Target:
    """A URL to fetch, read: ``host`` in ASCII (IDNA), lower case, without a trailing dot."""

    url: httpx2.URL
    host: str
    port: int

    @property
    def origin(self) -> str:
        """``host`` or ``host:port`` when the port is not the scheme's own, as the ``Host`` header has it."""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return shown if self.port == _DEFAULT_PORTS[self.url.scheme] else f"{shown}:{self.port}"


def target(text: str) -> Target:
    """``text`` read as an http(s) URL; a ToolError says what is wrong with it."""
    import httpx2

    if len(text) > URL_CHARS:
        raise ToolError(f"WebFetch: the url is longer than {URL_CHARS} characters")
    try:
        url = httpx2.URL(text.strip())
    except (httpx2.InvalidURL, UnicodeError) as e:
        raise ToolError(f"WebFetch: {text!r} is not a valid URL ({e})") from None
    if url.scheme not in _DEFAULT_PORTS:
        raise ToolError(f"WebFetch: {text!r} is not an http or https URL")
    if url.userinfo:
        raise ToolError("WebFetch: URLs with a user name or password are refused")
    host = url.raw_host.decode("ascii").lower().removesuffix(".")
    if not host:
        raise ToolError(f"WebFetch: {text!r} names no host")
    port = url.port or _DEFAULT_PORTS[url.scheme]
    if not 0 < port < 65536:
        raise ToolError(f"WebFetch: {text!r} has no valid port")
    return Target(url.copy_with(fragment=None), host, port)


def host_of(text: object) -> str | None:
    """The host a WebFetch ``url`` names (as ``target`` reads it), or None for one that is not valid."""
    if not isinstance(text, str):
        return None
    try:
        return target(text).host
    except ToolError:
        return None


def domain_name(text: str) -> str:
    """A host name as written in a rule or a list, as ``target`` spells hosts (ASCII, lower case); a
    ValueError for a name that is not one (not valid IDNA)."""
    name = text.strip().lower().removesuffix(".")
    if name.isascii():
        return name
    import httpx2

    try:
        return httpx2.URL(f"http://{name}/").raw_host.decode("ascii")
    except (httpx2.InvalidURL, UnicodeError):
        raise ValueError(f"{text!r} is not a host name") from None


def allowed_private(found: Target, private_hosts: tuple[str, ...]) -> bool:
    """Whether ``[web] private_hosts`` names the target's host (``name``) or host and port (``name:port``)."""
    for entry in private_hosts:
        name, _, port = entry.strip().rpartition(":") if _has_port(entry) else (entry, "", "")
        try:
            name = domain_name(name.strip().strip("[]"))
        except ValueError:  # names no host, so allows none
            continue
        if name == found.host and (not port or port == str(found.port)):
            return True
    return False


def _has_port(entry: str) -> bool:
    """Whether a ``private_hosts`` entry ends in a port: ``name:8000``, ``[::1]:8000`` (not ``::1``)."""
    entry = entry.strip()
    return entry.count(":") == 1 or (entry.startswith("[") and "]:" in entry)


WEBFETCH_RULE = (
    "WebFetch reaches only public addresses unless the team file's [web] private_hosts names the host"
)


def _webfetch_refusal(message: str) -> Exception:
    return ToolError(f"WebFetch: {message}")


async def resolve(
    found: Target,
    private_hosts: tuple[str, ...],
    *,
    refusal: Callable[[str], Exception] = _webfetch_refusal,
    rule: str = WEBFETCH_RULE,
) -> IPAddress:
    """The address to connect to for ``found``: its name resolved once, every address checked; raises what
    ``refusal`` makes of the reason (WebFetch's ``ToolError`` by default), the refusal naming ``rule``."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(found.host, found.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise refusal(f"cannot resolve {found.host}: {e}") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    if not addresses:
        raise refusal(f"{found.host} has no address")
    if not allowed_private(found, private_hosts):
        for address in addresses:
            kind = non_public(address)
            if kind is not None:
                named = found.host if found.host == str(address) else f"{found.host} ({address})"
                raise refusal(f"refused: {named} is not a public address ({kind}); {rule} ({found.origin!r})")
    return addresses[0]


def non_public(address: IPAddress) -> str | None:
    """What kind of address that is not on the public internet ``address`` is, or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if inner is None and address in _NAT64:
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None:
            kind = non_public(inner)
            return None if kind is None else f"{kind} {inner} inside IPv6"
    for kind, test in (
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
    ):
        if test:
            return kind
    return None if address.is_global else "non-public"


def pinned(found: Target, address: IPAddress) -> tuple[httpx2.URL, dict[str, str], dict[str, str]]:
    """The URL that connects to ``address``, and the headers and request extensions that keep the
    ``Host`` header and TLS's server name (and so the certificate check) those of ``found``'s host."""
    url = found.url.copy_with(host=str(address))
    extensions = {"sni_hostname": found.host} if found.url.scheme == "https" else {}
    return url, {"Host": found.origin}, extensions
