"""Model providers behind one seam (``Model.complete``): ``anthropic``, ``sim`` and ``scripted``.

Importing this package does not import the anthropic SDK; ``open_model`` does.
"""

from .catalog import CATALOG, SOURCE_DATE, ModelInfo, Price, lookup
from .errors import (
    BLOCK_ENV,
    MissingAPIKey,
    ModelAuthError,
    ModelBadRequest,
    ModelConfigError,
    ModelConnectionError,
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
from .pricing import cost_for, cost_usd, with_overrides
from .registry import default_model, is_sim, open_model
from .reply import Reply
from .scripted import ScriptedModel
from .types import Block, CacheTTL, Message, Model, ModelRequest, ModelResponse, Usage

__all__ = [
    "BLOCK_ENV",
    "CATALOG",
    "SOURCE_DATE",
    "Block",
    "CacheTTL",
    "Message",
    "MissingAPIKey",
    "Model",
    "ModelAuthError",
    "ModelBadRequest",
    "ModelConfigError",
    "ModelConnectionError",
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
    "with_overrides",
]
