"""Every ``teamrt`` subcommand's arguments, declared: ``build_parser``.

Only argparse and the standard library are imported here, so that ``teamrt --help`` (and a usage
mistake) costs nothing of the runtime; the two checks that need teamrt's own limits import them when
an argument is given. A usage mistake is one line that points to the subcommand's own help.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from teamrt import __version__
from teamrt.cli.output import EXIT_USAGE

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
    from teamrt.team import MOST  # the team file's limit; importing it at the top would load the runtime

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MOST:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to {MOST:_}, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    from teamrt.team import MOST  # the team file's limit; importing it at the top would load the runtime

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
    from teamrt.mailbox import is_name  # the mailbox (and asyncio) only when --run-id is given

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
