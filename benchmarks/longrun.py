"""Long-run benchmark: one agent, 500 turns of tool use on ``sim``, under today's context policy and the new.

The agent works through the checklist of ``teamrt.sim.plays.longrun`` (files read, greps, test runs with long
output, edits; results of 0.5 to 8K tokens; facts planted early and asked about later) through the real
loop, store, SDK and simulator, priced as Sonnet 5.5 and as Haiku 5.5, each twice in the same run:

- **new**: ``ContextPolicy.for_model`` (the default: the trigger chosen from the model's prices and bands,
  server-side context editing and compaction where the model has them), thinking adaptive, with the
  simulator's thinking binding on (the catalog's ``binds_thinking``);
- **baseline**: ``ContextPolicy.legacy`` (compaction at window - max_tokens - 5%, client-side, the summary
  sent with ``tool_choice`` none). It edits the messages before later thinking blocks, which the API
  refuses on a binding model, so its cost is measured with thinking off; one more run with thinking on
  counts the errors it meets (``baseline_api_errors``) and the turn it fails at.

``recall`` is the share of questions the play answered right, from what it could see in its request. The
configurations run in parallel processes (``--jobs``). Prints a table (``--breakdown``: where each run's
cost went), then one JSON object as the last line with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from teamrt.models import Model, ModelError, ModelRequest, ModelResponse, Usage, lookup, open_model
from teamrt.models.catalog import ModelInfo
from teamrt.models.pricing import cost_usd
from teamrt.models.types import OnRestart, OnText
from teamrt.runtime.agent import DEFAULT_MAX_TOKENS, AgentEnv, AgentSpec
from teamrt.runtime.asking import policy_asker
from teamrt.runtime.compaction import ContextPolicy
from teamrt.runtime.loop import AgentLoop
from teamrt.settings import ModelSettings, Settings
from teamrt.sim import SimServer
from teamrt.sim.plays import longrun
from teamrt.store import create_store
from teamrt.store.engine import DB_ENV
from teamrt.tools.base import ToolContext
from teamrt.tools.permissions import Permissions

MODELS = {"sonnet": "sim:claude-sonnet-5-5", "haiku": "sim:claude-haiku-5-5"}
TARGET_RATIO = {"sonnet": 0.35, "haiku": 0.2}
TARGET_RECALL = 0.9
SETTINGS = Settings(model=ModelSettings(sdk_retries=0, stream_retries=0))
"""No retries: an error the simulator answers is counted once and ends the agent, as it would a real run."""
PARTS = ("input", "cache_write", "cache_read", "output")


@dataclass(frozen=True)
class Config:
    """One agent's run: the model it is priced as, the policy, whether it thinks."""

    name: str
    model: str
    policy: str
    """``new`` (``ContextPolicy.for_model``) or ``legacy``."""
    thinking: bool
    cards: tuple[str, ...]
    """The rate cards (``MODELS``' names) its calls are priced by."""


@dataclass
class Priced:
    """A run's calls priced by one model's rate card."""

    cost_usd: float = 0.0
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    summary_cost_usd: float = 0.0


@dataclass
class Figures:
    """What one run cost (by each rate card it is priced by), where the cost went, and what it remembered."""

    config: Config
    priced: dict[str, Priced] = field(default_factory=dict)
    status: str = ""
    reason: str | None = None
    turns: int = 0
    summaries: int = 0
    server_compactions: int = 0
    server_edits: int = 0
    client_compactions: int = 0
    peak_prompt_tokens: int = 0
    api_errors: int = 0
    statuses: list[int] = field(default_factory=list)
    answers: list[tuple[str, str, str]] = field(default_factory=list)
    asked_after_compaction: int = 0
    off_script: int = 0
    trigger: int = 0
    seconds: float = 0.0

    @property
    def recall(self) -> float | None:
        if not self.answers:
            return None
        return sum(1 for _, given, want in self.answers if given == want) / len(self.answers)


def cost_parts(usage: Usage, info: ModelInfo) -> dict[str, float]:
    """``cost_usd(usage, info)`` split by kind of token, at the price band the whole prompt falls in."""
    price = info.price
    if info.long_context_from is not None and usage.prompt_tokens > info.long_context_from:
        assert info.long_context_price is not None
        price = info.long_context_price
    unsplit = max(0, usage.cache_creation_input_tokens - usage.cache_write_5m - usage.cache_write_1h)
    writes = (
        usage.cache_write_5m + unsplit
    ) * price.cache_write_5m + usage.cache_write_1h * price.cache_write_1h
    return {
        "input": usage.input_tokens * price.input / 1e6,
        "cache_write": writes / 1e6,
        "cache_read": usage.cache_read_input_tokens * price.cache_read / 1e6,
        "output": usage.output_tokens * price.output / 1e6,
    }


