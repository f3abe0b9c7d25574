"""The simulator's request errors: each is answered with the API's status and error type."""

from __future__ import annotations

from teamrt.errors import TeamrtError


class SimInvalidRequest(TeamrtError, ValueError):
    status = 400
    error_type = "invalid_request_error"


class SimNotFound(SimInvalidRequest):
    status = 404
    error_type = "not_found_error"
