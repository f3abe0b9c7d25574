"""Chaos benchmark: the example teams killed (SIGKILL) again and again and resumed, at scale.

Runs the research and coding examples on ``sim`` in turn, each with five kills
(named fault points and timers, seeded), resuming after each, until ``--kills``
kills have fired, and checks every run against an uninterrupted one
(``teamrt.testing.chaos``): nothing lost, nothing twice, no corruption. The baseline,
measured in the same run, is the uninterrupted run itself: a resume's cost is
set beside it.

With ``--db postgres`` the runs live on a throwaway PostgreSQL server the
benchmark starts (``teamrt.testing.pgserver``; it exits 2 with one line when
PostgreSQL is not installed): every run, the references and the chaos runs
alike, in one database, as a user's runs share one, reached through
``TEAMRT_DB``, which the harness hands every owner it forks. The checks read the runs back
through the store; "corrupted" counts a run's inconsistent rows there
(``teamrt.testing.chaos.inconsistencies``) instead of SQLite's ``integrity_check``.
The default is 30 kills there too (an example run and a resume each take
longer on the server than on SQLite, so it takes longer).

With ``--faults disk,inodes,wal,branch,worktree,mail,pg-restart`` the runs
also suffer those faults (``teamrt.testing.chaos.plan_for``), two kinds a run, spread
over the runs by seed, the kinds not yet injected first: a full disk under
the store, inodes exhausted under the mailbox, the WAL emptied or cut in half
(on PostgreSQL the server stopped ``immediate``), the integration branch
deleted after a merge, a coder's worktree deleted after a write, a message
corrupted in ``new/``, the server restarted (``fast``) mid-run (PostgreSQL
only; skipped on SQLite). An incarnation that does not end by its deadline
is a hang: killed, resumed, counted.

Prints a table, then one JSON object as the last line with ``--json``; keys
``kills``, ``resumes``, ``lost``, ``duplicated``, ``corrupted``,
``silent_losses`` and ``hangs`` (these five must be 0), ``faults`` (how many
kinds were injected, ``kill`` among them; ``fault_kinds`` names them),
``refused`` (resumes that refused, naming the loss), ``named_losses``,
``stops`` and ``errors`` (incarnations that ended with an error after a
fault that may stop a run, and otherwise), ``resume_p50_ms`` and ``db``
(``sqlite`` or ``postgres``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from teamrt.store.engine import DB_ENV
from teamrt.testing import chaos
from teamrt.testing.pgserver import NoServer, PgServer

KILLS_PER_RUN = 5
FAULTS_PER_RUN = 2
DEFAULT_KILLS = {"sqlite": 30, "postgres": 30}


@contextmanager
def server_database() -> Iterator[tuple[PgServer, str]]:
    """A throwaway PostgreSQL server and one database on it for every run; yields both, the database as
    its URL. Raises NoServer when PostgreSQL is not installed."""
    with PgServer() as server:
        yield server, server.create_database("teamrt")


def fault_kinds(text: str) -> list[str]:
    """``--faults``: kinds separated by commas, each one of ``chaos.FAULTS``."""
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in chaos.FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no such fault: {', '.join(unknown)} (the faults: {', '.join(chaos.FAULTS)})"
        )
    return kinds


def faults_for(example: str, db: str, wanted: list[str], injected: Counter[str], seed: int) -> list[str]:
    """The faults of ``wanted`` a run of ``example`` suffers: up to ``FAULTS_PER_RUN``, those injected
    least so far first (ties broken by seed), so that every kind comes early."""
    kinds = chaos.applicable(wanted, example, db)
    order = sorted(kinds, key=lambda k: (injected[k], (kinds.index(k) - seed) % max(1, len(kinds))))
    return order[:FAULTS_PER_RUN]


def worth_telling(result: chaos.Result) -> bool:
    """Whether a run is shown on stderr: anything lost, doubled, different, hung, refused, stopped or
    named."""
    counts = (result.lost, result.duplicated, result.corrupted, result.hangs)
    found = (result.differences, result.twice, result.silent, result.errors, result.refused, result.stops)
    return any(counts) or any(found) or bool(result.losses)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=sorted(DEFAULT_KILLS), default="sqlite",
                        help="a SQLite file per run (default), or a throwaway PostgreSQL server")  # fmt: skip
    parser.add_argument("--kills", type=int, default=None, help="kills to fire in all (default 30)")
    known = ",".join(chaos.FAULTS[1:])
    parser.add_argument("--faults", type=fault_kinds, default=[],
                        help=f"faults to inject besides kills, by commas: {known}")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    if args.kills is None:
        args.kills = DEFAULT_KILLS[args.db]
    started = time.monotonic()
    server = None
    with ExitStack() as stack:
        os.environ.pop(DB_ENV, None)  # each run its own SQLite file, unless a server holds them
        if args.db == "postgres":
            try:
                server, os.environ[DB_ENV] = stack.enter_context(server_database())
            except NoServer as e:
                print(f"chaos: --db postgres: {e}", file=sys.stderr)
                return 2
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="teamrt-chaos-"))
        ctx = chaos.context()
        base = Path(tmp)
        (base / "tree").mkdir()
        tree = chaos.prepare("research", base / "tree")  # one copy of the tree, the same for every run
        refs = {}
        for example in ("research", "coding"):
            where = base / f"reference-{example}"
            where.mkdir()
            refs[example] = chaos.reference(example, where / "home", chaos.prepare(example, where, tree), ctx)
        totals: Counter[str] = Counter()
        injected: Counter[str] = Counter()
        resume_ms: list[float] = []
        runs, seed = 0, args.seed
        while totals["kills"] < args.kills:
            example = ("research", "coding")[seed % 2]
            where = base / f"seed-{seed}"
            where.mkdir()
            project = chaos.prepare(example, where, tree)
            ref = refs[example]
            kinds = faults_for(example, args.db, args.faults, injected, seed)
            plan = chaos.plan_for(seed, KILLS_PER_RUN, ref, kinds, args.db)
            run_id, fired = chaos.run_through_crashes(
                example, where / "home", project, plan, ctx, server=server,
                deadline_s=chaos.deadline_for(ref), strict=False,
            )  # fmt: skip
            result = chaos.check(example, where / "home", run_id, project, ref, fired)
            for key in ("kills", "resumes", "lost", "duplicated", "corrupted", "silent_losses", "hangs",
                        "named_losses", "quarantined"):  # fmt: skip
                totals[key] += getattr(result, key)
            for key in ("twice", "refused", "stops", "errors"):
                totals[key] += len(getattr(result, key))
            totals["differ"] += bool(result.differences)
            injected.update(result.faults)
            resume_ms += result.resume_ms
            if worth_telling(result):
                print(
                    f"seed {seed} ({example}, {', '.join(kinds) or 'kills only'}): {result}", file=sys.stderr
                )
            runs += 1
            seed += 1
    seconds = time.monotonic() - started
    p50 = statistics.median(resume_ms) if resume_ms else 0.0
    p95 = statistics.quantiles(resume_ms, n=20)[-1] if len(resume_ms) > 1 else p50
    baseline_ms = statistics.mean(r.seconds for r in refs.values()) * 1000
    kinds_seen = sorted(injected)
    print(f"{runs} runs, {totals['kills']} kills, {totals['resumes']} resumes in {seconds:.1f} s")
    print(f"faults injected (runs): {', '.join(f'{k} {injected[k]}' for k in kinds_seen)}")
    print(f"lost {totals['lost']}, duplicated {totals['duplicated']}, corrupted {totals['corrupted']},"
          f" side effects twice {totals['twice']}, runs differing {totals['differ']}")  # fmt: skip
    print(f"silent losses {totals['silent_losses']}, hangs {totals['hangs']}; named losses"
          f" {totals['named_losses']}, refused resumes {totals['refused']}, stops {totals['stops']},"
          f" errors {totals['errors']}")  # fmt: skip
    print(f"resume p50 {p50:.0f} ms (start of resume to every agent running again);"
          f" an uninterrupted example run takes {baseline_ms:.0f} ms")  # fmt: skip
    if args.json:
        print(json.dumps({
            "kills": totals["kills"], "resumes": totals["resumes"], "lost": totals["lost"],
            "duplicated": totals["duplicated"], "corrupted": totals["corrupted"],
            "silent_losses": totals["silent_losses"], "hangs": totals["hangs"],
            "faults": len(kinds_seen), "fault_kinds": kinds_seen,
            "fault_runs": {k: injected[k] for k in kinds_seen},
            "refused": totals["refused"], "named_losses": totals["named_losses"],
            "quarantined": totals["quarantined"], "stops": totals["stops"], "errors": totals["errors"],
            "side_effects_twice": totals["twice"], "runs_differing": totals["differ"], "runs": runs,
            "resume_p50_ms": round(p50, 1),
            "resume_p95_ms": round(p95, 1),
            "uninterrupted_run_ms": round(baseline_ms, 1),
            "resume_p50_vs_run": round(p50 / baseline_ms, 3) if baseline_ms else None,
            "seconds": round(seconds, 1), "db": args.db,
        }))  # fmt: skip
    silent = totals["lost"] + totals["duplicated"] + totals["corrupted"] + totals["twice"]
    bad = silent + totals["silent_losses"] + totals["hangs"] + totals["errors"]
    return 1 if bad or (not args.faults and totals["differ"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
