"""Chaos benchmark: the example teams killed (SIGKILL) again and again and resumed, at scale.

Runs the research and coding examples on ``sim`` in turn, each with five kills
(named fault points and timers, seeded), resuming after each, until ``--kills``
kills have fired, and checks every run against an uninterrupted one
(``teamrt.chaos``): nothing lost, nothing twice, no corruption. The baseline,
measured in the same run, is the uninterrupted run itself: a resume's cost is
set beside it.

With ``--db postgres`` the runs live on a throwaway PostgreSQL server the
benchmark starts (``teamrt.pgserver``; it exits 2 with one line when
PostgreSQL is not installed): every run, the references and the chaos runs
alike, in one database, as a user's runs share one, reached through
``TEAMRT_DB``, which the harness hands every owner it forks. The checks read the runs back
through the store; "corrupted" counts a run's inconsistent rows there
(``teamrt.chaos.inconsistencies``) instead of SQLite's ``integrity_check``.
The default there is 10 kills, not 30, to end within a minute: an example
run and a resume each take longer on the server than on SQLite.

Prints a table, then one JSON object as the last line with ``--json``; keys
``kills``, ``resumes``, ``lost``, ``duplicated``, ``corrupted`` (the last three
must be 0), ``resume_p50_ms`` and ``db`` (``sqlite`` or ``postgres``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from teamrt import chaos
from teamrt.pgserver import NoServer, PgServer
from teamrt.store.engine import DB_ENV

KILLS_PER_RUN = 5
DEFAULT_KILLS = {"sqlite": 30, "postgres": 10}


@contextmanager
def server_database() -> Iterator[str]:
    """A throwaway PostgreSQL server and one database on it for every run; yields its URL. Raises
    NoServer when PostgreSQL is not installed."""
    with PgServer() as server:
        yield server.create_database("teamrt")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=sorted(DEFAULT_KILLS), default="sqlite",
                        help="a SQLite file per run (default), or a throwaway PostgreSQL server")  # fmt: skip
    parser.add_argument("--kills", type=int, default=None,
                        help="kills to fire in all (default 30 on SQLite, 10 on PostgreSQL)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    if args.kills is None:
        args.kills = DEFAULT_KILLS[args.db]
    started = time.monotonic()
    with ExitStack() as stack:
        os.environ.pop(DB_ENV, None)  # each run its own SQLite file, unless a server holds them
        if args.db == "postgres":
            try:
                os.environ[DB_ENV] = stack.enter_context(server_database())
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
        totals = {
            "kills": 0,
            "resumes": 0,
            "lost": 0,
            "duplicated": 0,
            "corrupted": 0,
            "twice": 0,
            "differ": 0,
        }
        resume_ms: list[float] = []
        runs, seed = 0, args.seed
        while totals["kills"] < args.kills:
            example = ("research", "coding")[seed % 2]
            where = base / f"seed-{seed}"
            where.mkdir()
            project = chaos.prepare(example, where, tree)
            kills = chaos.kills_for(seed, KILLS_PER_RUN, refs[example])
            run_id, fired = chaos.run_through_crashes(example, where / "home", project, kills, ctx)
            result = chaos.check(example, where / "home", run_id, project, refs[example], fired)
            for key in ("kills", "resumes", "lost", "duplicated", "corrupted"):
                totals[key] += getattr(result, key)
            totals["twice"] += len(result.twice)
            totals["differ"] += bool(result.differences)
            resume_ms += result.resume_ms
            if result.differences or result.twice or result.lost or result.duplicated or result.corrupted:
                print(f"seed {seed} ({example}): {result}", file=sys.stderr)
            runs += 1
            seed += 1
    seconds = time.monotonic() - started
    p50 = statistics.median(resume_ms) if resume_ms else 0.0
    p95 = statistics.quantiles(resume_ms, n=20)[-1] if len(resume_ms) > 1 else p50
    baseline_ms = statistics.mean(r.seconds for r in refs.values()) * 1000
    print(f"{runs} runs, {totals['kills']} kills, {totals['resumes']} resumes in {seconds:.1f} s")
    print(f"lost {totals['lost']}, duplicated {totals['duplicated']}, corrupted {totals['corrupted']},"
          f" side effects twice {totals['twice']}, runs differing {totals['differ']}")  # fmt: skip
    print(f"resume p50 {p50:.0f} ms (start of resume to every agent running again);"
          f" an uninterrupted example run takes {baseline_ms:.0f} ms")  # fmt: skip
    if args.json:
        print(json.dumps({
            "kills": totals["kills"], "resumes": totals["resumes"], "lost": totals["lost"],
            "duplicated": totals["duplicated"], "corrupted": totals["corrupted"],
            "side_effects_twice": totals["twice"], "runs_differing": totals["differ"], "runs": runs,
            "resume_p50_ms": round(p50, 1),
            "resume_p95_ms": round(p95, 1),
            "uninterrupted_run_ms": round(baseline_ms, 1),
            "resume_p50_vs_run": round(p50 / baseline_ms, 3) if baseline_ms else None,
            "seconds": round(seconds, 1), "db": args.db,
        }))  # fmt: skip
    bad = totals["lost"] + totals["duplicated"] + totals["corrupted"] + totals["twice"] + totals["differ"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
