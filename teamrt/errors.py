"""The roots of every error teamrt raises on purpose.

``TeamrtError`` is the base of them all, so an embedder can catch teamrt's failures apart from bugs.
``UserError`` marks a mistake the person can fix (a bad team file, an unknown agent or run, a missing key,
a store that fell behind): the CLI tells it in one line and exits non-zero, never with a traceback. Errors
keep their older base (``ValueError``, ``LookupError``) as a second base, so no ``except`` written against
them breaks. ``ToolError`` stays outside: it is addressed to the model, not to the person.
"""

from __future__ import annotations


class TeamrtError(Exception):
    """An error teamrt raises on purpose."""


class UserError(TeamrtError):
    """A mistake the person can fix, told in one line (its ``str``)."""
