"""``teamrt run`` and ``resume``: a run in the foreground with its progress, or detached.

In the foreground the run's progress goes to stderr as its events are committed
(``teamrt.runs.progress``) and its end is the final report: the answer on stdout,
the totals on stderr, or one JSON object. ``--detach`` (and ``--tui``, which then
watches it) first checks what a person can get wrong, in this process's one line,
then hands the run to a process of its own (``teamrt.runs.detach``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

from teamrt import home
from teamrt.cli import tui
from teamrt.cli.asking import asking_here
from teamrt.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, error, notice, warning
from teamrt.cli.parser import TUI_ASK_WAIT_S
from teamrt.runs import detach, progress
from teamrt.runs import query as runs
from teamrt.runs.alerts import terminal_alerts
from teamrt.runs.follow import OUTPUT_LOG, store_ready
from teamrt.runs.render import money
from teamrt.runtime.teamrun import (
    Choices,
    NotResumable,
    RunSummary,
    check_reachable,
    check_start,
    resume_run,
    run_single,
    run_team_file,
    sandbox_notice,
    single_team,
    team_file_of,
    team_from_file,
)
from teamrt.runtime.verify import refuse_if_behind
from teamrt.settings import load_settings
from teamrt.store import RunRecord
from teamrt.store.engine import DB_FILE, server_url
from teamrt.store.ownership import lock_name
from teamrt.terminal import clean, clean_line

LOCAL_FLAGS = ("command", "teamfile", "detach", "tui", "run_id", "json")
"""What ``run --detach`` does not pass on to the run it starts."""


def handle(args: argparse.Namespace) -> int:
    if getattr(args, "queued", None):  # a queued run's child, started by its worker (teamrt.queue.child)
        from teamrt.queue import child

        return child.run_queued(args.queued) if args.command == "run" else child.resume_queued(args.run)
    if args.command == "run":
        return _run_one(args)
    return _resume(args)


def _run_one(args: argparse.Namespace) -> int:
    if args.teamfile is None and not args.prompt:
        print("teamrt: run needs --prompt or a team file (see 'teamrt run --help')", file=sys.stderr)
        return EXIT_USAGE
    if args.teamfile is not None and args.agent is not None:
        print("teamrt: --agent runs one agent alone; leave out the team file (see 'teamrt run --help')",
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if args.run_id is not None and _run_taken(args.run_id):
        print(f"teamrt: run {args.run_id!r} exists already; leave out --run-id", file=sys.stderr)
        return EXIT_FAILED
    if args.tui:
        args.ask_wait = TUI_ASK_WAIT_S if args.ask_wait is None else args.ask_wait
        print("teamrt: starting the run ...", file=sys.stderr)
        started = _detach(args, quiet=True)
        return started if started else tui.watch(args.run_id)
    if args.detach:
        return _detach(args)
    project = home.project_root()
    run_id = args.run_id or home.new_run_id()
    on_notice = notice if not args.quiet else warning
    if args.agent is not None:
        work = run_single(
            args.prompt, agent=args.agent, project=project, choices=_choices(args), on_notice=on_notice,
            run_id=run_id,
        )  # fmt: skip
    else:
        work = run_team_file(
            _team_path(args, project), prompt=args.prompt, project=project, choices=_choices(args),
            on_notice=on_notice, run_id=run_id,
        )  # fmt: skip
    return _foreground(lambda: asyncio.run(work), run_id, args)


def _team_path(args: argparse.Namespace, project: Path) -> Path:
    return Path(args.teamfile) if args.teamfile is not None else team_file_of(project)


def _choices(args: argparse.Namespace) -> Choices:
    return Choices(
        model=args.model, on_ask=args.on_ask, ask_wait=args.ask_wait, max_turns=args.max_turns,
        budget_tokens=args.budget_tokens, budget_usd=args.budget_usd, unconfined=args.unconfined,
    )  # fmt: skip


def _foreground(work: Callable[[], RunSummary], run_id: str, args: argparse.Namespace, after: int = 0) -> int:
    """Do ``work`` (a run to its end), its progress on stderr unless --quiet, with the bell (and a desktop
    notification) when an ask waits or the run ends, on a terminal; then its result. Ctrl-C says how to
    go on."""
    run_dir = home.runs_path() / run_id
    out = (lambda line: None) if args.quiet else notice
    try:
        alerts = None if args.quiet else terminal_alerts(run_id, load_settings().notify, sys.stderr)
        policy = getattr(args, "on_ask", None) is not None  # --on-ask: the policy answers, not you
        with (  # asks put to you here on a terminal, lines held while one is shown: teamrt.cli.asking
            asking_here(out, policy_given=policy) as held,
            progress.watching(run_dir, run_id, held, after=after, on_event=alerts.seen if alerts else None),
        ):
            result = work()
    except KeyboardInterrupt:
        if _run_taken(run_id):
            print(
                f"\nteamrt: run {run_id} interrupted; resume it with: teamrt resume {run_id}", file=sys.stderr
            )
        else:
            notice("\nteamrt: interrupted before the run started")
        return EXIT_INTERRUPTED
    return _report(result, args)


def _report(result: RunSummary, args: argparse.Namespace) -> int:
    """A run's end: its answer on stdout, its totals on stderr (or one JSON object), the exit status."""
    outcome = result.outcome
    prompt_tokens = result.input_tokens + result.cache_read_tokens
    if args.json:
        print(json.dumps({
            "run": result.run_id, "status": outcome.status, "reason": outcome.reason,
            "answer": outcome.answer,
            "agents": result.agents, "lead_turns": outcome.turns, "input_tokens": prompt_tokens,
            "cache_read_tokens": result.cache_read_tokens, "output_tokens": result.output_tokens,
            "cost_usd": result.cost_usd, "simulated": result.simulated, "budget_usd": result.budget_usd,
            "integration_branch": result.integration if result.merged else None, "merged": result.merged,
        }))  # fmt: skip
    elif outcome.answer:
        print(clean(outcome.answer))  # the model's words: never instructions to the terminal
    if not args.quiet and not args.json:
        share = result.cache_read_tokens / prompt_tokens if prompt_tokens else 0.0
        budget = f" of ${result.budget_usd:.2f}" if result.budget_usd is not None else ""
        notice(
            f"\nrun {result.run_id}: {outcome.status}; {result.agents} agent(s),"
            f" {outcome.turns} lead turn(s);"
            f" {prompt_tokens:,} input tokens ({share:.0%} read from cache), {result.output_tokens:,} output;"
            f" {money(result.cost_usd, result.simulated)}{budget}"
        )
        if result.merged:
            notice(
                f"its work: {result.merged} branch(es) merged onto {result.integration};"
                f" teamrt apply {result.run_id} brings it onto your branch"
            )
    if outcome.status != "done":
        said = "the run is blocked" if outcome.status == "blocked" else f"the lead {outcome.status}"
        error(f"{said}: {outcome.reason}")
        return EXIT_FAILED
    if outcome.reason and not args.json:  # done, but not all went to plan (a spawn failed)
        notice(f"teamrt: note: {outcome.reason}")
    return 0


