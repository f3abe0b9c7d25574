"""One call of an MCP server's tool: its progress journaled, its time bounded, its failures told in a line.

Each call carries a progress token: its progress is journaled
(``teamrt.mcp.capabilities.Progress``). A call's ``timeout`` is wall-clock, as
Claude Code's ``MCP_TOOL_TIMEOUT`` is (progress does not extend it), except that
the time its server's questions (sampling, elicitation) wait on a person does
not count: a person taking a minute to answer a form does not time the call out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

from teamrt.mcp.capabilities import Progress
from teamrt.mcp.lifecycle import Journal, Lifecycle, Server, one_line
from teamrt.mcp.tools import result_of
from teamrt.tools.base import ToolError, ToolResult


async def call_tool(
    life: Lifecycle, server: Server, tool: str, args: dict[str, Any], agent: str, journal: Journal
) -> ToolResult:
    """Call ``tool`` of ``server`` for ``agent`` (its session started again once if it died); a timeout, a
    dead server or a broken answer is a ToolError."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
    from pydantic import ValidationError

    name = server.config.name
    client, process = await life.client_for_call(server)
    timeout = server.config.timeout
    progress = Progress(name, tool, agent or None, journal)
    server.calls.append(agent)
    try:
        result = await timed(client.call_tool(tool, args, progress_callback=progress), timeout, server)
    except TimeoutError:
        raise ToolError(
            f"mcp__{name}__{tool} did not answer within {timeout:g} s; teamrt stopped waiting for it"
            " (the server may still be at work on it)"
        ) from None
    except MCPError as e:
        if e.code == REQUEST_TIMEOUT:
            raise ToolError(f"mcp__{name}__{tool} timed out on the server's side: {one_line(e)}") from None
        if e.code == CONNECTION_CLOSED or (process is not None and process.closed.is_set()):
            raise ToolError(await life.lost(server, process, during_call=True)) from None
        raise ToolError(f"MCP server {name!r} refused the call: {one_line(e)}") from None
    except (ValidationError, RuntimeError) as e:
        raise ToolError(f"MCP server {name!r} gave an answer that is not valid MCP: {one_line(e)}") from None
    finally:
        server.calls.remove(agent)
    return result_of(result)


async def timed(call: Coroutine[Any, Any, Any], timeout: float, server: Server) -> Any:
    """``call``'s result within ``timeout`` seconds, not counting the time its server's questions wait on a
    person; past it, the call is cancelled (the SDK tells the server) and ``TimeoutError`` raised."""
    task = asyncio.ensure_future(call)
    side = server.side
    start = time.monotonic()
    asked = side.asked_s() if side is not None else 0.0
    try:
        while True:
            counted = time.monotonic() - start - ((side.asked_s() - asked) if side is not None else 0.0)
            left = timeout - counted
            if left <= 0:
                break
            await asyncio.wait([task], timeout=min(left, 1.0) if side is not None else left)
            if task.done():
                return task.result()
    except BaseException:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    raise TimeoutError
