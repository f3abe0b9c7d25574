"""The cost of a call, from its usage and the model's prices; and the prices a settings or prices file
lays over the catalog, checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from teamrt.models.catalog import CATALOG, CatalogError, ModelInfo, Price, lookup, prices_table
from teamrt.models.catalog import (
    DEFAULT_MIN_CACHE_TOKENS as DEFAULT_MIN_CACHE_TOKENS,  # the simulator imports it here
)
from teamrt.models.types import Usage
from teamrt.settings import Settings, SettingsError, read_prices_file

WEB_SEARCH_USD = 10 / 1000
"""The price of one search by the API's web search tool ($10 per 1,000, on every model), on top of the
tokens: its results are billed as input."""


def with_overrides(prices: Mapping[str, ModelInfo | Price]) -> dict[str, ModelInfo]:
    """The catalog with a prices file's entries laid over it (new models included).

    A ``ModelInfo`` (what ``teamrt.settings`` reads) replaces the entry whole; a bare ``Price``
    replaces every price tier of the built-in entry and keeps its limits."""
    table = dict(CATALOG)
    for model, given in prices.items():
        if isinstance(given, ModelInfo):
            table[model] = given
            continue
        known = table.get(model)
        if known is None:
            table[model] = ModelInfo(given, DEFAULT_MIN_CACHE_TOKENS)
        else:
            table[model] = replace(known, price=given, long_context_from=None, long_context_price=None)
    return table


def settings_prices(settings: Settings) -> dict[str, ModelInfo]:
    """The settings' ``[prices]``, each model laid over its built-in entry; raises ``SettingsError``, naming
    the file, for a table the catalog cannot take."""
    return _checked(settings.prices, f"settings file {settings.path}")


def price_table(settings: Settings) -> dict[str, ModelInfo]:
    """The catalog with the settings' ``[prices]`` laid over it: the prices a run bills by."""
    return with_overrides(settings_prices(settings))


def load_prices_file(path: Path) -> dict[str, ModelInfo]:
    """A prices file (``teamrt show --prices``): ``[prices."<model>"]`` tables as in the settings file."""
    return _checked(read_prices_file(path), f"prices file {path}")


def _checked(raw: Any, source: str) -> dict[str, ModelInfo]:
    try:
        return prices_table("prices", raw, CATALOG, source)
    except CatalogError as e:
        raise SettingsError(f"{source}: {e}") from e


def cost_usd(usage: Usage, info: ModelInfo) -> float:
    """USD for ``usage``; a prompt over the long-context threshold is billed at that tier throughout.

    Cache writes not split by lifetime are billed at the 5-minute rate (those split are billed by their
    lifetime: a 1-hour write at ``cache_write_1h``); web searches at ``WEB_SEARCH_USD``; each server-side
    compaction the call ran (``usage.compaction``) on its own usage, its own prompt deciding its band.
    """
    price = info.price
    if info.long_context_from is not None and usage.prompt_tokens > info.long_context_from:
        assert info.long_context_price is not None
        price = info.long_context_price
    unsplit = max(0, usage.cache_creation_input_tokens - usage.cache_write_5m - usage.cache_write_1h)
    per_million = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + (usage.cache_write_5m + unsplit) * price.cache_write_5m
        + usage.cache_write_1h * price.cache_write_1h
        + usage.cache_read_input_tokens * price.cache_read
    )
    compactions = sum(cost_usd(step, info) for step in usage.compaction)
    return per_million / 1_000_000 + usage.web_search_requests * WEB_SEARCH_USD + compactions


def worst_cost_usd(info: ModelInfo, input_tokens: int, max_tokens: int) -> float:
    """The most a call can cost: every input token at the dearest input rate (a 1-hour cache
    write), every possible output token at the output rate."""
    price = info.price
    if info.long_context_from is not None and input_tokens > info.long_context_from:
        assert info.long_context_price is not None
        price = info.long_context_price
    dearest_input = max(price.input, price.cache_write_5m, price.cache_write_1h)
    return (input_tokens * dearest_input + max_tokens * price.output) / 1_000_000


def cost_for(model: str, usage: Usage, table: Mapping[str, ModelInfo] | None = None) -> float | None:
    """USD for ``usage`` on ``model``; None when the model has no price."""
    info = lookup(model, dict(table) if table is not None else None)
    return None if info is None else cost_usd(usage, info)
