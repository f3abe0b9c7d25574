"""MCP resources as Claude Code offers them to its model: ListMcpResourcesTool and ReadMcpResourceTool.

Claude Code gives its model these two tools when a connected server has
resources: ``ListMcpResourcesTool`` (``{server?}``: every server's resources,
or one's) and ``ReadMcpResourceTool`` (``{server, uri}``). teamrt offers the same
tools, with the same names and inputs, to an agent one of whose servers declares
the ``resources`` capability (and whose ``tools`` do not leave them out). Beyond
Claude Code, the listing also shows each server's resource templates
(``demo://item/{id}``): a model that fills one in can read what it names, which
the concrete list alone would hide.

What a server says is someone else's text: the listing is JSON (control
characters escaped), each name, title, description and URI cut to a bound, at
most ``MAX_LISTED`` entries a server. What a read returns goes to the model as
a tool's embedded resource does (``teamrt.mcp.tools.resource_block``): text as
text, images and PDFs as the API's blocks, other bytes as a line saying what
they are; a large text is spilled by the loop as any tool's output is.

Permissions: reading sends the model's URI to the server, so a read is judged
by that server's rules (``teamrt.tools.permissions``: ``mcp__<server>`` and
``mcp__<server>__*`` cover ``ReadMcpResourceTool`` calls on it, and like every
``mcp__`` call it is asked about unless allowed). Listing sends nothing of the
model's and is read-only.

Prompts are not offered to the model: Claude Code shows a server's prompts to the
person as slash commands (``/mcp__<server>__<prompt>``), and so does teamrt, in a
task or a person's message (``teamrt.mcp.prompts``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from teamrt.mcp.tools import McpTool, resource_block
from teamrt.tools.base import ToolContext, ToolError, ToolResult, object_schema

LIST = "ListMcpResourcesTool"
READ = "ReadMcpResourceTool"
MAX_LISTED = 200
"""Resources (and templates) of one server listed at most."""
MAX_PAGES = 10
"""Pages of a listing read at most."""
MAX_FIELD = 300
"""Characters of a resource's name, title, description or URI shown."""
MAX_URI = 2048
"""The longest URI a read sends."""
MAX_CONTENTS = 20
"""Parts of one read's answer passed on."""

_LIST_DESCRIPTION = (
    "Lists the resources of the MCP servers (documents, records, files they offer to read), with their URIs,"
    " and their resource templates (URIs with {placeholders} to fill in). Give server to list one server's."
)
_READ_DESCRIPTION = (
    "Reads one resource of an MCP server, by the server's name and the resource's URI (from"
    f" {LIST}, or a template of it filled in)."
)


class Sessions(Protocol):
    """What reaches the servers (``teamrt.mcp.servers.McpServers``)."""

    async def session(self, name: str) -> Any: ...


