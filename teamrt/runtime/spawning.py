"""Spawning: ``spawn_agent`` and ``Task`` start children, whose answers go back to their parents.

Children are made within the team's limits on depth and numbers, each named
after its role (or its parent, for a fork), and started at once; a parent
that waits gets their answers as the call's result, one that does not gets
each as a ``result`` mail when the child ends (``report``). A spawn refused or
failing is a ``spawn.failed`` event and a tool error for its caller, and a run
that ends done after one says so (``with_failed_spawns``).

Forks: the children of one spawn get the parent's system prompt and tools
list unchanged, its messages up to and including the spawning assistant
turn, and the same placeholder result for every call of that turn; only
their directive differs, so they share one prompt-cache entry. A fork may
not spawn (its tools list stays its parent's, or the cache is lost).

Worktree children get a checkout of their own (``teamrt.worktree``), and a
first turn that says where they work and how their work lands (``landing``).
Forks and teammates work in their parent's workspace.

Before any child is made, the spawn's cost is forecast (``teamrt.runtime.forecast``)
and the spawning agent's ``Spawn`` rules judge it: one in its deny list refuses
the spawn, one in its ask list asks the person (the ask shows the forecast and
its basis), as a call's rules do. The forecast of the children made is recorded
(``spawn.forecast``) for the run's burn-down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from pathlib import Path
from typing import Final

from teamrt.agents import choose_model
from teamrt.mailbox import Mailbox
from teamrt.mailbox.mailbox import MailNotDelivered
from teamrt.models import lookup, price_table
from teamrt.models.tokens import request_tokens, text_tokens
from teamrt.models.types import Block
from teamrt.runtime.agent import Outcome
from teamrt.runtime.asking import Ask
from teamrt.runtime.assembly import Assembly
from teamrt.runtime.diskfull import DiskHalt
from teamrt.runtime.forecast import SPAWN_FORECAST, Child, Forecast, forecast
from teamrt.runtime.lostmail import LostMail
from teamrt.runtime.member import Member, Runner
from teamrt.store import Store
from teamrt.team import Team
from teamrt.tools.base import ToolError, tool_param
from teamrt.tools.names import canonical
from teamrt.tools.permissions import Verdict
from teamrt.tools.team import task_spawn
from teamrt.worktree import GitError, Worktrees

WORKTREE_NOTE_END = " Write only inside your worktree.\n\n"
"""Where teamrt's word on a worktree agent's checkout ends in its first message, and its directive begins."""
FORK_PLACEHOLDER = "Forked: you are one of the children this call started. Your directive follows."
SPAWN_RULE_TOOL: Final = "Spawn"
"""The name a spawn's ask is made under: the name of the rules that ask about it."""
SPAWN_FAILED: Final = "spawn.failed"
"""The event of a spawn refused or failed: its agent, kind, role and reason (the caller gets a tool error)."""


