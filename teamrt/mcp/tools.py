"""An MCP server's tools as teamrt tools: ``mcp__<server>__<tool>``, and their results as content blocks.

A listed tool is offered to the model only when it can be offered as it is:
its name made fit for the API (characters other than letters, digits, ``_``
and ``-`` become ``_``, as Claude Code does) must not hold ``__`` (which
would make ``mcp__<server>__<tool>`` rules ambiguous), must fit the API's
length and must not clash with another of the server's tools; its input
schema must be a JSON object of ``type: "object"`` of reasonable size. What is
left out is said in one line each. A description is cut to
``DESCRIPTION_CHARS``, as Claude Code cuts it.

A tool annotated ``readOnlyHint`` counts as read-only: the loop runs it in
parallel with other reads and a resume runs it again; any other is
side-effecting, so a call a crash cut short is reported, never repeated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from teamrt.models.types import Block
from teamrt.tools.base import ToolContext, ToolResult

PREFIX = "mcp__"
MAX_NAME = 128
"""The longest tool name the Messages API takes (``^[a-zA-Z0-9_-]{1,128}$``; the simulator checks it too)."""
DESCRIPTION_CHARS = 2048
SCHEMA_BYTES = 64 * 1024
"""A larger input schema would be sent with every request of every agent; it is refused."""
MAX_TOOLS = 500
"""Tools of one server offered at most."""
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types the Messages API reads."""
MAX_IMAGE_CHARS = 5 * 1024 * 1024
"""The largest image (base64) passed to the model; the API refuses larger ones."""
MAX_IMAGES = 20
_UNFIT = re.compile(r"[^A-Za-z0-9_-]")


class Caller(Protocol):
    """What runs a call on a server (``teamrt.mcp.servers.McpServers``)."""

    def call(
        self, server: str, tool: str, args: dict[str, Any], *, agent: str = ""
    ) -> Awaitable[ToolResult]: ...


@dataclass(eq=False)
class McpTool:
    """One tool of one MCP server, as the agent loop runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    server: str
    tool: str
    """The tool's own name on its server."""
    caller: Caller = field(repr=False)

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await self.caller.call(self.server, self.tool, input, agent=ctx.agent)  # whose call it is


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, the tool's name made fit for the API."""
    return f"{PREFIX}{server}__{_UNFIT.sub('_', tool)}"


def adapt(server: str, listed: list[Any], caller: Caller) -> tuple[list[McpTool], list[str]]:
    """The tools of ``listed`` (the SDK's ``Tool`` objects) that can be offered, sorted by name, and a line
    for each left out."""
    tools: dict[str, McpTool] = {}
    problems: list[str] = []
    for item in listed:
        raw = str(getattr(item, "name", ""))
        shown = json.dumps(raw[:60]) + ("..." if len(raw) > 60 else "")
        name = tool_name(server, raw)
        why = _refusal(server, raw, name, getattr(item, "input_schema", None))
        if why is None and name in tools:
            why = f"its name, made fit for the API, is {tools[name].tool!r}'s too"
        if why is None and len(tools) >= MAX_TOOLS:
            why = f"the server lists more than {MAX_TOOLS} tools"
        if why is not None:
            problems.append(f"MCP server {server!r}: tool {shown} left out: {why}")
            continue
        annotations = getattr(item, "annotations", None)
        description = str(getattr(item, "description", None) or getattr(item, "title", None) or raw)
        if len(description) > DESCRIPTION_CHARS:
            description = description[: DESCRIPTION_CHARS - 1] + "…"
        tools[name] = McpTool(
            name=name,
            description=description,
            input_schema=dict(item.input_schema),
            read_only=bool(getattr(annotations, "read_only_hint", None)),
            server=server,
            tool=raw,
            caller=caller,
        )
    return [tools[n] for n in sorted(tools)], problems


