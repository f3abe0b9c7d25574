"""``teamrt run --prompt``: one agent, in a run of its own, to the end."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import home
from ..agents import AgentDefinition, load_definitions
from ..mailbox import Inbox, Mailbox
from ..models import lookup, open_model, with_overrides
from ..settings import load_settings
from ..store import Store, create_store
from ..tools.base import ToolContext
from ..tools.permissions import Permissions
from ..tools.registry import builtin_tools
from .agent import AgentEnv, AgentSpec, Outcome
from .asking import policy_asker
from .budget import Budget
from .loop import AgentLoop


class UnknownAgent(ValueError):
    pass


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    outcome: Outcome
    input_tokens: int
    cache_read_tokens: int
    output_tokens: int
    cost_usd: float
    agents: int


def summarise(run_id: str, outcome: Outcome, store: Store) -> RunSummary:
    """The figures ``teamrt run`` prints, read back from the store."""
    usage = store.reader.run().usage
    return RunSummary(
        run_id,
        outcome,
        usage.input_tokens + usage.cache_creation_tokens,
        usage.cache_read_tokens,
        usage.output_tokens,
        usage.cost_usd,
        len(store.reader.agents()),
    )


def pick_definition(project: Path, name: str) -> AgentDefinition:
    definitions = load_definitions(project)
    if name not in definitions:
        raise UnknownAgent(f"no agent named {name!r}; known: {', '.join(sorted(definitions))}")
    return definitions[name]


async def run_single(
    prompt: str,
    *,
    agent: str,
    model: str,
    project: Path,
    on_ask: str = "deny",
    max_turns: int | None = None,
    budget_tokens: int | None = None,
    budget_usd: float | None = None,
    echo: bool = True,
) -> RunSummary:
    definition = pick_definition(project, agent)
    settings = load_settings()
    model_name = model  # --model decides: an agent file's model never turns offline sim into Claude
    tools = builtin_tools()
    if definition.tools is not None:
        tools = {n: t for n, t in tools.items() if n in definition.tools}
    tools = {n: t for n, t in tools.items() if n not in definition.disallowed_tools}
    chat = open_model(model_name, settings=settings)  # a missing key fails before a run exists
    run_id = home.new_run_id()
    run_dir = home.run_dir(run_id)
    store = create_store(
        run_dir, run_id, task=prompt, workdir=str(project), budget_tokens=budget_tokens, budget_usd=budget_usd
    )
    mailbox = Mailbox(run_dir / "mailbox", run_id, spill_dir=run_dir / "spill")
    mailbox.register(definition.name)
    inbox = Inbox(mailbox, definition.name)
    try:
        await store.add_agent(
            definition.name,
            kind="lead",
            model=model_name,
            role=definition.name,
            definition=dataclasses.asdict(definition),
            workspace=str(project),
            budget_tokens=budget_tokens,
            budget_usd=budget_usd,
        )
        epoch = await store.begin_epoch(definition.name)
        spec = AgentSpec(
            name=definition.name,
            model=chat,
            model_name=model_name,
            system=definition.prompt,
            tools=tools,
            permissions=Permissions(definition.permission_mode or "default"),
            info=lookup(model_name, with_overrides(settings.prices)),
            role=definition.name,
            max_turns=max_turns or definition.max_turns,
        )
        env = AgentEnv(
            store=store,
            tools=ToolContext(workspace=project, run_dir=run_dir, extra_roots=(run_dir / "spill",)),
            spill_dir=run_dir / "spill",
            asker=policy_asker(on_ask),
            budgets=[Budget("run", budget_tokens, budget_usd)],
            inbox=inbox,
            on_text=_echo if echo else None,
        )
        outcome = await AgentLoop(spec, env, epoch=epoch).run(prompt)
        await store.set_run_status(outcome.status, outcome.reason)
        return summarise(run_id, outcome, store)
    finally:
        await chat.aclose()
        inbox.close()
        mailbox.close()
        store.close()


def _echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
