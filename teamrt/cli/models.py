"""``teamrt models``: the prices teamrt bills by, the settings' overrides laid over them, each model's limits.

A module of its own, beside ``project``: it reads only the catalog and the settings file, so listing the
prices never loads the store, the team file or MCP.
"""

from __future__ import annotations

import argparse
import dataclasses

from teamrt.cli.output import print_json
from teamrt.models.catalog import CATALOG_VERSION, SOURCE, SOURCE_DATE, ModelInfo, Price
from teamrt.models.pricing import settings_prices, with_overrides
from teamrt.settings import load_settings, settings_path


def handle(args: argparse.Namespace) -> int:
    return _list_models(args.json)


def _list_models(as_json: bool = False) -> int:
    """``models``: the price and limits table, as text or (``as_json``) one JSON array."""
    overrides = settings_prices(load_settings())
    table = with_overrides(overrides)
    if as_json:
        print_json([_model_json(name, info, name in overrides) for name, info in table.items()])
        return 0
    header = (
        ("input", 8), ("output", 8), ("write 5m", 10), ("write 1h", 10), ("read", 8), ("min cache", 11),
        ("max out", 9), ("window", 11),
    )  # fmt: skip
    print(f"{'model':22}" + "".join(f"{title:>{width}}" for title, width in header))
    for name, info in table.items():
        p = info.price
        mark = " *" if name in overrides else ""
        print(
            f"{name:22}{p.input:>8g}{p.output:>8g}{p.cache_write_5m:>10g}{p.cache_write_1h:>10g}"
            f"{p.cache_read:>8g}{info.min_cache_tokens:>11}{info.max_output_tokens:>9,}{info.context_window:>11,}"
            f"{mark}"
        )
        if info.long_context_price is not None:
            q = info.long_context_price
            print(
                f"{'  over ' + format(info.long_context_from, ','):22}{q.input:>8g}{q.output:>8g}"
                f"{q.cache_write_5m:>10g}{q.cache_write_1h:>10g}{q.cache_read:>8g}"
            )
    print(
        f"USD per million tokens; prices and limits from teamrt's catalog (version {CATALOG_VERSION}:"
        f" {SOURCE}, as read on {SOURCE_DATE}) unless marked *."
    )
    for name, info in overrides.items():
        print(f"* {name}: {info.source}")
    if not overrides:
        print(f"Override any figure or add models in {settings_path()}.")
    print("Every cost teamrt shows is an estimate at these prices, not Anthropic's bill.")
    print("sim bills like claude-sonnet-5-5; sim:<model> like <model>. --json gives each model's source.")
    return 0


def _model_json(name: str, info: ModelInfo, overridden: bool) -> dict[str, object]:
    """One model of ``models --json``: prices in USD per million tokens, limits in tokens."""

    def prices(p: Price) -> dict[str, float]:
        return dataclasses.asdict(p)  # input, output, cache_write_5m, cache_write_1h, cache_read

    long = info.long_context_price
    return {
        "model": name,
        **prices(info.price),
        "min_cache_tokens": info.min_cache_tokens,
        "long_context": None if long is None else {"over_tokens": info.long_context_from, **prices(long)},
        "context_window": info.context_window,
        "max_output_tokens": info.max_output_tokens,
        "sampling": info.sampling,
        "source": info.source,
        "from_settings": overridden,
    }