def _refusal(server: str, raw: str, name: str, schema: Any) -> str | None:
    if not raw or "__" in _UNFIT.sub("_", raw):
        return "an empty name, or one holding '__', would make mcp__<server>__<tool> ambiguous"
    if len(name) > MAX_NAME:
        return f"mcp__{server}__<tool> would be {len(name)} characters; the API takes {MAX_NAME}"
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "its input schema is not a JSON object schema (type: object)"
    try:
        size = len(json.dumps(schema))
    except (TypeError, ValueError, RecursionError):
        return "its input schema is not JSON"
    if size > SCHEMA_BYTES:
        return f"its input schema is {size:,} bytes; teamrt takes {SCHEMA_BYTES:,}"
    return None


# -- results -------------------------------------------------------------------------------------------


def result_of(result: Any) -> ToolResult:
    """The SDK's ``CallToolResult`` as a tool result: text when it holds only text, else the API's content
    blocks (text, image, document); ``isError`` makes an error result."""
    blocks: list[Block] = []
    images = 0
    for item in result.content:
        block = _block(item)
        if block.get("type") == "image":
            images += 1
            if images > MAX_IMAGES:
                block = {"type": "text", "text": f"[image left out: more than {MAX_IMAGES} in one result]"}
        blocks.append(block)
    if not blocks and result.structured_content is not None:
        blocks.append({"type": "text", "text": json.dumps(result.structured_content, ensure_ascii=False)})
    blocks = [b for b in blocks if b.get("type") != "text" or b.get("text")]
    error = bool(result.is_error)
    if all(b["type"] == "text" for b in blocks):
        text = "\n".join(b["text"] for b in blocks)
        return ToolResult(text or ("(the tool failed and said nothing)" if error else "(no output)"), error)
    return ToolResult(blocks, error)


def _block(item: Any) -> Block:
    kind = getattr(item, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(item.text)}
    if kind == "image":
        return _image(str(item.data), str(item.mime_type), "an image")
    if kind == "audio":
        return {"type": "text", "text": f"[audio ({item.mime_type}) left out: the model cannot hear it]"}
    if kind == "resource_link":
        about = f" ({item.mime_type})" if item.mime_type else ""
        return {"type": "text", "text": f"[resource link: {item.name} {item.uri}{about}]"}
    if kind == "resource":
        return resource_block(item.resource)
    return {"type": "text", "text": f"[content of type {str(kind)[:40]!r} left out]"}


def resource_block(resource: Any) -> Block:
    """A resource's contents (the SDK's ``TextResourceContents`` or ``BlobResourceContents``), embedded in a
    tool's result or read with ``ReadMcpResourceTool``: text as text under its URI, a PDF as a document,
    an image as an image (as a tool's images are), other bytes as a line saying what they are."""
    uri, mime = str(resource.uri), resource.mime_type or ""
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return {"type": "text", "text": f"[resource {uri}]\n{text}"}
    blob = str(getattr(resource, "blob", ""))
    if mime == "application/pdf":
        if len(blob) > MAX_IMAGE_CHARS:
            said = f"a PDF of {len(blob):,} characters of base64, over the {MAX_IMAGE_CHARS:,} teamrt takes"
            return {"type": "text", "text": f"[resource {uri} left out: {said}]"}
        source = {"type": "base64", "media_type": mime, "data": blob}
        return {"type": "document", "source": source, "title": uri[:500]}
    if mime.startswith("image/"):
        return _image(blob, mime, f"resource {uri}")
    return {"type": "text", "text": f"[resource {uri}: {len(blob) * 3 // 4:,} bytes of {mime or 'data'}]"}


def _image(data: str, mime: str, what: str) -> Block:
    if mime not in IMAGE_TYPES:
        return {"type": "text", "text": f"[{what} of type {mime[:60]} left out: the model reads only "
                                        f"{', '.join(IMAGE_TYPES)}]"}  # fmt: skip
    if len(data) > MAX_IMAGE_CHARS:
        return {"type": "text", "text": f"[{what} left out: {len(data):,} characters of base64, over the"
                                        f" API's {MAX_IMAGE_CHARS:,}]"}  # fmt: skip
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
