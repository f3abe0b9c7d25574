"""The ``teamrt`` command.

Mistakes a user can make (a bad argument, an unusable run directory) end in
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from teamrt import __version__
from teamrt.mailbox import MailboxError
from teamrt.settings import SettingsError
from teamrt.terminal import clean, clean_json, clean_line

if TYPE_CHECKING:
    from teamrt.agents import AgentDefinition
    from teamrt.models.catalog import ModelInfo, Price
    from teamrt.runs.query import Prices
    from teamrt.runtime.teamrun import RunSummary
    from teamrt.store import RunRecord

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
TUI_TRACE_ENV = "TEAMRT_TUI_TRACE"
TUI_ASK_WAIT_S = 300.0  # how long a call that needs approval waits for the user watching in ``run --tui``


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line instead of usage plus message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see '{self.prog} --help')\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:  # a subcommand's parser: its error points to its own help
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _positive_int(text: str) -> int:
    from teamrt.team import MOST

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MOST:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MOST:_}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    from teamrt.team import MOST

    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= MOST:
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most {MOST:_}, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {text!r}")
    return value


def _run_name(text: str) -> str:
    from teamrt.mailbox import is_name

    if not is_name(text):
        raise argparse.ArgumentTypeError(f"not a run name: {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="teamrt", description="A runtime for teams of LLM agents.")
    parser.add_argument("--version", action="version", version=f"teamrt {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo",
        help="run the example teams offline on sim: research, then coding",
        description="Run the example teams of examples/ on the built-in sim model, always (an API key is"
        " never used): the research team surveys a copy of a source tree (teamrt's own, or --tree) with"
        " forks and a reviewer teammate and writes REPORT.md; the coding team fixes the failing tests of"
        " a small repository with worktree agents, a reviewer and the merge queue, and its integration"
        " branch is applied. Each run ends with a table of its agents. 'mailbox' instead shows the"
        " mailbox between real processes.",
    )
    demo.add_argument(
        "which", nargs="?", choices=("all", "research", "coding", "mailbox"), default="all",
        help="which demo (default: all, the research and the coding team)",
    )  # fmt: skip
    demo.add_argument(
        "--tree", type=Path, help="the source tree the research team surveys (default: teamrt's)"
    )
    demo.add_argument(
        "--rounds",
        type=_positive_int,
        default=200,
        help="mailbox demo: ping-pong rounds per worker (default: 200)",
    )
    run = commands.add_parser(
        "run",
        help="run a team on a task in this repository, to the end",
        description="Run a team on a prompt at the top of this git repository (this directory outside"
        " git), in a run of its own: the team of TEAMFILE, else .teamrt/team.toml (teamrt init writes"
        " one), else the built-in team (a lead with forks, coder worktree agents and a reviewer). Prints"
        " the run's id and its progress on stderr, the answer on stdout. The model is Claude"
        " (claude-sonnet-5-5) when ANTHROPIC_API_KEY is set; --model sim runs offline. A run on Claude"
        " has a hard budget ($5 unless --budget-usd, the team file or the settings say otherwise).",
    )
    run.add_argument("teamfile", nargs="?", help="a team file (TOML); see docs/team-file.md")
    run.add_argument("--prompt", help="the task (a team file may give a default)")
    run.add_argument(
        "--agent",
        help="run this one agent alone instead of a team (a built-in: lead, coder, researcher, reviewer,"
        " or one from .teamrt/agents or .claude/agents)",
    )
    run.add_argument(
        "--model",
        help="every agent's model: a Claude model or alias (sonnet, opus, haiku), sim (offline), sim:<claude"
        " model>, or a model of the server ANTHROPIC_BASE_URL names (default: claude-sonnet-5-5 when a key"
        " is set)",
    )
    run.add_argument(
        "--on-ask",
        choices=("deny", "allow"),
        help="how to answer a tool call that needs approval when no one does (default: the team file's,"
        " else deny, telling the model why)",
    )
    run.add_argument(
        "--ask-wait",
        type=_seconds,
        metavar="SECONDS",
        help="how long a call that needs approval waits for you to answer it (teamrt answer) before"
        " --on-ask does (default: the team file's ask_wait, else 0: --on-ask answers at once)",
    )
    run.add_argument("--max-turns", type=_positive_int, help="stop the lead after this many model turns")
    run.add_argument("--budget-tokens", type=_positive_int, help="hard limit on tokens for the run")
    run.add_argument(
        "--budget-usd", type=_positive_float,
        help="hard limit on dollars for the run (default on Claude: the team file's, else 5)",
    )  # fmt: skip
    run.add_argument("--quiet", action="store_true", help="print only the answer: no progress, no totals")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end: the run's result")
    run.add_argument(
        "--unconfined",
        action="store_true",
        help="where bubblewrap is not installed, let agents' commands (bash, merge gates) run anyway,"
        " unconfined: with your rights, your files and your network (as [sandbox] unconfined = true does;"
        " without it they are refused)",
    )
    run.add_argument(
        "--detach",
        action="store_true",
        help="check the arguments, start the run in the background and print its id; its output goes to"
        " output.log in the run's directory (follow it with: teamrt logs RUN -f)",
    )
    run.add_argument(
        "--tui",
        action="store_true",
        help="start the run in the background and watch it in the TUI (quitting the TUI leaves the run"
        f" going); calls that need approval then wait {TUI_ASK_WAIT_S:.0f} s for you unless --ask-wait says",
    )
    run.add_argument("--run-id", type=_run_name, help=argparse.SUPPRESS)  # the id a detached run is given
    resume = commands.add_parser(
        "resume",
        help="take over a crashed run and go on to its end",
        description="Go on with a run whose process died (teamrt ls says crashed): processes its tools"
        " left are killed, mail is reconciled, every agent that had not ended goes on from its last kept"
        " turn, a side-effecting tool call the crash cut short is reported to its agent as interrupted"
        " rather than run again. A live run is refused.",
    )
    resume.add_argument("run", metavar="RUN", help="the run's id, as teamrt ls shows it")
    resume.add_argument("--quiet", action="store_true", help="print only the answer: no progress, no totals")
    resume.add_argument("--json", action="store_true", help="print one JSON object at the end: the result")
    resume.add_argument(
        "--detach", action="store_true",
        help="take the run over in the background and print its id (follow it with: teamrt logs RUN -f)",
    )  # fmt: skip
    resume.add_argument(
        "--accept-loss", action="store_true",
        help="go on even though the store lacks what the run's directory shows was done (its WAL lost, say),"
        " which resume otherwise refuses naming it: the loss is recorded, mail the store never recorded as"
        " read is read again",
    )  # fmt: skip
    init = commands.add_parser(
        "init",
        help="write .teamrt/team.toml, the team of 'teamrt run --prompt', to edit",
        description="Write the built-in team, commented, to .teamrt/team.toml at the top of this git"
        " repository (this directory outside git), where 'teamrt run --prompt' finds it; commit it to"
        " share it. An existing file is left alone unless --force.",
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing .teamrt/team.toml")
    models = commands.add_parser(
        "models",
        help="list the known models with their prices and cache minimums",
        description="The price table teamrt bills by (USD per million tokens), with the settings"
        " file's overrides applied, and each model's minimum cacheable prefix.",
    )
    models.add_argument("--json", action="store_true", help="print the table as one JSON array")
    agents = commands.add_parser(
        "agents",
        help="list the agents this repository's runs can use, with what did not load",
        description="Every agent definition that loads here: teamrt's built-ins, then ~/.claude/agents,"
        " .claude/agents and .teamrt/agents (subfolders included), a later one replacing an earlier one"
        " of the same name; each with its scope, file, model and tools. Then the definitions replaced,"
        " the warnings (tools teamrt lacks, fields it does not use) and the files skipped, each with its"
        " cause. The built-in team lets its lead spawn every agent not built in, by its role name.",
    )
    agents.add_argument("--json", action="store_true", help="print the agents as one JSON object")
    trust = commands.add_parser(
        "trust",
        help="let this repository's hooks, MCP servers and allow rules count, as they are now",
        description="Hooks and permissions.allow rules in .claude/settings.json (and a tracked"
        " .claude/settings.local.json), and the servers of .mcp.json and of the repository's agent files,"
        " came with the repository, so teamrt runs and counts them only after you trusted them. teamrt"
        " trust, at the top of the repository, first shows each of them exactly (control characters"
        " written as escapes), asks you when it runs in a terminal, then records outside the repository a"
        " hash of them as they are now; a change to them stops them until you trust them again. Your own"
        " settings (~/.claude/settings.json) need no trust. Every hook runs in the sandbox of Bash.",
    )
    trust.add_argument(
        "--yes", action="store_true", help="record the trust without asking, after showing what it covers"
    )
    trusting = trust.add_mutually_exclusive_group()
    trusting.add_argument(
        "--revoke", action="store_true", help="stop trusting this repository's hooks, servers and allow rules"
    )
    trusting.add_argument(
        "--list", action="store_true", help="list the repositories whose hooks you trusted, and whether"
        " that trust still holds"
    )  # fmt: skip
    mcp = commands.add_parser(
        "mcp",
        help="list the MCP servers this project's runs may use, and their state and tools",
        description="The MCP servers of the team file, your settings (~/.claude.json) and the project's"
        " .mcp.json and agent files: where each comes from and whether it starts (a repository's servers"
        " start only once you trusted them with teamrt trust, or enabled them in your own settings). With"
        " --run, each server's state in that run; with --tools, each server that may start is started,"
        " in the sandbox as a run starts it, to list its tools, then stopped.",
    )
    mcp.add_argument("--run", metavar="RUN", help="also show each server's state in this run")
    mcp.add_argument("--tools", action="store_true", help="start the servers to list their tools")
    ls = commands.add_parser(
        "ls",
        help="list the runs, newest first",
        description="One line per run: status (a running run whose owner is gone is crashed; a live"
        " one says its owner's pid; one whose owner's process is here but has stopped beating, stopped by"
        " SIGSTOP or overloaded, is not responding), age, agents, cost (of its budget, when it has one),"
        " tokens and the task's first line. A simulated cost says (sim).",
    )
    ls.add_argument("--json", action="store_true", help="print the runs as one JSON array")
    show = commands.add_parser(
        "show",
        help="show one run: totals, the agent tree, answers and tasks",
        description="A run's header and totals (its owner's pid while it runs, its cost and budget),"
        " its agents as a tree, each agent's latest answer and the shared task list. Answers and tasks"
        " are cut to a few lines unless --full.",
    )
    show.add_argument("run", metavar="RUN", help="the run's id, as teamrt ls shows it")
    show.add_argument("--full", action="store_true", help="show answers and tasks whole")
    show.add_argument(
        "--json", action="store_true", help="print the run as one JSON object (answers and tasks whole)"
    )
    show.add_argument(
        "--prices",
        metavar="FILE",
        type=Path,
        help='also its cost at the prices of FILE: [prices."<model>"] tables, as in the settings file',
    )
    logs = commands.add_parser(
        "logs",
        help="print a run's event log; -f follows a live run to its end",
        description="One line per event of the run: the time since it started, the agent (or run), the"
        " event and what it says. With -f, print new events as they come until the run ends, then how it"
        " ended; the exit status is then 0 if the run is done, 1 if it failed, was stopped or crashed.",
    )
    logs.add_argument("run", metavar="RUN", help="the run's id")
    logs.add_argument("-f", "--follow", action="store_true", help="follow a live run until it ends")
    logs.add_argument(
        "--json", action="store_true",
        help="one JSON object per event, a line each (JSON Lines); with -f, how the run ended goes to stderr",
    )  # fmt: skip
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
    answer = commands.add_parser(
        "answer",
        help="allow or deny a tool call of a live run that waits for approval",
        description="Answer the permission ask ASK of a live run (teamrt show RUN lists the asks"
        " waiting): allow runs the call, deny refuses it, telling the model you did and why"
        " (--reason). An answer that comes after the ask's wait (ask_wait, --ask-wait) is ignored:"
        " the run's policy has answered by then.",
    )
    answer.add_argument("run", metavar="RUN", help="the run's id")
    answer.add_argument("ask", metavar="ASK", help="the ask's id, as teamrt show lists it (ask-...)")
    answer.add_argument("verdict", choices=("allow", "deny"), help="allow or deny the call")
    answer.add_argument("--reason", help="why, for the model (a denial says who denied it in any case)")
    tui = commands.add_parser(
        "tui",
        help="watch runs live in a terminal UI, and step in by mail",
        description="The runs list, and for one run: its agents as a tree with what each is doing now,"
        " the selected agent's transcript, mail and worktree, the task list and the event log. Message"
        " (m) or stop (x) an agent, approve or deny (a/d) a waiting permission ask, resume (r) a crashed"
        " run. Press ? in the TUI for every key.",
    )
    tui.add_argument("run", metavar="RUN", nargs="?", help="open this run (default: the runs list)")
    apply = commands.add_parser(
        "apply",
        help="bring a finished run's integration branch onto your current branch",
        description="Fast-forward your current branch to the run's integration branch (teamrt/RUN),"
        " or merge it when your branch has moved on (after you confirm, or with --yes). Refused when"
        " your working tree has uncommitted changes; a conflicting merge is undone. First it lists every"
        " protected path the run's commits change (.claude, .mcp.json, CLAUDE.md, AGENTS.md, .teamrt,"
        " the team file), symlink leaving the tree and hidden index entry, and refuses unless each such"
        " path is named with --allow-protected.",
    )
    apply.add_argument("run", metavar="RUN", help="the run's id")
    apply.add_argument("--yes", action="store_true", help="make a merge commit without asking")
    apply.add_argument(
        "--allow-protected", action="append", default=[], metavar="PATH",
        help="take the run's changes to this protected path (repeatable); its changes are shown first",
    )  # fmt: skip
    gc = commands.add_parser(
        "gc",
        help="remove the worktrees and branches of finished runs",
        description="For every finished run: remove its worktrees and its agents' branches, and its"
        " integration branch once applied. Work not merged is kept and said so: a worktree or branch"
        " with commits the integration branch (or your HEAD) lacks, or with uncommitted changes; so is"
        " an integration branch not applied. Live and crashed runs are left alone.",
    )
    gc.add_argument(
        "--force", action="store_true",
        help="remove unmerged worktrees and branches, and integration branches not applied, too",
    )  # fmt: skip
    gc.add_argument(
        "--dry-run", action="store_true", help="say what would be removed and kept; change nothing"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors: argparse has printed them
        return e.code if isinstance(e.code, int) else EXIT_FAILED
    if args.command is None:  # bare ``teamrt``
        parser.print_help()
        return 0
    try:
        return _run(args)
    except BrokenPipeError:  # the reader went away (`teamrt models | head`); say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except (MailboxError, SettingsError, OSError) as e:
        _error(e)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("teamrt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        return _demo(args)
    if args.command == "models":
        return _list_models(args.json)
    if args.command == "agents":
        return _list_agents(args.json)
    if args.command == "trust":
        return _trust(args)
    if args.command == "mcp":
        return _mcp(args)
    if args.command == "run":
        return _run_one(args)
    if args.command == "init":
        return _init(args.force)
    if args.command == "resume":
        return _resume(args)
    if args.command in ("ls", "show", "send", "stop", "answer"):
        return _inspect(args)
    if args.command == "logs":
        return _logs(args)
    if args.command == "tui":
        return _tui(args.run)
    if args.command in ("apply", "gc"):
        return _git_command(args)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse allows no other


def _init(force: bool) -> int:
    """``teamrt init``: the built-in team, to edit, at ``<top>/.teamrt/team.toml``."""
    import shutil

    from teamrt import home
    from teamrt.runtime.teamrun import DEFAULT_TEAM, TEAM_FILE

    target = home.project_root() / home.DEFAULT_HOME / TEAM_FILE
    if target.exists() and not force:
        print(f"teamrt: {target} exists already; edit it, or overwrite it with teamrt init --force",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    target.parent.mkdir(mode=home.DIR_MODE, parents=True, exist_ok=True)
    shutil.copyfile(DEFAULT_TEAM, target)
    print(f"wrote {target}: the team 'teamrt run --prompt ...' starts here; every key: docs/team-file.md")
    return 0


def _demo(args: argparse.Namespace) -> int:
    if args.which == "mailbox":
        from teamrt.demos import mailbox

        return mailbox.run(rounds=args.rounds)
    from teamrt.demos import teams
    from teamrt.demos.examples import ExamplesError

    try:
        return teams.run(args.which, tree=args.tree)
    except ExamplesError as e:
        _error(e)
        return EXIT_FAILED


def _run_one(args: argparse.Namespace) -> int:
    import asyncio

    from teamrt import home
    from teamrt.runtime.teamrun import run_single, run_team_file

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
    try:
        if args.tui:
            args.ask_wait = TUI_ASK_WAIT_S if args.ask_wait is None else args.ask_wait
            print("teamrt: starting the run ...", file=sys.stderr)
            started = _detach(args, quiet=True)
            return started if started else _tui(args.run_id)
        if args.detach:
            return _detach(args)
        project = home.project_root()
        run_id = args.run_id or home.new_run_id()
        notice = _notice if not args.quiet else _warning
        if args.agent is not None:
            work = run_single(
                args.prompt, agent=args.agent, project=project, choices=_choices(args), on_notice=notice,
                run_id=run_id,
            )  # fmt: skip
        else:
            work = run_team_file(
                _team_path(args, project), prompt=args.prompt, project=project, choices=_choices(args),
                on_notice=notice, run_id=run_id,
            )  # fmt: skip
        return _foreground(lambda: asyncio.run(work), run_id, args)
    except _run_errors() as e:
        _error(e)
        return EXIT_FAILED


def _run_errors() -> tuple[type[Exception], ...]:
    """The errors a run's start raises for a user's mistake: each is one line."""
    from teamrt.agents import DefinitionError
    from teamrt.models import ModelConfigError
    from teamrt.runtime.teamrun import BranchTaken, NoPrompt, UnknownAgent
    from teamrt.store import StoreError
    from teamrt.team import TeamFileError

    return (DefinitionError, UnknownAgent, ModelConfigError, StoreError, TeamFileError, NoPrompt, BranchTaken)


def _team_path(args: argparse.Namespace, project: Path) -> Path:
    from teamrt.runtime.teamrun import team_file_of

    return Path(args.teamfile) if args.teamfile is not None else team_file_of(project)


def _choices(args: argparse.Namespace) -> Any:
    from teamrt.runtime.teamrun import Choices

    return Choices(
        model=args.model, on_ask=args.on_ask, ask_wait=args.ask_wait, max_turns=args.max_turns,
        budget_tokens=args.budget_tokens, budget_usd=args.budget_usd, unconfined=args.unconfined,
    )  # fmt: skip


def _foreground(work: Callable[[], RunSummary], run_id: str, args: argparse.Namespace, after: int = 0) -> int:
    """Do ``work`` (a run to its end), its progress on stderr unless --quiet; then its result. Ctrl-C
    says how to go on."""
    from teamrt import home
    from teamrt.runs import progress

    run_dir = home.runs_path() / run_id
    out = (lambda line: None) if args.quiet else _notice
    try:
        with progress.watching(run_dir, run_id, out, after=after):
            result = work()
    except KeyboardInterrupt:
        if _run_taken(run_id):
            print(
                f"\nteamrt: run {run_id} interrupted; resume it with: teamrt resume {run_id}", file=sys.stderr
            )
        else:
            _notice("\nteamrt: interrupted before the run started")
        return EXIT_INTERRUPTED
    return _report(result, args)


def _notice(line: str) -> None:
    """A line (or lines) on stderr: a run's progress and notes, which quote agent data, made safe for a
    terminal."""
    print(clean(line), file=sys.stderr, flush=True)


def _error(said: object) -> None:
    """``teamrt: <said>`` on stderr, on one line safe for a terminal: an error may quote agent data (a
    file's name, a branch, a reason, an owner's host)."""
    print(f"teamrt: {clean_line(str(said))}", file=sys.stderr)


def _warning(line: str) -> None:
    """Under --quiet, what a run's start must still say: its notes and warnings, not its start line."""
    if line.startswith("teamrt: "):
        _notice(line)


