"""Fan-out benchmark: five children that need their parent's 20,000-token context, on ``sim``.

- forks: one ``spawn_agent`` with five directives. Each child gets the parent's prefix
  byte for byte, so all five read it from the prompt cache.
- fresh: five teammates, each of its own role (its own system prompt), handed the same
  context in their first message. This is how rival teammates receive a parent's context.

Both go through the real supervisor, the real SDK and the simulator's cache rules.
The run reports the cache-read share of the children's input tokens and the forks' input
cost over the fresh agents'. The fresh agents pay cache-write premiums that no one reads,
so it also reports each side's cost over plain, uncached input: the same children's input
tokens at the base input rate, with no cache writes or reads (``ratio_vs_uncached`` for the
forks). It also reports spawn latency: the time from the supervisor
creating a child to that child's first model request reaching the simulator, for 20
forks and 20 teammates. Prints a table, then one JSON object as the last line with
``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from teamrt.agents import load_definitions
from teamrt.models import Reply, Usage, lookup
from teamrt.models.pricing import cost_usd
from teamrt.models.tokens import message_blocks
from teamrt.runtime.supervisor import Supervisor
from teamrt.settings import Settings
from teamrt.sim import SimRequest, SimServer
from teamrt.store import create_store
from teamrt.store.engine import DB_ENV
from teamrt.team import load_team

CHILDREN = 5
SPAWNS = 20
TARGET_SHARE = 0.9
TARGET_RATIO = 0.25
TARGET_SPAWN_MS = 20.0
WORDS = ("module", "parser", "cache", "prefix", "worktree", "merge", "queue", "agent", "mailbox", "store")


def context_text() -> str:
    """About 20,000 tokens of material the children all need."""
    words = [WORDS[(i * 7) % len(WORDS)] for i in range(13_500)]
    return "Material for the survey:\n" + " ".join(words)


def team_project(base: Path) -> Path:
    project = base / "project"
    agents = project / ".teamrt" / "agents"
    agents.mkdir(parents=True)
    roles = []
    for i in range(CHILDREN):
        (agents / f"analyst{i}.md").write_text(
            f"---\nname: analyst{i}\ndescription: analyst {i}\n---\n"
            + f"You are analyst number {i}. Your speciality is area {i} of the system. " * 20
        )
        roles.append(f"[roles.analyst{i}]\n")
    # compact_at: the "fresh" lead writes its whole context into each spawn call, and the cost trigger
    # (about 74K tokens) would compact it mid-way; this measures the cache, not compaction
    (project / "team.toml").write_text(
        '[team]\nmodel = "sim"\nmax_agents = 60\nmax_concurrent = 60\ncompact_at = 500_000\n' + "".join(roles)
    )
    return project


def lead_policy(mode: str) -> Any:
    def lead(request: SimRequest) -> Reply:
        spawned = request.calls("spawn_agent")
        if mode == "fresh" and spawned < CHILDREN:  # one per turn: five contexts exceed one turn's output
            task = "\n".join(b["text"] for b in message_blocks(request.messages[0]) if b["type"] == "text")
            directive = task + f"\n\nStudy part {spawned}."
            return Reply().call(
                "spawn_agent",
                {"kind": "team", "role": f"analyst{spawned}", "directives": [directive], "wait": False},
            )
        if spawned:
            return Reply().say("done")
        reply = Reply()
        if mode == "forks":
            return reply.call(
                "spawn_agent", {"kind": "fork", "directives": [f"Study part {i}." for i in range(CHILDREN)]}
            )
        kind = "fork" if mode == "fork-latency" else "team"
        for i in range(SPAWNS):
            role = {} if kind == "fork" else {"role": f"analyst{i % CHILDREN}", "wait": False}
            reply.call("spawn_agent", {"kind": kind, "directives": [f"ping {i}"], **role})
        return reply

    return lead


async def scenario(base: Path, mode: str) -> tuple[list[Usage], list[float]]:
    """The children's usage and their spawn latencies (ms) in one run of ``mode``."""
    project = team_project(base / mode)
    run_dir = project / ".teamrt" / "runs" / "r1"
    run_dir.mkdir(parents=True)
    store = create_store(run_dir, "r1", task="fanout", workdir=str(project))
    team = load_team(project / "team.toml", project=project)
    with SimServer(default=lambda request: Reply().say("Noted: part studied.")) as sim:
        sim.policies["lead"] = lead_policy(mode)
        supervisor = Supervisor(
            store=store, run_dir=run_dir, team=team, definitions=load_definitions(project),
            project=project, settings=Settings(), sim=sim,
        )  # fmt: skip
        created: dict[str, float] = {}
        add = supervisor.assembly.add

        async def timed_add(*args: Any, **kwargs: Any) -> Any:
            start = asyncio.get_running_loop().time()
            member = await add(*args, **kwargs)
            created[member.name] = start
            if member.name == "lead":  # room to write the context into a spawn call ("fresh"): sim's limit
                member.loop.spec.max_tokens = 64_000
            return member

        supervisor.assembly.add = timed_add  # type: ignore[method-assign]
        try:
            outcome = await supervisor.run(context_text())
            assert outcome.status == "done", outcome
            children = [a for a in store.reader.agents() if a.kind != "lead"]
            assert len(children) == (CHILDREN if mode in ("forks", "fresh") else SPAWNS), children
            usages = [
                Usage(a.usage.input_tokens, 0, a.usage.cache_creation_tokens, a.usage.cache_read_tokens)
                for a in children
            ]
            first: dict[str, float] = {}
            for call in sim.calls:
                first.setdefault(call.agent, call.at)
            latencies = [(first[name] - start) * 1000 for name, start in created.items() if name != "lead"]
        finally:
            store.close()
    return usages, latencies


