"""MCP prompts as Claude Code has them: the person's ``/mcp__<server>__<prompt> arg1 arg2`` commands.

Claude Code offers each connected server's prompts to the *person* as slash
commands, ``/mcp__<server>__<prompt>``, never to its model (its MCP docs, "Use
MCP prompts as commands"): arguments follow the command, separated by spaces and
quoted when they hold one (``/mcp__jira__create_issue "Bug in login flow" high``),
taken in the order the prompt declares its arguments, and what the server answers
(``prompts/get``) is what the person sends. Server and prompt names are made fit
as tool names are (characters other than letters, digits, ``_`` and ``-`` become
``_``).

teamrt's person-facing inputs are the task of ``teamrt run``, a person's mail
(``teamrt send``, the TUI's message box) and ``teamrt mcp --prompts``. A text that
starts with ``/mcp__`` is expanded here, through the run's servers, once, where it
enters the run; the expansion is what is kept, so a resume never asks the server
again (``teamrt.runtime.personprompts``).

A prompt is a server's own text, and a person's command goes only to servers that
may start (a repository's server the person has not trusted never does). What the
server answers is cleaned of terminal control characters, bounded (``MAX_CHARS``
of text, ``MAX_IMAGES`` images, ``MAX_MESSAGES`` messages: more is refused, not
cut, since a cut prompt says something else), and its images and embedded resources
become blocks as a tool's do (``teamrt.mcp.tools.resource_block``). A prompt whose
name, made fit, holds ``__`` or is empty cannot be named by a command and is left
out with a line, as such tools are. Departure: Claude Code sends a prompt's
messages whatever their role; teamrt does too, but marks an ``assistant`` message
as such in the text, so the model is not led to take a server's words as its own.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from teamrt.errors import UserError
from teamrt.mcp.tools import IMAGE_TYPES, MAX_IMAGE_CHARS, MAX_NAME, resource_block
from teamrt.models.types import Block
from teamrt.terminal import clean, clean_line

PREFIX: Final = "/mcp__"
PROMPTED: Final = "mcp.prompt"
"""``{"server", "prompt", "arguments", "chars", "images", "to"}`` (with ``blocks`` for the task), or
``{"command", "error", "to"}``: a person's prompt command expanded, or refused
(``teamrt.runtime.personprompts``)."""
MAX_PROMPTS = 200
"""Prompts of one server listed at most."""
MAX_PAGES = 10
MAX_CHARS = 100_000
"""Characters of text an expanded prompt may hold; a larger one is refused."""
MAX_MESSAGES = 50
MAX_IMAGES = 5
MAX_ARGUMENT_CHARS = 10_000
"""Characters of one argument the person gives."""
MAX_FIELD = 300
"""Characters of a prompt's or argument's description shown."""
_UNFIT = re.compile(r"[^A-Za-z0-9_-]")


class PromptError(UserError):
    """A person's ``/mcp__`` command that cannot be expanded: one line saying why; nothing is sent."""


class Servers(Protocol):
    """What reaches the run's servers (``teamrt.mcp.servers.McpServers``)."""

    async def prompt_servers(self, names: Iterable[str]) -> list[str]: ...

    async def session(self, name: str) -> Any: ...

    def timeout(self, name: str) -> float: ...

    def names(self) -> list[str]: ...


@dataclass(frozen=True)
class Argument:
    name: str
    description: str
    required: bool


@dataclass(frozen=True)
class Prompt:
    """One prompt of one server, as a command names it."""

    server: str
    name: str
    """The prompt's own name on its server."""
    description: str
    arguments: tuple[Argument, ...]

    @property
    def command(self) -> str:
        """``/mcp__<server>__<prompt>``, names made fit."""
        return f"{PREFIX}{fit(self.server)}__{fit(self.name)}"

    def usage(self) -> str:
        """The command with its arguments: ``<required>`` and ``[optional]``."""
        shown = [f"<{a.name}>" if a.required else f"[{a.name}]" for a in self.arguments]
        return " ".join([self.command, *shown])


@dataclass(frozen=True)
class Expansion:
    """A command expanded: the blocks the person sends, and what the journal says of it."""

    prompt: Prompt
    arguments: dict[str, str]
    blocks: list[Block]

    def record(self) -> dict[str, Any]:
        """The ``mcp.prompt`` event's data (the blocks are kept with it: a resume reads them back)."""
        return {
            "server": self.prompt.server, "prompt": self.prompt.name, "arguments": sorted(self.arguments),
            "chars": sum(len(b.get("text", "")) for b in self.blocks),
            "images": sum(1 for b in self.blocks if b.get("type") in ("image", "document")),
        }  # fmt: skip