def _report(result: RunSummary, args: argparse.Namespace) -> int:
    """A run's end: its answer on stdout, its totals on stderr (or one JSON object), the exit status."""
    import json

    from teamrt.runs.query import money

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
        _notice(
            f"\nrun {result.run_id}: {outcome.status}; {result.agents} agent(s),"
            f" {outcome.turns} lead turn(s);"
            f" {prompt_tokens:,} input tokens ({share:.0%} read from cache), {result.output_tokens:,} output;"
            f" {money(result.cost_usd, result.simulated)}{budget}"
        )
        if result.merged:
            _notice(
                f"its work: {result.merged} branch(es) merged onto {result.integration};"
                f" teamrt apply {result.run_id} brings it onto your branch"
            )
    if outcome.status != "done":
        _error(f"the lead {outcome.status}: {outcome.reason}")
        return EXIT_FAILED
    if outcome.reason and not args.json:  # done, but not all went to plan (a spawn failed)
        _notice(f"teamrt: note: {outcome.reason}")
    return 0


DETACH_WAIT_S = 60.0  # how long ``run --detach`` waits for the run's store before it returns anyway
DETACH_POLL_S = 0.05
TAIL_LINES = 10  # of a detached run's output.log, shown when it did not start


def _run_taken(run_id: str) -> bool:
    """Whether run ``run_id`` has a store, or had one begun."""
    from teamrt import home
    from teamrt.store.engine import DB_FILE, server_url
    from teamrt.store.ownership import lock_name

    run_dir = home.runs_path() / run_id
    # a run in a server database has no run.db, and its lock file is named for its host
    return (run_dir / DB_FILE).exists() or (run_dir / lock_name(server_url() is not None)).exists()