@dataclass(eq=False)
class ResourceTool(McpTool):
    """``ListMcpResourcesTool`` or ``ReadMcpResourceTool`` for one agent, over ``servers``: the agent's
    servers that declare resources. An ``McpTool`` so that it is offered, and kept in step, with the MCP
    tools."""

    servers: Sequence[str] = ()
    sessions: Sessions | None = field(default=None, repr=False)
    timeouts: dict[str, float] = field(default_factory=dict)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        server = input.get("server")
        if server is not None and (not isinstance(server, str) or server not in self.servers):
            shown = json.dumps(server)[:80]
            known = ", ".join(self.servers)
            raise ToolError(f"{self.name}: no MCP server {shown} with resources here; there are: {known}")
        if self.tool == LIST:
            return await self._list([server] if server else list(self.servers))
        assert isinstance(server, str)
        uri = input.get("uri")
        if not isinstance(uri, str) or not uri or len(uri) > MAX_URI:
            raise ToolError(f"{READ}: uri must be a non-empty string of at most {MAX_URI} characters")
        return await self._read(server, uri)

    async def _list(self, names: list[str]) -> ToolResult:
        found: list[dict[str, Any]] = []
        notes: list[str] = []
        for name in names:
            try:
                found += await self._listed(name, notes)
            except ToolError as e:
                notes.append(str(e))
        text = json.dumps(found, ensure_ascii=False, indent=1) if found else "No resources found."
        return ToolResult("\n".join([text, *notes]))

    async def _listed(self, name: str, notes: list[str]) -> list[dict[str, Any]]:
        """One server's resources and templates, each a dict as Claude Code's tool shows them."""
        client = await self._session(name)
        resources = await self._pages(name, client.list_resources, "resources", notes)
        templates = await self._pages(name, client.list_resource_templates, "resource_templates", notes)
        shown: list[dict[str, Any]] = []
        for item in resources:
            entry = {"server": name, "uri": _cut(item.uri), "name": _cut(item.name)}
            shown.append(entry | _about(item))
        for item in templates:
            entry = {"server": name, "uriTemplate": _cut(item.uri_template), "name": _cut(item.name)}
            shown.append(entry | _about(item))
        return shown

    async def _pages(self, name: str, fetch: Any, key: str, notes: list[str]) -> list[Any]:
        items: list[Any] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await self._ask(name, fetch(cursor=cursor))
            items += getattr(page, key)
            cursor = page.next_cursor
            if cursor is None or len(items) >= MAX_LISTED:
                break
        if len(items) > MAX_LISTED or cursor is not None:
            what = "resources" if key == "resources" else "resource templates"
            notes.append(f"(MCP server {name!r} has more {what}; the first {MAX_LISTED} are listed)")
        return items[:MAX_LISTED]

    async def _read(self, name: str, uri: str) -> ToolResult:
        client = await self._session(name)
        result = await self._ask(name, client.read_resource(uri), uri=uri)
        blocks = [resource_block(item) for item in result.contents[:MAX_CONTENTS]]
        if len(result.contents) > MAX_CONTENTS:
            left = len(result.contents) - MAX_CONTENTS
            blocks.append({"type": "text", "text": f"[{left} more parts left out]"})
        if not blocks:
            return ToolResult(f"[resource {uri}: empty]")
        if all(b["type"] == "text" for b in blocks):
            return ToolResult("\n".join(b["text"] for b in blocks))
        return ToolResult(blocks)

    async def _session(self, name: str) -> Any:
        assert self.sessions is not None
        return await self.sessions.session(name)

    async def _ask(self, name: str, request: Any, *, uri: str = "") -> Any:
        """The answer to ``request``, within the server's timeout; its failure as a ToolError."""
        import asyncio

        from mcp.shared.exceptions import MCPError
        from pydantic import ValidationError

        what = f"{self.tool} of {uri[:200]!r}" if uri else self.tool
        timeout = self.timeouts.get(name, 60.0)
        try:
            return await asyncio.wait_for(request, timeout)
        except TimeoutError:
            raise ToolError(f"MCP server {name!r} did not answer {what} within {timeout:g} s") from None
        except MCPError as e:
            said = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            raise ToolError(f"MCP server {name!r} refused {what}: {said}") from None
        except (ValidationError, RuntimeError) as e:
            said = str(e).strip().splitlines()[0][:200]
            raise ToolError(f"MCP server {name!r} answered {what} with invalid MCP: {said}") from None


def resource_tools(
    sessions: Sessions,
    servers: Sequence[str],
    timeouts: dict[str, float],
    wanted: Sequence[str] = (LIST, READ),
) -> list[McpTool]:
    """The resource tools over ``servers`` (the agent's servers that declare resources; none: no tools),
    those of ``wanted``. ``timeouts``: each server's seconds per request."""
    if not servers:
        return []
    made: list[McpTool] = []
    server = {"type": "string", "enum": list(servers)}
    for name, description, schema in (
        (LIST, _LIST_DESCRIPTION, object_schema({"server": server})),
        (
            READ,
            _READ_DESCRIPTION,
            object_schema({"server": server, "uri": {"type": "string"}}, "server", "uri"),
        ),
    ):
        if name in wanted:
            made.append(ResourceTool(
                name=name, description=description, input_schema=schema, read_only=True, server="", tool=name,
                caller=_NO_CALLS, servers=tuple(servers), sessions=sessions, timeouts=dict(timeouts),
            ))  # fmt: skip
    return made


class _NoCalls:
    """A resource tool's ``caller``: it runs itself and calls no server tool."""

    async def call(self, server: str, tool: str, args: dict[str, Any], *, agent: str = "") -> ToolResult:
        raise ToolError(f"{tool} calls no tool of a server")


_NO_CALLS = _NoCalls()


def _cut(text: Any) -> str:
    said = str(text)
    return said if len(said) <= MAX_FIELD else said[: MAX_FIELD - 1] + "…"


def _about(item: Any) -> dict[str, str]:
    """A resource's or template's optional fields, as Claude Code's listing names them."""
    found = {"title": getattr(item, "title", None), "mimeType": getattr(item, "mime_type", None),
             "description": getattr(item, "description", None)}  # fmt: skip
    return {k: _cut(v) for k, v in found.items() if v}
