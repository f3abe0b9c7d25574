"""``teamrt models``: the prices teamrt bills by, the settings' overrides laid over them, each model's limits
and what it takes (its features), and which models the API has retired.

A module of its own, beside ``project``: it reads only the catalog and the settings file, so listing the
prices never loads the store, the team file or MCP. The text fits 80 columns: one table of prices and
limits, one of features, a legend; ``--json`` gives every field with each model's source.
"""

from __future__ import annotations

import argparse
import dataclasses
import textwrap

from teamrt.cli.output import print_json
from teamrt.models.catalog import (
    CATALOG_VERSION,
    EFFORT_LEVELS,
    SOURCE,
    SOURCE_DATE,
    ModelInfo,
    Price,
    successor,
)
from teamrt.models.pricing import settings_prices, with_overrides
from teamrt.settings import load_settings, settings_path

WIDTH = 80
NAME = 19
"""The model column: the longest catalog name (17) and a two-space gap."""


def handle(args: argparse.Namespace) -> int:
    return _list_models(args.json)


def _list_models(as_json: bool = False) -> int:
    """``models``: the price, limits and features tables, as text or (``as_json``) one JSON array."""
    overrides = settings_prices(load_settings())
    table = with_overrides(overrides)
    if as_json:
        print_json([_model_json(name, info, name in overrides, table) for name, info in table.items()])
        return 0
    for line in _prices(table, overrides):
        print(line)
    print()
    for line in _features(table):
        print(line)
    print()
    for line in _notes(overrides):
        print(line)
    return 0


def _prices(table: dict[str, ModelInfo], overrides: dict[str, ModelInfo]) -> list[str]:
    """USD per million tokens (input, output, 5-minute and 1-hour cache writes, cache reads), then the
    cache minimum, the output limit and the window in tokens, one row a model (a long-context band on a
    row of its own under it)."""
    columns = (("input", 6), ("output", 7), ("5m wr", 7), ("1h wr", 7), ("read", 6))
    limits = (("min", 6), ("max out", 8), ("window", 10))
    lines = [f"{'model':{NAME}}" + "".join(f"{t:>{w}}" for t, w in (*columns, *limits))]

    def rates(p: Price) -> str:
        values = (p.input, p.output, p.cache_write_5m, p.cache_write_1h, p.cache_read)
        return "".join(f"{v:>{w}g}" for v, (_, w) in zip(values, columns, strict=True))

    for name, info in table.items():
        mark = " *" if name in overrides else ""
        sizes = f"{info.min_cache_tokens:>6}{info.max_output_tokens:>8,}{info.context_window:>10,}"
        lines.append(f"{name:{NAME}}{rates(info.price)}{sizes}{mark}")
        if info.long_context_price is not None:
            band = "  over " + format(info.long_context_from, ",")
            lines.append(f"{band:{NAME}}{rates(info.long_context_price)}")
    return lines


FEATURES = (
    ("thinks", 7), ("binds", 6), ("edits", 6), ("thresh", 7), ("demand", 7), ("forced", 7), ("system", 7),
)  # fmt: skip


def _features(table: dict[str, ModelInfo]) -> list[str]:
    """What each model takes: "yes" or "-" a feature, then its effort levels; a retired model's row says
    when the API retired it and what to use instead."""
    lines = [f"{'model':{NAME}}" + "".join(f"{t:<{w}}" for t, w in FEATURES) + "effort"]
    for name, info in table.items():
        if info.retired is not None:
            newest = successor(name, table)
            lines.append(f"{name:{NAME}}retired {info.retired}" + (f"; use {newest}" if newest else ""))
            continue
        flags = (
            info.thinking_default is not None,
            info.binds_thinking,
            info.context_editing,
            info.server_compaction,
            info.compaction_on_demand,
            info.forced_tool_choice,
            info.system_messages,
        )
        cells = "".join(f"{'yes' if on else '-':<{w}}" for on, (_, w) in zip(flags, FEATURES, strict=True))
        lines.append(f"{name:{NAME}}{cells}{_effort(info.effort)}")
    return lines


def _effort(levels: tuple[str, ...]) -> str:
    """The effort levels compactly: ``low-max`` for a run of the API's levels, ``low-high,max`` for two."""
    if not levels:
        return "-"
    runs: list[list[str]] = []
    for level in levels:
        if runs and EFFORT_LEVELS.index(level) == EFFORT_LEVELS.index(runs[-1][-1]) + 1:
            runs[-1].append(level)
        else:
            runs.append([level])
    return ",".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _notes(overrides: dict[str, ModelInfo]) -> list[str]:
    """The legend (wrapped to 80 columns) and where the figures come from, one line each: a settings
    file's path is never broken across lines."""
    legend = (
        "USD per million tokens: input, output, cache writes (5m wr, 1h wr) and reads; min (the least"
        " prompt cached), max out and window in tokens. thinks: thinks when a request sends no thinking;"
        " binds: replayed thinking is bound to what came before it (keep history append-only); edits: the"
        " API's context editing; thresh: compaction at a token threshold; demand: compaction on demand (what"
        " teamrt uses where a model has it); forced: takes tool_choice any or tool;"
        " system: system messages mid-conversation; effort: the output_config.effort levels it takes. A"
        " retired model's old runs are still priced; a new run on it is refused."
    )
    lines = textwrap.wrap(legend, WIDTH)
    lines.append(
        f"From teamrt's catalog (version {CATALOG_VERSION}, as read on {SOURCE_DATE}) unless marked *:"
    )
    lines.append(f"{SOURCE}.")
    lines += [f"* {name}: {info.source}" for name, info in overrides.items()]
    if not overrides:
        lines += [
            "Override any figure or feature, or add models, in the settings file:",
            f"  {settings_path()}",
        ]
    lines.append("Every cost teamrt shows is an estimate at these prices, not Anthropic's bill.")
    lines.append("sim bills like claude-sonnet-5-5; sim:<model> like <model>.")
    lines.append("teamrt models --json gives every field, and each model's source.")
    return lines


def _model_json(
    name: str, info: ModelInfo, overridden: bool, table: dict[str, ModelInfo]
) -> dict[str, object]:
    """One model of ``models --json``: prices in USD per million tokens, limits in tokens, its features."""

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
        "thinking_default": info.thinking_default,
        "thinking_off": info.thinking_off,
        "binds_thinking": info.binds_thinking,
        "context_editing": info.context_editing,
        "server_compaction": info.server_compaction,
        "compaction_on_demand": info.compaction_on_demand,
        "effort": list(info.effort),
        "forced_tool_choice": info.forced_tool_choice,
        "system_messages": info.system_messages,
        "retired": info.retired,
        "use_instead": successor(name, table) if info.retired is not None else None,
        "source": info.source,
        "from_settings": overridden,
    }