def fit(name: str) -> str:
    """A server's or prompt's name as a command holds it (as Claude Code normalizes it)."""
    return _UNFIT.sub("_", name)


def is_command(text: str) -> bool:
    """Whether ``text`` (a task, a person's message) is an MCP prompt command."""
    return text.lstrip().startswith(PREFIX)


async def list_prompts(servers: Servers, name: str) -> tuple[list[Prompt], list[str]]:
    """The prompts server ``name`` (one ``prompt_servers`` gave) lists that a command can name, by name,
    and a line for each left out; a ``PromptError`` when it cannot be asked."""
    client = await _session(servers, name)
    items: list[Any] = []
    cursor = None
    problems: list[str] = []
    for _ in range(MAX_PAGES):
        page = await _ask(servers, name, client.list_prompts(cursor=cursor), "its prompts")
        items += page.prompts
        cursor = page.next_cursor
        if cursor is None or len(items) >= MAX_PROMPTS:
            break
    if len(items) > MAX_PROMPTS or cursor is not None:
        problems.append(f"MCP server {name!r} has more prompts; the first {MAX_PROMPTS} are listed")
    found: dict[str, Prompt] = {}
    for item in items[:MAX_PROMPTS]:
        raw = str(getattr(item, "name", ""))
        prompt = Prompt(name, raw, _cut(getattr(item, "description", None) or ""), _arguments(item))
        why = _refusal(prompt)
        if why is None and prompt.command in found:
            why = f"its name, made fit for a command, is {found[prompt.command].name!r}'s too"
        if why is not None:
            shown = json.dumps(clean_line(raw[:60])) + ("..." if len(raw) > 60 else "")
            problems.append(f"MCP server {name!r}: prompt {shown} left out: {why}")
            continue
        found[prompt.command] = prompt
    return [found[c] for c in sorted(found)], problems


async def expand(servers: Servers, text: str) -> Expansion | None:
    """``text`` expanded when it is a prompt command (None when it is not): the server's prompt, its
    arguments taken from the words after the command. Raises ``PromptError`` (one line) when the command
    names no prompt of a server that runs, the arguments do not fit, or the server's answer cannot be
    sent."""
    if not is_command(text):
        return None
    head, _, rest = text.strip().partition(" ")
    rest = rest.strip()
    command = clean_line(head[:200])
    prompt = await _find(servers, head)
    if prompt is None:
        raise PromptError(f"{command}: no MCP prompt of that name; `teamrt mcp --prompts` lists them")
    try:
        words = shlex.split(rest) if rest else []
    except ValueError as e:
        raise PromptError(f"{command}: its arguments cannot be read ({e}); usage: {prompt.usage()}") from None
    given = dict(zip((a.name for a in prompt.arguments), words, strict=False))
    if len(words) > len(prompt.arguments):
        took = f"takes {len(prompt.arguments)} argument{'s' if len(prompt.arguments) != 1 else ''}"
        raise PromptError(f"{command} {took}, given {len(words)}: quote a value with spaces; usage: "
                          f"{prompt.usage()}")  # fmt: skip
    missing = [a.name for a in prompt.arguments if a.required and a.name not in given]
    if missing:
        raise PromptError(f"{command}: missing {', '.join(missing)}; usage: {prompt.usage()}")
    long = [n for n, v in given.items() if len(v) > MAX_ARGUMENT_CHARS]
    if long:
        raise PromptError(f"{command}: {long[0]} is over {MAX_ARGUMENT_CHARS:,} characters")
    client = await _session(servers, prompt.server)
    result = await _ask(
        servers, prompt.server, client.get_prompt(prompt.name, given), f"prompt {prompt.name!r}"
    )
    return Expansion(prompt, given, _blocks(prompt, result.messages))


async def _find(servers: Servers, head: str) -> Prompt | None:
    """The prompt ``head`` (``/mcp__s__p``) names, asking only the servers whose fit name it begins with."""
    candidates = [n for n in servers.names() if head.startswith(f"{PREFIX}{fit(n)}__")]
    for name in await servers.prompt_servers(candidates):
        prompts, _ = await list_prompts(servers, name)
        for prompt in prompts:
            if prompt.command == head:
                return prompt
    return None


