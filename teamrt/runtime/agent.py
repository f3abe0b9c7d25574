"""What an agent loop runs with: its definition made concrete, and its surroundings."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from teamrt.mailbox import Inbox, Message
from teamrt.models.catalog import ModelInfo
from teamrt.models.levers import REPLY_TOKENS
from teamrt.models.types import Block, Model, OnRestart, OnText
from teamrt.runtime.asking import Asker
from teamrt.runtime.budget import Budget
from teamrt.runtime.compaction import ContextPolicy
from teamrt.runtime.hooks import AgentHooks
from teamrt.runtime.scopedrules import AgentRules
from teamrt.runtime.stream import TextStream
from teamrt.store import Store
from teamrt.tools.base import Tool, ToolContext
from teamrt.tools.permissions import Permissions

DEFAULT_MAX_TOKENS = REPLY_TOKENS


@dataclass
class AgentSpec:
    """Who the agent is: its model, prompt, tools, permissions and limits."""

    name: str
    model: Model
    model_name: str
    system: str
    tools: dict[str, Tool]
    permissions: Permissions
    info: ModelInfo | None = None
    """The model's prices and window (None: unknown, so no dollar figure and a 200k window)."""
    role: str = ""
    team: str = ""
    """The team file's name: with ``role`` it picks a ``sim`` policy."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_turns: int | None = None
    thinking: dict[str, Any] | None = None
    effort: str | None = None
    """The role's ``output_config.effort`` (None: the model's default)."""
    compact_at: int | None = None
    """The role's compaction trigger in input tokens (None: chosen from the model's prices)."""
    context: ContextPolicy | None = None
    """How the agent's context is kept (None: ``ContextPolicy.for_model``, with ``compact_at``)."""
    cache: str = "auto"
    """The prompt cache's lifetime: ``auto`` (chosen from the agent's waits, ``runtime.cachettl``), ``5m``
    or ``1h``."""
    persistent: bool = False
    """A teammate: when it has nothing to do it idles until mail comes, instead of ending."""


@dataclass
class AgentEnv:
    """Where the agent runs: its run's store, its workspace, its inbox, its budgets."""

    store: Store
    tools: ToolContext
    spill_dir: Path
    asker: Asker
    budgets: Sequence[Budget]
    inbox: Inbox | None = None
    on_text: OnText | None = None
    on_restart: OnRestart | None = None
    keep_waiting: Callable[[], bool] | None = None
    """True while the agent must wait for mail rather than end (a lead with busy children)."""
    on_idle: Callable[[bool], None] | None = None
    """Told True when the agent starts waiting for mail, False when mail wakes it."""
    current_epoch: Callable[[str], int | None] | None = None
    """The epoch an agent runs under now (None: not an agent of this run), to spot superseded mail."""
    after_tools: Callable[[list[str]], Awaitable[None]] | None = None
    """Called with the names of a turn's tools once they have run (a worktree's overlap check)."""
    stream: TextStream | None = None
    """Where the agent's text goes as it streams, for watchers (``runs/<run>/stream/<agent>``)."""
    hooks: AgentHooks | None = None
    """The Claude Code hooks that run at its events (``teamrt.runtime.hooks``); None: none."""
    rules: AgentRules | None = None
    """The path-scoped memory rules it gets as it touches their files (``teamrt.runtime.scopedrules``)."""
    tools_changed: Callable[[dict[str, Tool]], bool] | None = None
    """Called with its tools before each model call: puts in the tools its MCP servers list now (after a
    ``tools/list_changed``), True when they changed (``McpServers.follow``); None: they never do."""
    person_prompt: Callable[[Message], Awaitable[list[Block] | None]] | None = None
    """Expands mail from the person that is an MCP prompt command into the blocks the agent reads
    (``teamrt.runtime.personprompts``); None for other mail, or when there is none to expand."""
    clock: Callable[[], float] = time.monotonic
    """Seconds, for timing its waits for mail (which choose its cache's lifetime); tests pass their own."""


@dataclass(frozen=True)
class Outcome:
    """How an agent's run ended: ``done``, ``failed`` or ``stopped``, with its last answer."""

    status: str
    answer: str
    turns: int
    reason: str | None = None
    usage: dict[str, float] = field(default_factory=dict)
