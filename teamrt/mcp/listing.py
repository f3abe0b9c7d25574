"""``teamrt mcp``: the configured MCP servers, where each comes from, whether it starts, its state in a run,
and (only when asked: it starts them) its tools and its prompts (the person's ``/mcp__<server>__<prompt>``
commands, ``teamrt.mcp.prompts``). A server's tool names, descriptions and errors are its own
text, and its entry may come with a cloned repository: every line is made safe for a terminal
(``terminal.clean_line``) in ``describe``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from teamrt.mcp.config import McpConfig, ServerConfig
from teamrt.mcp.prompts import PromptError, list_prompts
from teamrt.mcp.servers import EXITED, FAILED, PROCESS, STARTED, STOPPED, McpServers
from teamrt.procs import is_running
from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy
from teamrt.terminal import clean, clean_line

STATES = (STARTED, FAILED, EXITED, STOPPED)
LIST_TIMEOUT = 30.0


def describe(
    config: McpConfig, *, events: Sequence[Any] | None = None, tools: dict[str, list[str]] | None = None
) -> list[str]:
    """The lines of ``teamrt mcp``: a server a paragraph. ``events``: a run's events (its servers' state);
    ``tools``: each started server's tool names, or its error as the only line."""
    lines: list[str] = []
    servers = [(c, "yes") for c in config.all_servers.values()]
    servers += [(b.config, f"no: {b.reason}") for b in config.blocked.values()]
    for server, starts in sorted(servers, key=lambda s: s[0].name):
        lines.append(f"{server.name}  {server.transport}: {server.where}")
        lines.append(f"  from: {_scope(server)}, {server.source}")
        lines.append(f"  starts: {starts}")
        if events is not None:
            lines.append(f"  in the run: {state_in_run(server.name, events)}")
        if tools is not None and server.name in tools:
            lines += [f"  {line}" for line in tools[server.name]]
    for problem in config.problems:
        lines.append(f"teamrt: warning: {problem}")
    if not servers:
        lines.insert(
            0, "no MCP servers configured (.mcp.json, ~/.claude.json, the team file's [mcp.servers])"
        )
    return [clean_line(line) for line in lines]


def state_in_run(name: str, events: Sequence[Any]) -> str:
    """A server's state in a run, from its events."""
    mine = [e for e in events if e.data.get("server") == name]
    last = next((e for e in reversed(mine) if e.kind in STATES), None)
    if last is None:
        return "not started"
    if last.kind == FAILED:
        return f"failed: {last.data.get('error')}"
    if last.kind == EXITED:
        return f"exited: it {last.data.get('how')}" + (
            "; started again when next called" if last.data.get("restart") else ""
        )
    if last.kind == STOPPED:
        return "stopped with the run"
    process = next((e for e in reversed(mine) if e.kind == PROCESS), None)
    if process is None:
        return f"running (attempt {last.data.get('attempt')})"
    pid, start = process.data.get("pid"), process.data.get("start_time")
    alive = isinstance(pid, int) and isinstance(start, int) and is_running(pid, start)
    return (
        f"running (pid {pid})" if alive else f"gone (pid {pid} ended without being stopped: the run crashed)"
    )


def list_tools(config: McpConfig, ctx: Confinement) -> dict[str, list[str]]:
    """Start every server that may start, list its tools, stop it: each server's tool lines."""
    return list_servers(config, ctx, tools=True, prompts=False)


def list_servers(config: McpConfig, ctx: Confinement, *, tools: bool, prompts: bool) -> dict[str, list[str]]:
    """Start every server that may start (those a repository brings only when trusted), list its tools
    and/or its prompts, stop it: each server's lines."""

    async def go() -> dict[str, list[str]]:
        servers = McpServers(config, ctx, start_timeout=LIST_TIMEOUT)
        try:
            names = sorted(config.all_servers)
            await servers.prepare(names)
            found: dict[str, list[str]] = {}
            for name in names:
                state, error = servers.state(name)
                if state != "running":
                    what = " and ".join(w for w, asked in (("tools", tools), ("prompts", prompts)) if asked)
                    found[name] = [f"{what}: none, it {error}"]
                    continue
                found[name] = _tool_lines(servers, name) if tools else []
                found[name] += await _prompt_lines(servers, name) if prompts else []
            return found
        finally:
            await servers.close()

    return asyncio.run(go())


def _tool_lines(servers: McpServers, name: str) -> list[str]:
    tools = servers.tools([name])
    lines = [f"tools ({len(tools)}):"] + [
        f"  {t.name}{' (read-only)' if t.read_only else ''}: {_first_line(t.description)}" for t in tools
    ]
    return lines + [f"  {line}" for line in servers.refused(name)]


async def _prompt_lines(servers: McpServers, name: str) -> list[str]:
    """A server's prompts as the commands a person types (``/mcp__s__p <required> [optional]``)."""
    if not await servers.prompt_servers([name]):
        return ["prompts: none (it declares no prompts)"]
    try:
        prompts, problems = await list_prompts(servers, name)
    except PromptError as e:
        return [f"prompts: none, {e}"]
    lines = [f"prompts ({len(prompts)}):"]
    for prompt in prompts:
        about = _first_line(prompt.description)
        lines.append(f"  {prompt.usage()}" + (f": {about}" if about else ""))
    return lines + [f"  {line}" for line in problems]


def listing_context(project: Path, run_dir: Path, policy: SandboxPolicy | None) -> Confinement:
    """Where ``teamrt mcp --tools`` starts stdio servers: the project, under ``policy`` (the team's)."""
    from teamrt.sandbox.protect import protected_paths

    protected = protected_paths((project,), home=run_dir.parent.parent)
    return Confinement(
        workspace=project, run_dir=run_dir, protected=protected, policy=policy or SandboxPolicy()
    )


def _scope(server: ServerConfig) -> str:
    return {
        "team": "the team file",
        "local": "your settings for this project",
        "project": "the project's .mcp.json",
        "user": "your user settings",
        "agent": "an agent file",
    }.get(server.scope, server.scope)


def _first_line(text: str) -> str:
    said = clean(text).strip()  # only a newline ends a line: a lone CR shows as U+FFFD
    line = clean_line(said.split("\n")[0]) if said else ""
    return line if len(line) <= 100 else line[:97] + "..."
