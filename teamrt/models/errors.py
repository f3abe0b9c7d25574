"""teamrt's model errors: callers branch on the class and its fields, never on message text.

``ModelError`` is what a call raises once every retry is spent. Configuration
mistakes (``MissingAPIKey``, ``RealModelBlocked``, ``UnknownModel``) are told
to the user in one line; the rest are the API's failures mapped from the SDK's
typed errors.
"""

from __future__ import annotations

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


class ModelAuthError(ModelError):
    """401 or 403: the key is wrong or lacks permission."""


class ModelBadRequest(ModelError):
    """400, 404, 413 and the like: the request itself is wrong; retrying will not help."""


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