def _tui(run_id: str | None) -> int:
    """Open the TUI, on ``run_id`` if given; an unknown run is one line, before the screen is taken."""
    from teamrt import home

    runs_dir = home.runs_path()
    if run_id is not None:
        try:
            home.existing_run_dir(run_id)
        except home.UnknownRun as e:
            _error(e)
            return EXIT_FAILED
    from teamrt.tui.app import TeamApp

    trace = os.environ.get(TUI_TRACE_ENV)  # benchmarks/tui.py: when each agent's change was shown
    TeamApp(runs_dir, run_id, trace_path=Path(trace) if trace else None).run()
    if run_id is not None:
        print(
            f"teamrt: run {run_id}: watch it again with teamrt tui {run_id}; its events: teamrt logs {run_id}"
        )
    return 0


def _detach(args: argparse.Namespace, *, quiet: bool = False) -> int:
    """``run --detach``: check what a user can get wrong, then start the run in a session of its own.

    Waits until the run's store exists, so that ``teamrt logs``, ``show`` and
    ``ls`` find it, or until the child exits: then its output's last lines are
    the error.
    """
    from teamrt import home
    from teamrt.runs import follow as logs

    _check_run(args)
    run_id = args.run_id = args.run_id or home.new_run_id()
    run_dir = home.run_dir(run_id)
    return _start_detached(
        _child_argv(args, run_id), run_dir, run_id, lambda: logs.store_ready(run_dir, run_id), quiet=quiet
    )