def _run_taken(run_id: str) -> bool:
    """Whether run ``run_id`` has a store, or had one begun."""
    run_dir = home.runs_path() / run_id
    # a run in a server database has no run.db, and its lock file is named for its host
    return (run_dir / DB_FILE).exists() or (run_dir / lock_name(server_url() is not None)).exists()


def _detach(args: argparse.Namespace, *, quiet: bool = False) -> int:
    """``run --detach``: check what a user can get wrong, then start the run in a session of its own.

    Waits until the run's store exists, so that ``teamrt logs``, ``show`` and
    ``ls`` find it, or until the child exits: then its output's last lines are
    the error.
    """
    _check_run(args)
    run_id = args.run_id = args.run_id or home.new_run_id()
    run_dir = home.run_dir(run_id)
    return _start_detached(
        _child_argv(args, run_id), run_dir, run_id, lambda: store_ready(run_dir, run_id), quiet=quiet
    )


def _start_detached(
    argv: list[str], run_dir: Path, run_id: str, ready: Callable[[], bool], *, quiet: bool = False
) -> int:
    """``detach.start``, said: the run's id on stdout and how to follow it, or why it did not start (its
    output's last lines). ``quiet``: print nothing once it started (the TUI takes the screen)."""
    output = run_dir / OUTPUT_LOG
    try:
        started = detach.start(argv, run_dir, ready)
    except detach.NotStarted as e:
        print(*(clean_line(line) for line in e.tail), sep="\n", file=sys.stderr)
        said = f"teamrt: run {run_id} did not start (exit {e.code}); its output is in {output}"
        print(said, file=sys.stderr)
        return EXIT_FAILED
    if not started:
        print(f"teamrt: note: run {run_id} has not started yet; its output is in {output}", file=sys.stderr)
    if quiet:
        return 0
    print(run_id)
    print(
        f"teamrt: run {run_id} goes on in the background; follow it with: teamrt logs {run_id} -f",
        file=sys.stderr,
    )
    return 0


