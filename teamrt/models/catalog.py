"""What teamrt knows about each Claude model: its prices, its limits and its minimum cacheable prefix.

The figures live in ``catalog.toml`` beside this module (USD per million
tokens, as read on ``SOURCE_DATE``, with where each came from); override or
extend them in the settings file (see ``teamrt.settings``). A model id matches
its entry with a snapshot date, ``-0`` or ``-latest`` after it:
``claude-opus-4-1-20250805`` is ``claude-opus-4-1`` and ``claude-opus-4-0`` is
``claude-opus-4``, but ``claude-opus-4-10`` is unknown.

The minimum cacheable prefix is the length under which the API neither
writes nor reads a cache entry.

Each entry also says what the model takes (its features: thinking by default,
bound thinking, context editing, server-side compaction, effort levels, forced
tool choice, mid-conversation system messages) and, for a model the API has
retired, the date: ``lookup`` still answers for it (an old run's cost is still
priced), while ``open_model`` refuses to start one, naming ``successor``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import date
from importlib import resources
from typing import Any

from teamrt.errors import UserError

CATALOG_FILE = "catalog.toml"


class CatalogError(UserError, ValueError):
    """A prices table cannot be used; the message names the table and the problem, on one line."""


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
    sampling: bool = True
    """False: the model refuses a non-default ``temperature``, so teamrt never sends one."""
    source: str = ""
    """Where the figures come from: the built-in file's note, or the settings file that set them."""
    thinking_default: str | None = None
    """How the model thinks when a request sends no ``thinking``: ``"adaptive"``, or None (it does not)."""
    thinking_off: str = "disabled"
    """The ``thinking.type`` that turns up-front thinking off: ``"disabled"``, or ``"between_tools"`` on a
    model that refuses ``disabled`` (Sonnet 5.5)."""
    binds_thinking: bool = False
    """The API runs the prefix check on this model's replayed thinking blocks (preserved thinking): a block
    is bound to the model, the system prompt, the tools and every message before it."""
    context_editing: bool = False
    """The model takes the ``clear_tool_uses_20250919`` and ``clear_thinking_20251015`` edits (beta)."""
    server_compaction: bool = False
    """The model takes compaction at a token threshold (the ``compact_20260112`` edit, beta)."""
    compaction_on_demand: bool = False
    """The model takes compaction on demand (the ``compaction`` parameter, beta ``compact-2026-09-04``)."""
    effort: tuple[str, ...] = ()
    """The ``output_config.effort`` levels the model takes; () when it takes none."""
    forced_tool_choice: bool = True
    """False: the API refuses ``tool_choice`` of type ``any`` or ``tool`` on this model, thinking or not."""
    system_messages: bool = False
    """The model takes ``system`` messages in the middle of ``messages``."""
    retired: str | None = None
    """The date the API retired the model (it answers 404): teamrt refuses it in one line."""


