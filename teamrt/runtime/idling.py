"""Who works and who idles: busy marks, mail set aside, a team at rest, and the wait for the lead's end.

A parent waits while a child is busy, and hears when one idles; a file an
inbox set aside is delivered again or told (``lostmail``), in a task the run's
end waits for; the stall watchdog (``stall``) asks here whether every live
agent waits on its inbox with nothing in flight, and wakes the lead. The run
waits here for its lead's end (``until_end``), which a team stalled for good
or a stopped store cuts short. One part, because all of it reads the same
state: the members' busy marks and inboxes, and the mail still being handled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from teamrt.events import SUPERVISOR
from teamrt.mailbox.inbox import SetAside
from teamrt.runtime.agent import Outcome
from teamrt.runtime.losses import RUN_STALLED
from teamrt.runtime.lostmail import LostMail
from teamrt.runtime.member import Member, Runner
from teamrt.runtime.services import Services
from teamrt.runtime.stall import WAKE, Watchdog
from teamrt.store import Store
from teamrt.tools.base import ToolError

log = logging.getLogger(__name__)


class Idling:
    """One run's busy marks, its mail set aside, its stall watchdog (``watchdog``), the wait for its end."""

    def __init__(
        self, *, store: Store, members: dict[str, Member], lost_mail: LostMail, services: Services,
        runner: Runner,
    ) -> None:  # fmt: skip
        self.store = store
        self.members = members
        self.lost_mail = lost_mail
        self.services = services
        self.runner = runner
        self.handling: set[asyncio.Task[None]] = set()  # of mail set aside, still being handled
        self.restoring = False  # a resume is restoring its agents: mail set aside waits for its scan
        self.watchdog = Watchdog(idle=self.all_waiting, quiet=self.nothing_in_flight, wake=self.wake_lead)

    def set_busy(self, name: str, busy: bool) -> None:
        """Track who is working; a parent idling on its children hears when one idles."""
        member = self.members[name]
        member.busy = busy
        if not busy and not member.settled.done():
            member.settled.set_result(None)
        parent = self.members.get(member.parent or "")
        if not busy and parent is not None and not parent.busy and not parent.done.done():
            self.services.send(
                SUPERVISOR, parent.name, f"{name} is idle.", kind="control", summary=f"{name} idle"
            )

    def set_aside(self, aside: SetAside) -> None:
        """An inbox set a file aside: deliver it again or tell, and record it (``lostmail``), in a task."""
        if self.restoring:  # not every agent is back yet (who may be told?): the resume's scan of bad/
            return
        task = asyncio.create_task(self._name_set_aside(aside), name=f"set aside {aside.bad}")
        self.handling.add(task)
        task.add_done_callback(self.handling.discard)

    async def _name_set_aside(self, aside: SetAside) -> None:
        try:
            await self.lost_mail.handle(aside)
        except Exception as e:  # the store stopped (the run ends and says so), or a bug: never the inbox's
            if self.store.failure is None:
                log.error("could not name %s's message set aside as bad/%s: %s", aside.agent, aside.bad, e)
        finally:
            self.watchdog.changed()

    def all_waiting(self) -> bool:
        """Every live agent waits on its inbox with nothing to read (the stall watchdog's first test)."""
        live = [m for m in self.members.values() if not m.done.done()]
        return "lead" in self.members and bool(live) and all(m.inbox.waiting for m in live)

    def nothing_in_flight(self) -> bool:
        """No mail waits in a live agent's ``new/``, none set aside is still being handled."""
        if self.handling or self.store.failure is not None:
            return False
        try:
            return not any(m.inbox.unread() for m in self.members.values() if not m.done.done())
        except OSError:
            return False

    async def wake_lead(self) -> None:
        """The team stalled: tell the lead (once per stall), and say so in the run's events."""
        lead = self.members.get("lead")
        if lead is None or lead.done.done():
            return
        waiting = ", ".join(sorted(n for n, m in self.members.items() if not m.done.done()))
        note = f"every agent is idle ({waiting}) and no mail is in flight; the lead was woken to go on"
        await self.store.append_event(RUN_STALLED, {"note": note, "woke": "lead"})
        try:
            self.services.send(SUPERVISOR, "lead", WAKE, summary="every agent is idle")
        except ToolError as e:  # the stall comes back, with no progress: the run ends with its reason
            log.error("could not wake the lead: %s", e)

    async def until_end(self, lead: Member) -> Outcome:
        """The lead's end; or, once the team has stalled for good (``stall``), every agent stopped and the
        run failed with the reason, recorded as a ``run.stalled`` event; or, once the store has stopped
        (a full disk, the lease lost), every agent stopped: nothing it did would be kept, and an agent
        idle on its inbox would wait for ever. The run then ends with the store's failure, in one line."""
        watch = asyncio.create_task(self.watchdog.watch(), name="stall watchdog")
        loop = asyncio.get_running_loop()
        stopped: asyncio.Future[None] = loop.create_future()

        def tell() -> None:
            if not stopped.done():
                stopped.set_result(None)

        def tell_from_writer() -> None:
            loop.call_soon_threadsafe(tell)

        self.store.on_failure(tell_from_writer)
        try:
            await asyncio.wait((lead.done, watch, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
        if stopped.done() and not lead.done.done():
            for member in self.members.values():
                if not member.done.done():
                    self.runner.stop(member, f"the run's store stopped: {self.store.failure}")
            return await lead.done
        if lead.done.done() or watch.cancelled():
            return self._with_stalls(await lead.done)
        reason = watch.result()
        waiting = sorted(n for n, m in self.members.items() if not m.done.done())
        times = f"{self.watchdog.woken} time{'' if self.watchdog.woken == 1 else 's'}"
        capped = self.watchdog.woken >= self.watchdog.max_wakes
        note = f"{reason}; the lead was woken {times}" + (", the most" if capped else " and nothing moved")
        note += f"; stopped {', '.join(waiting)}"
        await self.store.append_event(RUN_STALLED, {"note": note, "agents": waiting, "reason": reason})
        for member in self.members.values():
            if not member.done.done():
                self.runner.stop(member, reason)
        ended = await lead.done
        return Outcome("failed", ended.answer, ended.turns, reason)

    def _with_stalls(self, outcome: Outcome) -> Outcome:
        """A run that ends ``done`` after the team stalled and its lead was woken says so in its reason: the
        lead answered with what it had, which may lack what the lost mail carried."""
        woken = self.watchdog.woken
        if outcome.status != "done" or not woken:
            return outcome
        times = f"{woken} time{'' if woken == 1 else 's'}"
        said = (
            f"the team stalled {times} (every agent idle, no mail in flight); the lead was woken and answered"
        )
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)
