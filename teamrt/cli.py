"""The ``teamrt`` command.

Mistakes a user can make (a bad argument, an unusable run directory) end in
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from . import __version__
from .mailbox import MailboxError
from .settings import SettingsError

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line instead of usage plus message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="teamrt", description="A runtime for teams of LLM agents.")
    parser.add_argument("--version", action="version", version=f"teamrt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="show the mailbox at work between real processes",
        description="Start three worker processes and exchange mail with them: latency,"
        " broadcast, an unknown recipient, a hostile file, shutdown.",
    )
    demo.add_argument(
        "--rounds", type=_positive_int, default=200, help="ping-pong rounds per worker (default: 200)"
    )
    run = commands.add_parser(
        "run",
        help="run a team (TEAMFILE) or one agent on a prompt, to the end",
        description="Run the team of TEAMFILE, or without one a single agent (a built-in or one from"
        " .teamrt/agents or .claude/agents), on a prompt in this directory, in a run of its own, and"
        " print the answer with turns, tokens, cache-read share and cost. --model sim runs offline.",
    )
    run.add_argument("teamfile", nargs="?", help="a team file (TOML); see examples/teams/")
    run.add_argument("--prompt", help="the task (a team file may give a default)")
    run.add_argument("--agent", default="lead", help="the agent definition to run (default: lead)")
    run.add_argument(
        "--model",
        help="sim (offline, the default), sim:<claude model>, a Claude model, or a local server's model",
    )
    run.add_argument(
        "--on-ask",
        choices=("deny", "allow"),
        default="deny",
        help="how to answer a tool call that needs approval (default: deny, telling the model why)",
    )
    run.add_argument("--max-turns", type=_positive_int, help="stop after this many model turns")
    run.add_argument("--budget-tokens", type=_positive_int, help="hard limit on tokens for the run")
    run.add_argument("--budget-usd", type=_positive_float, help="hard limit on dollars for the run")
    run.add_argument("--quiet", action="store_true", help="do not stream the agent's text as it arrives")
    commands.add_parser(
        "models",
        help="list the known models with their prices and cache minimums",
        description="The price table teamrt bills by (USD per million tokens), with the settings"
        " file's overrides applied, and each model's minimum cacheable prefix.",
    )
    commands.add_parser(
        "ls",
        help="list the runs, newest first",
        description="One line per run: status (a running run whose owner is gone is crashed), age,"
        " agents, cost, tokens and the task's first line.",
    )
    show = commands.add_parser(
        "show",
        help="show one run: totals, the agent tree, answers and tasks",
        description="A run's header and totals, its agents as a tree, each agent's latest answer"
        " and the shared task list.",
    )
    show.add_argument("run", metavar="RUN", help="the run's id, as teamrt ls shows it")
    send = commands.add_parser(
        "send",
        help="send a message to an agent of a run",
        description="Deliver TEXT from you into AGENT's mailbox; the agent reads it on its next turn."
        " Prints the message id.",
    )
    send.add_argument("run", metavar="RUN", help="the run's id")
    send.add_argument("agent", metavar="AGENT", help="the agent to tell")
    send.add_argument("text", metavar="TEXT", help="the message")
    stop = commands.add_parser(
        "stop",
        help="ask a live run's supervisor to stop the run or one agent",
        description="Send a stop request to the supervisor of a live run: stop AGENT, or the whole"
        " run when no AGENT is given. A crashed or finished run is refused.",
    )
    stop.add_argument("run", metavar="RUN", help="the run's id")
    stop.add_argument("agent", metavar="AGENT", nargs="?", help="the agent to stop (default: the whole run)")
    apply = commands.add_parser(
        "apply",
        help="bring a finished run's integration branch onto your current branch",
        description="Fast-forward your current branch to the run's integration branch (teamrt/RUN),"
        " or merge it when your branch has moved on (after you confirm, or with --yes). Refused when"
        " your working tree has uncommitted changes; a conflicting merge is undone.",
    )
    apply.add_argument("run", metavar="RUN", help="the run's id")
    apply.add_argument("--yes", action="store_true", help="make a merge commit without asking")
    gc = commands.add_parser(
        "gc",
        help="remove the worktrees and branches of finished runs",
        description="For every finished run: remove its worktrees and its agents' branches, and its"
        " integration branch once applied. Live and crashed runs are left alone.",
    )
    gc.add_argument("--force", action="store_true", help="delete integration branches not yet applied too")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors: argparse has printed them
        return e.code if isinstance(e.code, int) else EXIT_FAILED
    try:
        return _run(args)
    except BrokenPipeError:  # the reader went away (`teamrt models | head`); say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except (MailboxError, SettingsError, OSError) as e:
        print(f"teamrt: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("teamrt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from .demos import mailbox as demo

        return demo.run(rounds=args.rounds)
    if args.command == "models":
        return _list_models()
    if args.command == "run":
        return _run_one(args)
    if args.command in ("ls", "show", "send", "stop"):
        return _inspect(args)
    if args.command in ("apply", "gc"):
        return _git_command(args)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse allows no other


def _run_one(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from .agents import DefinitionError
    from .models import ModelConfigError
    from .runtime.teamfile import TeamFileError
    from .runtime.teamrun import BranchTaken, NoPrompt, UnknownAgent, run_single, run_team_file
    from .store import StoreError

    if args.teamfile is None and not args.prompt:
        print("teamrt: run needs a team file or --prompt (see 'teamrt run --help')", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.teamfile is not None:
            work = run_team_file(
                Path(args.teamfile), prompt=args.prompt, model=args.model, project=Path.cwd(),
                on_notice=lambda line: print(line, file=sys.stderr),
            )  # fmt: skip
        else:
            work = run_single(
                args.prompt,
                agent=args.agent,
                model=args.model or "sim",
                project=Path.cwd(),
                on_ask=args.on_ask,
                max_turns=args.max_turns,
                budget_tokens=args.budget_tokens,
                budget_usd=args.budget_usd,
                on_text=None if args.quiet else _echo,
            )
        result = asyncio.run(work)
    except (
        DefinitionError, UnknownAgent, ModelConfigError, StoreError, TeamFileError, NoPrompt, BranchTaken,
    ) as e:  # fmt: skip
        print(f"teamrt: {e}", file=sys.stderr)
        return EXIT_FAILED
    outcome = result.outcome
    if (args.quiet or args.teamfile is not None) and outcome.answer:
        print(outcome.answer)
    prompt_tokens = result.input_tokens + result.cache_read_tokens
    share = result.cache_read_tokens / prompt_tokens if prompt_tokens else 0.0
    print(
        f"\n\nrun {result.run_id}: {outcome.status}; {result.agents} agent(s), {outcome.turns} lead turn(s);"
        f" {prompt_tokens:,} input tokens ({share:.0%} read from cache), {result.output_tokens:,} output;"
        f" ${result.cost_usd:.4f}"
    )
    if outcome.status != "done":
        print(f"teamrt: the lead {outcome.status}: {outcome.reason}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _inspect(args: argparse.Namespace) -> int:
    """``ls``, ``show``, ``send`` and ``stop``: the store and the mailbox, imported only now."""
    from . import home, runs
    from .store import StoreError

    try:
        if args.command == "ls":
            runs_dir = home.runs_path()
            print("\n".join(runs.render_ls(runs.list_runs(runs_dir), runs_dir)))
            return 0
        run_dir = home.existing_run_dir(args.run)
        if args.command == "show":
            print("\n".join(runs.render_show(run_dir, args.run)))
        elif args.command == "send":
            msg, status = runs.send(run_dir, args.run, args.agent, args.text)
            print(msg.id)
            if status != "running":
                print(
                    f"teamrt: note: run {args.run!r} is {status}; the message waits in the mailbox",
                    file=sys.stderr,
                )
        else:
            msg, created = runs.stop(run_dir, args.run, args.agent)
            what = f"agent {args.agent}" if args.agent else "the run"
            print(f"asked the supervisor of run {args.run} to stop {what} (message {msg.id})")
            if created:
                print(
                    "teamrt: note: this run had no supervisor mailbox yet; the request waits there",
                    file=sys.stderr,
                )
    except (home.UnknownRun, runs.RunsError, StoreError) as e:
        print(f"teamrt: {e}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _git_command(args: argparse.Namespace) -> int:
    """``apply`` and ``gc``: a run's branches and worktrees in the user's repository."""
    from . import home, runs
    from .store import StoreError
    from .worktree.apply import ApplyError, apply, collect, plan_apply
    from .worktree.git import GitError

    try:
        if args.command == "gc":
            for summary in runs.list_runs(home.runs_path()):
                if summary.status in ("done", "failed", "stopped"):
                    run_dir = home.existing_run_dir(summary.id)
                    with runs.reading(run_dir, summary.id) as reader:
                        run, agents = reader.run(), reader.agents()
                    branches = [a.branch for a in agents if a.branch]
                    for line in collect(run, run_dir, branches, force=args.force):
                        print(line)
            return 0
        run_dir = home.existing_run_dir(args.run)
        with runs.reading(run_dir, args.run) as reader:
            run = reader.run()
        status = runs.run_status(run)
        if status in ("running", runs.CRASHED):
            raise ApplyError(f"run {run.id} is {status}; apply it once it has ended")
        plan = plan_apply(run)
        if plan.how == "merge" and not args.yes:
            question = (
                f"{plan.branch} has moved on since run {run.id} started; merge {plan.integration} into it?"
            )
            if not sys.stdin.isatty():
                raise ApplyError(f"{question} Run again with --yes to make the merge commit")
            if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
                print("teamrt: nothing was changed", file=sys.stderr)
                return EXIT_FAILED
        print(apply(plan))
    except (home.UnknownRun, runs.RunsError, StoreError, ApplyError, GitError) as e:
        print(f"teamrt: {e}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _list_models() -> int:
    from .models.catalog import SOURCE, SOURCE_DATE
    from .models.pricing import with_overrides
    from .settings import load_settings, settings_path

    settings = load_settings()
    table = with_overrides(settings.prices)
    header = ("input", 8), ("output", 8), ("write 5m", 10), ("write 1h", 10), ("read", 8), ("min cache", 11)
    print(f"{'model':22}" + "".join(f"{title:>{width}}" for title, width in header))
    for name, info in table.items():
        p = info.price
        mark = " *" if name in settings.prices else ""
        print(
            f"{name:22}{p.input:>8g}{p.output:>8g}{p.cache_write_5m:>10g}{p.cache_write_1h:>10g}"
            f"{p.cache_read:>8g}{info.min_cache_tokens:>11}{mark}"
        )
        if info.long_context_price is not None and name not in settings.prices:
            q = info.long_context_price
            print(
                f"{'  over ' + format(info.long_context_from, ','):22}{q.input:>8g}{q.output:>8g}"
                f"{q.cache_write_5m:>10g}{q.cache_write_1h:>10g}{q.cache_read:>8g}"
            )
    print(f"USD per million tokens; {SOURCE}, as read on {SOURCE_DATE}.")
    print(f"* from {settings_path()}" if settings.prices else f"Override or add prices in {settings_path()}.")
    print("sim bills like claude-sonnet-5-5; sim:<model> like <model>.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