PRICE_FIELDS = tuple(f.name for f in fields(Price))
LIMIT_FIELDS = ("min_cache_tokens", "context_window", "max_output_tokens")
FEATURE_FIELDS = (
    "thinking_default", "thinking_off", "binds_thinking", "context_editing", "server_compaction",
    "compaction_on_demand", "effort", "forced_tool_choice", "system_messages", "retired",
)  # fmt: skip
"""What the model takes beyond prices and limits; each defaults to the field's default in ``ModelInfo``."""
MODEL_FIELDS = (*PRICE_FIELDS, *LIMIT_FIELDS, "sampling", "source", "long_context", *FEATURE_FIELDS)
DEFAULT_MIN_CACHE_TOKENS = 1024
"""The cache minimum assumed for a model known only from a prices file."""
EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""``output_config.effort``'s values in the API (SDK 2.14's ``OutputConfigParam``), lowest first."""
THINKING_DEFAULTS = {"adaptive": "adaptive", "none": None}
"""A file's ``thinking_default`` words and the ``ModelInfo`` value each means (TOML has no null)."""
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def model_info(where: str, table: Any, known: ModelInfo | None, source: str) -> ModelInfo:
    """The entry a ``[prices."<model>"]``-shaped ``table`` describes, laid over ``known`` (None: a new
    model, which must give every price). Setting any price drops ``known``'s long-context band unless
    the table gives its own, since a band priced for other base rates would be wrong."""
    if not isinstance(table, dict):
        raise CatalogError(f"[{where}] must be a table")
    for key in table:
        if key not in MODEL_FIELDS:
            raise CatalogError(f"[{where}] has no setting {key!r}")
    if known is None and (missing := [k for k in PRICE_FIELDS if k not in table]):
        raise CatalogError(f"[{where}] lacks {missing[0]!r}")
    base = known or ModelInfo(Price(0, 0, 0, 0, 0), DEFAULT_MIN_CACHE_TOKENS)
    prices = {k: _number(where, k, table[k]) for k in PRICE_FIELDS if k in table}
    limits: dict[str, Any] = {k: _count(where, k, table[k]) for k in LIMIT_FIELDS if k in table}
    if "sampling" in table and not isinstance(table["sampling"], bool):
        raise CatalogError(f"[{where}] sampling must be true or false")
    if "source" in table and not (isinstance(table["source"], str) and table["source"].strip()):
        raise CatalogError(f"[{where}] source must be a non-empty string")
    features = {k: _feature(where, k, table[k]) for k in FEATURE_FIELDS if k in table}
    long_from, long_price = base.long_context_from, base.long_context_price
    if prices:
        long_from, long_price = None, None
    if "long_context" in table:
        long_from, long_price = _band(f"{where}.long_context", table["long_context"])
    return replace(
        base,
        price=replace(base.price, **prices),
        long_context_from=long_from,
        long_context_price=long_price,
        sampling=table.get("sampling", base.sampling),
        source=table["source"].strip() if "source" in table else source,
        **limits,
        **features,
    )


def prices_table(where: str, raw: Any, base: Mapping[str, ModelInfo], source: str) -> dict[str, ModelInfo]:
    """Each model of a ``[prices]`` table (``where`` names it in errors), laid over its entry in ``base``."""
    if not isinstance(raw, dict):
        raise CatalogError(f"[{where}] must be a table of models")
    return {
        name: model_info(f'{where}."{name}"', table, lookup(name, dict(base)), source)
        for name, table in raw.items()
    }


