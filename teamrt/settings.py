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

    [notify]                # when a run needs you or ends (docs/hooks.md, "Notifications")
    terminal = "auto"       # the bell and a desktop notification (OSC 9/777/99) in the foreground and the
                            # TUI: "auto", "bell", "osc9", "osc777", "osc99", or false for none
    command = ["notify-send", "teamrt"]  # run with the title and the message as two more arguments
    timeout = 10            # seconds before the command is killed
    events = ["ask", "end", "budget"]    # what notifies: an ask waiting, the run's end, its budget near
    budget_share = 0.8      # "budget" notifies once this share of the run's budget is spent

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

``[notify] command`` is the person's own program, run unconfined as they would run it: only this file
sets it, never a repository's (a team file has no ``[notify]``). A string is split into arguments as a
shell would split it (``shlex``), but no shell ever runs it.
"""

from __future__ import annotations

import os
import shlex
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


TERMINAL_CHANNELS = ("auto", "bell", "osc9", "osc777", "osc99", "off")
"""How a terminal is told (``teamrt.runs.alerts``): chosen from the terminal, the bell alone, or an OSC
notification of one kind with the bell; ``off`` (``terminal = false``): neither."""
NOTIFY_EVENTS = ("ask", "end", "budget")


@dataclass(frozen=True)
class NotifySettings:
    terminal: str = "auto"
    command: tuple[str, ...] = ()
    """The program and its first arguments; () runs none."""
    timeout: float = 10.0
    events: tuple[str, ...] = NOTIFY_EVENTS
    budget_share: float = 0.8


@dataclass(frozen=True)
class Settings:
    model: ModelSettings = field(default_factory=ModelSettings)
    run: RunSettings = field(default_factory=RunSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)
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
    unknown = set(raw) - {"model", "run", "prices", "notify"}
    if unknown:
        raise SettingsError(f"settings file {path}: unknown section {sorted(unknown)[0]!r}")
    model = _section(path, "model", raw.get("model", {}), ModelSettings)
    run = _section(path, "run", raw.get("run", {}), RunSettings)
    if run.budget_usd <= 0:
        raise SettingsError(f"settings file {path}: [run] budget_usd must be above 0")
    notify = _notify(path, raw.get("notify", {}))
    return Settings(model=model, run=run, notify=notify, prices=raw.get("prices", {}), path=path)


def _notify(path: Path, table: Any) -> NotifySettings:
    """The ``[notify]`` table, each key checked; one line naming the file and the key for a bad one."""
    if not isinstance(table, dict):
        raise SettingsError(f"settings file {path}: [notify] must be a table")
    where = f"settings file {path}: [notify]"
    unknown = set(table) - {f.name for f in fields(NotifySettings)}
    if unknown:
        raise SettingsError(f"{where} has no setting {sorted(unknown)[0]!r}")
    got = NotifySettings()
    terminal = table.get("terminal", got.terminal)
    if isinstance(terminal, bool):
        terminal = "auto" if terminal else "off"
    if terminal not in TERMINAL_CHANNELS:
        raise SettingsError(f"{where} terminal must be true, false or one of {', '.join(TERMINAL_CHANNELS)}")
    command = table.get("command", [])
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as e:
            raise SettingsError(f"{where} command cannot be split into arguments: {e}") from e
    if not isinstance(command, list) or not all(isinstance(a, str) and a for a in command):
        raise SettingsError(f"{where} command must be a string or a list of non-empty strings")
    timeout = table.get("timeout", got.timeout)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise SettingsError(f"{where} timeout must be a number of seconds above 0 and at most 600")
    events = table.get("events", list(got.events))
    if not isinstance(events, list) or not all(e in NOTIFY_EVENTS for e in events):
        raise SettingsError(f"{where} events must be a list of {', '.join(map(repr, NOTIFY_EVENTS))}")
    share = table.get("budget_share", got.budget_share)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
        raise SettingsError(f"{where} budget_share must be a number above 0 and below 1")
    return NotifySettings(str(terminal), tuple(command), float(timeout), tuple(dict.fromkeys(events)),
                          float(share))  # fmt: skip


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
