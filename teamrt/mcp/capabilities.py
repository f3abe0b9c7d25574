"""What teamrt answers when an MCP server asks something of it: the client side of one server's session.

teamrt declares the client capabilities Claude Code users' servers rely on, and
answers them through the official SDK's ``ClientSession`` callbacks:

- **roots**: the server's workspace (the project it runs in) as one ``file://``
  root, nothing outside it. It does not change during a run, so no
  ``roots/list_changed`` is ever sent (the SDK declares ``listChanged`` for every
  client that answers roots).
- **sampling** and **elicitation**: a server may ask only while one of its tools
  is being called by an agent (``agent``, the caller of the oldest call in flight):
  the request is that agent's, checked (``teamrt.mcp.sampling``,
  ``teamrt.mcp.elicitation``) and handed to the run (``McpHost``), which asks
  the person, runs the model and charges the budgets. Outside a call, or outside
  a run (``teamrt mcp --tools``), they are refused.
- **logging** (``notifications/message``) and **progress**: journaled (``mcp.log``,
  ``mcp.progress``) at a bounded rate (``Rate``), their text cleaned and cut; what
  the rate drops is counted in the next event that is kept.
- **tools/list_changed**: handed to ``on_tools_changed`` (the server's tools are
  listed again, at a bounded rate, by ``McpServers``).

Every text a server sends is its own and may be hostile: none of it reaches a
terminal or the journal uncleaned, and none of its requests waits forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from teamrt.events import EventKind
from teamrt.mcp.elicitation import ASK_ROUNDS, Form, SchemaRefused, form, message_of, values
from teamrt.mcp.sampling import SampleRequest, SamplingRefused, read_request, reply_text, shown, stop_reason
from teamrt.terminal import clean_line

if TYPE_CHECKING:
    import mcp_types

SAMPLED: Final = "mcp.sampled"
"""``{"server", "model", "tokens", "usd", "max_tokens", "asked_tokens"}`` or ``{"server", "refused"}``: a
server's sampling request answered by the agent's model, or refused."""
ELICITED: Final = "mcp.elicited"
"""``{"server", "action", "fields"}`` (names only; never the values), or ``{"server", "refused"}``."""
PROGRESS: Final = "mcp.progress"
"""``{"server", "tool", "progress", "total", "message", "dropped"}``: a call's progress, rate-limited."""
LOG: Final = "mcp.log"
"""``{"server", "level", "logger", "text", "dropped"}``: a server's log message, rate-limited."""
TOOLS: Final = "mcp.tools"
"""``{"server", "tools", "added", "removed"}`` or ``{"server", "note"}``: a server's tools listed again
after ``tools/list_changed``; agents take the new list at their next turn."""

SAMPLING_ASK: Final = "McpSampling"
"""The tool name of a sampling request's ask, and of its rules (``McpSampling(server)``)."""
ELICITATION_ASK: Final = "McpElicitation"
"""The tool name of an elicitation's ask: allowed with the values in its note, or denied (decline)."""
MAX_OPEN: Final = 4
"""A server's sampling and elicitation requests waiting at once, at most: more are refused at once (a server
must not fill a person's screen with asks)."""
LOG_CHARS: Final = 1000
PROGRESS_CHARS: Final = 200
LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True)
class Sampled:
    """A sampling request answered: the model's text, the model, why it stopped."""

    text: str
    model: str
    stop_reason: str | None


@dataclass(frozen=True)
class Elicited:
    """A person's answer to an elicitation: ``accept`` (the values in ``note``), ``decline`` or ``cancel``."""

    action: str
    note: str | None = None


class McpHost(Protocol):
    """What the run does for a server's requests (``teamrt.runtime.mcphost``)."""

    async def sample(self, agent: str, server: str, request: SampleRequest) -> Sampled:
        """Ask about the request as about a tool call, run it on the agent's model (or a hinted model of
        the team) with no tools, charge the agent's and the run's budgets; raises ``SamplingRefused``."""
        ...

    async def elicit(self, agent: str, server: str, form: Form, problem: str) -> Elicited:
        """Put ``form`` to a person as an ask of ``agent``'s; ``problem``: why the last answer did not fit."""
        ...


Journal = Callable[[EventKind, dict[str, Any], "str | None"], Any]
"""Records an event (kind, data, agent), awaitable."""