def _start_detached(
    argv: list[str], run_dir: Path, run_id: str, ready: Callable[[], bool], *, quiet: bool = False
) -> int:
    """Start ``teamrt argv`` in a session of its own, its output appended to the run's output.log, and
    wait until ``ready()`` or the child's end (its output's last lines are then the error). ``quiet``:
    print nothing once it started (the TUI takes the screen)."""
    import subprocess
    import time

    from teamrt.runs import follow as logs

    output = run_dir / logs.OUTPUT_LOG
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "teamrt", *argv],
            stdin=subprocess.DEVNULL, stdout=fd, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # output.log follows the run as it goes
        )  # fmt: skip
    finally:
        os.close(fd)
    deadline = time.monotonic() + DETACH_WAIT_S
    while True:
        code = child.poll()  # before ready(): a run that ended that fast still counts as started
        if ready():
            break
        if code is not None:
            tail = output.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
            print(*(clean_line(line) for line in tail), sep="\n", file=sys.stderr)
            said = f"teamrt: run {run_id} did not start (exit {code}); its output is in {output}"
            print(said, file=sys.stderr)
            return EXIT_FAILED
        if time.monotonic() >= deadline:
            print(
                f"teamrt: note: run {run_id} has not started yet; its output is in {output}", file=sys.stderr
            )
            break
        time.sleep(DETACH_POLL_S)
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
    import asyncio

    from teamrt import home
    from teamrt.runtime.teamrun import check_start, sandbox_notice, single_team, team_from_file

    project = home.project_root()
    if args.agent is None:
        team, _ = team_from_file(
            _team_path(args, project), prompt=args.prompt, project=project, choices=_choices(args)
        )
    else:
        team, _ = single_team(args.agent, project=project, choices=_choices(args))
    for model in check_start(team, project, sim=False).values():
        asyncio.run(model.aclose())
    notice = sandbox_notice(team.sandbox)
    if notice is not None:
        _notice(notice)