def _check_run(args: argparse.Namespace) -> None:
    """Raise what ``run_team_file`` or ``run_single`` would raise before creating a run, creating none;
    say what the run's start would (its sandbox)."""
    project = home.project_root()
    if args.agent is None:
        team, _ = team_from_file(
            _team_path(args, project), prompt=args.prompt, project=project, choices=_choices(args)
        )
    else:
        team, _ = single_team(args.agent, project=project, choices=_choices(args))
    for model in check_start(team, project, sim=False).values():
        asyncio.run(model.aclose())
    said = sandbox_notice(team.sandbox)
    if said is not None:
        notice(said)


def _child_argv(args: argparse.Namespace, run_id: str) -> list[str]:
    """The arguments of ``run`` that gave ``args``, without --detach, with ``--run-id run_id``."""
    argv = ["run", f"--run-id={run_id}"]
    for dest, value in vars(args).items():
        if dest in LOCAL_FLAGS or value is None or value is False:
            continue
        flag = "--" + dest.replace("_", "-")
        argv.append(flag if value is True else f"{flag}={value}")
    return argv if args.teamfile is None else [*argv, "--", args.teamfile]


def _resume(args: argparse.Namespace) -> int:
    if args.detach:
        return _resume_detached(args.run, args.accept_loss)
    run_dir, _ = _crashed_run(args.run)  # before any progress line: a live run is refused at once
    with runs.reading(run_dir, args.run) as reader:
        seen = reader.last_events(1)
    after = seen[-1].id if seen else 0
    on_notice = notice if not args.quiet else warning
    work = resume_run(args.run, on_notice=on_notice, accept_loss=args.accept_loss)
    return _foreground(lambda: asyncio.run(work), args.run, args, after=after)


def _crashed_run(run_id: str) -> tuple[Path, RunRecord]:
    """The directory and record of run ``run_id``; raises ``NotResumable`` unless it crashed."""
    run_dir = home.existing_run_dir(run_id)
    with runs.reading(run_dir, run_id) as reader:
        run = reader.run()
        now = reader.now()  # the database's clock, which the heartbeat was written in
    status = runs.run_status(run, now)
    if status == runs.NOT_RESPONDING:
        raise NotResumable(runs.not_responding(run, now))
    if status != runs.CRASHED:
        owner = f" (pid {run.owner.pid} on {run.owner.host})" if status == "running" and run.owner else ""
        follow_up = f" (teamrt continue {run_id} --prompt ... goes on with it)" if status != "running" else ""
        raise NotResumable(f"run {run_id} is {status}{owner}; only a crashed run can be resumed{follow_up}")
    check_reachable(run_dir, run)
    return run_dir, run


def _resume_detached(run_id: str, accept_loss: bool = False) -> int:
    """``resume --detach``: a crashed run, taken over by a process in a session of its own; returns
    once that process owns the run (or has failed to). A store behind its run directory is refused here,
    in this process's one line, unless ``accept_loss``."""
    run_dir, before = _crashed_run(run_id)
    if not accept_loss:
        refuse_if_behind(run_dir, run_id)

    def taken_over() -> bool:
        with runs.reading(run_dir, run_id) as reader:
            owner = reader.run().owner
        return owner is not None and owner != before.owner

    argv = ["resume", run_id, "--quiet", *(["--accept-loss"] if accept_loss else [])]
    return _start_detached(argv, run_dir, run_id, taken_over)
