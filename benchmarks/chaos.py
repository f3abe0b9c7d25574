"""Chaos benchmark: the example teams killed (SIGKILL) again and again and resumed, at scale.

Runs the research and coding examples on ``sim`` in turn, each with five kills
(named fault points and timers, seeded), resuming after each, until ``--kills``
kills have fired, and checks every run against an uninterrupted one
(``teamrt.chaos``): nothing lost, nothing twice, no corruption. The baseline,
measured in the same run, is the uninterrupted run itself: a resume's cost is
set beside it.

Prints a table, then one JSON object as the last line with ``--json``; keys
``kills``, ``resumes``, ``lost``, ``duplicated``, ``corrupted`` (the last three
must be 0) and ``resume_p50_ms``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from teamrt import chaos

KILLS_PER_RUN = 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30, help="kills to fire in all (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    args = parser.parse_args()
    ctx = chaos.context()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="teamrt-chaos-") as tmp:
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
            "seconds": round(seconds, 1),
        }))  # fmt: skip
    bad = totals["lost"] + totals["duplicated"] + totals["corrupted"] + totals["twice"] + totals["differ"]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