LOCAL_FLAGS = ("command", "teamfile", "detach", "tui", "run_id", "json")
"""What ``run --detach`` does not pass on to the run it starts."""


def _child_argv(args: argparse.Namespace, run_id: str) -> list[str]:
    """The arguments of ``run`` that gave ``args``, without --detach, with ``--run-id run_id``."""
    argv = ["run", f"--run-id={run_id}"]
    for dest, value in vars(args).items():
        if (
            dest in ("command", "teamfile", "detach", "tui", "run_id", "json")
            or value is None
            or value is False
        ):
            continue
        flag = "--" + dest.replace("_", "-")
        argv.append(flag if value is True else f"{flag}={value}")
    return argv if args.teamfile is None else [*argv, "--", args.teamfile]


def _resume(args: argparse.Namespace) -> int:
    import asyncio

    from teamrt import home
    from teamrt.runs import query as runs
    from teamrt.runtime.teamrun import NotResumable, resume_run

    errors: tuple[type[Exception], ...] = (home.UnknownRun, NotResumable, runs.RunsError, *_run_errors())
    try:
        if args.detach:
            return _resume_detached(args.run, args.accept_loss)
        run_dir, _ = _crashed_run(args.run)  # before any progress line: a live run is refused at once
        with runs.reading(run_dir, args.run) as reader:
            seen = reader.last_events(1)
        after = seen[-1].id if seen else 0
        notice = _notice if not args.quiet else _warning
        work = resume_run(args.run, on_notice=notice, accept_loss=args.accept_loss)
        return _foreground(lambda: asyncio.run(work), args.run, args, after=after)
    except errors as e:
        _error(e)
        return EXIT_FAILED


