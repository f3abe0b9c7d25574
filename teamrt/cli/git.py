"""``teamrt apply`` and ``teamrt gc``: a run's branches and worktrees in the person's repository.

``apply`` brings a finished run's integration branch onto the current branch (``teamrt.worktree.apply``):
it lists first what the run's commits change of the protected paths, and asks before a merge commit;
``gc`` removes what finished runs left (their worktrees and branches), keeping work not merged.
"""

from __future__ import annotations

import argparse
import sys

from teamrt import home
from teamrt.cli.output import EXIT_FAILED
from teamrt.runs import query as runs
from teamrt.terminal import clean_line
from teamrt.worktree import apply as applying
from teamrt.worktree.apply import ApplyError, apply, collect, plan_apply


def handle(args: argparse.Namespace) -> int:
    if args.command == "gc":
        return _gc(args)
    return _apply(args)


def _gc(args: argparse.Namespace) -> int:
    said = 0
    for summary in runs.list_runs(home.runs_path()):
        if summary.status in ("done", "failed", "stopped"):
            run_dir = home.existing_run_dir(summary.id)
            with runs.reading(run_dir, summary.id) as reader:
                run, agents = reader.run(), reader.agents()
            for line in collect(run, run_dir, agents, force=args.force, dry_run=args.dry_run):
                print(clean_line(line))  # a branch's name is the agent's choice
                said += 1
    if not said:
        print("nothing to collect: no finished run has worktrees or branches left")
    elif args.dry_run:
        print("dry run: nothing was changed")
    return 0


def _apply(args: argparse.Namespace) -> int:
    run_dir = home.existing_run_dir(args.run)
    with runs.reading(run_dir, args.run) as reader:
        run = reader.run()
    status = runs.run_status(run)
    if status in (*runs.OWNED, runs.CRASHED):
        raise ApplyError(f"run {run.id} is {status}; apply it once it has ended")
    plan = plan_apply(run, run_dir)
    for line in applying.listing(plan):
        print(line)
    applying.check_allowed(plan, args.allow_protected)
    shown = applying.allowed_changes(plan, args.allow_protected)
    if shown:
        print(f"the changes you allowed, to {', '.join(sorted(args.allow_protected))}:\n{shown}")
    if plan.how == "merge" and not args.yes:
        question = f"{plan.branch} has moved on since run {run.id} started; merge {plan.integration} into it?"
        if not sys.stdin.isatty():
            raise ApplyError(f"{question} Run again with --yes to make the merge commit")
        if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
            print("teamrt: nothing was changed", file=sys.stderr)
            return EXIT_FAILED
    print(apply(plan))
    return 0