def _number(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise CatalogError(f"[{where}] {key} must be a number of 0 or more")
    return float(value)


def _count(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CatalogError(f"[{where}] {key} must be a whole number of 1 or more")
    return value


def _feature(where: str, key: str, value: Any) -> Any:
    if key == "thinking_default":
        if not (isinstance(value, str) and value in THINKING_DEFAULTS):
            raise CatalogError(f'[{where}] thinking_default must be "adaptive" or "none"')
        return THINKING_DEFAULTS[value]
    if key == "thinking_off":
        if value not in ("disabled", "between_tools"):
            raise CatalogError(f'[{where}] thinking_off must be "disabled" or "between_tools"')
        return value
    if key == "retired":
        return _retired(where, value)
    if key == "effort":
        known = ", ".join(EFFORT_LEVELS)
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise CatalogError(f"[{where}] effort must be a list of levels ({known}), or [] for none")
        if wrong := [v for v in value if v not in EFFORT_LEVELS]:
            raise CatalogError(f"[{where}] effort has no level {wrong[0]!r} (the levels: {known})")
        if len(set(value)) != len(value):
            raise CatalogError(f"[{where}] effort names a level twice")
        return tuple(level for level in EFFORT_LEVELS if level in value)  # lowest first, whatever the order
    if not isinstance(value, bool):
        raise CatalogError(f"[{where}] {key} must be true or false")
    return value


def _retired(where: str, value: Any) -> str | None:
    """A retirement date (``YYYY-MM-DD``), or ``false``: not retired (a settings file's way to allow a
    retired model again, for a server that still serves it)."""
    if value is False:
        return None
    if isinstance(value, date):  # TOML's bare date, 2026-08-05 without quotes
        return value.isoformat()
    if isinstance(value, str) and _DATE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip()).isoformat()
        except ValueError:
            pass
    raise CatalogError(f'[{where}] retired must be a date such as "2026-08-05", or false')


def _band(where: str, table: Any) -> tuple[int, Price]:
    if not isinstance(table, dict):
        raise CatalogError(f"[{where}] must be a table")
    for key in table:
        if key not in (*PRICE_FIELDS, "above_tokens"):
            raise CatalogError(f"[{where}] has no setting {key!r}")
    missing = [k for k in ("above_tokens", *PRICE_FIELDS) if k not in table]
    if missing:
        raise CatalogError(f"[{where}] lacks {missing[0]!r}")
    price = Price(**{k: _number(where, k, table[k]) for k in PRICE_FIELDS})
    return _count(where, "above_tokens", table["above_tokens"]), price


def _load_builtin() -> tuple[dict[str, Any], dict[str, ModelInfo]]:
    """The shipped file's header (version, source_date, source) and its models."""
    text = resources.files(__package__).joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    models = raw.pop("models")
    table: dict[str, ModelInfo] = {}
    for name, entry in models.items():
        missing = [k for k in MODEL_FIELDS if k not in entry and k not in ("long_context", "retired")]
        # The shipped file gives every field of every model (``retired`` only where the API retired it);
        # tests/models/test_catalog_data.py and test_catalog_features.py check.
        if missing:
            raise CatalogError(f'{CATALOG_FILE}: [models."{name}"] lacks {missing[0]!r}')
        table[name] = model_info(f'models."{name}"', entry, None, "")
    return raw, table


_HEADER, CATALOG = _load_builtin()
CATALOG_VERSION: int = _HEADER["version"]
SOURCE_DATE: str = _HEADER["source_date"]
SOURCE: str = _HEADER["source"]

_SNAPSHOT_SUFFIX = re.compile(r"(-0)?(-\d{8})?(-latest)?$")

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


def entry_name(model: str, table: Mapping[str, ModelInfo] | None = None) -> str | None:
    """The name of the entry ``lookup`` answers with for ``model`` (``claude-opus-4-1-20250805`` is
    ``claude-opus-4-1``; ``sim`` is ``SIM_DEFAULT``), or None."""
    table = CATALOG if table is None else table
    if model == "sim" or model.startswith("sim:"):
        model = model[4:] or SIM_DEFAULT
    for name in (model, _SNAPSHOT_SUFFIX.sub("", model)):
        if name in table:
            return name
    return None


def lookup(model: str, table: dict[str, ModelInfo] | None = None) -> ModelInfo | None:
    """The entry for ``model``, or None; ``sim`` follows ``SIM_DEFAULT``, ``sim:<model>`` ``<model>``.
    A retired model's entry is answered too: its runs are still priced."""
    table = CATALOG if table is None else table
    name = entry_name(model, table)
    return None if name is None else table[name]


_FAMILY = re.compile(r"(?:^|-)(opus|sonnet|haiku|fable|mythos)(?:-|$)")


def family(model: str) -> str | None:
    """The model's family word (``opus``, ``sonnet``, ``haiku``, ``fable``, ``mythos``), or None."""
    found = _FAMILY.search(model.removeprefix("sim:"))
    return found.group(1) if found else None


def successor(model: str, table: Mapping[str, ModelInfo] | None = None) -> str | None:
    """The newest model of ``model``'s family that is not retired (by the version numbers in the names:
    ``claude-opus-5-5`` after ``claude-opus-5`` after ``claude-opus-4-8``), or None when none is."""
    table = CATALOG if table is None else table
    kind = family(model)
    if kind is None:
        return None
    candidates = [name for name, info in table.items() if info.retired is None and family(name) == kind]
    if not candidates:
        return None
    return max(
        candidates, key=lambda name: tuple(int(n) for n in re.findall(r"\d+", _SNAPSHOT_SUFFIX.sub("", name)))
    )
