"""Permission asks: a call the rules neither allow nor deny goes to the supervisor.

Never to a parent, which may be waiting for this very child. The supervisor's
``HumanAsker`` records each ask (event ``ask``) and waits up to the run's
``ask_wait`` seconds for a person to answer it, by control mail to the
supervisor (``teamrt answer``, the TUI); when none does, the run's policy
answers (``--on-ask deny|allow``, default deny). Every ask ends with exactly
one ``ask.answered`` event saying who answered: a sender's name, ``policy``,
``stop`` (the agent was stopped while it waited) or ``resume`` (a crash came
first; see ``resume.close_stale_asks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from teamrt.store import Store, StoreError

ASK: Final = "ask"
ANSWERED: Final = "ask.answered"
BY_POLICY = "policy"
BY_STOP = "stop"
STOPPED = "the agent was stopped before anyone answered"


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


def policy_answer(policy: str, ask: Ask, *, waited_s: float = 0.0) -> Answer:
    """The run's policy's answer; ``waited_s``: how long a human had to answer first (0: nobody was asked)."""
    if policy == "allow":
        return Answer(True, "allowed by the run's policy (--on-ask allow)")
    nobody = f"no one answered within {waited_s:g}s" if waited_s > 0 else "nobody was asked to approve it"
    return Answer(
        False,
        f"{ask.reason}; {nobody} and the run's policy is to deny"
        " (--on-ask deny). Do the work another way or report that you need this permission.",
    )


def _check_policy(policy: str) -> None:
    if policy not in ("deny", "allow"):
        raise ValueError(f"--on-ask must be deny or allow, not {policy!r}")


def policy_asker(policy: str) -> Asker:
    """Answer every ask with the run's policy, ``deny`` or ``allow``, at once, recording nothing."""
    _check_policy(policy)

    async def answer(ask: Ask) -> Answer:
        return policy_answer(policy, ask)

    return answer


def human_answer(allowed: bool, by: str, reason: str | None) -> Answer:
    """A person's answer, as the model reads it: who decided, and why if they said."""
    said = f"{'allowed' if allowed else 'denied'} by {by}"
    if reason:
        said += f": {reason}"
    if not allowed:
        said += ". Do the work another way, or report that you need this permission."
    return Answer(allowed, said)


class HumanAsker:
    """The supervisor's asker: each ask recorded, waiting ``wait_s`` for a person, then the policy."""

    def __init__(self, store: Store, *, policy: str, wait_s: float) -> None:
        _check_policy(policy)
        if not wait_s >= 0:
            raise ValueError(f"ask_wait must be 0 or more seconds, not {wait_s!r}")
        self.store = store
        self.policy = policy
        self.wait_s = wait_s
        self._waiting: dict[str, asyncio.Future[tuple[Answer, str]]] = {}
        self._ids: set[str] | None = None  # every ask id of the run, read from the store at the first ask

    async def __call__(self, ask: Ask) -> Answer:
        ask_id = self._new_id()
        data = {
            "id": ask_id,
            "tool": ask.tool,
            "input": ask.input,
            "reason": ask.reason,
            "wait_s": self.wait_s,
        }
        try:
            await self.store.append_event(ASK, data, agent=ask.agent)
            answer, by = await self._verdict(ask, ask_id)
        except asyncio.CancelledError:  # the agent was stopped: its ask ends too, denied
            with contextlib.suppress(StoreError):  # a store that failed keeps no more events anyway
                await self._record(ask, ask_id, Answer(False, STOPPED), BY_STOP)
            raise
        await self._record(ask, ask_id, answer, by)  # queued at once: a stop from here on cannot undo it
        return answer

    async def _verdict(self, ask: Ask, ask_id: str) -> tuple[Answer, str]:
        """A person's answer and name, if one comes within ``wait_s``; else the policy's."""
        if self.wait_s <= 0:
            return policy_answer(self.policy, ask), BY_POLICY
        loop = asyncio.get_running_loop()
        verdict: asyncio.Future[tuple[Answer, str]] = loop.create_future()

        def time_up() -> None:  # whichever comes first, the timer or a person, settles the ask
            if not verdict.done():
                verdict.set_result((policy_answer(self.policy, ask, waited_s=self.wait_s), BY_POLICY))

        timer = loop.call_later(self.wait_s, time_up)
        self._waiting[ask_id] = verdict
        try:
            return await verdict
        finally:
            timer.cancel()
            del self._waiting[ask_id]

    def answer(self, ask_id: str, allowed: bool, *, by: str, reason: str | None = None) -> bool:
        """A person's answer to a waiting ask; False (and nothing done) when no such ask waits."""
        verdict = self._waiting.get(ask_id)
        if verdict is None or verdict.done():
            return False
        verdict.set_result((human_answer(allowed, by, reason), by))
        return True

    def _new_id(self) -> str:
        if self._ids is None:
            self._ids = {str(e.data.get("id")) for e in self.store.reader.events(kinds=(ASK,))}
        while (ask_id := f"ask-{secrets.token_hex(4)}") in self._ids:
            pass
        self._ids.add(ask_id)
        return ask_id

    async def _record(self, ask: Ask, ask_id: str, answer: Answer, by: str) -> None:
        data = {"id": ask_id, "allowed": answer.allowed, "by": by, "reason": answer.reason}
        await self.store.append_event(ANSWERED, data, agent=ask.agent)
