"""``SimServer``: the Messages API on loopback, for the unmodified anthropic SDK.

    with SimServer(policies={"reviewer": review}) as sim:
        model = open_model("sim", sim=sim)

``POST /v1/messages`` (plain and streamed) and ``POST
/v1/messages/count_tokens``; errors in the API's JSON shape with a
``request-id`` header. The agent, role and team come from the ``teamrt-agent``,
``teamrt-role`` and ``teamrt-team`` headers that the ``sim`` provider sends;
the policy is the one named ``<team>/<role>``, else ``<role>``, else the
default. Each handled request is logged in ``calls``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from teamrt.models.tokens import request_tokens
from teamrt.sim.binding import Bound, PrefixChain, bind
from teamrt.sim.cache import CacheLedger, CacheOutcome, render
from teamrt.sim.checks_params import parse_betas
from teamrt.sim.checks_thinking import drops_blocks, thinks
from teamrt.sim.context_management import counted, manage
from teamrt.sim.corpus import Corpus, corpus_from_env
from teamrt.sim.faults import STATUS_FAULTS, Fault, FaultPlan
from teamrt.sim.http import HttpRequest, HttpResponse, LoopbackServer
from teamrt.sim.policy import Policy, SimRequest, default_thought, echo
from teamrt.sim.ratelimits import RateLimiter, SimRateLimits
from teamrt.sim.respond import Shape, build_message, sse, stream_events
from teamrt.sim.servertools import play
from teamrt.sim.validate import SimInvalidRequest, model_id, model_info, validate


@dataclass(frozen=True)
class SimCall:
    """One request the simulator answered (or failed on purpose)."""

    agent: str
    role: str
    model: str
    stream: bool
    status: int
    fault: str | None
    cache_read: int = 0
    cache_creation: int = 0
    at: float = 0.0
    """``time.monotonic()`` when the request was handled."""


class SimServer:
    """A simulated Messages API. ``clock`` (seconds) drives cache lifetimes; tests pass their own."""

    def __init__(
        self,
        policies: Mapping[str, Policy] | None = None,
        *,
        default: Policy = echo,
        clock: Callable[[], float] = time.monotonic,
        record: bool = False,
        corpus: Corpus | None = None,
        rate_limits: SimRateLimits | None = None,
    ) -> None:
        """``corpus``: the pages web searches find (default: ``corpus_from_env`` at each search, the built-in
        pages unless ``TEAMRT_SIM_SEARCH_DIR`` names a directory; the shared server outlives a demo)."""
        self.policies: dict[str, Policy] = dict(policies or {})
        self._corpus = corpus
        self.default = default
        self.clock = clock
        self.faults = FaultPlan()
        self.limiter = RateLimiter(rate_limits or SimRateLimits(), clock)
        """The account's rate limits (``teamrt.sim.ratelimits``): headers on every response it sees, 429s."""
        self.ledger = CacheLedger()
        self.calls: list[SimCall] = []
        self.policy_errors: list[str] = []
        self.record = record
        self.bodies: list[tuple[str, bytes]] = []
        """With ``record``: (agent, request body) of every ``/v1/messages`` request, as received."""
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._holding = False
        self._waiting: list[asyncio.Future[None]] = []
        self._http = LoopbackServer(self._handle, name="teamrt-sim")

    @property
    def url(self) -> str:
        return self._http.url

    def close(self) -> None:
        self._http.close()

    def hold_responses(self) -> None:
        """Account the requests that arrive but begin no response (so none's cache writes become
        visible) until ``release_responses``: a burst arriving at one moment, made deterministic."""
        self._holding = True

    def release_responses(self) -> None:
        self._holding = False
        self._http.call_soon(self._wake_held)

    def _wake_held(self) -> None:
        for waiter in self._waiting:
            if not waiter.done():
                waiter.set_result(None)
        self._waiting.clear()

    async def _held(self) -> None:
        if self._holding:  # checked and queued on the server's thread, where _wake_held runs
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            await waiter

    def __enter__(self) -> SimServer:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def _handle(self, request: HttpRequest, response: HttpResponse) -> None:
        request_id = f"req_sim_{next(self._ids):06d}"
        headers = {"request-id": request_id}
        if request.method != "POST":
            await _error(response, 405, "invalid_request_error", f"{request.method} is not allowed", headers)
            return
        if not (request.headers.get("x-api-key") or request.headers.get("authorization")):
            await _error(response, 401, "authentication_error", "x-api-key header is required", headers)
            return
        try:
            params = json.loads(request.body)
            betas = parse_betas(request.headers.get("anthropic-beta"))
            validate(params, count_only=request.path == "/v1/messages/count_tokens", betas=betas)
            info = model_info(params["model"])
            bound = bind(params, model_id(params["model"]), info, drop=drops_blocks(params))
        except SimInvalidRequest as e:
            await _error(response, e.status, e.error_type, str(e), headers)
            return
        except ValueError as e:  # bad JSON, a forged or unbound thinking block
            await _error(response, 400, "invalid_request_error", str(e), headers)
            return
        if request.path == "/v1/messages/count_tokens":
            await response.json(200, counted(bound.params, params["model"], info, betas), headers)
        elif request.path == "/v1/messages":
            await self._messages(request, params, bound, response, headers)
        else:
            await _error(response, 404, "not_found_error", f"no route for {request.path}", headers)

    async def _messages(
        self,
        request: HttpRequest,
        params: dict[str, Any],
        bound: Bound,
        response: HttpResponse,
        headers: dict[str, str],
    ) -> None:
        """Answer a checked request. ``params`` is the request as sent (what the response's thinking is
        bound to); ``bound.params`` what the model reads (dropped thinking removed), which the cache
        ledger, the policy and the token counts see."""
        agent = request.headers.get("teamrt-agent", "")
        role = request.headers.get("teamrt-role", "")
        team = request.headers.get("teamrt-team", "")
        if self.record:
            self.bodies.append((agent, request.body))
        streamed = bool(params.get("stream"))
        fault = self.faults.take(agent)

        def log(status: int, outcome: CacheOutcome | None = None) -> None:
            read, created = (outcome.cache_read, outcome.cache_creation) if outcome else (0, 0)
            call = SimCall(
                agent, role, params["model"], streamed, status, fault.kind if fault else None, read, created,
                time.monotonic(),
            )  # fmt: skip
            with self._lock:
                self.calls.append(call)

        if fault is not None and fault.kind in STATUS_FAULTS:
            status, kind = STATUS_FAULTS[fault.kind]
            retry_after = (
                1.0 if fault.retry_after is None and fault.kind == "rate_limit" else fault.retry_after
            )
            extra = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
            log(status)
            await _error(response, status, kind, f"simulated {fault.kind}", {**headers, **extra})
            return
        info = model_info(params["model"])
        betas = parse_betas(request.headers.get("anthropic-beta"))
        managed = manage(bound.params, params["model"], info, betas)  # context edits, compaction
        read = managed.params  # what the model reads
        positions = render(read)
        outcome = self.ledger.account(positions, info.min_cache_tokens, self.clock())
        grant = self.limiter.admit(
            params["model"], outcome.input_tokens + outcome.cache_creation, params["max_tokens"]
        )
        headers.update(grant.headers)
        if grant.refusal is not None:  # over a rate limit: the API's 429, before the model runs
            log(429)
            await _error(response, 429, "rate_limit_error", grant.refusal, headers)
            return
        request_key = positions[-1].key if positions else hashlib.sha256(request.body).digest()
        asked = SimRequest(read, agent, role, team)
        shape = Shape(
            model_id(params["model"]),
            PrefixChain.through(params),
            thought=default_thought(asked) if thinks(read, info) else None,
            display=_display(read),
            room=info.context_window - request_tokens(read),
            input_transformations=bound.input_transformations,
            lead=[managed.compaction] if managed.compaction is not None else [],
            stop=managed.stop,
            applied_edits=managed.applied_edits if params.get("context_management") is not None else None,
        )
        try:
            policy = self.policies.get(f"{team}/{role}") or self.policies.get(role, self.default)
            corpus = self._corpus or corpus_from_env()
            reply, searches = play(policy, asked, corpus, request_key)
        except Exception as e:
            detail = "".join(traceback.format_exception_only(e)).strip()
            self.policy_errors.append(f"{role or 'default'} policy for {agent or '?'}: {detail}")
            print(f"teamrt sim: policy raised:\n{traceback.format_exc()}", file=sys.stderr)
            log(500)
            await _error(
                response, 500, "api_error", f"sim policy for role {role!r} raised {detail}",
                {**headers, "x-should-retry": "false"},
            )  # fmt: skip
            return
        message = build_message(
            params["model"], request_key, reply, outcome, params["max_tokens"], shape=shape,
            web_searches=searches, stop_sequences=params.get("stop_sequences"),
        )  # fmt: skip
        self.limiter.settle(grant, message["usage"]["output_tokens"])
        log(200, outcome)
        await self._held()
        if not streamed:
            if fault is not None and fault.kind in ("cut", "stall"):
                await _misbehave(response, fault)
                return
            if fault is not None and fault.kind == "slow":
                await asyncio.sleep(fault.delay)
            self.ledger.begin(outcome, self.clock())
            await response.json(200, message, headers)
            return
        events = stream_events(message, bad_tool_input=fault is not None and fault.kind == "bad_tool_input")
        self.ledger.begin(outcome, self.clock())
        await response.start_stream(
            {**headers, "content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await _send_events(response, events, fault)


def _display(params: dict[str, Any]) -> str:
    """How thinking is shown: the request's ``thinking.display``, else summarized."""
    thinking = params.get("thinking")
    display = thinking.get("display") if isinstance(thinking, dict) else None
    return str(display or "summarized")


async def _send_events(response: HttpResponse, events: list[dict[str, Any]], fault: Fault | None) -> None:
    kind = fault.kind if fault is not None else None
    if kind in ("cut", "stall", "stream_error"):
        assert fault is not None
        head = events[: min(fault.after_events, len(events) - 1)]
        await response.chunk(b"".join(sse(e) for e in head))
        if kind == "stream_error":
            error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            await response.chunk(sse(error))
            await response.end_stream()
        else:
            await _misbehave(response, fault)
    elif kind == "slow":
        assert fault is not None
        for event in events:
            await response.chunk(sse(event))
            await asyncio.sleep(fault.delay)
        await response.end_stream()
    else:
        await response.chunk(b"".join(sse(e) for e in events), flush=False)
        await response.end_stream()


async def _misbehave(response: HttpResponse, fault: Fault) -> None:
    if fault.kind == "stall":
        await asyncio.sleep(fault.seconds)
    response.abort()


async def _error(
    response: HttpResponse, status: int, kind: str, message: str, headers: dict[str, str]
) -> None:
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": headers["request-id"]}
    await response.json(status, body, headers)
