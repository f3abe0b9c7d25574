"""``teamrt demo``: the example teams (``examples/``) at work, offline on ``sim``, always.

Each example runs in a scratch copy under ``<home>/demo/<stamp>/``: the research
team surveys a copy of a source tree (teamrt's own by default), reads what a
page on the web advises (a few pages served on loopback, ``webpages``: the
demo stays offline) and writes REPORT.md there; the coding team fixes a copy of ``examples/coding-team/repo``
(a git repository made for the occasion), and its integration branch is then
applied and tested. Progress lines come from the run's event log as it is
written; each run ends with a table of its agents.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from teamrt import home
from teamrt.agents import scan_definitions
from teamrt.demos import webpages
from teamrt.demos.examples import coding_repo, copy_tree, team_file
from teamrt.runs import progress
from teamrt.runs import query as runs
from teamrt.runs.render import agent_tree, money, table
from teamrt.runtime.teamrun import Choices, RunSummary, run_team, team_from_file
from teamrt.store import AgentRecord, StoreReader
from teamrt.team import Team

Out = Callable[[str], None]


@dataclass(frozen=True)
class DemoRun:
    name: str
    run_id: str
    run_dir: Path
    workspace: Path
    summary: RunSummary
    seconds: float


def run(which: str = "all", *, tree: Path | None = None, out: Out = print) -> int:
    """Run the research and/or coding example; 0 when every run ended done with its outcome checked."""
    for example in ("research", "coding"):
        team_file(example)  # outside a clone of teamrt: one clear line before anything is made
    scratch = home.teamrt_home() / "demo" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    scratch.mkdir(parents=True, exist_ok=True)
    out(f"teamrt demo: the example teams on sim (offline; no API key is used), in {scratch}")
    ok = True
    if which in ("all", "research"):
        source = (tree or Path(__file__).resolve().parents[1]).resolve()
        ok &= _research(source, scratch / "research", out)
    if which in ("all", "coding"):
        ok &= _coding(scratch / "coding", out)
    out(f"\nEvery run stays in {home.runs_path()}: teamrt tui, teamrt ls, teamrt show RUN, teamrt logs RUN.")
    out(_on_path())
    return 0 if ok else 1


def _on_path() -> str:
    """How to get the ``teamrt`` command for use on any repository (the README's Install says more)."""
    bin_dir = Path(sys.executable).parent
    if shutil.which("teamrt") == str(bin_dir / "teamrt"):
        return "The teamrt command is on your PATH: cd into a repository of yours and try teamrt run --help."
    checkout = Path(__file__).resolve().parents[2]
    return (
        f"To use teamrt on a repository of yours, put the command on your PATH: source {bin_dir}/activate"
        f" (this shell), or pipx install {checkout} (or: uv tool install {checkout})."
    )


def _research(source: Path, workspace: Path, out: Out) -> bool:
    copy_tree(source, workspace)
    out(f"\n== research team: surveying {source} (a copy, in {workspace})")
    with webpages.serving() as host:
        out(f"  the web it searches and reads: pages served at http://{host}/")
        demo = _run("research", team_file("research"), workspace, out, web_host=host)
    report = workspace / "REPORT.md"
    _table(demo, out)
    if not report.is_file():
        out(f"the lead wrote no {report.name}")
        return False
    out(f"\n{report} ({len(report.read_text(encoding='utf-8').splitlines())} lines) begins:")
    for line in report.read_text(encoding="utf-8").splitlines()[:8]:
        out(f"  {line}")
    return demo.summary.outcome.status == "done"


def reading_from(team: Team, host: str) -> Team:
    """``team`` allowed to fetch from ``host``: a loopback address, which WebFetch refuses unless the team
    names it, and a domain no rule of the example allows."""
    name = host.rpartition(":")[0]
    web = dataclasses.replace(team.web, private_hosts=(*team.web.private_hosts, host))
    return dataclasses.replace(team, web=web, allow=(*team.allow, f"WebFetch(domain:{name})"))


def _coding(workspace: Path, out: Out) -> bool:
    coding_repo(workspace)
    out(f"\n== coding team: fixing the failing tests of a small repository ({workspace})")
    out(f"  before: {_unittest(workspace)}")
    demo = _run("coding", team_file("coding"), workspace, out)
    _table(demo, out)
    out(f"\n$ teamrt apply {demo.run_id}")
    from teamrt.worktree.apply import ApplyError, apply, plan_apply  # GitPython: only now

    with runs.reading(demo.run_dir, demo.run_id) as reader:
        record = reader.run()
    try:
        out(f"  {apply(plan_apply(record))}")
    except ApplyError as e:
        out(f"  teamrt: {e}")
        return False
    after = _unittest(workspace)
    out(f"  after: {after}")
    return demo.summary.outcome.status == "done" and after.endswith("OK")


def _run(name: str, team_file: Path, workspace: Path, out: Out, *, web_host: str | None = None) -> DemoRun:
    """Run the team in ``workspace`` on sim, printing its progress as the events are committed;
    ``web_host``: the loopback host the demo's pages are served at, which WebFetch may then read."""
    run_id = home.new_run_id()
    run_dir = home.run_dir(run_id)  # the home here, not the scratch repository's: teamrt ls lists it
    started = time.monotonic()
    scan = scan_definitions(workspace)
    team, task = team_from_file(
        team_file, prompt=None, project=workspace, choices=Choices(model="sim"), scan=scan
    )
    if web_host is not None:
        team = reading_from(team, web_host)
    work = run_team(
        team, task, project=workspace, definitions=scan.definitions, run_id=run_id, run_dir=run_dir
    )
    with progress.watching(run_dir, run_id, lambda line: out(f"  {line}")):
        summary = asyncio.run(work)
    return DemoRun(name, run_id, run_dir, workspace, summary, time.monotonic() - started)


def _table(demo: DemoRun, out: Out) -> None:
    with runs.reading(demo.run_dir, demo.run_id) as reader:
        lines = run_table(reader, demo.seconds)
    out(f"\nrun {demo.run_id} ({demo.name}): {demo.summary.outcome.status}")
    for line in lines:
        out(f"  {line}")


def run_table(reader: StoreReader, seconds: float) -> list[str]:
    """One row per agent (kind, role, turns, mail, tokens, cache-read share, cost) and the run's totals."""
    agents = reader.agents()
    mail = reader.mail()
    rows = [
        ("AGENT", "KIND", "ROLE", "STATUS", "TURNS", "MAIL IN", "MAIL OUT", "TOKENS", "CACHE READ", "COST")
    ]
    for agent, depth in agent_tree(agents):
        turns = sum(t.role == "assistant" for t in reader.turns(agent.name))
        received = sum(m.agent == agent.name for m in mail)
        sent = sum(m.sender == agent.name for m in mail)
        rows.append((
            "  " * depth + agent.name, agent.kind, agent.role or "", agent.status, str(turns), str(received),
            str(sent), f"{agent.usage.total_tokens:,}", f"{_cache_share(agent):.0%}",
            money(agent.usage.cost_usd, True),
        ))  # fmt: skip
    run = reader.run()
    kinds: dict[str, int] = {}
    for agent in agents:
        kinds[agent.kind] = kinds.get(agent.kind, 0) + 1
    merged = [m for m in reader.merges() if m.status == "merged"]
    usage = run.usage
    prompt = usage.input_tokens + usage.cache_creation_tokens + usage.cache_read_tokens
    return [
        *table(rows, right=(4, 5, 6, 7, 8, 9)),
        "agents by kind: " + ", ".join(_count(n, k) for k, n in kinds.items()),
        f"tokens: {usage.total_tokens:,} ({usage.cache_read_tokens / prompt if prompt else 0:.0%} of the"
        f" input read from cache); cost {money(usage.cost_usd, True)}; {len(mail)} messages;"
        f" {len(merged)} merged commits; wall time {seconds:.1f} s",
    ]


def _count(n: int, kind: str) -> str:
    noun = {"lead": "lead", "fork": "fork", "worktree": "worktree agent", "team": "teammate"}.get(kind, kind)
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _cache_share(agent: AgentRecord) -> float:
    u = agent.usage
    prompt = u.input_tokens + u.cache_creation_tokens + u.cache_read_tokens
    return u.cache_read_tokens / prompt if prompt else 0.0


def _unittest(repo: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "unittest"], cwd=repo, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    lines = [line for line in result.stderr.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]
    return "; ".join(lines) or f"python -m unittest exited {result.returncode}"
