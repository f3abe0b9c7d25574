"""teamrt's model errors: callers branch on the class and its fields, never on message text.

``ModelError`` is what a call raises once every retry is spent. Configuration
mistakes (``MissingAPIKey``, ``RealModelBlocked``, ``UnknownModel``) are told
to the user in one line; the rest are the API's failures mapped from the SDK's
typed errors.
"""

from __future__ import annotations

import re
from typing import Any

from teamrt.errors import TeamrtError, UserError


class ModelError(TeamrtError):
    """A model call failed. ``status`` is the HTTP status (None without a response);
    ``error_type`` the API's ``error.type``; ``attempts`` how many times it was tried."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.request_id = request_id
        self.attempts = attempts


class ModelConfigError(ModelError, UserError):
    """The model cannot be used as configured; one line says what to set."""


class MissingAPIKey(ModelConfigError):
    pass


BLOCK_ENV = "TEAMRT_NO_REAL_MODELS"


class RealModelBlocked(ModelConfigError):
    """A server off loopback was about to be called with ``BLOCK_ENV`` set (the test suite sets it)."""


class UnknownModel(ModelConfigError):
    pass


class NoModel(ModelConfigError):
    """A run named no model, and no key or server is set for the default one."""


class RetiredModel(ModelConfigError):
    """The catalog says the API retired the model (it answers 404): refused before the run starts, in
    one line naming the retirement date and the newest model of its family."""


class ModelAuthError(ModelError):
    """401 or 403: the key is wrong or lacks permission."""


class ModelBadRequest(ModelError):
    """400, 404, 413 and the like: the request itself is wrong; retrying will not help."""


class EffortUnsupported(ModelConfigError, ValueError):
    """A request asked for an ``effort`` its model does not take (the catalog's ``effort`` levels). Raised
    before the call, in one line, rather than dropped: a role that asked for ``low`` to save money should
    learn that its model cannot, not pay ``high`` in silence."""


_TOO_LONG_FIGURES = re.compile(r"\b(\d[\d,]{0,18}) tokens > (\d[\d,]{0,18}) maximum")


class ModelContextTooLong(ModelBadRequest):
    """The prompt does not fit: a 400 "prompt is too long: N tokens > M maximum", or a 413
    ``request_too_large`` (the body is over the API's size limit). The caller compacts and retries.
    ``tokens`` and ``limit`` are the figures of the message when it gives them (else None)."""

    def __init__(self, message: str, *, detail: str = "", **fields: Any) -> None:
        """``detail``: the API's own message, where the figures are; ``fields``: ``ModelError``'s."""
        super().__init__(message, **fields)
        found = _TOO_LONG_FIGURES.search(detail or message)
        self.tokens: int | None = int(found.group(1).replace(",", "")) if found else None
        self.limit: int | None = int(found.group(2).replace(",", "")) if found else None


def is_context_too_long(status: int, error_type: str | None, detail: str) -> bool:
    """Whether an API error says the prompt (or the body) is too big for the model."""
    if status == 413 or error_type == "request_too_large":
        return True
    return status == 400 and detail.lstrip().lower().startswith("prompt is too long")


class ModelRateLimited(ModelError):
    """429 after the SDK's retries."""


class ModelOverloaded(ModelError):
    """529 (or an ``overloaded_error`` in the stream) after every retry."""


class ModelServerError(ModelError):
    """5xx after every retry."""


class ModelConnectionError(ModelError):
    """No response could be had: refused, reset, timed out before the stream began."""


class ModelStreamCut(ModelError):
    """The stream broke off mid-way on every attempt."""


class ModelStalled(ModelStreamCut):
    """The stream went silent for longer than the stall limit on every attempt."""


class ScriptError(ModelError):
    """A ``ScriptedModel`` ran out of steps, or had steps left over."""