class Metered:
    """The model the agent calls, with every call's cost recorded by kind, and when the history was compacted:
    client-side (the request no longer extends the previous one), or server-side (a ``compaction`` block or
    edits the API applied)."""

    def __init__(self, inner: Model, cards: dict[str, ModelInfo], figures: Figures) -> None:
        self.inner = inner
        self.name = inner.name
        self.cards = cards
        self.figures = figures
        for name in cards:
            figures.priced[name] = Priced()
        self._last: list[Any] = []

    async def complete(
        self, request: ModelRequest, *, on_text: OnText | None = None, on_restart: OnRestart | None = None
    ) -> ModelResponse:
        figures = self.figures
        summary = request.compaction is not None or longrun.asks_summary(_last_user_text(request))
        if not summary and not _extends(request.messages, self._last) and not _swapped(request.messages):
            figures.client_compactions += 1
        if not summary:
            self._last = request.messages
        try:
            response = await self.inner.complete(request, on_text=on_text, on_restart=on_restart)
        except ModelError as e:  # every answer the simulator gave: no retries (SETTINGS)
            if e.status is not None and e.status >= 400:
                figures.statuses.append(e.status)
            raise
        usage = response.usage
        figures.peak_prompt_tokens = max(figures.peak_prompt_tokens, usage.prompt_tokens)
        for name, info in self.cards.items():
            priced, usd = figures.priced[name], cost_usd(usage, info)
            for kind, part in cost_parts(usage, info).items():
                priced.parts[kind] += part
            priced.cost_usd += usd
            priced.summary_cost_usd += usd if summary else 0.0
        figures.summaries += summary
        figures.server_compactions += sum(1 for b in response.content if b.get("type") == "compaction")
        figures.server_edits += len(response.applied_edits)
        compacted = figures.client_compactions + figures.server_compactions + figures.server_edits
        if compacted and any(b["name"] == "answer" for b in response.tool_uses):
            figures.asked_after_compaction += 1
        return response

    async def count_tokens(self, request: ModelRequest) -> int:
        return await self.inner.count_tokens(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _swapped(messages: list[Any]) -> bool:
    """Whether the history opens with a compaction block: the API's summary swapped in, not teamrt's."""
    first = messages[0]["content"] if messages else None
    return isinstance(first, list) and bool(first) and first[0].get("type") == "compaction"


def _last_user_text(request: ModelRequest) -> str:
    content = request.messages[-1]["content"] if request.messages else ""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def _extends(messages: list[Any], before: list[Any]) -> bool:
    """Whether ``messages`` is ``before`` (the same message objects) with more after it."""
    return len(messages) >= len(before) and all(a is b for a, b in zip(messages, before, strict=False))


def policy_for(config: Config, info: ModelInfo) -> ContextPolicy:
    if config.policy == "legacy":
        return ContextPolicy.legacy(info, DEFAULT_MAX_TOKENS)
    return ContextPolicy.for_model(info, DEFAULT_MAX_TOKENS)


async def run_one(config: Config, turns: int, base: Path) -> Figures:
    """``config`` run for ``turns`` turns in ``base``: its figures."""
    info = lookup(config.model)
    assert info is not None, config.model
    figures = Figures(config)
    bench = longrun.Workbench(longrun.checklist(turns))
    store = create_store(base, "longrun", task="long run", workdir=str(base))
    try:
        await store.add_agent("solo", kind="team", model=config.model)
        epoch = await store.begin_epoch("solo")
        with SimServer(default=longrun.play) as sim:
            policy = policy_for(config, info)
            figures.trigger = policy.trigger
            cards = {name: _info(MODELS[name]) for name in config.cards}
            model = Metered(open_model(config.model, sim=sim, settings=SETTINGS), cards, figures)
            spec = AgentSpec(
                name="solo", model=model, model_name=config.model, system=longrun.SYSTEM, tools=bench.tools(),
                permissions=Permissions("bypassPermissions"), info=info,
                thinking={"type": "adaptive" if config.thinking else info.thinking_off}, context=policy,
            )  # fmt: skip
            env = AgentEnv(
                store=store, tools=ToolContext(workspace=base, run_dir=base), spill_dir=base / "spill",
                asker=policy_asker("deny"), budgets=[],
            )  # fmt: skip
            start = time.perf_counter()
            try:
                outcome = await AgentLoop(spec, env, epoch=epoch).run(bench.task())
            finally:
                await model.aclose()
            figures.seconds = time.perf_counter() - start
            figures.status, figures.reason, figures.turns = outcome.status, outcome.reason, outcome.turns
            # the errors the client met (a refused request never reaches ``sim.calls``), and any fault the
            # simulator logged that did not reach it
            logged = [c.status for c in sim.calls if c.status >= 400]
            figures.api_errors = max(len(figures.statuses), len(logged))
            if sim.policy_errors:
                figures.reason = f"{figures.reason}; policy: {sim.policy_errors[0]}"
    finally:
        store.close()
    figures.answers, figures.off_script = list(bench.answers), bench.off_script
    return figures


def _info(model: str) -> ModelInfo:
    info = lookup(model)
    assert info is not None, model
    return info


def run_in_process(config: Config, turns: int) -> Figures:
    """One configuration in a process of its own (a pool's worker), its store in a temporary directory
    (on ``/dev/shm`` where there is one: the store's fsyncs are not what is measured)."""
    shm = Path("/dev/shm")
    where = os.environ.get("TMPDIR") or (str(shm) if shm.is_dir() else None)
    with tempfile.TemporaryDirectory(prefix="teamrt-longrun-", dir=where) as tmp:
        return asyncio.run(run_one(config, turns, Path(tmp)))


def configs(separate_baselines: bool, binding_check: bool) -> list[Config]:
    """Every run, the longest first (they share the pool's processes).

    Today's policy sends both models the same requests (the same window, ``max_tokens`` and trigger, the
    same play, thinking off), so one baseline run is priced by both rate cards, each call at its own band;
    ``separate_baselines`` runs one per model instead (their figures agree)."""
    if separate_baselines:
        runs = [Config(f"baseline_{n}", m, "legacy", False, (n,)) for n, m in MODELS.items()]
    else:
        runs = [Config("baseline", MODELS["sonnet"], "legacy", False, tuple(MODELS))]
    if binding_check:
        runs.append(Config("baseline_thinking", MODELS["sonnet"], "legacy", True, ("sonnet",)))
    return runs + [Config(n, m, "new", True, (n,)) for n, m in MODELS.items()]


def measure(runs: list[Config], turns: int, jobs: int) -> dict[str, Figures]:
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("fork")) as pool:
        futures = {c.name: pool.submit(run_in_process, c, turns) for c in runs}
        return {name: future.result() for name, future in futures.items()}