def _crashed_run(run_id: str) -> tuple[Path, RunRecord]:
    """The directory and record of run ``run_id``; raises ``NotResumable`` unless it crashed."""
    from teamrt import home
    from teamrt.runs import query as runs
    from teamrt.runtime.teamrun import NotResumable, check_reachable

    run_dir = home.existing_run_dir(run_id)
    with runs.reading(run_dir, run_id) as reader:
        run = reader.run()
        now = reader.now()  # the database's clock, which the heartbeat was written in
    status = runs.run_status(run, now)
    if status == runs.NOT_RESPONDING:
        raise NotResumable(runs.not_responding(run, now))
    if status != runs.CRASHED:
        owner = f" (pid {run.owner.pid} on {run.owner.host})" if status == "running" and run.owner else ""
        raise NotResumable(f"run {run_id} is {status}{owner}; only a crashed run can be resumed")
    check_reachable(run_dir, run)
    return run_dir, run


def _resume_detached(run_id: str, accept_loss: bool = False) -> int:
    """``resume --detach``: a crashed run, taken over by a process in a session of its own; returns
    once that process owns the run (or has failed to). A store behind its run directory is refused here,
    in this process's one line, unless ``accept_loss``."""
    from teamrt.runs import query as runs
    from teamrt.runtime.verify import refuse_if_behind

    run_dir, before = _crashed_run(run_id)
    if not accept_loss:
        refuse_if_behind(run_dir, run_id)

    def taken_over() -> bool:
        with runs.reading(run_dir, run_id) as reader:
            owner = reader.run().owner
        return owner is not None and owner != before.owner

    argv = ["resume", run_id, "--quiet", *(["--accept-loss"] if accept_loss else [])]
    return _start_detached(argv, run_dir, run_id, taken_over)


def _inspect(args: argparse.Namespace) -> int:
    """``ls``, ``show``, ``send``, ``stop`` and ``answer``: the store and the mailbox, imported only now."""
    from teamrt import home
    from teamrt.runs import query as runs
    from teamrt.store import StoreError

    try:
        if args.command == "ls":
            runs_dir = home.runs_path()
            summaries = runs.list_runs(runs_dir)
            if args.json:
                _print_json([runs.summary_json(s) for s in summaries])
            else:
                print("\n".join(runs.render_ls(summaries, runs_dir)))
            return 0
        run_dir = home.existing_run_dir(args.run)
        if args.command == "show" and args.json:
            _print_json(runs.show_json(run_dir, args.run))
        elif args.command == "show":
            prices = _prices_file(args.prices) if args.prices is not None else None
            print("\n".join(runs.render_show(run_dir, args.run, full=args.full, prices=prices)))
        elif args.command == "send":
            sent, status = runs.send(run_dir, args.run, args.agent, args.text)
            print(sent.message.id)
            _said_through(sent, args.run)
            if status != "running":
                print(
                    f"teamrt: note: run {args.run!r} is {status}; the message waits in the mailbox",
                    file=sys.stderr,
                )
        elif args.command == "answer":
            sent = runs.answer(run_dir, args.run, args.ask, args.verdict == "allow", args.reason)
            print(
                f"sent {args.verdict} for {args.ask} to the supervisor of run {args.run}"
                f" (message {sent.message.id})"
            )
            _said_through(sent, args.run)
        else:
            sent, created = runs.stop(run_dir, args.run, args.agent)
            what = f"agent {args.agent}" if args.agent else "the run"
            print(f"asked the supervisor of run {args.run} to stop {what} (message {sent.message.id})")
            _said_through(sent, args.run)
            if created:
                print(
                    "teamrt: note: this run had no supervisor mailbox yet; the request waits there",
                    file=sys.stderr,
                )
    except (home.UnknownRun, runs.RunsError, StoreError) as e:
        _error(e)
        return EXIT_FAILED
    return 0


def _said_through(sent: Any, run_id: str) -> None:
    """On stderr, for a message that went through the database to a run on another host."""
    if not sent.through_database:
        return
    if sent.owner_host is None:
        line = f"left in the database for run {run_id!r}, which has no live owner: a resume delivers it"
    elif sent.taken:
        line = f"delivered through the database to its owner on {sent.owner_host}"
    else:
        line = (
            f"left in the database for run {run_id!r}; its owner on {sent.owner_host} has not taken it"
            " yet (it will when it reads again)"
        )
    print(f"teamrt: note: {clean_line(line)}", file=sys.stderr)


def _print_json(value: object) -> None:
    """``value`` as JSON on stdout, the whole of what a ``--json`` command prints there; nothing in it that
    a terminal would act on (``clean_json``: the same values, escaped)."""
    import json

    print(clean_json(json.dumps(value, indent=2, ensure_ascii=False, default=str)))


def _logs(args: argparse.Namespace) -> int:
    """``logs``: a line per event (``--json``: a JSON object per line); ``-f`` follows the run to its end
    and says how it ended (on stderr with ``--json``, so that stdout stays JSON Lines)."""
    from teamrt import home
    from teamrt.runs import follow as logs
    from teamrt.runs import query as runs
    from teamrt.store import StoreError

    render = logs.event_json if args.json else logs.format_event
    try:
        run_dir = home.existing_run_dir(args.run)
        status = logs.follow(
            run_dir, args.run, lambda line: print(line, flush=True), follow=args.follow, render=render
        )
    except (home.UnknownRun, runs.RunsError, StoreError) as e:
        _error(e)
        return EXIT_FAILED
    if not args.follow:
        return 0
    print(f"run {args.run} ended: {status}", file=sys.stderr if args.json else sys.stdout)
    return 0 if status == "done" else EXIT_FAILED


