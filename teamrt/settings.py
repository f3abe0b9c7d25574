"""The user's settings file: model prices and how patiently model calls are retried.

``$TEAMRT_SETTINGS``, else ``$XDG_CONFIG_HOME/teamrt/settings.toml`` (default
``~/.config/teamrt/settings.toml``). A missing file means the defaults::

    [model]
    stall_seconds = 90      # a stream silent this long counts as cut
    stream_retries = 3      # retries of a stream cut mid-way (teamrt's own)
    stream_retry_delay = 1  # seconds before the first of them, doubling each time
    sdk_retries = 4         # retries before a response starts (the anthropic SDK's)

    [prices."claude-sonnet-5-5"]   # USD per million tokens; replaces the built-in price
    input = 2.0
    output = 10.0
    cache_write_5m = 2.5
    cache_write_1h = 4.0
    cache_read = 0.2
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # teamrt.models imports this module; the catalog is imported when a file is read
    from .models.catalog import Price

SETTINGS_ENV = "TEAMRT_SETTINGS"


class SettingsError(ValueError):
    """The settings file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ModelSettings:
    stall_seconds: float = 90.0
    stream_retries: int = 3
    stream_retry_delay: float = 1.0
    sdk_retries: int = 4


@dataclass(frozen=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    prices: dict[str, Price] = field(default_factory=dict)


def settings_path() -> Path:
    configured = os.environ.get(SETTINGS_ENV)
    if configured:
        return Path(configured).expanduser()
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "teamrt" / "settings.toml"


def load_settings(path: Path | None = None) -> Settings:
    """The settings at ``path`` (default ``settings_path()``); defaults when the file is absent."""
    from .models.catalog import Price

    path = settings_path() if path is None else path
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise SettingsError(f"settings file {path}: {e}") from e
    unknown = set(raw) - {"model", "prices"}
    if unknown:
        raise SettingsError(f"settings file {path}: unknown section {sorted(unknown)[0]!r}")
    model = _section(path, "model", raw.get("model", {}), ModelSettings)
    prices_raw = raw.get("prices", {})
    if not isinstance(prices_raw, dict):
        raise SettingsError(f"settings file {path}: [prices] must be a table of models")
    prices = {
        name: _section(path, f"prices.{name}", table, Price, required=True)
        for name, table in prices_raw.items()
    }
    return Settings(model=model, prices=prices)


def _section(path: Path, name: str, table: Any, cls: Any, *, required: bool = False) -> Any:
    if not isinstance(table, dict):
        raise SettingsError(f"settings file {path}: [{name}] must be a table")
    names = {f.name for f in fields(cls)}
    for key, value in table.items():
        if key not in names:
            raise SettingsError(f"settings file {path}: [{name}] has no setting {key!r}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise SettingsError(f"settings file {path}: [{name}] {key} must be a number of 0 or more")
    if required and names - set(table):
        raise SettingsError(f"settings file {path}: [{name}] lacks {sorted(names - set(table))[0]!r}")
    kinds = {f.name: f.type for f in fields(cls)}
    return cls(**{k: int(v) if kinds[k] == "int" else float(v) for k, v in table.items()})
