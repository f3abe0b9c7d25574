"""Permission asks: a call the rules neither allow nor deny goes to the supervisor.

Never to a parent, which may be waiting for this very child. A human answers
in the TUI (a later issue); until one does, or when no one can, the run's
policy answers (``--on-ask deny|allow``, default deny).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ask:
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str


@dataclass(frozen=True)
class Answer:
    allowed: bool
    reason: str


Asker = Callable[[Ask], Awaitable[Answer]]


def policy_asker(policy: str) -> Asker:
    """Answer every ask with the run's policy, ``deny`` or ``allow``."""
    if policy not in ("deny", "allow"):
        raise ValueError(f"--on-ask must be deny or allow, not {policy!r}")

    async def answer(ask: Ask) -> Answer:
        if policy == "allow":
            return Answer(True, "allowed by the run's policy (--on-ask allow)")
        return Answer(
            False,
            f"{ask.reason}; nobody was asked to approve it and the run's policy is to deny"
            " (--on-ask deny). Do the work another way or report that you need this permission.",
        )

    return answer
