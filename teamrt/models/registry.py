"""``open_model``: a model name to a ``Model``.

- ``sim`` or ``sim:<claude model>``: the simulator (the given ``SimServer``, or
  the process's own), through the real SDK; priced and cached like the named
  Claude model (``sim`` alone: ``catalog.SIM_DEFAULT``).
- anything else: the ``anthropic`` provider, with ``ANTHROPIC_API_KEY`` (or
  ``ANTHROPIC_AUTH_TOKEN``) and, when set, ``ANTHROPIC_BASE_URL`` for an
  Anthropic-compatible server. Claude Code's aliases (``sonnet``, ``opus``,
  ``haiku``) name the newest model of their family; without
  ``ANTHROPIC_BASE_URL`` a name the catalog does not know is refused with the
  nearest known one, since Anthropic's API would refuse it only after the key.
  A model the catalog marks retired (the API answers 404 for it) is refused in
  one line naming its retirement date and the newest model of its family; a
  settings file's ``retired = false`` allows it again, for a server that still
  serves it. Resuming an old run on it is refused the same way.

A run that names no model takes ``default_model()``: Claude when a key or a
server is set, else one line on how to set one or run offline.

With ``TEAMRT_NO_REAL_MODELS`` set (the test suite sets it), the provider
refuses any server that is not on a loopback address before it connects
(``anthropic_api.refuse_real_models``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from teamrt.models.catalog import (
    DEFAULT_MODEL,
    ModelInfo,
    entry_name,
    family,
    lookup,
    resolve,
    successor,
    suggest,
)
from teamrt.models.errors import MissingAPIKey, NoModel, RetiredModel, UnknownModel
from teamrt.models.pricing import price_table
from teamrt.models.types import Model
from teamrt.settings import Settings, load_settings, settings_path

if TYPE_CHECKING:
    from teamrt.sim import SimServer


def is_sim(name: str) -> bool:
    return name == "sim" or name.startswith("sim:")


KEY_ENVS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")


def default_model(settings: Settings | None = None) -> str:
    """The model of a run that names none: the settings' ``[model] default`` or the catalog's, when
    a key or a server is set; raises ``NoModel`` (one line on what to do) when neither is."""
    if not any(os.environ.get(name) for name in KEY_ENVS):
        raise NoModel(
            "no model named and ANTHROPIC_API_KEY is not set: export ANTHROPIC_API_KEY=... to run on"
            f" Claude ({DEFAULT_MODEL} by default), or add --model sim to run offline on the simulator"
        )
    settings = load_settings() if settings is None else settings
    return resolve(settings.model.default or DEFAULT_MODEL)


def open_model(name: str, *, settings: Settings | None = None, sim: SimServer | None = None) -> Model:
    """The ``Model`` for ``name``; raises a ``ModelConfigError`` with one line saying what to set."""
    settings = load_settings() if settings is None else settings
    prices = price_table(settings)
    name = resolve(name)
    if name == "scripted":
        raise UnknownModel("the scripted model exists only inside tests (teamrt.models.ScriptedModel)")
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or None
    if lookup(name, prices) is None and (is_sim(name) or base_url is None):
        raise UnknownModel(
            f"unknown model {name!r}{suggest(name, prices)} (teamrt models lists the known ones;"
            " any name goes to a server set by ANTHROPIC_BASE_URL)"
        )
    info = lookup(name, prices)
    if info is not None and info.retired is not None:
        raise RetiredModel(retired_line(name, info, prices))
    from teamrt.models.anthropic_api import AnthropicModel  # the SDK import (~1.5 s) is paid only here

    if is_sim(name):
        if sim is None:
            from teamrt.sim import shared_server

            sim = shared_server()
        return AnthropicModel(
            name, api_key="sim", base_url=sim.url, settings=settings.model, prices=prices, labels=True
        )
    key = os.environ.get("ANTHROPIC_API_KEY") or None
    token = os.environ.get("ANTHROPIC_AUTH_TOKEN") or None
    if key is None and token is None:
        if base_url is None:
            raise MissingAPIKey(
                f"ANTHROPIC_API_KEY is not set: export it to run on {name}, or set ANTHROPIC_BASE_URL"
                " for an Anthropic-compatible server, or use --model sim to run offline"
            )
        key = "none"  # local servers often need no key, but the SDK will not send a request without one
    return AnthropicModel(name, api_key=key, base_url=base_url, settings=settings.model, prices=prices)


def retired_line(name: str, info: ModelInfo, prices: dict[str, ModelInfo]) -> str:
    """The one line that refuses a retired model: when, what to use instead, and how to allow it anyway."""
    entry = entry_name(name, prices) or name
    newest = successor(entry, prices)
    if newest is None:
        instead = "choose a current model (teamrt models lists them)"
    else:
        shown = f"sim:{newest}" if is_sim(name) else newest
        instead = f"use {shown}, the newest {(family(entry) or '').title()} model, instead"
    line = f"{name} was retired on {info.retired} (Anthropic's API answers 404 for it): {instead}"
    if is_sim(name):
        return line  # the simulator follows the API: it has no model to allow
    allow = f'retired = false under [prices."{entry}"] in {settings_path()}'
    return f"{line}; a server that still serves it can be allowed with {allow}"
