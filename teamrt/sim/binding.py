"""Preserved thinking: the checks the API runs on the thinking blocks a request sends back.

On the newer models (the catalog's ``binds_thinking``) a thinking or
``redacted_thinking`` block is bound to what came before it: the top-level
``system`` prompt, the ``tools`` and every block of ``messages`` before it
(its *prefix*). The simulator seals a digest of that prefix into each block's
signature (``teamrt.sim.signing``) and, when the block comes back, computes the
digest of what now comes before it. If they differ (something before it was
edited, left out or moved, an earlier thinking block included) the request is
refused with the API's 400, or, with ``thinking.block_binding.
prefix_mismatch_behavior: "drop_block"`` (beta ``thinking-binding-controls-
2026-08-01``), the failing block and the rest of that turn's consecutive
thinking blocks are dropped before the model reads the request, each reported
in the response's ``input_transformations``.

On every model, a block written by a model whose thinking the requested model
may not read is dropped without an error (``model_binding_mismatch``), as the
API does. Which model reads which is the documentation's list (preserved
thinking, "Switching models mid-conversation"): each model reads its own
blocks; Claude Fable 5.1 also reads Claude Opus 5's and Opus 5.5's; Claude
Haiku 5.5's blocks are not locked to it and replay on any model.

A compaction block (``compact_20260112``) restarts the prefix: the API reads
the conversation from the newest one on, so the blocks after it are bound to
the system prompt, the tools and the conversation from that block, and the
messages it summarises may be left out of later requests. The turns kept after
a block of compaction on demand (compaction-thinking-blocks: turns left out of
the compaction request, or that arrived while it ran) keep their thinking: the
block seals the prefix of the messages it summarised (``compaction_seal``), and
a kept block matches either prefix, while the system prompt and tools are those
the block was written with and the first kept message's role differs from the
last summarised one's (else the API merges them) and is not ``system``.

What the prefix digest leaves out: ``cache_control`` markers (a breakpoint
moving from turn to turn is not a change of content; the API's prefix check
compares content, and teamrt moves its breakpoints every turn), fields sent
as null (the schema reads them as absent, and the SDK writes some of a
response's blocks back with nulls), and how the
blocks are split into messages (consecutive messages of one role are one turn,
as the API merges them). Everything else is compared byte for byte, in
canonical JSON.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from teamrt.models.catalog import ModelInfo
from teamrt.models.tokens import canonical, message_blocks, system_blocks
from teamrt.models.types import Block
from teamrt.sim.signing import read_signature, unseal

THINKING_TYPES = ("thinking", "redacted_thinking")
BINDING_BETA = "thinking-binding-controls-2026-08-01"
_READS: dict[str, frozenset[str]] = {"claude-fable-5-1": frozenset({"claude-opus-5", "claude-opus-5-5"})}
"""Models that read other models' thinking blocks besides their own (the preserved-thinking page)."""
_PORTABLE = frozenset({"claude-haiku-5-5"})
"""Models whose thinking blocks replay on any model (the documented Haiku 5.5 exception)."""
_SNAPSHOT = re.compile(r"(-0)?(-\d{8})?(-latest)?$")
_ROLE_TAGS = {"user": b"U", "assistant": b"A", "system": b"S"}


class PrefixMismatch(ValueError):
    """A thinking block failed the prefix check; ``where`` is its place in the request."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where}: Invalid `signature` in `thinking` block. The block is bound to a different"
            " conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to"
            ' "drop_block".'
        )
        self.where = where


class ForgedThinking(ValueError):
    """A thinking block the simulator did not sign, or whose text changed since."""


def model_name(model: str) -> str:
    """The model a block's seal names: the Claude id without its snapshot suffix."""
    return _SNAPSHOT.sub("", model)


def readable(reader: str, writer: str) -> bool:
    """Whether ``reader`` may read thinking ``writer`` wrote (both Claude model ids)."""
    reader, writer = model_name(reader), model_name(writer)
    return reader == writer or writer in _PORTABLE or writer in _READS.get(reader, frozenset())


def _start(params: dict[str, Any]) -> bytes:
    state = hashlib.sha256(b"teamrt-sim-prefix\0").digest()
    for tag, blocks in ((b"T", params.get("tools") or []), (b"S", system_blocks(params.get("system")))):
        for block in blocks:
            state = _add(state, tag, block)
    return state


def _add(state: bytes, tag: bytes, block: Block) -> bytes:
    """The chain's state after ``block``: a hash of the state before and the block (a chain, not one running
    hash, so a compaction block can seal a state that later requests go on from)."""
    data = canonical({k: v for k, v in block.items() if k != "cache_control" and v is not None})
    return hashlib.sha256(state + tag + len(data).to_bytes(8, "big") + data).digest()