class Rate:
    """A token bucket: ``burst`` events at once, then ``per_s`` a second; counts what it drops."""

    def __init__(self, burst: int, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.per_s, self._clock = burst, per_s, clock
        self._tokens = float(burst)
        self._at = clock()
        self.dropped = 0

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.per_s)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        self.dropped += 1
        return False

    def taken_dropped(self) -> int:
        """What was dropped since the last kept event (and reset)."""
        dropped, self.dropped = self.dropped, 0
        return dropped


class ClientSide:
    """The answers teamrt gives one server's requests and notifications (its ``Client``'s callbacks)."""

    def __init__(
        self,
        server: str,
        workspace: Path,
        *,
        host: McpHost | None,
        journal: Journal,
        caller: Callable[[], str | None],
        on_tools_changed: Callable[[], None],
    ) -> None:
        """``caller``: the agent of the oldest call in flight on the server (None: none)."""
        self.server = server
        self.workspace = workspace
        self.host = host
        self._journal = journal
        self._caller = caller
        self._on_tools_changed = on_tools_changed
        self.logs = Rate(burst=20, per_s=1.0)
        self._asking = 0
        self._asked_since = 0.0
        self._asked_s = 0.0

    def callbacks(self) -> dict[str, Any]:
        """The keyword arguments of the SDK's ``Client`` that declare and answer teamrt's capabilities."""
        return {
            "list_roots_callback": self.roots,
            "sampling_callback": self.sample,
            "elicitation_callback": self.elicit,
            "logging_callback": self.log,
            "message_handler": self.notified,
        }

    def asked_s(self) -> float:
        """Seconds spent so far waiting on a person for this server's requests (the open ones too): a call's
        timeout does not run while its server waits on a person."""
        open_s = time.monotonic() - self._asked_since if self._asking else 0.0
        return self._asked_s + open_s

    def _ask_begins(self) -> None:
        if not self._asking:
            self._asked_since = time.monotonic()
        self._asking += 1

    def _ask_ends(self) -> None:
        self._asking -= 1
        if not self._asking:
            self._asked_s += time.monotonic() - self._asked_since

    # -- roots ----------------------------------------------------------------------------------------

    async def roots(self, context: Any) -> mcp_types.ListRootsResult:
        from mcp_types import ListRootsResult, Root

        root = Root(uri=self.workspace.resolve().as_uri(), name=self.workspace.name or "workspace")  # type: ignore[arg-type]
        return ListRootsResult(roots=[root])

    # -- sampling -------------------------------------------------------------------------------------

    async def sample(self, context: Any, params: Any) -> Any:
        from mcp_types import INVALID_REQUEST, CreateMessageResult, ErrorData, TextContent

        agent = self._caller()
        try:
            if self.host is None:
                raise SamplingRefused("teamrt answers sampling requests only in a run")
            if agent is None:
                raise SamplingRefused(
                    "teamrt answers sampling requests only during a call of the server's tools"
                )
            if self._asking >= MAX_OPEN:
                raise SamplingRefused(f"the server has {MAX_OPEN} requests waiting already")
            request = read_request(params)
            self._ask_begins()
            try:
                sampled = await self.host.sample(agent, self.server, request)
            finally:
                self._ask_ends()
        except SamplingRefused as e:
            why = clean_line(str(e))[:300]
            await self._journal(SAMPLED, {"server": self.server, "refused": why}, agent)
            return ErrorData(code=INVALID_REQUEST, message=f"teamrt refused the sampling request: {why}")
        said: dict[str, Any] = {"server": self.server, "request": shown(request), "model": sampled.model,
                "max_tokens": request.max_tokens, "asked_tokens": request.asked_tokens}  # fmt: skip
        await self._journal(SAMPLED, said, agent)
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=reply_text([{"type": "text", "text": sampled.text}])),
            model=sampled.model,
            stop_reason=stop_reason(sampled.stop_reason),
        )

    # -- elicitation ----------------------------------------------------------------------------------

    async def elicit(self, context: Any, params: Any) -> Any:
        from mcp_types import INVALID_PARAMS, INVALID_REQUEST, ElicitResult, ErrorData

        agent = self._caller()
        refusal, code = None, INVALID_REQUEST
        if self.host is None:
            refusal = "teamrt puts a server's questions to a person only in a run"
        elif agent is None:
            refusal = "teamrt puts a server's questions to a person only during a call of its tools"
        elif self._asking >= MAX_OPEN:
            refusal = f"the server has {MAX_OPEN} requests waiting already"
        asked: Form | None = None
        if refusal is None:
            try:
                asked = _form_of(params)
            except SchemaRefused as e:
                refusal, code = str(e), INVALID_PARAMS
        if refusal is not None or asked is None or self.host is None or agent is None:
            why = clean_line(refusal or "")[:300]
            await self._journal(ELICITED, {"server": self.server, "refused": why}, agent)
            return ErrorData(code=code, message=f"teamrt refused the elicitation: {why}")
        names = [f.name for f in asked.fields]
        problem = ""
        self._ask_begins()
        try:
            for _ in range(ASK_ROUNDS):
                answer = await self.host.elicit(agent, self.server, asked, problem)
                if answer.action != "accept" or asked.url is not None:
                    action = answer.action if answer.action in ("accept", "decline", "cancel") else "cancel"
                    await self._journal(
                        ELICITED, {"server": self.server, "action": action, "fields": names}, agent
                    )
                    return ElicitResult(action=action)  # type: ignore[arg-type]
                found = values(answer.note, asked.fields)
                if isinstance(found, dict):
                    await self._journal(
                        ELICITED, {"server": self.server, "action": "accept", "fields": names}, agent
                    )
                    return ElicitResult(action="accept", content=found)
                problem = found
        finally:
            self._ask_ends()
        note = f"no answer fitted the form in {ASK_ROUNDS} asks: {problem}"
        said: dict[str, Any] = {"server": self.server, "action": "cancel", "fields": names, "note": note}
        await self._journal(ELICITED, said,
                            agent)  # fmt: skip
        return ElicitResult(action="cancel")

    # -- notifications --------------------------------------------------------------------------------

    async def log(self, params: Any) -> None:
        if not self.logs.take():
            return
        data = params.data
        text = data if isinstance(data, str) else _json(data)
        level = params.level if params.level in LOG_LEVELS else "info"
        said: dict[str, Any] = {"server": self.server, "level": level, "text": _cut(text, LOG_CHARS)}
        if isinstance(params.logger, str) and params.logger:
            said["logger"] = _cut(params.logger, 80)
        dropped = self.logs.taken_dropped()
        if dropped:
            said["dropped"] = dropped
        await self._journal(LOG, said, None)

    async def notified(self, message: Any) -> None:
        from mcp_types import ToolListChangedNotification

        if isinstance(message, ToolListChangedNotification):
            self._on_tools_changed()


