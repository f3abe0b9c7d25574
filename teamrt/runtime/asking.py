"""Permission asks: a call the rules neither allow nor deny goes to the supervisor.

Never to a parent, which may be waiting for this very child. The supervisor's
``HumanAsker`` records each ask (event ``ask``, with the rule "allow always"
would add) and waits for a person:

- With a person at the run's terminal (an ``Attendant``: a foreground ``teamrt
  run``, ``resume`` or ``continue`` whose stdin and stderr are a terminal, set
  for the run by ``attending``), the ask is put to them and waits for them, as
  long as it takes; the team's ``ask_wait`` and ``on_ask`` do not apply.
- Without one, it waits up to the run's ``ask_wait`` seconds, then the run's
  policy answers (``--on-ask deny|allow``, default deny).

Either way a person may answer by control mail to the supervisor (``teamrt
answer``, the TUI): allow (once, or always), or deny, with a note for the
model. "Always" (``AlwaysRules``, the supervisor's ``teamrt.runtime.always``)
writes the call's rule to ``.claude/settings.local.json`` and adds it to the
live run's rules; when no rule can be formed or written, the answer counts as
allow once and the person is told why.

Every ask ends with exactly one ``ask.answered`` event saying who answered: a
sender's name, ``policy``, ``stop`` (the agent was stopped while it waited) or
``resume``. An ask a crash left open keeps its id: the resume carries it
(``carry``) and the call that asks again (the same agent and call) is given
the same id, recorded as ``ask.again``, so ``teamrt answer RUN ask-...`` typed
from the old id still answers it, even before the call asks again. A carried
ask whose call is not asked again (its agent had ended, or the rules now
decide the call) is closed ``by resume`` (``release``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Protocol

from teamrt.claudecode.local_rules import RuleChoice
from teamrt.events import USER
from teamrt.store import EventRecord, Store, StoreError

ASK: Final = "ask"
ANSWERED: Final = "ask.answered"
ASKED_AGAIN: Final = "ask.again"
BY_POLICY = "policy"
BY_STOP = "stop"
BY_RESUME = "resume"
STOPPED = "the agent was stopped before anyone answered"
NOT_ASKED_AGAIN = (
    "the run crashed before the ask was answered, and after the resume its call was not asked again"
)
NO_ALWAYS = "allow always is not offered here"


@dataclass(frozen=True)
class Ask:
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str
    call_id: str | None = None
    """The call's ``tool_use`` id: a resumed run's call asks again under its old ask's id."""


@dataclass(frozen=True)
class Answer:
    allowed: bool
    reason: str
    by: str = ""
    """Who answered (a sender's name, ``policy``, ``stop``); "" when not recorded (``policy_asker``)."""
    note: str | None = None
    """What the person said with the answer, as they said it (an MCP server's form's values)."""


Asker = Callable[[Ask], Awaitable[Answer]]


@dataclass(frozen=True)
class Shown:
    """An ask as the person at the terminal sees it."""

    id: str
    agent: str
    tool: str
    input: dict[str, Any]
    reason: str
    rule: str | None
    """The rule "allow always" adds; None when there is none (``no_rule`` says why)."""
    no_rule: str = ""


@dataclass(frozen=True)
class Choice:
    """The person's answer: allow (``always``: and remember the rule) or deny (``note``: for the model)."""

    allowed: bool
    always: bool = False
    note: str | None = None


class NobodyThere(Exception):
    """The terminal went away (its input ended): asks go back to the team's ``ask_wait`` and ``on_ask``."""


class Attendant(Protocol):
    """The person at the run's terminal (``teamrt.cli.asking``)."""

    async def ask(self, shown: Shown) -> Choice:
        """Put ``shown`` to the person and return their answer; cancelled when someone answers first
        (by mail), raises ``NobodyThere`` when no one can answer."""
        ...

    def tell(self, line: str) -> None:
        """Say ``line`` to the person (what "allow always" did)."""
        ...


@dataclass(frozen=True)
class Remembered:
    rule: str | None
    """The rule added to the settings and the live run; None when none was (``said`` says why)."""
    said: str
    """One line for the person."""


class AlwaysRules(Protocol):
    """What "allow always" does in the run (``teamrt.runtime.always``)."""

    def choice(self, ask: Ask) -> RuleChoice:
        """The rule "allow always" would add for ``ask``, or why none."""
        ...

    async def remember(self, ask: Ask) -> Remembered:
        """Write the rule of ``ask`` to the settings and add it to the live run's rules."""
        ...


ATTENDANT: ContextVar[Attendant | None] = ContextVar("teamrt_attendant", default=None)
"""The person at the terminal of the run started in this context (``attending``); None: nobody."""


