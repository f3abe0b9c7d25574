"""``teamrt continue RUN --prompt ...`` and ``teamrt run --continue``: a run that ended, given a follow-up.

In the foreground the round runs as ``teamrt run`` and ``resume`` do (``cli.run``'s foreground: progress
on stderr, the answer on stdout, the totals, the exit status); ``--detach`` checks what can be refused
here, in one line, then hands the round to a process of its own, as ``resume --detach`` does. The TUI's
``c`` starts ``teamrt continue RUN --prompt ... --detach``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from teamrt import home
from teamrt.cli import tui
from teamrt.cli.output import EXIT_USAGE, notice, warning
from teamrt.cli.run import _foreground, _start_detached
from teamrt.errors import UserError
from teamrt.runs import query as runs

NOT_WITH_CONTINUE = ("teamfile", "agent", "model", "on_ask", "ask_wait", "unconfined", "run_id")
"""``teamrt run`` arguments that choose a new run's team: a continued run keeps its own."""


class NoRunHere(UserError, LookupError):
    """``run --continue`` where no run was kept."""


def handle(args: argparse.Namespace) -> int:
    if args.command == "run":  # teamrt run --continue
        return continue_newest(args)
    return follow_up(args, args.run)


def continue_newest(args: argparse.Namespace) -> int:
    """``teamrt run --continue``: ``teamrt continue`` on the newest run of this repository."""
    given = [name for name in NOT_WITH_CONTINUE if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join("TEAMFILE" if n == "teamfile" else "--" + n.replace("_", "-") for n in given)
        print(f"teamrt: run --continue goes on with the run's own team; leave out {flags}", file=sys.stderr)
        return EXIT_USAGE
    if not args.prompt:
        print("teamrt: run --continue needs --prompt: what the lead should do next", file=sys.stderr)
        return EXIT_USAGE
    run_id = newest_run()
    if args.tui:
        args.detach = True
        started = follow_up(args, run_id, quiet=True)
        return started if started else tui.watch(run_id)
    return follow_up(args, run_id)


def newest_run() -> str:
    """The id of the newest run kept in this repository's home (``teamrt ls``'s first that can be read)."""
    runs_dir = home.runs_path()
    for summary in runs.list_runs(runs_dir):
        if summary.problem is None and (runs_dir / summary.id).is_dir():
            return summary.id
    raise NoRunHere(f"no run to continue in {runs_dir}; start one with teamrt run --prompt ...")


def follow_up(args: argparse.Namespace, run_id: str, *, quiet: bool = False) -> int:
    """The round on ``args.prompt``: in the foreground, or with ``args.detach`` in a process of its own."""
    from teamrt.runtime.continuing import continue_run, plan_round

    run_dir = home.existing_run_dir(run_id)
    # only ``teamrt continue RUN`` takes --accept-loss: a store that lost work is gone on with by its name
    accept_loss = bool(getattr(args, "accept_loss", False))
    plan = plan_round(
        run_dir,
        run_id,
        args.prompt,
        budget_usd=args.budget_usd,
        budget_tokens=args.budget_tokens,
        max_turns=args.max_turns,
        accept_loss=accept_loss,
    )  # fmt: skip: refused here, in one line, before any progress line or process
    if args.detach:
        return _detached(args, run_id, plan.run.owner, quiet=quiet)
    with runs.reading(run_dir, run_id) as reader:
        seen = reader.last_events(1)
    after = seen[-1].id if seen else 0
    on_notice = notice if not args.quiet else warning
    work = continue_run(
        run_id, args.prompt, budget_usd=args.budget_usd, budget_tokens=args.budget_tokens,
        max_turns=args.max_turns, on_notice=on_notice, accept_loss=accept_loss,
    )  # fmt: skip
    return _foreground(lambda: asyncio.run(work), run_id, args, after=after)


def _detached(args: argparse.Namespace, run_id: str, before: object, *, quiet: bool) -> int:
    """``continue --detach``: the round in a process of its own, returned from once that process owns
    the run (its status running again under a new owner)."""
    run_dir = home.existing_run_dir(run_id)

    def taken_over() -> bool:
        with runs.reading(run_dir, run_id) as reader:
            run = reader.run()
        return run.status == "running" and run.owner is not None and run.owner != before

    argv = ["continue", run_id, f"--prompt={args.prompt}", "--quiet"]
    for flag, value in (
        ("--budget-usd", args.budget_usd),
        ("--budget-tokens", args.budget_tokens),
        ("--max-turns", args.max_turns),
    ):
        if value is not None:
            argv.append(f"{flag}={value}")
    if getattr(args, "accept_loss", False):
        argv.append("--accept-loss")
    if quiet:
        notice(f"teamrt: going on with run {run_id} ...")
    return _start_detached(argv, run_dir, run_id, taken_over, quiet=quiet)
