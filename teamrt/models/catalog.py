"""What teamrt knows about each Claude model: its prices and its minimum cacheable prefix.

Prices are USD per million tokens, from Anthropic's pricing page and model
overview pages as read on ``SOURCE_DATE``; override or extend them in the
settings file (see ``teamrt.settings``). A model id matches its entry with a
snapshot date, ``-0`` or ``-latest`` after it: ``claude-opus-4-1-20250805`` is
``claude-opus-4-1`` and ``claude-opus-4-0`` is ``claude-opus-4``, but
``claude-opus-4-10`` is unknown.

The minimum cacheable prefix is the length under which the API neither
writes nor reads a cache entry. Where no published figure was found for a
model, the value of its predecessor is used and marked so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

SOURCE_DATE = "2026-11-22"
SOURCE = "Anthropic pricing page and model overview pages"


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float


@dataclass(frozen=True)
class ModelInfo:
    price: Price
    min_cache_tokens: int
    long_context_from: int | None = None
    """Prompts of more than this many input tokens are billed at ``long_context_price``."""
    long_context_price: Price | None = None
    context_window: int = 200_000
    max_output_tokens: int = 64_000
    """The most ``max_tokens`` a request to this model may ask for (the API refuses more)."""


def _p(input: float, output: float, write_5m: float, write_1h: float, read: float) -> Price:
    return Price(input, output, write_5m, write_1h, read)


_OPUS_4 = _p(15, 75, 18.75, 30, 1.50)
_OPUS_45 = _p(5, 25, 6.25, 10, 0.50)
_SONNET_4 = _p(3, 15, 3.75, 6, 0.30)
_SONNET_4_LONG = _p(6, 22.50, 7.50, 12, 0.60)
_SONNET_5 = _p(2, 10, 2.50, 4, 0.20)
_FABLE_5 = _p(10, 50, 12.50, 20, 1.00)
_FABLE_51 = _p(10, 50, 12.50, 20, 0.25)

CATALOG: dict[str, ModelInfo] = {
    "claude-fable-5-1": ModelInfo(_FABLE_51, 512),  # minimum: Fable 5's, assumed
    "claude-mythos-5-1": ModelInfo(_FABLE_51, 512),  # minimum: Mythos 5's, assumed
    "claude-fable-5": ModelInfo(_FABLE_5, 512),
    "claude-mythos-5": ModelInfo(_FABLE_5, 512),
    "claude-opus-5-5": ModelInfo(_p(4, 20, 5, 8, 0.20), 512),  # minimum: Opus 5's, assumed
    "claude-opus-5": ModelInfo(_OPUS_45, 512),
    "claude-opus-4-8": ModelInfo(_OPUS_45, 1024),
    "claude-opus-4-7": ModelInfo(_OPUS_45, 4096),
    "claude-opus-4-6": ModelInfo(_OPUS_45, 4096),
    "claude-opus-4-5": ModelInfo(_OPUS_45, 4096),
    "claude-opus-4-1": ModelInfo(_OPUS_4, 1024),
    "claude-opus-4": ModelInfo(_OPUS_4, 1024),
    "claude-sonnet-5-5": ModelInfo(_SONNET_5, 1024),  # minimum: Sonnet 5's, assumed
    "claude-sonnet-5": ModelInfo(_SONNET_5, 1024),
    "claude-sonnet-4-6": ModelInfo(_SONNET_4, 1024),
    "claude-sonnet-4-5": ModelInfo(_SONNET_4, 1024, 200_000, _SONNET_4_LONG),
    "claude-sonnet-4": ModelInfo(_SONNET_4, 1024, 200_000, _SONNET_4_LONG),
    "claude-3-7-sonnet": ModelInfo(_SONNET_4, 1024),
    "claude-haiku-5-5": ModelInfo(
        _p(0.10, 0.50, 0.125, 0.20, 0.01), 1024, 100_000, _p(0.50, 2.50, 0.625, 1.00, 0.05)
    ),  # minimum: assumed
    "claude-haiku-4-5": ModelInfo(_p(1, 5, 1.25, 2, 0.10), 4096),
    "claude-3-5-haiku": ModelInfo(_p(0.80, 4, 1, 1.60, 0.08), 2048),
    "claude-3-haiku": ModelInfo(_p(0.25, 1.25, 0.30, 0.50, 0.03), 2048),
}

_SNAPSHOT_SUFFIX = re.compile(r"(-0)?(-\d{8})?(-latest)?$")

_MILLION_TOKEN_WINDOW = (
    "claude-fable-5-1", "claude-mythos-5-1", "claude-fable-5", "claude-mythos-5", "claude-opus-5-5",
    "claude-opus-5", "claude-opus-4-8", "claude-opus-4-7", "claude-opus-4-6", "claude-sonnet-5-5",
    "claude-sonnet-5", "claude-sonnet-4-6", "claude-haiku-5-5",
)  # fmt: skip
for _name in _MILLION_TOKEN_WINDOW:
    CATALOG[_name] = replace(CATALOG[_name], context_window=1_000_000)

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The model of a run that names none when a key is set (the settings' ``[model] default`` overrides it)."""

SIM_DEFAULT = DEFAULT_MODEL
"""The model whose prices and cache rules the simulator follows when its name says none."""

ALIASES = {"sonnet": "claude-sonnet-5-5", "opus": "claude-opus-5-5", "haiku": "claude-haiku-5-5"}
"""Claude Code's model aliases: each names the newest model of its family."""


def resolve(model: str) -> str:
    """``model`` with an alias (``sonnet``, ``sim:opus``) replaced by the model it names."""
    if model.startswith("sim:"):
        return "sim:" + ALIASES.get(model[4:], model[4:])
    return ALIASES.get(model, model)


def suggest(model: str, table: dict[str, ModelInfo] | None = None) -> str:
    """``; did you mean X?`` for the known name closest to ``model``, or "" when none is close."""
    import difflib

    names = [*ALIASES, *(CATALOG if table is None else table)]
    close = difflib.get_close_matches(model.removeprefix("sim:"), names, n=1, cutoff=0.4)
    return f"; did you mean {close[0]}?" if close else ""


def lookup(model: str, table: dict[str, ModelInfo] | None = None) -> ModelInfo | None:
    """The entry for ``model``, or None; ``sim`` follows ``SIM_DEFAULT``, ``sim:<model>`` ``<model>``."""
    table = CATALOG if table is None else table
    if model == "sim" or model.startswith("sim:"):
        model = model[4:] or SIM_DEFAULT
    return table.get(model) or table.get(_SNAPSHOT_SUFFIX.sub("", model))
