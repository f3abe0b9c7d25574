"""The team tools' side of the run (``tools.team.TeamServices``): mail, tasks, shutdowns, to-do lists.

What an agent's ``send_message``, ``broadcast``, ``task_*``, ``respond_shutdown``
and ``TodoWrite`` calls do, over the run's mailbox and store; ``spawn_agent``
and ``Task`` go to ``spawning``. A message the disk refuses is a tool error
that says what happens to it (``diskfull``); every message posted is kept in
memory, to be delivered again if its file is damaged (``lostmail``).
"""

from __future__ import annotations

from typing import Any

from teamrt.mailbox import Mailbox, MailboxError
from teamrt.mailbox.mailbox import MailNotDelivered
from teamrt.runtime.diskfull import DiskHalt
from teamrt.runtime.hooks import task_completing
from teamrt.runtime.lostmail import LostMail
from teamrt.runtime.member import Member
from teamrt.runtime.spawning import Spawning
from teamrt.store import Store, TaskUnavailable
from teamrt.tools.base import ToolError
from teamrt.tools.team import describe_tasks
from teamrt.tools.todo import TODOS_EVENT


class Services:
    """What the team tools call, for one run."""

    def __init__(
        self, *, store: Store, members: dict[str, Member], mailbox: Mailbox, lost_mail: LostMail,
        disk: DiskHalt, spawning: Spawning,
    ) -> None:  # fmt: skip
        self.store = store
        self.members = members
        self.mailbox = mailbox
        self.lost_mail = lost_mail
        self.disk = disk
        self.spawning = spawning

    async def spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str:
        return await self.spawning.spawn(parent, kind=kind, role=role, directives=directives, wait=wait)

    def send(self, sender: str, to: str, body: str, *, kind: str = "message", summary: str = "",
             data: dict[str, Any] | None = None) -> str:  # fmt: skip
        epoch = self.members[sender].loop.epoch if sender in self.members else 0
        if to in self.members:
            self.members[to].busy = True  # before delivery: its parent must not end in between
        try:
            msg = self.mailbox.post(
                sender=sender, recipient=to, body=body, kind=kind, summary=summary or body[:80],
                data=data or {}, epoch=epoch,
            )  # fmt: skip
            self.lost_mail.remember(msg)  # delivered again from here if its file is damaged
        except MailNotDelivered as e:  # the disk refused it: the sender hears why (a tool error)
            kept = e.lasting and sender in self.members  # an agent's: a resume delivers it, once
            self.disk.mail_failed(e, kept=kept)
            if kept:
                then = "; the run stops until space is freed; this message is kept and delivered when the run"
                then += " is resumed: do not send it again"
            else:
                then = "; the run stops until space is freed" if e.lasting else "; send it again later"
            raise ToolError(f"{e}{then}") from e
        except MailboxError as e:
            known = ", ".join(sorted(n for n in self.members if n != sender))
            raise ToolError(f"{e}; the team is: {known}") from e
        return f"delivered {msg.id} to {to}"

    def broadcast(self, sender: str, body: str, summary: str) -> list[str]:
        """Send to every other live agent; one the disk refuses does not keep the rest from theirs (each
        refusal is kept or said), and the caller hears who has it and who has not."""
        others = [n for n, m in self.members.items() if n != sender and not m.done.done()]
        refused: list[tuple[str, ToolError]] = []
        for name in others:
            try:
                self.send(sender, name, body, summary=summary)
            except ToolError as e:
                if not isinstance(e.__cause__, MailNotDelivered):
                    raise
                refused.append((name, e))
        if refused:
            sent = [n for n in others if n not in dict(refused)]
            head = f"sent to {', '.join(sent)}; " if sent else ""
            raise ToolError(head + "; ".join(str(e) for _, e in refused)) from refused[0][1].__cause__
        return others

    async def create_task(self, agent: str, subject: str, description: str, blocked_by: list[int]) -> str:
        task = await self.store.create_task(subject, description, created_by=agent, blocked_by=blocked_by)
        return f"created task {task.id}: {task.subject}"

    async def claim_task(self, agent: str, task_id: int) -> str:
        try:
            task = await self.store.claim_task(task_id, agent)
        except TaskUnavailable as e:
            if e.owner != agent or not e.reason.startswith("already claimed"):
                raise ToolError(str(e)) from e
            task = next(t for t in self.store.reader.tasks() if t.id == task_id)  # its own claim, again
        return f"you hold task {task.id}: {task.subject}\n{task.description}"

    async def update_task(self, agent: str, task_id: int, status: str) -> str:
        task = next((t for t in self.store.reader.tasks() if t.id == task_id), None)
        if status == "done" and task is not None and agent in self.members:  # TaskCompleted hooks first
            refused = await task_completing(self.members[agent].loop, task.id, task.subject, task.description)
            if refused is not None:
                raise ToolError(f"task {task.id} is not done: a TaskCompleted hook says:\n{refused}")
        task = await self.store.update_task(task_id, status, by=agent)
        return f"task {task.id} is {task.status}"

    def list_tasks(self) -> str:
        return describe_tasks(self.store.reader.tasks())

    def accept_shutdown(self, agent: str, reason: str) -> None:
        self.members[agent].loop.finish_after_turn(reason)

    def role_agents(self) -> dict[str, str]:
        return self.spawning.role_agents()

    async def record_todos(self, agent: str, todos: list[dict[str, str]]) -> None:
        await self.store.append_event(TODOS_EVENT, {"todos": todos}, agent=agent)