@dataclass
class PrefixChain:
    """The prefix digests of a request's blocks, in order; ``extend`` goes on past its end (a response's
    blocks follow the request's messages as the assistant's)."""

    params: dict[str, Any]
    _start: bytes = field(init=False)
    _state: bytes = field(init=False)
    _kept: bytes | None = field(init=False, default=None)  # the prefix as kept turns after a block see it
    _kept_role: str = field(init=False, default="")  # the role of the last message the block summarised
    _first_kept: bool = field(init=False, default=False)
    kept: str | None = field(init=False, default=None)
    """The last added block's prefix as the turns kept after a compaction on demand see it (None: none)."""

    def __post_init__(self) -> None:
        self._start = self._state = _start(self.params)

    def blocks(self) -> Iterator[tuple[int, int, str, Block, str]]:
        """Each block of ``messages``: (message index, block index, role, block, the digest before it)."""
        for i, message in enumerate(self.params.get("messages") or []):
            role = str(message.get("role", ""))
            for j, block in enumerate(message_blocks(message)):
                yield i, j, role, block, self.add(role, block)

    def add(self, role: str, block: Block) -> str:
        """The digest before ``block``; ``block`` is then added to the chain."""
        tag = _ROLE_TAGS.get(role, b"?")
        if block.get("type") == "compaction" and isinstance(block.get("content"), str):
            self._state = self._start  # the model reads from the newest compaction block on
            self._kept, self._kept_role = _summarised_prefix(block, self._start)
            self._first_kept, self.kept = True, None
            before = self._state
            self._state = _add(before, tag, block)
            return before.hex()[:32]
        if self._first_kept and role in (self._kept_role, "system"):
            self._kept = None  # merged into the last summarised message: the kept prefix no longer holds
        self._first_kept = False
        before, self.kept = self._state, self._kept.hex()[:32] if self._kept is not None else None
        self._state = _add(before, tag, block)
        if self._kept is not None:
            self._kept = _add(self._kept, tag, block)
        return before.hex()[:32]

    @classmethod
    def through(cls, params: dict[str, Any]) -> PrefixChain:
        """The chain past every block of ``params`` (where a response to it begins)."""
        chain = cls(params)
        for _ in chain.blocks():
            pass
        return chain

    def end(self) -> str:
        """The digest after every block so far (the prefix of the next block)."""
        return self._state.hex()[:32]


def compaction_seal(params: dict[str, Any]) -> dict[str, str]:
    """What a compaction on demand's block seals of the request it summarised (``params``, as sent): the
    chain's state after its messages, its system prompt and tools, and the role of its last message."""
    chain = PrefixChain.through(params)
    messages = params.get("messages") or []
    last = messages[-1].get("role") if messages and isinstance(messages[-1], dict) else ""
    return {"follows": chain._state.hex(), "st": chain._start.hex(), "r": str(last or "")}


def _summarised_prefix(block: Block, start: bytes) -> tuple[bytes | None, str]:
    """The state the turns kept after ``block`` go on from, when it is a compaction on demand's block
    written for this request's system prompt and tools; else None."""
    fields = unseal(block.get("signature"))
    if not fields or fields.get("kind") != "compaction" or fields.get("st") != start.hex():
        return None, ""
    follows = fields.get("follows")
    try:
        state = bytes.fromhex(follows) if isinstance(follows, str) else None
    except ValueError:
        return None, ""
    return (state, str(fields.get("r") or "")) if state is not None and len(state) == 32 else (None, "")


@dataclass(frozen=True)
class Bound:
    params: dict[str, Any]
    """The request as the model reads it: the dropped blocks removed."""
    input_transformations: list[dict[str, Any]]
    """``input_transformations`` of the response: one ``thinking_dropped`` entry per dropped block."""


def bind(params: dict[str, Any], model: str, info: ModelInfo, *, drop: bool) -> Bound:
    """Run the model and prefix checks on ``params``' thinking blocks for ``model`` (a Claude id).

    Raises ``ForgedThinking`` for a block the simulator did not sign as it is, ``PrefixMismatch`` for a
    block whose prefix changed unless ``drop``; returns the request with the blocks the API drops removed."""
    dropped: dict[tuple[int, int], str] = {}
    dropping = False  # a block of this run of consecutive thinking blocks failed the prefix check
    chain = PrefixChain(params)
    for i, j, role, block, prefix in chain.blocks():
        if role != "assistant" or not isinstance(block, dict) or block.get("type") not in THINKING_TYPES:
            dropping = False
            continue
        where = f"messages.{i}.content.{j}"
        seal = read_signature(block)
        if seal is None:
            kind = block["type"]
            field_name = "signature" if kind == "thinking" else "data"
            raise ForgedThinking(f"{where}: Invalid `{field_name}` in `{kind}` block")
        if not readable(model, seal.model):
            dropped[(i, j)] = "model_binding_mismatch"
        elif dropping:
            dropped[(i, j)] = "prefix_binding_mismatch"
        elif info.binds_thinking and seal.prefix not in (prefix, chain.kept):
            if not drop:
                raise PrefixMismatch(where)
            dropped[(i, j)] = "prefix_binding_mismatch"
            dropping = True
    if not dropped:
        return Bound(params, [])
    transformations = [
        {"type": "thinking_dropped", "path": f"messages.{i}.content.{j}", "reason": reason}
        for (i, j), reason in sorted(dropped.items())
    ]
    return Bound(_without(params, dropped), transformations)


def _without(params: dict[str, Any], dropped: dict[tuple[int, int], str]) -> dict[str, Any]:
    """``params`` with the dropped blocks removed (a message left empty goes with them)."""
    messages = []
    for i, message in enumerate(params["messages"]):
        blocks = message_blocks(message)
        kept = [b for j, b in enumerate(blocks) if (i, j) not in dropped]
        if len(kept) == len(blocks):
            messages.append(message)
        elif kept:
            messages.append({**message, "content": kept})
    return {**params, "messages": messages}