class Spawning:
    """Starts the children of one run's agents, and reports their ends to their parents."""

    def __init__(
        self, *, store: Store, run_dir: Path, team: Team, project: Path, members: dict[str, Member],
        mailbox: Mailbox, worktrees: Worktrees | None, lost_mail: LostMail, assembly: Assembly,
        disk: DiskHalt, runner: Runner,
    ) -> None:  # fmt: skip
        self.store = store
        self.run_dir = run_dir
        self.team = team
        self.project = project
        self.members = members
        self.mailbox = mailbox
        self.worktrees = worktrees
        self.lost_mail = lost_mail
        self.assembly = assembly
        self.disk = disk
        self.runner = runner
        self._serial = itertools.count(1)
        self.torn_down = False
        """The run's end has closed its mailbox and inboxes: an agent task still left (one an interrupt
        cancels at the interpreter's shutdown) reports to no one."""

    async def spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str:
        """Start ``directives``' children of ``parent``; one refused or failing is recorded as a
        ``spawn.failed`` event (for the progress lines and logs) and comes back as a tool error."""
        try:
            return await self._spawn(parent, kind=kind, role=role, directives=directives, wait=wait)
        except ToolError as e:
            await self.store.append_event(
                SPAWN_FAILED,
                {"agent": parent, "kind": kind, "role": role, "children": len(directives), "reason": str(e)},
                agent=parent,
            )
            raise

    async def _spawn(
        self, parent: str, *, kind: str, role: str | None, directives: list[str], wait: bool
    ) -> str:
        caller = self.members[parent]
        if caller.kind == "fork":
            raise ToolError("a fork cannot spawn agents; report back to your parent instead")
        if caller.depth + 1 > self.team.max_depth:
            raise ToolError(
                f"agents may nest {self.team.max_depth} deep; {parent} is at depth {caller.depth}"
            )
        if len(self.members) + len(directives) > self.team.max_agents:
            raise ToolError(f"the run may have {self.team.max_agents} agents; it has {len(self.members)}")
        if kind == "worktree" and self.worktrees is None:
            raise ToolError(
                f"worktree agents need a git repository with a commit; {self.project} is not in one"
            )
        if kind in ("team", "worktree", "task") and (role is None or role not in self.team.roles):
            raise ToolError(f"role must be one of: {', '.join(sorted(self.team.roles)) or '(none)'}")
        expected = self.forecast(caller, kind, role, directives)
        await self._approve(caller, kind, role, directives, expected)
        children: list[tuple[Member, str]] = []
        for directive in directives:
            try:
                child = await self.child(caller, kind, role)
            except (GitError, OSError) as e:
                full = self.disk.disk_full(
                    e, self.run_dir, f"{parent} could not start a {role or kind} agent"
                )
                if full is not None:  # the spawn's call goes on on resume, with the children made so far
                    for made, _ in children:
                        self.runner.settle(made, Outcome("stopped", "", 0, str(full)))
                    raise await self.disk.stopped_by_disk(full) from e
                if not isinstance(e, GitError):
                    raise
                await self._abandon([c for c, _ in children], f"not started: {e}")
                raise ToolError(f"could not create a worktree for a {role}: {e}") from e
            children.append((child, directive))
        names = [c.name for c, _ in children]
        await self.store.append_event(SPAWN_FORECAST, expected.data(names), agent=parent)
        for child, directive in children:
            child.background = not wait
            self.runner.start(child, self.first_turn(caller, child, directive))
        await self.store.append_event(
            "spawn", {"kind": kind, "children": [c.name for c, _ in children], "wait": wait}, agent=parent
        )
        if not wait:
            return f"started {', '.join(c.name for c, _ in children)}; each result will arrive as mail"
        await asyncio.gather(*(c.settled for c, _ in children))  # a teammate: until its first answer
        return "\n\n".join(self.answer(c) for c, _ in children)

    def forecast(self, caller: Member, kind: str, role: str | None, directives: list[str]) -> Forecast:
        """What the children of ``caller``'s spawn are expected to cost (``teamrt.runtime.forecast``): a
        fork's prefix is ``caller``'s conversation, in the cache already; a fresh child's its system prompt,
        tools and directive."""
        directive = round(sum(text_tokens(d) for d in directives) / max(1, len(directives)))
        if kind == "fork":
            spec, spec_role = caller.loop.spec, self.team.lead
            model, info, max_turns = spec.model_name, spec.info, spec.max_turns
            tools = [tool_param(t) for t in spec.tools.values()]
            prefix = request_tokens({"tools": tools, "system": spec.system, "messages": caller.loop.messages})
        else:
            spec_role = self.team.roles[role or ""]
            definition = self.assembly.definitions.get(spec_role.agent)
            prompt = definition.prompt if definition is not None else ""
            named = definition.tools if definition is not None else None
            model = (
                choose_model(spec_role.model, definition, self.team.model) if definition else self.team.model
            )
            info = lookup(model, price_table(self.assembly.settings))
            max_turns = spec_role.max_turns or (definition.max_turns if definition is not None else None)
            tools = [tool_param(t) for n, t in self.assembly.host.tools.items()
                     if named is None or canonical(n) is None or canonical(n) in named]  # fmt: skip
            system = f"{prompt}\n\n{self.assembly.memory.text}" if self.assembly.memory.text else prompt
            prefix = request_tokens({"tools": tools, "system": system})
        child = Child(
            label="fork" if kind == "fork" else spec_role.name, model=model, info=info,
            prefix_tokens=prefix + directive, cached=kind == "fork", max_turns=max_turns,
            budget_usd=spec_role.budget_usd, budget_tokens=spec_role.budget_tokens,
        )  # fmt: skip
        left = self.assembly.run_budget.left_usd()
        return forecast(child, len(directives), self.store.reader.agents(), run_left_usd=left)

    async def _approve(
        self, caller: Member, kind: str, role: str | None, directives: list[str], expected: Forecast
    ) -> None:
        """Let the spawn go on, or raise a ToolError saying why not: ``caller``'s ``Spawn`` rules judge its
        forecast; a deny rule refuses it, an ask rule asks the person (as a call's ask: recorded, answered
        at the terminal, by ``teamrt answer`` or by the run's policy)."""
        label = "fork" if kind == "fork" else role or ""
        decision = caller.loop.spec.permissions.spawn_decision(label, expected.usd, expected.text())
        if decision is None:
            return
        if decision.verdict is Verdict.DENY:
            raise ToolError(f"permission denied: {decision.reason}")
        asked = {"kind": kind, "role": role, "directives": directives}
        answer = await caller.loop.env.asker(Ask(caller.name, SPAWN_RULE_TOOL, asked, decision.reason))
        if not answer.allowed:
            said = (
                answer.reason if decision.reason in answer.reason else f"{decision.reason}; {answer.reason}"
            )
            raise ToolError(f"permission denied: {said}")

    async def child(self, caller: Member, kind: str, role: str | None) -> Member:
        """A new child of ``caller``, added to the run, not started."""
        if kind == "fork":
            spec_role = dataclasses.replace(self.team.lead, name="fork", agent=self.team.lead.agent)
        else:
            spec_role = self.team.roles[role or ""]
        name = self._name(f"{caller.name}-fork" if kind == "fork" else role or "mate")
        return await self.assembly.add(
            spec_role, name, kind=kind, parent=caller.name, depth=caller.depth + 1,
            fork_of=caller if kind == "fork" else None,
        )  # fmt: skip

    def _name(self, base: str) -> str:
        name = base
        while name in self.members:
            name = f"{base}-{next(self._serial)}"
        return name

    def spawned_by_last_turn(self, parent: Member) -> list[tuple[Block, list[Member]]]:
        """Each spawn call of ``parent``'s last kept turn with the children it had created: children
        are created call by call, in the order of each call's directives."""
        turns = self.store.reader.turns(parent.name)
        if not turns or turns[-1].role != "assistant":
            return []
        created = {a.name: a.created_at for a in self.store.reader.agents() if a.parent == parent.name}
        since = turns[-1].created_at
        children = sorted((m for m in self.members.values() if created.get(m.name, -1.0) >= since),
                          key=lambda m: created[m.name])  # fmt: skip
        spawned = []
        for call in turns[-1].content:
            spawn = self.spawn_of(call) if call.get("type") == "tool_use" else None
            if spawn is not None:
                count = len(spawn[2])
                spawned.append((call, children[:count]))
                children = children[count:]
        return spawned

    def spawn_of(self, call: Block) -> tuple[str, str | None, list[str], bool] | None:
        """What a spawning call (``spawn_agent``, or ``Task`` by any of its names) asked for: the kind, the
        role, the directives and whether its caller waits; None for any other call, or a Task call that
        could start nothing."""
        args = call.get("input") or {}
        if call.get("name") == "spawn_agent":
            kind, directives = str(args.get("kind")), list(args.get("directives") or [])
            return kind, args.get("role"), directives, bool(args.get("wait", kind != "team"))
        if canonical(str(call.get("name"))) == "Task":
            try:
                kind, role, prompt = task_spawn(args, self.role_agents())
            except ToolError:
                return None
            return kind, role, [prompt], True
        return None

    def role_agents(self) -> dict[str, str]:
        return {name: role.agent for name, role in self.team.roles.items()}

    def answer(self, child: Member) -> str:
        """A child's answer for its parent: its end, or (a teammate still with us) its latest answer."""
        if child.done.done():
            o = child.done.result()
            head = f"## {child.name}: {o.status}" + (f" ({o.reason})" if o.reason else "")
            return f"{head}\n{o.answer or '(no answer)'}"
        return f"## {child.name}: idle; reach it with send_message\n{child.loop.answer or '(no answer)'}"

    async def _abandon(self, members: list[Member], reason: str) -> None:
        """Children added but never started, because a later one of the same spawn failed."""
        for member in members:
            await self.store.set_agent_status(member.name, "failed", reason)
            member.busy = False
            member.done.set_result(Outcome("failed", "", 0, reason))
            member.settled.set_result(None)

    def first_turn(self, parent: Member, child: Member, directive: str) -> str | list[Block]:
        if child.checkout is not None and self.worktrees is not None:
            gates = ", ".join(f"`{g}`" for g in self.team.gates) or "none"
            return (
                f"You work in your own git worktree, {child.checkout.workspace}, a detached checkout of"
                f" {child.checkout.base[:12]}. Commit there if you like; when you finish, teamrt commits"
                f" the rest and merges your work onto {self.worktrees.integration} once its gates"
                f" ({gates}) pass.{WORKTREE_NOTE_END}{directive}"
            )
        if child.kind != "fork":
            return directive
        calls = [b for b in parent.loop.messages[-1]["content"] if b.get("type") == "tool_use"]
        placeholders: list[Block] = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": FORK_PLACEHOLDER} for c in calls
        ]
        return [*placeholders, {"type": "text", "text": directive}]

    def report(self, child: Member, outcome: Outcome) -> None:
        """A background child's final answer, as a ``result`` mail to its parent (not when the store
        stopped: the end was not kept, so a resume goes on with the child and it reports then). Nor once
        the run's end has closed the mailbox: a teammate idle at Ctrl-C is cancelled only at the
        interpreter's shutdown, and its "failed: CancelledError" was posted through the closed mailbox
        (``OSError: Bad file descriptor``); the store keeps it live, so a resume goes on with it."""
        if child.parent is None or child.parent not in self.members or self.store.failure is not None:
            return
        if self.torn_down or self.disk.full is not None:  # a full disk: as a stopped store, told on resume
            return
        body = outcome.answer or f"(no answer; {outcome.status}: {outcome.reason})"
        data = {"status": outcome.status, "reason": outcome.reason, "epoch": child.loop.epoch}
        try:
            posted = self.mailbox.post(
                sender=child.name, recipient=child.parent, body=body, kind="result",
                summary=f"{child.name} {outcome.status}", data=data, epoch=child.loop.epoch,
            )  # fmt: skip
        except MailNotDelivered as e:  # a resume reports it again: no result mail is found
            self.disk.mail_failed(e, kept=False)
            return
        self.lost_mail.remember(posted)  # delivered again from here if its file is damaged

    def with_failed_spawns(self, outcome: Outcome) -> Outcome:
        """A run that ends ``done`` after spawns failed says so in its reason: the lead heard each
        failure as a tool error and may have worked around it, so the run is not failed, but it is
        not a silent success either.

        The outcome first: a run that did not end ``done`` (its store stopped, say) reads nothing; a
        store that cannot be read here stops the run as a failed write does, in one line."""
        if outcome.status != "done" or self.store.failure is not None:
            return outcome
        from sqlalchemy.exc import SQLAlchemyError

        from teamrt.store import StoreWriteFailed
        from teamrt.store.engine import one_line

        try:
            failed = self.store.reader.events(kinds=(SPAWN_FAILED,))
        except SQLAlchemyError as e:
            raise StoreWriteFailed(self.store.where, one_line(e)) from e
        if not failed:
            return outcome
        first = failed[0].data
        what = " ".join(str(x) for x in (first.get("kind"), first.get("role")) if x)
        said = (
            f"{len(failed)} spawn{'' if len(failed) == 1 else 's'} failed; the first:"
            f" {failed[0].agent} could not start {what} agents: {first.get('reason')}"
        )
        return dataclasses.replace(outcome, reason=f"{outcome.reason}; {said}" if outcome.reason else said)