def _baseline(figures: dict[str, Figures], card: str) -> Figures:
    return next(f for f in figures.values() if f.config.policy == "legacy" and not f.config.thinking
                and card in f.config.cards)  # fmt: skip


def _recall(answers: list[tuple[str, str, str]]) -> float | None:
    return round(sum(1 for _, g, w in answers if g == w) / len(answers), 4) if answers else None


def result(figures: dict[str, Figures], turns: int, breakdown: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"turns": turns}
    new = [figures[n] for n in MODELS]
    for name in MODELS:
        out[f"cost_usd_{name}"] = round(figures[name].priced[name].cost_usd, 4)
        out[f"baseline_cost_usd_{name}"] = round(_baseline(figures, name).priced[name].cost_usd, 4)
    for name in MODELS:
        baseline = out[f"baseline_cost_usd_{name}"]
        out[f"ratio_{name}"] = round(figures[name].priced[name].cost_usd / baseline, 4) if baseline else None
    out["api_errors"] = sum(f.api_errors for f in new)
    answers = [a for f in new for a in f.answers]
    out["recall"] = _recall(answers)
    out["questions"] = len(answers)
    out["questions_after_compaction"] = sum(f.asked_after_compaction for f in new)
    baselines = [f for f in figures.values() if f.config.policy == "legacy" and not f.config.thinking]
    out["baseline_recall"] = _recall([a for f in baselines for a in f.answers])
    check = figures.get("baseline_thinking")
    if check is not None:
        out["baseline_api_errors"] = check.api_errors
        out["baseline_thinking_status"] = check.status
        out["baseline_thinking_turns"] = check.turns
    out["statuses"] = {name: f.status for name, f in figures.items()}
    out["seconds"] = {name: round(f.seconds, 1) for name, f in figures.items()}
    out["targets"] = {
        **{f"ratio_{n}": f"<= {t}" for n, t in TARGET_RATIO.items()},
        "api_errors": "== 0", "recall": f">= {TARGET_RECALL}",
    }  # fmt: skip
    out["targets_met"] = (
        all(out[f"ratio_{n}"] is not None and out[f"ratio_{n}"] <= t for n, t in TARGET_RATIO.items())
        and out["api_errors"] == 0
        and out["recall"] is not None
        and out["recall"] >= TARGET_RECALL
        and all(f.status == "done" and f.turns == turns for f in new)
    )
    if breakdown:
        out["breakdown"] = {name: _breakdown(f) for name, f in figures.items()}
    return out


