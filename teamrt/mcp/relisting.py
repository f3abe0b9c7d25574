"""A server's ``tools/list_changed``: its tools listed again, at a bounded rate, the change journaled.

One listing runs at a time (a notification during one has it run once more
after it), at least ``RELIST_GAP`` seconds apart, at most ``MAX_RELISTS`` times
in a run: a storm of notifications is one listing, and a server cannot keep a
run busy listing. A listing that differs from the one before replaces the
server's tools and bumps ``McpServers.version``; agents take the new list
before their next model call (``McpServers.follow``), never during a turn.

A server says its tools changed while a call runs (the tool that changed them),
before the call's answer. The listing that follows is another round trip, which
the calling agent would otherwise race to its next model call: so a call's
answer waits for it (``listed``, bounded by one gap and one listing's time), and
the agent's next turn has the new tools however slow the server or busy the
machine. (The SDK hands a notification to its handler's task before the answer
that follows it on the wire reaches the caller: asyncio runs them in that order.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from teamrt.mcp.capabilities import TOOLS
from teamrt.mcp.lifecycle import Journal, Server, list_tools, one_line
from teamrt.mcp.tools import Caller, adapt

MAX_RELISTS = 20
"""Times a server's tools are listed again after ``tools/list_changed`` in a run, at most."""
RELIST_GAP = 1.0
"""Seconds between two listings of one server's tools, at least: a storm of notifications is one listing."""


@dataclass
class Relisting:
    """Lists a server's tools again when it says they changed. ``changed``: called after each listing that
    changed a server's tools; ``timeout``: seconds a listing may take."""

    journal: Journal
    caller: Caller
    changed: Callable[[], None]
    timeout: float

    def tools_changed(self, server: Server) -> None:
        """A server said its tools changed: list them again (or once more after the listing under way)."""
        server.listed.clear()
        if server.relisting is not None and not server.relisting.done():
            server.changed_again = True
            return
        server.relisting = asyncio.ensure_future(self._relist(server))

    async def listed(self, server: Server) -> None:
        """Return once the tools ``server`` said changed are listed again (at once when none wait), or
        once a gap and a listing's time have passed: then agents take them at a later turn."""
        if server.listed.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.listed.wait(), RELIST_GAP + self.timeout)

    async def _relist(self, server: Server) -> None:
        try:
            await self._relisting(server)
        finally:  # listed, given up, or stopped: nothing more to wait for
            server.listed.set()

    async def _relisting(self, server: Server) -> None:
        name = server.config.name
        while True:
            server.changed_again = False
            if server.relists >= MAX_RELISTS:
                if server.relists == MAX_RELISTS:
                    server.relists += 1
                    note = f"said its tools changed more than {MAX_RELISTS} times; they are not listed again"
                    await self.journal(TOOLS, {"server": name, "note": note})
                return
            server.relists += 1
            client = server.client
            if client is None or server.state != "running":
                return
            try:
                listed = await asyncio.wait_for(list_tools(client), self.timeout)
            except Exception as e:
                note = f"could not list its tools: {one_line(e)}"
                await self.journal(TOOLS, {"server": name, "note": note})
                return
            tools, problems = adapt(name, listed, self.caller)
            before = {t.name: t.input_schema for t in server.tools or []}
            if {t.name: t.input_schema for t in tools} != before:
                server.tools, server.refused = tools, problems
                self.changed()
                names = [t.name for t in tools]
                await self.journal(TOOLS, {
                    "server": name, "tools": names, "added": sorted(set(names) - set(before)),
                    "removed": sorted(set(before) - set(names)),
                })  # fmt: skip
            if not server.changed_again:  # this listing took every change said so far: no call waits the gap
                server.listed.set()
            await asyncio.sleep(RELIST_GAP)
            if not server.changed_again:
                return
