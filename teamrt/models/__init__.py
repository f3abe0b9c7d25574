"""Model providers behind one seam (``Model.complete``): ``anthropic``, ``sim`` and ``scripted``.

Importing this package does not import the anthropic SDK; ``open_model`` does.
"""

from teamrt.models.catalog import CATALOG, SOURCE_DATE, ModelInfo, Price, lookup
from teamrt.models.errors import (
    BLOCK_ENV,
    EffortUnsupported,
    MissingAPIKey,
    ModelAuthError,
    ModelBadRequest,
    ModelConfigError,
    ModelConnectionError,
    ModelContextTooLong,
    ModelError,
    ModelOverloaded,
    ModelRateLimited,
    ModelServerError,
    ModelStalled,
    ModelStreamCut,
    NoModel,
    RealModelBlocked,
    ScriptError,
    UnknownModel,
)
from teamrt.models.pricing import cost_for, cost_usd, price_table, with_overrides
from teamrt.models.registry import default_model, is_sim, open_model
from teamrt.models.reply import Reply
from teamrt.models.scripted import ScriptedModel
from teamrt.models.types import Block, CacheTTL, Message, Model, ModelRequest, ModelResponse, Usage

__all__ = [
    "BLOCK_ENV",
    "CATALOG",
    "SOURCE_DATE",
    "Block",
    "CacheTTL",
    "EffortUnsupported",
    "Message",
    "MissingAPIKey",
    "Model",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelContextTooLong",
    "ModelError",
    "ModelInfo",
    "ModelOverloaded",
    "ModelRateLimited",
    "ModelRequest",
    "ModelResponse",
    "ModelServerError",
    "ModelStalled",
    "ModelStreamCut",
    "NoModel",
    "Price",
    "RealModelBlocked",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "UnknownModel",
    "Usage",
    "cost_for",
    "cost_usd",
    "default_model",
    "is_sim",
    "lookup",
    "open_model",
    "price_table",
    "with_overrides",
]