def _breakdown(f: Figures) -> dict[str, Any]:
    priced = {
        card: {"cost_usd": round(p.cost_usd, 4), **{f"{k}_usd": round(v, 4) for k, v in p.parts.items()},
               "summary_cost_usd": round(p.summary_cost_usd, 4)}
        for card, p in f.priced.items()
    }  # fmt: skip
    return {
        "model": f.config.model, "policy": f.config.policy, "thinking": f.config.thinking, "priced": priced,
        "status": f.status, "reason": f.reason, "turns": f.turns, "trigger": f.trigger,
        "summaries": f.summaries, "client_compactions": f.client_compactions,
        "server_compactions": f.server_compactions, "server_edits": f.server_edits,
        "peak_prompt_tokens": f.peak_prompt_tokens, "api_errors": f.api_errors, "statuses": f.statuses,
        "recall": f.recall, "questions": len(f.answers), "wrong": [a for a in f.answers if a[1] != a[2]],
        "off_script": f.off_script, "seconds": round(f.seconds, 1),
    }  # fmt: skip


def print_table(figures: dict[str, Figures], out: dict[str, Any], breakdown: bool) -> None:
    print(f"{'':34}{'cost $':>10}{'turns':>7}{'recall':>8}{'errors':>8}  status")
    for name, f in figures.items():
        recall = "-" if f.recall is None else f"{f.recall:.2f}"
        for card, p in f.priced.items():
            label = f"{name} (as {card})" if len(f.priced) > 1 else name
            print(f"{label:34}{p.cost_usd:>10.2f}{f.turns:>7}{recall:>8}{f.api_errors:>8}  {f.status}"
                  + (f" ({f.reason})" if f.reason else ""))  # fmt: skip
    if breakdown:
        heads = "".join(f"{k:>12}" for k in (*PARTS, "summaries"))
        print(f"\n{'where the cost went, $':34}{heads}{'trigger':>10}")
        for name, f in figures.items():
            for card, p in f.priced.items():
                cells = "".join(f"{p.parts[k]:>12.3f}" for k in PARTS) + f"{p.summary_cost_usd:>12.3f}"
                print(f"{f'{name} (as {card})':34}{cells}{f.trigger:>10,}")
            print(f"{'':34}summaries {f.summaries}, client compactions {f.client_compactions}, server"
                  f" compactions {f.server_compactions}, edits {f.server_edits}, peak prompt"
                  f" {f.peak_prompt_tokens:,}, {f.seconds:.1f} s")  # fmt: skip
    print(
        f"ratio sonnet {out['ratio_sonnet']} (target <= {TARGET_RATIO['sonnet']}), haiku {out['ratio_haiku']}"
        f" (target <= {TARGET_RATIO['haiku']}), api errors {out['api_errors']}, recall {out['recall']}"
        f" (target >= {TARGET_RECALL}): {'met' if out['targets_met'] else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON object on a line of its own")
    parser.add_argument("--turns", type=int, default=500, help="turns of the agent in each run (default 500)")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 3), help="processes to run in")
    parser.add_argument("--breakdown", action="store_true", help="where each run's cost went")
    parser.add_argument(
        "--no-binding-check", action="store_true",
        help="skip the baseline run with thinking on (baseline_api_errors)",
    )  # fmt: skip
    parser.add_argument(
        "--separate-baselines", action="store_true",
        help="run today's policy once per model rather than once priced by both rate cards",
    )  # fmt: skip
    args = parser.parse_args()
    if args.turns < 30:
        parser.error("--turns must be at least 30 (questions come after the first two fifths)")
    os.environ.pop(DB_ENV, None)
    runs = configs(args.separate_baselines, not args.no_binding_check)
    figures = measure(runs, args.turns, max(args.jobs, 1))
    out = result(figures, args.turns, args.breakdown)
    print_table(figures, out, args.breakdown)
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