def _git_command(args: argparse.Namespace) -> int:
    """``apply`` and ``gc``: a run's branches and worktrees in the user's repository."""
    from teamrt import home
    from teamrt.runs import query as runs
    from teamrt.store import StoreError
    from teamrt.worktree import apply as applying
    from teamrt.worktree.apply import ApplyError, apply, collect, plan_apply
    from teamrt.worktree.git import GitError

    try:
        if args.command == "gc":
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


def _list_agents(as_json: bool = False) -> int:
    """``agents``: what ``scan_definitions`` finds for this repository, as text or one JSON object."""
    from teamrt import home
    from teamrt.agents import one_line, role_name, scan_definitions

    project = home.project_root()
    scan = scan_definitions(project)

    def where(source: str) -> str:
        path = Path(source)
        return one_line(str(path.relative_to(project)) if path.is_relative_to(project) else source)

    def tools(names: tuple[str, ...] | None) -> str:
        return "all" if names is None else ", ".join(names) or "none"

    if as_json:
        _print_json({
            "project": str(project),
            "agents": [
                {"name": d.name, "role": role_name(d.name), "scope": d.scope, "path": d.source,
                 "description": d.description, "model": d.model, "tools": d.tools,
                 "disallowed_tools": d.disallowed_tools, "permission_mode": d.permission_mode,
                 "max_turns": d.max_turns, "warnings": d.warnings}
                for d in scan.definitions.values()
            ],
            "overridden": [{"name": d.name, "scope": d.scope, "path": d.source} for d in scan.overridden],
            "skipped": scan.skipped,
            "warnings": scan.warnings,
        })  # fmt: skip
        return 0

    def row(d: AgentDefinition) -> tuple[str, ...]:
        refused = f" (not {', '.join(d.disallowed_tools)})" if d.disallowed_tools else ""
        return d.name, d.scope, one_line(d.model or "inherit"), tools(d.tools) + refused, where(d.source)

    # a repository's agent files are someone else's text: every cell made safe for a terminal, then aligned
    rows = [("agent", "scope", "model", "tools", "file"), *map(row, scan.definitions.values())]
    rows = [tuple(clean_line(cell) for cell in r) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        line = "  ".join(f"{cell:{width}}" for cell, width in zip(r, widths, strict=False)) + f"  {r[-1]}"
        print(clean_line(line))
    replaced = [f"{d.name} ({d.scope}): {where(d.source)}" for d in scan.overridden]
    loaded = [line for d in scan.definitions.values() for line in d.warnings]
    sections = (
        ("replaced by a later definition", replaced),
        ("warnings", [*scan.notes, *loaded]),
        ("skipped, did not load", list(scan.skipped)),
    )
    for title, lines in sections:
        if lines:
            print(f"\n{title}:")
            print(*(f"  {clean_line(line)}" for line in lines), sep="\n")
    return 0


def _trust(args: argparse.Namespace) -> int:
    """``trust``: record (or revoke, or list) the person's trust in the repository's hooks, MCP servers
    and allow rules. What it would trust is shown, escaped, before anything is recorded; a file that
    cannot be read exactly (a duplicate JSON key) is refused in one line, and nothing recorded."""
    from teamrt import home
    from teamrt.claudecode import trust
    from teamrt.claudecode.settings import SettingsError as ClaudeSettingsError
    from teamrt.terminal import clean_line

    try:
        if args.list:
            entries = sorted(trust.trusted_projects().values(), key=lambda t: t.project)
            for entry in entries:
                line = f"{entry.project}  trusted {entry.trusted_at}: {trust.trust_state(entry)}"
                print(clean_line(line))
            if not entries:
                print("no repository is trusted (teamrt trust in one trusts what came with it)")
            return 0
        project = home.project_root()
        if args.revoke:
            said = "no longer trusts" if trust.revoke(project) else "had no trust recorded for"
            print(clean_line(f"teamrt {said} the hooks, MCP servers and allow rules of {project}"))
            return 0
        return _trust_project(project, yes=args.yes)
    except (ClaudeSettingsError, trust.TrustError) as e:
        print(clean_line(f"teamrt: {e}"), file=sys.stderr)
        return EXIT_FAILED


def _trust_project(project: Path, *, yes: bool) -> int:
    """Show what ``project`` would have trusted, ask (in a terminal, unless ``yes``), then record it."""
    from teamrt.agents import load_definitions
    from teamrt.claudecode import trust
    from teamrt.claudecode.settings import read_settings_files
    from teamrt.mcp.config import repository_servers
    from teamrt.terminal import clean_line

    files = read_settings_files(project)
    problems: list[str] = []
    servers = repository_servers(project, load_definitions(project).values(), problems)
    if problems:  # trusting what could not be read whole would trust something else than it shows
        for problem in problems:
            print(clean_line(f"teamrt: {problem}"), file=sys.stderr)
        print("teamrt: nothing trusted; fix the files above, then run teamrt trust again", file=sys.stderr)
        return EXIT_FAILED
    digest, mcp, allow = trust.hooks_digest(files), trust.mcp_digest(servers), trust.allow_digest(files)
    if digest is None and mcp is None and allow is None:
        print(clean_line(
            f"nothing to trust: {project}/.claude/settings.json and settings.local.json have no hooks or"
            " allow rules, and the project has no MCP servers (.mcp.json, agent files' mcpServers)"
        ))  # fmt: skip
        return 0
    parsed = trust.every_hook(files)
    for problem in parsed.problems:
        print(clean_line(f"teamrt: warning: {problem}"), file=sys.stderr)
    print(*trust.trust_report(project, files, parsed, servers), sep="\n", flush=True)
    if not yes and sys.stdin is not None and sys.stdin.isatty():
        try:
            answer = input("Trust all of the above as it is now? [y/N] ").strip().lower()
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer not in ("y", "yes"):
            print("nothing trusted")
            return EXIT_FAILED
    trust.trust(project, digest, mcp, allow)
    where = clean_line(str(project))
    for what, recorded in (("hooks", digest), ("MCP servers", mcp), ("allow rules", allow)):
        if recorded is not None:
            print(f"teamrt trusts the {what} of {where} as they are now")
    print("A change to them stops them until you trust them again; teamrt trust --revoke takes this back.")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    """``mcp``: the configured MCP servers (``teamrt.mcp.listing``), their state in a run, their tools."""
    from teamrt import home
    from teamrt.agents import load_definitions
    from teamrt.mcp import listing
    from teamrt.mcp.config import load_mcp_config, mcp_allowed
    from teamrt.runtime.teamrun import team_file_of
    from teamrt.store import StoreError, open_reader
    from teamrt.team import TeamFileError, load_team, team_from_json

    project = home.project_root()
    try:
        events = None
        if args.run is not None:
            run_dir = home.existing_run_dir(args.run)
            reader = open_reader(run_dir, args.run)
            try:
                run, events = reader.run(), reader.events()
            finally:
                reader.close()
            project = Path(run.workdir)
            team = team_from_json(run.settings["team"]) if "team" in run.settings else None
        else:
            run_dir = home.runs_path() / "mcp-listing"
            team = load_team(team_file_of(project), project=project)
        servers = team.mcp_servers if team is not None else {}
        source = str(team.path) if team is not None else "team file"
        allowed_env, private_hosts = mcp_allowed(team)
        config = load_mcp_config(
            project, servers, load_definitions(project).values(), team_source=source,
            allowed_env=allowed_env, private_hosts=private_hosts,
        )  # fmt: skip
        tools = None
        if args.tools:
            policy = team.sandbox if team is not None else None
            tools = listing.list_tools(config, listing.listing_context(project, run_dir, policy))
    except (home.UnknownRun, StoreError, TeamFileError) as e:
        _error(e)
        return EXIT_FAILED
    print("\n".join(listing.describe(config, events=events, tools=tools)))
    return 0


def _list_models(as_json: bool = False) -> int:
    """``models``: the price and limits table, as text or (``as_json``) one JSON array."""
    from teamrt.models.catalog import CATALOG_VERSION, SOURCE, SOURCE_DATE
    from teamrt.models.pricing import with_overrides
    from teamrt.settings import load_settings, settings_path

    settings = load_settings()
    table = with_overrides(settings.prices)
    if as_json:
        _print_json([_model_json(name, info, name in settings.prices) for name, info in table.items()])
        return 0
    header = (
        ("input", 8), ("output", 8), ("write 5m", 10), ("write 1h", 10), ("read", 8), ("min cache", 11),
        ("max out", 9), ("window", 11),
    )  # fmt: skip
    print(f"{'model':22}" + "".join(f"{title:>{width}}" for title, width in header))
    for name, info in table.items():
        p = info.price
        mark = " *" if name in settings.prices else ""
        print(
            f"{name:22}{p.input:>8g}{p.output:>8g}{p.cache_write_5m:>10g}{p.cache_write_1h:>10g}"
            f"{p.cache_read:>8g}{info.min_cache_tokens:>11}{info.max_output_tokens:>9,}{info.context_window:>11,}"
            f"{mark}"
        )
        if info.long_context_price is not None:
            q = info.long_context_price
            print(
                f"{'  over ' + format(info.long_context_from, ','):22}{q.input:>8g}{q.output:>8g}"
                f"{q.cache_write_5m:>10g}{q.cache_write_1h:>10g}{q.cache_read:>8g}"
            )
    print(
        f"USD per million tokens; prices and limits from teamrt's catalog (version {CATALOG_VERSION}:"
        f" {SOURCE}, as read on {SOURCE_DATE}) unless marked *."
    )
    for name, info in settings.prices.items():
        print(f"* {name}: {info.source}")
    if not settings.prices:
        print(f"Override any figure or add models in {settings_path()}.")
    print("Every cost teamrt shows is an estimate at these prices, not Anthropic's bill.")
    print("sim bills like claude-sonnet-5-5; sim:<model> like <model>. --json gives each model's source.")
    return 0


def _model_json(name: str, info: ModelInfo, overridden: bool) -> dict[str, object]:
    """One model of ``models --json``: prices in USD per million tokens, limits in tokens."""
    import dataclasses

    def prices(p: Price) -> dict[str, float]:
        return dataclasses.asdict(p)  # input, output, cache_write_5m, cache_write_1h, cache_read

    long = info.long_context_price
    return {
        "model": name,
        **prices(info.price),
        "min_cache_tokens": info.min_cache_tokens,
        "long_context": None if long is None else {"over_tokens": info.long_context_from, **prices(long)},
        "context_window": info.context_window,
        "max_output_tokens": info.max_output_tokens,
        "sampling": info.sampling,
        "source": info.source,
        "from_settings": overridden,
    }


def _prices_file(path: Path) -> Prices:
    """``show --prices FILE``: the catalog with FILE laid over it (a bad file raises ``SettingsError``)."""
    from teamrt.models.pricing import with_overrides
    from teamrt.runs.query import Prices
    from teamrt.settings import load_prices_file

    return Prices(with_overrides(load_prices_file(path)), str(path))


if __name__ == "__main__":
    raise SystemExit(main())