def _form_of(params: Any) -> Form:
    if getattr(params, "mode", "form") == "url":
        url = clean_line(str(getattr(params, "url", "")))
        if not url.startswith(("https://", "http://")) or len(url) > 2000:
            raise SchemaRefused("its URL is not an http(s) address of at most 2000 characters")
        return Form(message_of(params.message), (), url=url)
    return form(params.message, params.requested_schema)


class Progress:
    """One call's progress notifications, journaled at most once each ``every_s`` seconds and ``most``
    times in all (the calls' progress shows in ``teamrt logs`` and the TUI's agent view)."""

    def __init__(
        self,
        server: str,
        tool: str,
        agent: str | None,
        journal: Journal,
        *,
        every_s: float = 1.0,
        most: int = 200,
    ) -> None:
        self.server, self.tool, self.agent = server, tool, agent
        self._journal = journal
        self.rate = Rate(burst=1, per_s=1 / every_s)
        self.left = most
        self.seen = 0

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen += 1
        if self.left <= 0 or not self.rate.take():
            return
        self.left -= 1
        said: dict[str, Any] = {"server": self.server, "tool": self.tool, "progress": _finite(progress)}
        if total is not None:
            said["total"] = _finite(total)
        if message:
            said["message"] = _cut(message, PROGRESS_CHARS)
        dropped = self.rate.taken_dropped()
        if dropped:
            said["dropped"] = dropped
        await self._journal(PROGRESS, said, self.agent)


def _finite(number: float) -> float | None:
    return number if number == number and abs(number) < 1e300 else None


def _cut(text: str, limit: int) -> str:
    line = clean_line(text).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _json(data: Any) -> str:
    import json

    try:
        return json.dumps(data, ensure_ascii=False, default=str)[: LOG_CHARS * 2]
    except (TypeError, ValueError, RecursionError):
        return "(a log message that is not JSON)"
