"""``open_model``: a model name to a ``Model``.

- ``sim`` or ``sim:<claude model>``: the simulator (the given ``SimServer``, or
  the process's own), through the real SDK; priced and cached like the named
  Claude model (``sim`` alone: ``catalog.SIM_DEFAULT``).
- anything else: the ``anthropic`` provider, with ``ANTHROPIC_API_KEY`` (or
  ``ANTHROPIC_AUTH_TOKEN``) and, when set, ``ANTHROPIC_BASE_URL`` for an
  Anthropic-compatible server.

With ``TEAMRT_NO_REAL_MODELS`` set (the test suite sets it), the provider
refuses any server that is not on a loopback address before it connects
(``anthropic_api.refuse_real_models``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..settings import Settings, load_settings
from .errors import MissingAPIKey, UnknownModel
from .pricing import with_overrides
from .types import Model

if TYPE_CHECKING:
    from .sim import SimServer


def is_sim(name: str) -> bool:
    return name == "sim" or name.startswith("sim:")


def open_model(name: str, *, settings: Settings | None = None, sim: SimServer | None = None) -> Model:
    """The ``Model`` for ``name``; raises a ``ModelConfigError`` with one line saying what to set."""
    settings = load_settings() if settings is None else settings
    prices = with_overrides(settings.prices)
    from .anthropic_api import AnthropicModel  # the SDK import (~1.5 s) is paid only here

    if is_sim(name):
        if sim is None:
            from .sim import shared_server

            sim = shared_server()
        return AnthropicModel(
            name, api_key="sim", base_url=sim.url, settings=settings.model, prices=prices, labels=True
        )
    if name == "scripted":
        raise UnknownModel("the scripted model exists only inside tests (teamrt.models.ScriptedModel)")
    base_url = os.environ.get("ANTHROPIC_BASE_URL") or None
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