@contextlib.contextmanager
def attending(attendant: Attendant | None) -> Iterator[None]:
    """The supervisors made in the body (a foreground ``teamrt run``'s ``asyncio.run``) ask ``attendant``."""
    token = ATTENDANT.set(attendant)
    try:
        yield
    finally:
        ATTENDANT.reset(token)


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
    return Answer(allowed, said, by, reason)


@dataclass(frozen=True)
class _Verdict:
    answer: Answer
    by: str
    always: bool = False


class HumanAsker:
    """The supervisor's asker: each ask recorded, put to the person at the terminal when there is one,
    else waiting ``wait_s`` for a person's mail, then the policy."""

    def __init__(
        self, store: Store, *, policy: str, wait_s: float, attendant: Attendant | None = None
    ) -> None:
        """``attendant``: the person at the terminal (default: ``ATTENDANT``'s, as the run was started)."""
        _check_policy(policy)
        if not wait_s >= 0:
            raise ValueError(f"ask_wait must be 0 or more seconds, not {wait_s!r}")
        self.store = store
        self.policy = policy
        self.wait_s = wait_s
        self.attendant = attendant if attendant is not None else ATTENDANT.get()
        self.always: AlwaysRules | None = None
        """What "allow always" does (the supervisor's); None: it is not offered."""
        self._waiting: dict[str, asyncio.Future[_Verdict]] = {}
        self._ids: set[str] | None = None  # every ask id of the run, read from the store at the first ask
        self._carried: dict[str, EventRecord] = {}  # asks a crash left open, to be asked again
        self._early: dict[str, _Verdict] = {}  # answers to carried asks that came before they were

    async def __call__(self, ask: Ask) -> Answer:
        carried = self._adopt(ask)
        ask_id = carried or self._new_id()
        attended = self.attendant is not None
        choice = self._choice(ask)
        wait: dict[str, Any] = {"wait_s": None, "attended": True} if attended else {"wait_s": self.wait_s}
        try:
            if carried is None:
                rule = {"rule": choice.rule} if choice.rule else {"rule": None, "no_rule": choice.why}
                data = {"id": ask_id, "tool": ask.tool, "input": ask.input, "reason": ask.reason, **wait,
                        "call": ask.call_id, **rule}  # fmt: skip
                await self.store.append_event(ASK, data, agent=ask.agent)
            else:
                await self.store.append_event(ASKED_AGAIN, {"id": ask_id, **wait}, agent=ask.agent)
            verdict = await self._verdict(ask, ask_id, choice)
        except asyncio.CancelledError:  # the agent was stopped: its ask ends too, denied
            with contextlib.suppress(StoreError):  # a store that failed keeps no more events anyway
                await self._record(ask, ask_id, _Verdict(Answer(False, STOPPED), BY_STOP))
            raise
        remembered = None
        if verdict.always:
            remembering = asyncio.ensure_future(self._remember(ask))
            try:  # a stop now does not undo the person's answer, nor leave the rule half added
                remembered = await asyncio.shield(remembering)
            except asyncio.CancelledError:
                await self._record(ask, ask_id, verdict, await remembering)
                raise
        await self._record(ask, ask_id, verdict, remembered)  # queued at once: a stop cannot undo it
        return dataclasses.replace(verdict.answer, by=verdict.by)

    def _choice(self, ask: Ask) -> RuleChoice:
        return self.always.choice(ask) if self.always is not None else RuleChoice(None, NO_ALWAYS)

    async def _remember(self, ask: Ask) -> Remembered:
        if self.always is None:
            remembered = Remembered(None, f"teamrt: {NO_ALWAYS}; allowed once")
        else:
            remembered = await self.always.remember(ask)
        if self.attendant is not None:
            self.attendant.tell(remembered.said)
        return remembered

    async def _verdict(self, ask: Ask, ask_id: str, choice: RuleChoice) -> _Verdict:
        """A person's answer: at the terminal, or by mail within ``wait_s`` (without a terminal); else the
        policy's."""
        early = self._early.pop(ask_id, None)
        if early is not None:  # answered by mail after the crash, before the call asked again
            return early
        attendant = self.attendant
        if attendant is None and self.wait_s <= 0:
            return _Verdict(policy_answer(self.policy, ask), BY_POLICY)
        loop = asyncio.get_running_loop()
        verdict: asyncio.Future[_Verdict] = loop.create_future()
        self._waiting[ask_id] = verdict
        timer: asyncio.TimerHandle | None = None
        person: asyncio.Task[None] | None = None

        def time_up() -> None:  # whichever comes first, the timer or a person, settles the ask
            if not verdict.done():
                answer = policy_answer(self.policy, ask, waited_s=self.wait_s)
                verdict.set_result(_Verdict(answer, BY_POLICY))

        if attendant is not None:
            shown = Shown(ask_id, ask.agent, ask.tool, ask.input, ask.reason, choice.rule, choice.why)
            person = asyncio.create_task(self._ask_person(attendant, shown, ask, verdict))
        else:
            timer = loop.call_later(self.wait_s, time_up)
        try:
            return await verdict
        finally:
            if timer is not None:
                timer.cancel()
            if person is not None and not person.done():
                person.cancel()  # answered by mail: the prompt comes down
            del self._waiting[ask_id]

    async def _ask_person(
        self, attendant: Attendant, shown: Shown, ask: Ask, verdict: asyncio.Future[_Verdict]
    ) -> None:
        try:
            choice = await attendant.ask(shown)
        except NobodyThere:  # from now on the team's ask_wait and on_ask answer
            self.attendant = None
            if not verdict.done():
                verdict.set_result(_Verdict(policy_answer(self.policy, ask), BY_POLICY))
            return
        if not verdict.done():
            answer = human_answer(choice.allowed, USER, choice.note)
            verdict.set_result(_Verdict(answer, USER, choice.allowed and choice.always))

    def answer(
        self, ask_id: str, allowed: bool, *, by: str, reason: str | None = None, always: bool = False
    ) -> bool:
        """A person's answer to a waiting ask (``always``: remember its rule too); False (and nothing done)
        when no such ask waits. A carried ask not asked again yet keeps the answer for when it is."""
        verdict = _Verdict(human_answer(allowed, by, reason), by, allowed and always)
        waiting = self._waiting.get(ask_id)
        if waiting is not None and not waiting.done():
            waiting.set_result(verdict)
            return True
        if ask_id in self._carried and ask_id not in self._early:
            self._early[ask_id] = verdict
            return True
        return False

    # -- asks a crash left open --------------------------------------------------------------------

    async def carry(self, events: Sequence[EventRecord], live: Collection[str]) -> list[str]:
        """Take the asks among ``events`` that have no answer (a crash came first): those of the agents in
        ``live`` are kept open, to be asked again under their ids as the agents go on; the others are closed
        now, ``by resume``. Returns the ids closed."""
        answered = {e.data.get("id") for e in events if e.kind == ANSWERED}
        closed = []
        for event in events:
            ask_id = event.data.get("id")
            if event.kind != ASK or ask_id in answered or not isinstance(ask_id, str):
                continue
            if event.agent in live:
                self._carried[ask_id] = event
            else:
                await self._close(ask_id, event.agent)
                closed.append(ask_id)
        return closed

    async def release(self, agent: str | None = None) -> list[str]:
        """Close, ``by resume``, the carried asks of ``agent`` (None: of every agent) whose calls were not
        asked again (the agent has settled its calls, or the run ends). Returns their ids."""
        ids = [i for i, e in self._carried.items() if agent is None or e.agent == agent]
        for ask_id in ids:
            event = self._carried.pop(ask_id)
            self._early.pop(ask_id, None)
            await self._close(ask_id, event.agent)
        return ids

    def _adopt(self, ask: Ask) -> str | None:
        """The id of the carried ask ``ask`` asks again (the same agent and call), taken; else None."""
        for ask_id, event in self._carried.items():
            data = event.data
            if event.agent != ask.agent or data.get("tool") != ask.tool:
                continue
            call = data.get("call")
            if (call == ask.call_id) if (call and ask.call_id) else data.get("input") == ask.input:
                del self._carried[ask_id]
                return ask_id
        return None

    async def _close(self, ask_id: str, agent: str | None) -> None:
        data = {"id": ask_id, "allowed": False, "by": BY_RESUME, "reason": NOT_ASKED_AGAIN}
        await self.store.append_event(ANSWERED, data, agent=agent)

    def _new_id(self) -> str:
        if self._ids is None:
            self._ids = {str(e.data.get("id")) for e in self.store.reader.events(kinds=(ASK,))}
        while (ask_id := f"ask-{secrets.token_hex(4)}") in self._ids:
            pass
        self._ids.add(ask_id)
        return ask_id

    async def _record(
        self, ask: Ask, ask_id: str, verdict: _Verdict, remembered: Remembered | None = None
    ) -> None:
        answer = verdict.answer
        data: dict[str, Any] = {
            "id": ask_id, "allowed": answer.allowed, "by": verdict.by, "reason": answer.reason,
        }  # fmt: skip
        if remembered is not None:
            data |= {"always": remembered.rule, "said": remembered.said}
        await self.store.append_event(ANSWERED, data, agent=ask.agent)
