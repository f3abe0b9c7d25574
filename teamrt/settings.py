"""The user's settings file: the default model and budget, model prices, how patiently calls are retried.

``$TEAMRT_SETTINGS``, else ``$XDG_CONFIG_HOME/teamrt/settings.toml`` (default
``~/.config/teamrt/settings.toml``). A missing file means the defaults::

    [model]
    default = "claude-sonnet-5-5"   # the model of a run that names none (with a key set)
    stall_seconds = 90      # a stream silent this long counts as cut
    stream_retries = 3      # retries of a stream cut mid-way (teamrt's own)
    stream_retry_delay = 1  # seconds before the first of them, doubling each time
    sdk_retries = 4         # retries before a response starts (the anthropic SDK's)

    [run]
    budget_usd = 5.0        # the hard budget of a run on Claude that sets none (sim runs get none)

    [prices."claude-sonnet-5-5"]   # any field of the built-in catalog; the rest stay built-in
    cache_read = 0.1        # USD per million tokens
    max_output_tokens = 32000
    source = "our invoice of 2026-11"   # where these figures come from (default: this file)

    [prices."qwen3-coder"]  # a model the catalog lacks: every price is required
    input = 0.5
    output = 1.0
    cache_write_5m = 0.0
    cache_write_1h = 0.0
    cache_read = 0.0

A model's fields are those of ``teamrt/models/catalog.toml``: the five prices, ``min_cache_tokens``,
``context_window``, ``max_output_tokens``, ``sampling``, ``source`` and a ``long_context`` table
(``above_tokens`` and five prices). Setting a price drops the built-in long-context band unless the
table gives its own. This module reads the ``[prices]`` tables as written; ``teamrt.models.pricing``
checks them against the catalog (``settings_prices``), so that the settings know nothing of models.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from teamrt.errors import UserError

SETTINGS_ENV = "TEAMRT_SETTINGS"


class SettingsError(UserError, ValueError):
    """The settings file cannot be used; the message names the file and the problem."""


DEFAULT_BUDGET_USD = 5.0


@dataclass(frozen=True)
class ModelSettings:
    default: str = ""
    """The model of a run that names none; "" means the catalog's ``DEFAULT_MODEL``."""
    stall_seconds: float = 90.0
    stream_retries: int = 3
    stream_retry_delay: float = 1.0
    sdk_retries: int = 4


@dataclass(frozen=True)
class RunSettings:
    budget_usd: float = DEFAULT_BUDGET_USD


@dataclass(frozen=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    run: RunSettings = field(default_factory=RunSettings)
    prices: Any = field(default_factory=dict)
    """The settings' ``[prices]`` as written: a table per model, checked and laid over its built-in entry
    by ``teamrt.models.pricing.settings_prices``."""
    path: Path | None = None
    """The file read; None when there was none."""


def settings_path() -> Path:
    configured = os.environ.get(SETTINGS_ENV)
    if configured:
        return Path(configured).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "teamrt" / "settings.toml"


def load_settings(path: Path | None = None) -> Settings:
    """The settings at ``path`` (default ``settings_path()``); defaults when the file is absent."""
    path = settings_path() if path is None else path
    try:
        raw = _read(path, "settings file")
    except FileNotFoundError:
        return Settings()
    unknown = set(raw) - {"model", "run", "prices"}
    if unknown:
        raise SettingsError(f"settings file {path}: unknown section {sorted(unknown)[0]!r}")
    model = _section(path, "model", raw.get("model", {}), ModelSettings)
    run = _section(path, "run", raw.get("run", {}), RunSettings)
    if run.budget_usd <= 0:
        raise SettingsError(f"settings file {path}: [run] budget_usd must be above 0")
    return Settings(model=model, run=run, prices=raw.get("prices", {}), path=path)


def read_prices_file(path: Path) -> Any:
    """The ``[prices]`` of a prices file (``teamrt show --prices``), as written: ``[prices."<model>"]``
    tables as in the settings file, and nothing else (``teamrt.models.pricing.load_prices_file`` checks
    the tables)."""
    what = "prices file"
    try:
        raw = _read(path, what)
    except FileNotFoundError as e:
        raise SettingsError(f"{what} {path}: no such file") from e
    unknown = set(raw) - {"prices"}
    if unknown:
        only = '(only [prices."<model>"])'
        raise SettingsError(f"{what} {path}: unknown section {sorted(unknown)[0]!r} {only}")
    if not raw.get("prices"):
        raise SettingsError(f'{what} {path}: no [prices."<model>"] table')
    return raw["prices"]


def _read(path: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SettingsError(f"{what} {path}: {e}") from e


def _section(path: Path, name: str, table: Any, cls: Any) -> Any:
    if not isinstance(table, dict):
        raise SettingsError(f"settings file {path}: [{name}] must be a table")
    names = {f.name for f in fields(cls)}
    kinds = {f.name: f.type for f in fields(cls)}
    for key, value in table.items():
        if key not in names:
            raise SettingsError(f"settings file {path}: [{name}] has no setting {key!r}")
        if kinds[key] == "str":
            if not isinstance(value, str) or not value.strip():
                raise SettingsError(f"settings file {path}: [{name}] {key} must be a non-empty string")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise SettingsError(f"settings file {path}: [{name}] {key} must be a number of 0 or more")
    converters: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "str": str.strip}
    return cls(**{k: converters[str(kinds[k])](v) for k, v in table.items()})
