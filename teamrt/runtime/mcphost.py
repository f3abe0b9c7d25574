"""What the run does for an MCP server's sampling and elicitation requests (``teamrt.mcp.capabilities``).

A request comes during an agent's call of the server's tool and is that agent's:

- **Sampling** is judged like a tool call named ``McpSampling`` with input
  ``{"server": ...}``: a deny rule refuses it, an allow rule (``McpSampling(github)``,
  or ``McpSampling`` for every server) lets it run, and otherwise the mode decides
  as for a call that reaches off the machine (asked in default, acceptEdits and
  plan modes; allowed in bypassPermissions; denied in dontAsk). An ask goes to
  the person by the run's ask channel (``teamrt answer``, the TUI, the terminal);
  "allow always" adds ``McpSampling(<server>)``. The request then runs on the
  agent's model, or another model of the team a hint of the server names
  (``teamrt.mcp.sampling.choose_model``), with no tools, its worst case reserved
  against the agent's and the run's budgets first, as every model call of the
  agent is; what it used is added to the agent's usage.
- **Elicitation** is an ask named ``McpElicitation`` whose input is the form;
  allow answers it (the values in the answer's note), deny declines. When no
  person answers (an unattended run past its ``ask_wait``, or its policy), it is
  declined, whatever ``--on-ask`` says: a policy cannot fill in a form.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from teamrt.mcp.capabilities import ELICITATION_ASK, SAMPLING_ASK, Elicited, Sampled
from teamrt.mcp.elicitation import Field, Form
from teamrt.mcp.sampling import SampleRequest, SamplingRefused, choose_model
from teamrt.models import Model, lookup
from teamrt.models.params import request_params
from teamrt.models.pricing import worst_cost_usd
from teamrt.models.tokens import request_tokens
from teamrt.models.types import ModelRequest
from teamrt.runtime.asking import BY_POLICY, Ask
from teamrt.runtime.budget import BudgetExhausted, Reservation
from teamrt.store import Usage
from teamrt.tools.permissions import Verdict

if TYPE_CHECKING:
    from teamrt.models.catalog import ModelInfo
    from teamrt.runtime.member import Member


class RunMcpHost:
    """The run's ``McpHost``. ``members``: the run's agents, by name (filled as they are made);
    ``model``: the run's client of a model, by name; ``allowed``: the models the team file names."""

    def __init__(
        self,
        members: dict[str, Member],
        model: Callable[[str], Model],
        allowed: Sequence[str],
        prices: dict[str, ModelInfo] | None = None,
    ) -> None:
        self.members = members
        self._model = model
        self.allowed = list(dict.fromkeys(allowed))
        self._prices = prices

    def _member(self, agent: str) -> Member:
        member = self.members.get(agent)
        if member is None or member.done.done():
            raise SamplingRefused("the agent whose call this is has ended")
        return member

    async def sample(self, agent: str, server: str, request: SampleRequest) -> Sampled:
        member = self._member(agent)
        loop = member.loop
        spec, env = loop.spec, loop.env
        input = {"server": server, **request.preview()}
        decision = spec.permissions.decide(SAMPLING_ASK, {"server": server}, read_only=True,
                                           workspace=env.tools.workspace)  # fmt: skip
        if decision.verdict is Verdict.DENY:
            raise SamplingRefused(f"permission denied: {decision.reason}")
        if decision.verdict is Verdict.ASK:
            reason = f"MCP server {server!r} asks to sample the model ({decision.reason})"
            answer = await env.asker(Ask(agent, SAMPLING_ASK, input, reason))
            if not answer.allowed:
                raise SamplingRefused(f"permission denied: {answer.reason}")
        name = choose_model(request.hints, spec.model_name, self.allowed)
        model = spec.model if name == spec.model_name else self._model(name)
        info = spec.info if name == spec.model_name else lookup(name, self._prices)
        max_tokens = (
            min(request.max_tokens, info.max_output_tokens) if info is not None else request.max_tokens
        )
        temperature = request.temperature if info is None or info.sampling else None  # as the catalog says
        call = ModelRequest(
            model=name, messages=request.messages, max_tokens=max_tokens, system=request.system,
            temperature=temperature, stop_sequences=request.stop_sequences,
            agent=agent, role=spec.role, team=spec.team,
        )  # fmt: skip
        tokens = request_tokens(request_params(call, info))
        usd = worst_cost_usd(info, tokens, max_tokens) if info is not None else 0.0
        try:
            reservation = Reservation(env.budgets, tokens + max_tokens, usd)
        except BudgetExhausted as e:
            raise SamplingRefused(f"budget: {e.reason}") from None
        try:
            response = await model.complete(call)
        except BaseException:
            reservation.settle(0, 0.0)
            raise
        u = response.usage
        reservation.settle(u.prompt_tokens + u.output_tokens, response.cost_usd or 0.0)
        await env.store.add_usage(agent, Usage(
            u.input_tokens, u.output_tokens, u.cache_creation_input_tokens, u.cache_read_input_tokens,
            response.cost_usd or 0.0,
        ))  # fmt: skip
        return Sampled(response.text, response.model or name, response.stop_reason)

    async def elicit(self, agent: str, server: str, form: Form, problem: str) -> Elicited:
        member = self.members.get(agent)
        if member is None or member.done.done():
            return Elicited("cancel")
        shown = "; ".join(_field(f) for f in form.fields)
        what = f"you to open {form.url}" if form.url is not None else f"for {shown}"
        reason = f"MCP server {server!r} asks {what}: {form.message}"
        if problem:
            reason += f" (your last answer did not fit: {problem})"
        answer = await member.loop.env.asker(
            Ask(agent, ELICITATION_ASK, {"server": server, **form.shown()}, reason)
        )
        if answer.by == BY_POLICY or not answer.by:
            return Elicited("decline")  # no person answered: a policy cannot fill in a form
        if not answer.allowed:
            return Elicited("decline")
        return Elicited("accept", answer.note)


def _field(field: Field) -> str:
    """A form's field in a few words: ``colour (red|green, optional)``."""
    kind = "|".join(field.labels or field.choices) if field.choices else field.format or field.kind
    if len(kind) > 80:
        kind = kind[:79] + "…"
    return f"{field.name} ({kind}{'' if field.required else ', optional'})"
