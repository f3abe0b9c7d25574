"""What a tool is to the agent loop.

A tool has a name the model calls it by, a JSON schema for its input, and an
async ``run``. ``read_only`` tools of one turn may run in parallel and may be
run again after a crash; the others run in order and are never re-run blindly.
A tool reports a failure the model should see by raising ``ToolError`` (or by
returning ``ToolResult(..., is_error=True)``); anything else it raises is a
bug and fails the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from teamrt.sandbox.confinement import Confinement
from teamrt.sandbox.policy import SandboxPolicy, WebPolicy

if TYPE_CHECKING:
    from teamrt.sandbox.quarantine import Guard

OnProcess = Callable[[int], Awaitable[None]]
"""Called with the pid of each process a tool starts, before the tool waits on it (journaled)."""


class ToolError(Exception):
    """A failure told to the model as an error result; the message is what it reads."""


@dataclass(frozen=True)
class ToolContext:
    """Where and for whom a tool runs."""

    workspace: Path
    """The agent's root: file tools are confined to it (symlinks resolved), bash runs in it."""
    run_dir: Path
    """The run's directory (``<home>/runs/<run>``): file tools never read or list it."""
    agent: str = ""
    on_process: OnProcess | None = None
    extra_roots: tuple[Path, ...] = field(default=())
    """Further directories file tools may read (never write)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to the environment of the programs tools run (a worktree's git settings)."""
    readable: tuple[Path, ...] = field(default=())
    """Directories sandboxed programs must see even under the private /tmp (a worktree's repository)."""
    writable: tuple[Path, ...] = field(default=())
    """Directories outside the workspace that sandboxed programs may write (a worktree's git metadata)."""
    protected: tuple[Path, ...] = field(default=())
    """Canonical paths no tool may change in any permission mode (``teamrt.sandbox.protect``): the file
    tools refuse them, the sandbox mounts those that exist read-only."""
    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    """What the run allows programs: network, environment, limits, running unconfined."""
    web: WebPolicy = field(default_factory=WebPolicy)
    """What the run allows WebFetch (the private hosts it may reach) and WebSearch."""
    read_denied: Callable[[Path], str | None] | None = None
    """The agent's deny rules for reading: the rule (as written) that forbids reading a canonical path,
    or None. Reads refuse such a path and walks (glob, grep) skip it."""
    guard: Guard | None = None
    """The run's check of protected paths (``teamrt.sandbox.quarantine``): every process that ran in the
    workspace is followed by a scan that moves out what it created or changed there. None outside a run."""

    @property
    def confinement(self) -> Confinement:
        """What the programs the tools run may see and touch (``teamrt.sandbox``)."""
        return Confinement(
            self.workspace,
            self.run_dir,
            extra_roots=self.extra_roots,
            env=self.env,
            readable=self.readable,
            writable=self.writable,
            protected=self.protected,
            policy=self.policy,
        )


@dataclass(frozen=True)
class ToolResult:
    content: str | list[dict[str, Any]]
    """Text, or the Messages API's ``tool_result`` content blocks (``text``, ``image``, ``document``): an MCP
    tool's image stays an image. ``result_text`` is the text of either."""
    is_error: bool = False

    @property
    def text(self) -> str:
        """The content's text (``result_text``)."""
        return result_text(self.content)


def result_text(content: str | list[dict[str, Any]]) -> str:
    """The text of a result's content: itself, or its text blocks joined (other blocks left out)."""
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


class Tool(Protocol):
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool

    async def run(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


def object_schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """A tool's ``input_schema``: an object of ``properties``, ``required`` ones named, no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def tool_param(tool: Tool) -> dict[str, Any]:
    """The tool as the Messages API's ``tools`` entry; a server tool (one the API runs) gives its own."""
    api_param: Callable[[], dict[str, Any]] | None = getattr(tool, "api_param", None)
    if api_param is not None:
        return api_param()
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
