"""Policies for the example teams (``examples/``), by ``<team>/<role>``: the simulator plays them.

A team file named ``research`` or ``coding`` gets these on ``sim``; any other
team gets the simulator's default (``echo``).
"""

from __future__ import annotations

from ..policy import Policy
from . import coding, research

POLICIES: dict[str, Policy] = {
    "research/lead": research.lead,
    "research/fork": research.fork,
    "research/reviewer": research.reviewer,
    "coding/lead": coding.lead,
    "coding/coder": coding.coder,
    "coding/reviewer": coding.reviewer,
}