def share(usages: list[Usage]) -> float:
    read = sum(u.cache_read_input_tokens for u in usages)
    return read / sum(u.prompt_tokens for u in usages)


def input_cost(usages: list[Usage]) -> float:
    info = lookup("sim")
    assert info is not None
    return sum(cost_usd(u, info) for u in usages)


def uncached_cost(usages: list[Usage]) -> float:
    """What the same input tokens cost as plain input: no cache writes, no cache reads."""
    return input_cost([Usage(input_tokens=u.prompt_tokens) for u in usages])


async def measure(base: Path) -> dict[str, Any]:
    forks, _ = await scenario(base, "forks")
    fresh, _ = await scenario(base, "fresh")
    _, fork_latency = await scenario(base, "fork-latency")
    _, team_latency = await scenario(base, "team-latency")
    result: dict[str, Any] = {
        "fork_cache_read_share": round(share(forks), 3),
        "fresh_cache_read_share": round(share(fresh), 3),
        "fork_input_usd": round(input_cost(forks), 5),
        "fresh_input_usd": round(input_cost(fresh), 5),
        "uncached_input_usd": round(uncached_cost(forks), 5),
        "fresh_uncached_input_usd": round(uncached_cost(fresh), 5),
        "spawn_p50_ms_fork": round(statistics.median(fork_latency), 2),
        "spawn_p50_ms_team": round(statistics.median(team_latency), 2),
        "children_input_tokens": sum(u.prompt_tokens for u in forks) // CHILDREN,
    }
    result["cost_ratio_fork_vs_fresh"] = round(result["fork_input_usd"] / result["fresh_input_usd"], 3)
    result["ratio_vs_uncached"] = round(input_cost(forks) / uncached_cost(forks), 3)
    result["fresh_ratio_vs_uncached"] = round(input_cost(fresh) / uncached_cost(fresh), 3)
    result["targets"] = {
        "fork_cache_read_share": f">= {TARGET_SHARE}",
        "cost_ratio_fork_vs_fresh": f"<= {TARGET_RATIO}",
        "spawn_p50_ms": f"<= {TARGET_SPAWN_MS}",
    }
    result["targets_met"] = (
        result["fork_cache_read_share"] >= TARGET_SHARE
        and result["cost_ratio_fork_vs_fresh"] <= TARGET_RATIO
        and max(result["spawn_p50_ms_fork"], result["spawn_p50_ms_team"]) <= TARGET_SPAWN_MS
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    args = parser.parse_args()
    os.environ.pop(DB_ENV, None)
    os.environ["TEAMRT_HOME"] = tempfile.mkdtemp(prefix="teamrt-home-")
    with tempfile.TemporaryDirectory(prefix="teamrt-bench-") as tmp:
        result = asyncio.run(measure(Path(tmp)))
    print(f"{'':26}{'cache-read share':>18}{'input cost':>12}{'uncached':>12}{'÷ uncached':>12}")
    print(
        f"{'5 forks':26}{result['fork_cache_read_share']:>18}{result['fork_input_usd']:>12}"
        f"{result['uncached_input_usd']:>12}{result['ratio_vs_uncached']:>12}"
    )
    print(
        f"{'5 fresh role agents':26}{result['fresh_cache_read_share']:>18}{result['fresh_input_usd']:>12}"
        f"{result['fresh_uncached_input_usd']:>12}{result['fresh_ratio_vs_uncached']:>12}"
    )
    print(
        f"children of {result['children_input_tokens']:,} input tokens each; forks cost"
        f" {result['cost_ratio_fork_vs_fresh']}x the fresh agents' input (target <= {TARGET_RATIO})"
        f" and {result['ratio_vs_uncached']}x the same input uncached;"
        f" spawn p50 {result['spawn_p50_ms_fork']} ms (fork), {result['spawn_p50_ms_team']} ms (teammate)"
        f" (target <= {TARGET_SPAWN_MS}): {'met' if result['targets_met'] else 'NOT met'}"
    )
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