def _blocks(prompt: Prompt, messages: Sequence[Any]) -> list[Block]:
    """The server's messages as the blocks of one user turn: text cleaned, images and resources as a
    tool's are; refused (``PromptError``) when there are too many or too much."""
    command = prompt.command
    if len(messages) > MAX_MESSAGES:
        raise PromptError(f"{command}: the server's prompt has {len(messages)} messages; teamrt takes "
                          f"{MAX_MESSAGES}")  # fmt: skip
    blocks: list[Block] = []
    for message in messages:
        block = _block(getattr(message, "content", None))
        if getattr(message, "role", "user") == "assistant" and block["type"] == "text":
            block = {"type": "text", "text": f"[the prompt's assistant message]\n{block['text']}"}
        blocks.append(block)
    for block in blocks:
        if block["type"] == "text":
            block["text"] = clean(block["text"])
    chars = sum(len(b["text"]) for b in blocks if b["type"] == "text")
    if chars > MAX_CHARS:
        raise PromptError(f"{command}: the server's prompt is {chars:,} characters; teamrt takes "
                          f"{MAX_CHARS:,}")  # fmt: skip
    images = sum(1 for b in blocks if b["type"] in ("image", "document"))
    if images > MAX_IMAGES:
        raise PromptError(f"{command}: the server's prompt has {images} images; teamrt takes {MAX_IMAGES}")
    blocks = [b for b in blocks if b["type"] != "text" or b["text"].strip()]
    if not blocks:
        raise PromptError(f"{command}: the server's prompt is empty")
    return blocks


def _block(content: Any) -> Block:
    kind = getattr(content, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(content.text)}
    if kind == "image":
        data, mime = str(content.data), str(content.mime_type)
        if mime not in IMAGE_TYPES:
            return {"type": "text", "text": f"[an image of type {clean_line(mime[:60])} left out]"}
        if len(data) > MAX_IMAGE_CHARS:
            return {"type": "text", "text": f"[an image left out: {len(data):,} characters of base64]"}
        return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}}
    if kind == "resource":
        return resource_block(content.resource)
    if kind == "resource_link":
        return {"type": "text", "text": f"[resource link: {content.name} {content.uri}]"}
    if kind == "audio":
        return {"type": "text", "text": "[audio left out: the model cannot hear it]"}
    return {"type": "text", "text": f"[content of type {clean_line(str(kind)[:40])!r} left out]"}


def _arguments(item: Any) -> tuple[Argument, ...]:
    declared = getattr(item, "arguments", None) or []
    return tuple(
        Argument(
            str(a.name), _cut(getattr(a, "description", None) or ""), bool(getattr(a, "required", False))
        )
        for a in declared[:50]
    )


def _refusal(prompt: Prompt) -> str | None:
    if not prompt.name or "__" in fit(prompt.name):
        return "an empty name, or one holding '__', would make /mcp__<server>__<prompt> ambiguous"
    if len(prompt.command) > MAX_NAME:
        return f"the command would be {len(prompt.command)} characters; teamrt takes {MAX_NAME}"
    bad = [a.name for a in prompt.arguments if not a.name or fit(a.name) != a.name]
    if bad:
        return f"an argument's name is not a plain word: {json.dumps(clean_line(bad[0][:40]))}"
    return None


async def _session(servers: Servers, name: str) -> Any:
    from teamrt.tools.base import ToolError

    try:
        return await servers.session(name)
    except ToolError as e:
        raise PromptError(clean_line(str(e))) from None


async def _ask(servers: Servers, name: str, request: Any, what: str) -> Any:
    """The answer to ``request`` within the server's timeout; its failure as a ``PromptError``."""
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    timeout = servers.timeout(name)
    try:
        return await asyncio.wait_for(request, timeout)
    except TimeoutError:
        raise PromptError(f"MCP server {name!r} did not give {what} within {timeout:g} s") from None
    except MCPError as e:
        raise PromptError(f"MCP server {name!r} refused {what}: {_said(e)}") from None
    except (ValidationError, RuntimeError) as e:
        raise PromptError(f"MCP server {name!r} gave {what} in invalid MCP: {_said(e)}") from None


def _said(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return clean_line(text[0][:200] if text else type(error).__name__)


def _cut(text: Any) -> str:
    said = clean_line(str(text))
    return said if len(said) <= MAX_FIELD else said[: MAX_FIELD - 1] + "…"
