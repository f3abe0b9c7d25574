"""A person's ``/mcp__<server>__<prompt>`` command, expanded where it enters the run, and kept.

Two of the person's inputs reach an agent inside the run: the task (the lead's
first turn) and mail from ``user`` (``teamrt send``, the TUI's message box).
Either may be a prompt command (``teamrt.mcp.prompts``); it is expanded once,
through the run's servers, and what the server answered is what is kept:

- **the task**: expanded before the lead starts; the blocks are journaled with
  the ``mcp.prompt`` event, so a resume whose lead had not kept its first turn
  reads them back (``kept_task``) instead of asking the server again. A command
  that cannot be expanded ends the run before the lead starts, failed, with the
  ``PromptError``'s line (the CLI prints it).
- **mail**: expanded as the agent takes the mail into a turn; the turn keeps the
  blocks (the ``mail`` table keeps the message as the person wrote it), so a
  resume reads the turn. A command that cannot be expanded is journaled with the
  reason (``mcp.prompt`` with ``error``, shown by ``teamrt logs`` and the TUI) and
  the agent is told only that the person's command could not be used: none of it
  is sent.
- **a follow-up's prompt** (``teamrt continue``): expanded before its round
  begins (``for_round``), through servers of the run's configuration started for
  it alone: the round's first user turn is written with the round, in one
  transaction, before the run's own servers start. The turn keeps the blocks
  (a resume reads the turn, never the server); the ``mcp.prompt`` event says
  what was expanded (``journal_round``). A command that cannot be expanded is the
  ``PromptError``'s one line, and the run is not continued.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from teamrt.events import USER
from teamrt.mailbox import Message
from teamrt.mcp.config import McpConfig
from teamrt.mcp.prompts import PROMPTED, Expansion, PromptError, Servers, expand, is_command
from teamrt.mcp.servers import McpServers
from teamrt.models.types import Block
from teamrt.terminal import clean_line

if TYPE_CHECKING:
    from teamrt.sandbox.confinement import Confinement
    from teamrt.store import EventRecord, Store

__all__ = ["PROMPTED", "PersonPrompt", "for_mail", "for_round", "journal_round", "kept_task", "task"]

PersonPrompt = Callable[[Message], Awaitable[list[Block] | None]]
"""An agent's mail expanded when it is the person's prompt command (None: it is not one)."""


async def task(servers: Servers, store: Store, text: str) -> str | list[Block]:
    """The lead's task: ``text``, or the blocks its prompt command expands to (journaled with them);
    raises ``PromptError``."""
    expanded = await expand(servers, text)
    if expanded is None:
        return text
    await store.append_event(PROMPTED, {**expanded.record(), "to": "lead", "blocks": expanded.blocks})
    return expanded.blocks


def kept_task(events: Sequence[EventRecord]) -> list[Block] | None:
    """The blocks the task expanded to, as journaled (None: it was not a prompt command)."""
    for event in events:
        blocks = event.data.get("blocks")
        if event.kind == PROMPTED and event.data.get("to") == "lead" and isinstance(blocks, list):
            return blocks
    return None


def for_mail(servers: Servers, store: Store, agent: str) -> PersonPrompt:
    """What expands the person's prompt commands in ``agent``'s mail, as the blocks of its mail."""

    async def expanded(msg: Message) -> list[Block] | None:
        if msg.sender != USER or msg.kind != "message" or not is_command(msg.body):
            return None
        head = f'<mail id="{msg.id}" from="{msg.sender}" kind="{msg.kind}"'
        try:
            done = await expand(servers, msg.body)
        except PromptError as e:
            command = clean_line(msg.body.strip().split(" ", 1)[0][:200])
            await store.append_event(PROMPTED, {"command": command, "error": str(e), "to": agent})
            note = (f"(the person's command {command} could not be used, and nothing of it was sent;"
                    " teamrt told them why)")  # fmt: skip
            return [{"type": "text", "text": f"{head}>\n{note}\n</mail>"}]
        assert done is not None
        data: dict[str, Any] = {**done.record(), "to": agent}
        await store.append_event(PROMPTED, data)
        command = done.prompt.command
        return [
            {"type": "text", "text": f'{head} prompt="{command}">'},
            *done.blocks,
            {"type": "text", "text": "</mail>"},
        ]

    return expanded


async def for_round(
    config: McpConfig, ctx: Confinement, text: str, *, start_timeout: float
) -> Expansion | None:
    """A follow-up's prompt expanded when it is a prompt command (None: it is not one), through the
    servers of ``config`` started where ``ctx`` says for this alone, and stopped after; raises
    ``PromptError``. No store: nothing of the run has changed yet (``journal_round`` says it once the
    round has begun)."""
    if not is_command(text):
        return None
    servers = McpServers(config, ctx, start_timeout=start_timeout)
    try:
        return await expand(servers, text)
    finally:
        await servers.close()


async def journal_round(store: Store, expanded: Expansion, number: int) -> None:
    """The ``mcp.prompt`` event of round ``number``'s expanded prompt (the lead's turn keeps the blocks)."""
    await store.append_event(PROMPTED, {**expanded.record(), "to": "lead", "round": number})
