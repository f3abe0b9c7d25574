"""The agent loop (docs/architecture.md, "Data flow" and "The agent loop").

    wait for input -> build the request -> call the model -> persist the assistant turn
    and its tool calls (pending) -> run the tools (running -> done | error) -> persist
    the results -> repeat

until the model ends its turn with no tool call and no mail waiting, a limit is
reached, or the agent is stopped. Every step is committed before the next one
starts, so a crash loses at most the step in flight. Budgets, context
compaction, spilling and permission asks live beside the loop, in their own
modules; the loop only calls them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from teamrt import faults
from teamrt.errors import TeamrtError
from teamrt.events import AGENT_ENDED, AgentEnd
from teamrt.mailbox import Message
from teamrt.models import ModelError, ModelRequest, ModelResponse
from teamrt.models.errors import ModelContextTooLong
from teamrt.models.pricing import worst_cost_usd
from teamrt.models.tokens import request_tokens
from teamrt.models.types import Block
from teamrt.procs import process_start_time
from teamrt.runtime import context, hook_events, prefixguard, scopedrules
from teamrt.runtime import hooks as hooking
from teamrt.runtime.agent import AgentEnv, AgentSpec, Outcome
from teamrt.runtime.asking import Ask
from teamrt.runtime.budget import BudgetExhausted, Reservation
from teamrt.runtime.cachettl import WaitHistory, choose_ttl
from teamrt.runtime.compaction import BASE_TOKENS, LIMIT_MARGIN, ContextPolicy, cleared_tokens
from teamrt.runtime.history import replayable
from teamrt.runtime.sizing import RequestSizer
from teamrt.runtime.spill import bound_results
from teamrt.runtime.surrogates import scrubbed
from teamrt.store import FinishedCall, IngestedMail, NewEvent, ToolUse, Usage
from teamrt.tools.base import Tool, ToolContext, ToolError, ToolResult, tool_param
from teamrt.tools.names import canonical, legacy_input
from teamrt.tools.permissions import Verdict

log = logging.getLogger(__name__)

MAX_PARALLEL_READS = 10


class ContextExhausted(TeamrtError):
    pass


class AgentLoop:
    def __init__(
        self, spec: AgentSpec, env: AgentEnv, *, epoch: int, messages: list[Any] | None = None
    ) -> None:
        self.spec = spec
        self.env = env
        self.epoch = epoch
        self.messages: list[Any] = list(messages or [])
        self.turns = 0
        self._failed_compactions = 0  # in a row; at MAX_FAILED_COMPACTIONS only the limit makes it compact
        self._prefix_checked = False  # the system prompt and tools compared with the history's, once
        self._prefix_digest: str | None = None  # to keep with the next assistant turn (``prefixguard``)
        self._policy: ContextPolicy | None = spec.context  # None: chosen at the first request
        self._window_cap: int | None = None  # the input limit a "prompt is too long" answer revealed
        fixed = request_tokens({"tools": [tool_param(t) for t in spec.tools.values()], "system": spec.system})
        measured = spec.context is None or spec.context.measured
        self._sizer = RequestSizer(fixed, self.messages, measured=measured)
        self._waiting: list[Message] = []  # mail seen after the model's last turn, ingested next
        self._task: asyncio.Task[Outcome] | None = None
        self._stopping: str | None = None
        self._finishing: str | None = None
        self.answer = ""
        """The text of the model's latest turn that had any: what the agent reports when it ends."""
        self._unfinished: set[str] = set()  # tool calls of the last turn whose result is not kept yet
        self._paused = False  # the last turn ended ``pause_turn``: the API paused it mid-way
        self._clamp_said = False
        self._waits = WaitHistory(
            env.store, spec.name, fresh=not self.messages
        )  # waits for mail: they choose the cache's lifetime

    @property
    def _max_tokens(self) -> int:
        """The spec's ``max_tokens``, clamped to the model's output limit from the catalog (the API
        refuses more); a clamp is logged once per agent."""
        spec = self.spec
        limit = spec.info.max_output_tokens if spec.info else None
        if limit is None or spec.max_tokens <= limit:
            return spec.max_tokens
        if not self._clamp_said:
            self._clamp_said = True
            log.warning(
                "%s: max_tokens %d is above %s's output limit; asking for %d", spec.name, spec.max_tokens,
                spec.model_name, limit,
            )  # fmt: skip
        return limit

    def stop(self, reason: str = "stopped") -> None:
        """End the agent now: its model call or tools are cancelled, its processes killed."""
        self._stopping = reason
        if self._task is not None:
            self._task.cancel()

    @property
    def stopping(self) -> str | None:
        """Why the agent was told to stop, if it was."""
        return self._stopping

    def finish_after_turn(self, reason: str) -> None:
        """End the agent, done, once the current turn's tool results are kept (an accepted shutdown)."""
        self._finishing = reason

    async def run(
        self, task: str | list[Block] | None = None, *, finished: list[FinishedCall] | None = None
    ) -> Outcome:
        """Run to the end. ``task``: the first user turn's text, or its blocks (a fork's);
        ``finished``: results of the last turn's calls, settled by a resume.

        Run again after it ended (a worktree agent whose merge failed), it goes on from the mail
        that woke it, waiting for that mail if it has not come yet.
        """
        self._task = asyncio.current_task()
        results: list[FinishedCall] = list(finished or [])
        start: list[Block] = [{"type": "text", "text": task}] if isinstance(task, str) else list(task or [])
        try:
            if self._stopping is not None:  # stopped between runs
                return await self._end("stopped", self.answer, self._stopping)
            if self._finishing is not None:  # a resume found a shutdown accepted (and settled its call)
                if results:
                    await self._append_user([r.result[0] for r in results], [], results)
                return await self._end("done", self.answer, self._finishing)
            refused = await hooking.starting(self, task)
            if refused is not None:
                return await self._end("stopped", self.answer, refused)
            ended = (
                not (start or results or self._paused)
                and self.messages
                and self.messages[-1]["role"] == "assistant"
            )
            if ended and not self._mail_waiting():
                assert self.env.inbox is not None, "an agent run again needs an inbox"
                self._waiting.append(await self.env.inbox.next())
            while True:
                # a paused turn goes back as it is, with no user turn after it: mail and hook context wait
                mail = [] if self._paused else self._take_mail()
                blocks = [r.result[0] for r in results] + start
                if not self._paused:
                    blocks += scopedrules.context(self) + hooking.context(self)
                blocks += await self._mail_blocks(mail)
                if blocks:
                    await self._append_user(blocks, mail, results)
                results, start = [], []
                if self.spec.max_turns is not None and self.turns >= self.spec.max_turns:
                    return await self._end(
                        "stopped", self.answer, f"reached its limit of {self.spec.max_turns} turns"
                    )
                response = await self._call_model(await self._request())
                self.answer = response.text or self.answer
                await self._append_assistant(response)
                if self._paused:  # the API paused a long server-tool turn: send it back to go on
                    continue
                if not response.tool_uses:
                    if self._mail_waiting():
                        continue
                    waits = self.env.keep_waiting is not None and self.env.keep_waiting()
                    if (self.spec.persistent or waits) and await self._idle():
                        continue
                    if await hooking.stop_blocked(self):
                        continue
                    return await self._end("done", self.answer)
                results = await self._run_tools(response)
                if self.env.after_tools is not None:
                    used = [canonical(c["name"]) or c["name"] for c in response.tool_uses]
                    await self.env.after_tools(used)
                if self._finishing is not None:
                    await self._append_user([r.result[0] for r in results], [], results)
                    return await self._end("done", self.answer, self._finishing)
        except BudgetExhausted as e:
            return await self._end("stopped", self.answer, f"budget exhausted: {e.reason}")
        except (ModelError, ContextExhausted) as e:
            return await self._end("failed", self.answer, str(e))
        except asyncio.CancelledError:
            if self._stopping is None:
                raise
            for call_id in sorted(self._unfinished):
                await self.env.store.move_tool_call(call_id, "interrupted")
            return await self._end("stopped", self.answer, self._stopping)
        finally:
            self._task = None  # stop() between runs (a worktree agent merging) must not cancel its caller

    # -- input ----------------------------------------------------------------

    def resumed_from_store(self) -> None:
        """Count the kept turns and take the latest answer, for an agent rebuilt from the store; note a
        last turn the API paused, which goes on."""
        said = [m for m in self.messages if m["role"] == "assistant"]
        self.turns = len(said)
        if self.messages and self.messages[-1]["role"] == "assistant":
            kept = [t for t in self.env.store.reader.turns(self.spec.name) if t.role == "assistant"]
            self._paused = bool(kept) and kept[-1].stop_reason in ("pause_turn", "compaction")
        for message in reversed(said):
            text = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
            if text:
                self.answer = text
                break

    @property
    def paused(self) -> bool:
        """Whether the last turn was paused by the API (``pause_turn``): the agent has not answered yet."""
        return self._paused

    def has_mail(self) -> bool:
        """Whether mail is waiting to be read."""
        return self._mail_waiting()

    def hold(self, mail: list[Message]) -> None:
        """Mail read from the inbox before the agent runs (a resume), for its next user turn."""
        self._waiting.extend(mail)

    async def rerun(self, call: Block) -> FinishedCall:
        """Run a call of the last kept turn (after a crash: never started, or read-only) to its result.

        It runs before ``run``, so ``stop`` must reach it too: a call asked about again after a resume
        may wait long for its answer. A stopped agent's call ends ``interrupted``; the agent's next
        ``run`` then ends it ``stopped``.
        """
        if self._stopping is None:
            self._task = asyncio.current_task()
            try:
                result = await self._run_one(call, {})
                result = bound_results({call["id"]: result}, self.env.spill_dir, self.spec.name)[call["id"]]
                status = "error" if result.is_error else "done"
                return FinishedCall(call["id"], status, [_result_block(call["id"], result)], result.is_error)
            except asyncio.CancelledError:
                if self._stopping is None:
                    raise
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()  # the stop is handled here
            finally:
                self._task = None
        await self.env.store.move_tool_call(call["id"], "interrupted")
        block = _result_block(call["id"], ToolResult(f"not run: {self._stopping}", is_error=True))
        return FinishedCall(call["id"], "interrupted", [block], True)

    def _take_mail(self) -> list[Message]:
        mail, self._waiting = self._waiting, []
        while self.env.inbox is not None and (msg := self.env.inbox.poll()) is not None:
            mail.append(msg)
        return mail

    async def _idle(self) -> bool:
        """Wait for mail, spending no tokens, and wake at once; False if there is nothing to wait for.

        A parent idles only while a child is busy. It re-checks after saying it idles: a child
        that went idle just before that could not have told it, and one after will. A wait is timed
        and kept (``agent.waited``): the agent's waits choose its cache's lifetime (``_build``).
        """
        assert self.env.inbox is not None, "an agent that idles needs an inbox"
        if await hooking.idle_blocked(self):  # a TeammateIdle hook keeps a teammate working
            return True
        began = self.env.clock()  # the wait begins as the agent says it idles
        await self.env.store.set_agent_status(self.spec.name, "idle")
        if self.env.on_idle is not None:
            self.env.on_idle(True)
        if self.spec.persistent or (self.env.keep_waiting is not None and self.env.keep_waiting()):
            self._waiting.append(await self.env.inbox.next())
            await self._waits.record(self.env.clock() - began, self._size())
        elif not self._mail_waiting():  # a child's last report may have come in meanwhile
            return False
        if self.env.on_idle is not None:
            self.env.on_idle(False)
        await self.env.store.set_agent_status(self.spec.name, "running")
        return True

    async def _mail_blocks(self, mail: list[Message]) -> list[Block]:
        """Mail as the model reads it, a person's MCP prompt command expanded (``env.person_prompt``)."""
        blocks: list[Block] = []
        for msg in mail:
            expanded = await self.env.person_prompt(msg) if self.env.person_prompt is not None else None
            blocks += [self._mail_block(msg)] if expanded is None else expanded
        return blocks

    def _mail_block(self, msg: Message) -> Block:
        """Mail as the model reads it. A result or control message from a superseded epoch of its
        sender is recorded (ingested) but marked so, and not acted on; peer messages always count."""
        head = f'<mail id="{msg.id}" from="{msg.sender}" kind="{msg.kind}"'
        current = self.env.current_epoch(msg.sender) if self.env.current_epoch else None
        if msg.kind in ("result", "control") and current is not None and msg.epoch < current:
            return {"type": "text", "text": f"{head} superseded=\"true\">(sent by an earlier run of"
                    f" {msg.sender}, which has since restarted; ignore it)</mail>"}  # fmt: skip
        if msg.summary:
            head += f' summary="{msg.summary}"'
        return {"type": "text", "text": f"{head}>\n{msg.body}\n</mail>"}

    def _mail_waiting(self) -> bool:
        self._waiting = self._take_mail()
        return bool(self._waiting)

    async def _append_user(
        self, blocks: list[Block], mail: list[Message], finished: list[FinishedCall]
    ) -> None:
        """The next user turn: tool results (ending their calls), the task, mail, in one commit."""
        ingested = [IngestedMail(m.id, m.sender, m.kind, m.to_dict()) for m in mail]
        await self.env.store.append_turn(
            self.spec.name,
            epoch=self.epoch,
            role="user",
            content=blocks,
            ingested=ingested,
            finished=finished,
        )
        self._unfinished.clear()
        for msg in mail:  # only now is each message's id committed as ingested
            assert self.env.inbox is not None
            self.env.inbox.ack(msg)
        self._add_message({"role": "user", "content": blocks})

    # -- the model --------------------------------------------------------------

    async def _request(self) -> ModelRequest:
        """The next request, the history compacted first when it would pass the policy's bound. Tools an
        MCP server changed come in here, between turns; its thinking is checked against them again."""
        changed = self.env.tools_changed
        if changed is not None and changed(self.spec.tools):
            self._prefix_checked = False  # prefixguard: the thinking bound to the old tools goes
        if not self._prefix_checked:
            await self._check_prefix()
        bound = self._bound()
        if await self._over(bound):
            await self._compact(bound)
        return self._managed(self._build())

    async def _check_prefix(self) -> None:
        """Take out the history's thinking blocks if its system prompt or tools were others (``prefixguard``:
        a resumed or continued agent's are built anew), on a model that binds thinking; keep the digest."""
        self._prefix_checked = True
        spec, store = self.spec, self.env.store
        now = prefixguard.digest(spec.system, [tool_param(t) for t in spec.tools.values()])
        if not prefixguard.has_thinking(self.messages):  # nothing to check (a new agent): no read at all
            self._prefix_digest = now
            return
        before = prefixguard.recorded(store, spec.name)
        if now == before:
            return
        if before is not None and spec.info is not None and spec.info.binds_thinking:
            log.info("%s: its system prompt or tools changed; its thinking blocks are left out", spec.name)
            why = "thinking left out: the system prompt or tools changed"
            await self._replace_history(prefixguard.without_thinking(self.messages), why)
        self._prefix_digest = now

    @property
    def context_policy(self) -> ContextPolicy:
        """How this agent's context is kept: the spec's, else chosen for its model (``compaction``)."""
        if self._policy is None:
            spec = self.spec
            base = max(BASE_TOKENS, self._sizer.fixed + BASE_TOKENS // 2)  # a big prompt moves the base
            self._policy = ContextPolicy.for_model(spec.info, self._max_tokens, spec.compact_at, base=base)
        return self._policy

    def _bound(self) -> int:
        """The size past which the loop compacts: the trigger (the limit once ``MAX_FAILED_COMPACTIONS``
        compactions in a row could not get under it), never past a window the API revealed."""
        policy = self.context_policy
        open_breaker = self._failed_compactions >= context.MAX_FAILED_COMPACTIONS
        bound = policy.limit if open_breaker else policy.trigger
        return bound if self._window_cap is None else min(bound, self._window_cap)

    def _managed(self, request: ModelRequest) -> ModelRequest:
        """``request`` with the policy's betas and ``context_management`` (the API's clearing), if any. On
        ``on_demand`` models there is no ``context_management``: the API refuses it with ``compaction``, and
        a compaction request must send the very prompt the agent's cache holds."""
        policy = self.context_policy
        if not policy.betas:
            return request
        betas = tuple(dict.fromkeys([*request.betas, *policy.betas]))
        return replace(request, context_management=policy.context_management, betas=betas)

    async def _over(self, bound: int) -> bool:
        """Whether the next request would pass ``bound``; near it on an estimate, ``count_tokens`` decides."""
        if self._size() <= bound:
            return False
        if not self._sizer.uncertain:
            return True
        try:
            self._sizer.counted(await self.spec.model.count_tokens(self._build()))
        except ModelError as e:  # no count to be had: the estimate, which errs high, decides
            log.info("%s: count_tokens failed (%s); compacting on the estimate", self.spec.name, e)
            return True
        return self._size() > bound

    async def _compact(self, bound: int, *, forced: bool = False) -> None:
        """Compact, between the ``PreCompact`` and ``PostCompact`` hooks (``hook_events``). A hook's block
        skips a compaction ahead of the limit; one the API forced (``forced``) cannot be skipped, so the
        agent fails with the hook's reason, as Claude Code lets the error surface."""
        blocked = await hook_events.pre_compact(self)
        if blocked is not None:
            if forced:
                raise ContextExhausted(f"a PreCompact hook blocked a compaction the context needs: {blocked}")
            return
        await self._compact_layers(bound)
        await hook_events.post_compact(self)

    async def _compact_layers(self, bound: int) -> None:
        """Bring the history under ``bound``, cheapest layer first (``context``); raises
        ``ContextExhausted`` when ``MAX_FAILED_COMPACTIONS`` summaries in a row leave it over the limit."""
        policy, spec = self.context_policy, self.spec
        limit = policy.limit if self._window_cap is None else min(policy.limit, self._window_cap)
        if policy.strategy == "on_demand":
            compacted = await self._compact_on_demand()
            if compacted and not await self._over(bound):
                self._failed_compactions = 0
                return
            self._failed_compactions += 1  # no summary, or not enough: teamrt's layers (the breaker counts)
            if compacted and not await self._over(limit):
                return
        manual = (spec.thinking or {}).get("type") == "enabled"
        recap = policy.binds_thinking and manual  # a stripped last turn would lack its leading thinking
        own = not recap and policy.strategy != "editing"  # ``editing``: the API's clearing is the cheap layer
        cleared = context.clear_old_tool_results(self.messages) if own else None
        if cleared is not None:
            await self._replace_history(cleared, "cleared old tool results")
            if not await self._over(int(bound * context.CLEARED_ENOUGH)):
                self._failed_compactions = 0
                return
        while self._failed_compactions < context.MAX_FAILED_COMPACTIONS:
            summary = await self._summary()
            await self._replace_history(context.summarised(self.messages, summary, recap=recap), "summarised")
            if not await self._over(bound):
                self._failed_compactions = 0
                return
            self._failed_compactions += 1
            if not await self._over(limit):
                return  # over the trigger, under the limit: the agent goes on
        raise ContextExhausted(
            f"the context stays over {limit:,} tokens after {context.MAX_FAILED_COMPACTIONS} compactions"
        )

    async def _compact_on_demand(self) -> bool:
        """Compaction on demand (compaction-on-demand, compaction-background): the agent's last request sent
        again with the ``compaction`` parameter, so it reads that request's cache, and the returned block
        swapped in for the messages sent; the reply to that request and what answered it stay after the
        block, their thinking valid (compaction-thinking-blocks). False when no summary came back (the
        stop reason is not ``compaction``, or the block's content is null) or the history is too long even
        to compact: the full history is kept and teamrt's own layers run."""
        sent = context.compaction_split(self.messages)
        request = self._managed(self._build())
        ask = replace(request, messages=list(self.messages[:sent]), compaction=self.context_policy.compaction)
        try:
            answer = await self._complete(ask)
        except ModelContextTooLong as e:
            log.info("%s: the compaction request was too long (%s); teamrt compacts", self.spec.name, e)
            return False
        await self.env.store.add_usage(self.spec.name, _stored_usage(answer))
        block = context.summary_of(answer.content) if answer.stop_reason == "compaction" else None
        if block is None:
            log.info("%s: compaction on demand returned no summary (stop_reason %s); teamrt compacts",
                     self.spec.name, answer.stop_reason)  # fmt: skip
            return False
        await self._replace_history(context.swapped(self.messages, sent, block), "server")
        return True

    async def _summary(self) -> str:
        """The model's summary of the work so far, asked in a request that reads its cached prefix; asked
        once more if it called a tool and wrote nothing."""
        policy = self.context_policy
        ask = context.summary_request(self._build(), self._max_tokens, tool_choice=policy.summary_tool_choice)
        answer = await self._complete(ask)
        await self.env.store.add_usage(self.spec.name, _stored_usage(answer))
        if not answer.text.strip() and answer.tool_uses:
            answer = await self._complete(context.summary_again(ask, answer))
            await self.env.store.add_usage(self.spec.name, _stored_usage(answer))
        return answer.text

    def _size(self) -> int:
        """The next request's input tokens: the API's last count plus an estimate of what came since
        (``sizing``), kept up to date as turns are added."""
        return self._sizer.size

    def _add_message(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self._sizer.added(message)

    def _build(self) -> ModelRequest:
        spec = self.spec
        return ModelRequest(
            model=spec.model_name,
            messages=list(self.messages),
            max_tokens=self._max_tokens,
            system=spec.system,
            tools=[tool_param(t) for t in spec.tools.values()],
            thinking=spec.thinking,
            effort=spec.effort,
            cache_ttl=choose_ttl(self._waits.waits, spec.info, spec.cache),
            agent=spec.name,
            role=spec.role,
            team=spec.team,
        )

    async def _call_model(self, request: ModelRequest) -> ModelResponse:
        """One call of the agent's conversation. A "prompt is too long" answer, or a reply the window cut
        (``model_context_window_exceeded``), compacts the history and asks again, at most
        ``MAX_FAILED_COMPACTIONS`` times."""
        for _ in range(context.MAX_FAILED_COMPACTIONS):
            try:
                response = await self._complete(request)
            except ModelContextTooLong as e:
                tokens = e.tokens or self._size()
                if e.limit is not None:  # the API's window is smaller than the catalog said
                    self._window_cap = e.limit - self._max_tokens - e.limit // LIMIT_MARGIN
                reason = str(e)
            else:
                if response.stop_reason != "model_context_window_exceeded":
                    return response
                tokens = response.usage.prompt_tokens
                reason = f"the reply was cut by the context window at {tokens:,} input tokens"
            log.info("%s: %s; compacting", self.spec.name, reason)
            self._sizer.counted(tokens)
            await self._compact(min(self._bound(), tokens * 3 // 4), forced=True)  # at least a quarter off
            request = self._managed(self._build())
        raise ContextExhausted(
            f"the model still found the context too long after {context.MAX_FAILED_COMPACTIONS} compactions"
        )

    async def _complete(self, request: ModelRequest) -> ModelResponse:
        """One call, its worst case reserved against every budget first."""
        tokens = self._size()
        info = self.spec.info
        usd = worst_cost_usd(info, tokens, request.max_tokens) if info else 0.0
        reservation = Reservation(self.env.budgets, tokens + request.max_tokens, usd)
        try:
            response = await self.spec.model.complete(
                request, on_text=self.env.on_text, on_restart=self.env.on_restart
            )
        except BaseException:
            reservation.settle(0, 0.0)
            raise
        finally:
            if self.env.stream is not None:
                self.env.stream.end_turn()
        reservation.settle(
            response.usage.prompt_tokens + response.usage.output_tokens, response.cost_usd or 0.0
        )
        return scrubbed(response)

    async def _append_assistant(self, response: ModelResponse) -> None:
        uses = [ToolUse(b["id"], b["name"], b["input"], self._read_only(b)) for b in response.tool_uses]
        usage = _stored_usage(response)
        prefix = (
            []
            if self._prefix_digest is None
            else [NewEvent(prefixguard.PREFIX, {"digest": self._prefix_digest})]
        )
        await self.env.store.append_turn(
            self.spec.name,
            epoch=self.epoch,
            role="assistant",
            content=response.content,
            stop_reason=response.stop_reason,
            model=response.model,
            usage=usage,
            tool_uses=uses,
            events=prefix,  # the prefix the turn's thinking is bound to, kept with it in one commit
        )
        self._prefix_digest = None
        if content := replayable(response.content):
            self._add_message({"role": "assistant", "content": content})
        self._sizer.answered(response.usage)
        self._unfinished = {use.id for use in uses}
        # paused by the API (a long server-tool turn): sent back as it is to go on
        self._paused = response.stop_reason == "pause_turn"
        self.turns += 1
        if response.applied_edits:
            cleared = cleared_tokens(response.applied_edits)
            data = {"how": "edited", "messages": len(self.messages), "cleared_input_tokens": cleared,
                    "edits": response.applied_edits}  # fmt: skip
            await self.env.store.append_event("agent.compacted", data, agent=self.spec.name)

    async def _replace_history(self, messages: list[Any], how: str) -> None:
        """Keep ``messages`` as the agent's history from now on (a ``compaction`` turn). On a model that
        binds thinking, the thinking blocks whose prefix changed are stripped first: the API refuses them."""
        if self.context_policy.binds_thinking:
            messages = context.rebound(self.messages, messages)
        data = {"how": how, "messages": len(messages), "tokens_before": self._size()}
        event = NewEvent("agent.compacted", data)
        await self.env.store.append_turn(
            self.spec.name, epoch=self.epoch, role="compaction", content=messages, events=[event]
        )
        self.messages = messages
        self._sizer.replaced(messages)

    # -- tools -------------------------------------------------------------------

    async def _run_tools(self, response: ModelResponse) -> list[FinishedCall]:
        """Run the turn's calls: consecutive read-only ones together (at most 10), the rest in order."""
        calls = response.tool_uses
        results: dict[str, ToolResult] = {}
        i = 0
        while i < len(calls):
            batch = [calls[i]]
            while (
                self._read_only(batch[-1])
                and i + len(batch) < len(calls)
                and self._read_only(calls[i + len(batch)])
                and len(batch) < MAX_PARALLEL_READS
            ):
                batch.append(calls[i + len(batch)])
            outcomes = await asyncio.gather(*(self._run_one(c, response.invalid_tool_inputs) for c in batch))
            results.update(zip((c["id"] for c in batch), outcomes, strict=True))
            i += len(batch)
        bounded = bound_results(results, self.env.spill_dir, self.spec.name)
        return [
            FinishedCall(call_id, "error" if r.is_error else "done", [_result_block(call_id, r)], r.is_error)
            for call_id, r in bounded.items()
        ]

    def _read_only(self, call: Block) -> bool:
        tool = self._tool(call["name"])
        return tool is not None and tool.read_only

    def _tool(self, name: str) -> Tool | None:
        """The agent's tool a call names: by the name the model sees, or by an older or other name of it
        (``read``, ``Agent``), so runs recorded before the rename resume."""
        return self.spec.tools.get(name) or self.spec.tools.get(canonical(name) or "")

    async def _run_one(self, call: Block, invalid: Mapping[str, str]) -> ToolResult:
        """Run one call, or say why it may not run. A call with side effects is journaled
        ``running`` first; a read-only one needs no mark, since a resume runs it again anyway."""
        refusal, args = await self._refusal(call, invalid)
        if refusal is not None:
            return ToolResult(refusal, is_error=True)
        store, call_id, tool = self.env.store, call["id"], self._tool(call["name"])
        assert tool is not None  # _refusal said there is one
        if not tool.read_only:
            await store.move_tool_call(call_id, "running")

        async def journal_process(pid: int) -> None:
            await store.record_tool_process(call_id, pid, process_start_time(pid) or 0)

        ctx: ToolContext = replace(
            self.env.tools,
            agent=self.spec.name,
            on_process=journal_process,
            read_denied=lambda path: self.spec.permissions.read_denial(path, self.env.tools.workspace),
        )
        faults.point("tool.before", call_id)
        try:
            result = await tool.run(args, ctx)
        except ToolError as e:
            result = ToolResult(str(e), is_error=True)
        await hooking.post_tool(self, call, tool.name, args, result)
        await scopedrules.touched(self, tool.name, args, result)
        faults.point("tool.after", call_id)
        return result

    async def _refusal(self, call: Block, invalid: Mapping[str, str]) -> tuple[str | None, dict[str, Any]]:
        """Why the call may not run (invalid input, no such tool, a PreToolUse hook, a permission), or
        None; and the input it runs with (a hook may change it)."""
        if call["id"] in invalid:
            return invalid[call["id"]], call["input"]
        tool = self._tool(call["name"])
        if tool is None:
            known = ", ".join(sorted(self.spec.tools))
            return f"there is no tool named {call['name']!r}; the tools are: {known}", call["input"]
        name = tool.name  # rules, hooks and asks see the name the model sees now, whatever the call says
        pre = await hooking.pre_tool(self, call, name, legacy_input(call["name"], call["input"]))
        if pre.refusal is not None:
            return pre.refusal, pre.input
        decision = hooking.decide(self, name, tool, pre)
        if decision.verdict == Verdict.DENY:
            return f"permission denied: {decision.reason}", pre.input
        if decision.verdict == Verdict.ASK:  # PermissionRequest hooks may answer it for the person
            hooked = await hook_events.permission_request(self, name, tool, pre.input)
            if hooked.refusal is not None:
                return hooked.refusal, hooked.input
            if not hooked.allowed:
                ask = Ask(self.spec.name, name, hooked.input, decision.reason, call["id"])
                answer = await self.env.asker(ask)
                if not answer.allowed:
                    return f"permission denied: {answer.reason}", hooked.input
            return None, hooked.input
        return None, pre.input

    # -- the end -------------------------------------------------------------------

    async def _end(self, status: AgentEnd, answer: str, reason: str | None = None) -> Outcome:
        store = self.env.store
        await store.set_agent_status(self.spec.name, status, reason)
        await store.append_event(
            AGENT_ENDED[status], {"turns": self.turns, "reason": reason}, agent=self.spec.name
        )
        return Outcome(status, answer, self.turns, reason)


def _stored_usage(response: ModelResponse) -> Usage:
    """A call's usage as the store keeps it: the tokens of the server-side compactions it ran (``usage.
    iterations``, billed on top) added in, and its whole cost."""
    u = response.usage
    steps = (u, *u.compaction)
    return Usage(
        sum(s.input_tokens for s in steps),
        sum(s.output_tokens for s in steps),
        sum(s.cache_creation_input_tokens for s in steps),
        sum(s.cache_read_input_tokens for s in steps),
        response.cost_usd or 0.0,
    )


def _result_block(call_id: str, result: ToolResult) -> Block:
    """The ``tool_result`` block of a call: its content as text or as blocks (an MCP tool's images)."""
    block: Block = {"type": "tool_result", "tool_use_id": call_id, "content": result.content}
    if result.is_error:
        block["is_error"] = True
    return block
