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


AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age(text: str) -> float:
    """``30d``, ``12h``, ``2w``, ``90m``, ``45s`` in seconds."""
    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    try:
        value = float(number) if unit in AGE_UNITS and number[:1].isdigit() else -1.0
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected an age such as 30d, 12h, 2w or 90m, got {text!r}")
    return value * AGE_UNITS[unit]


def _run_name(text: str) -> str:
    from teamrt.mailbox import is_name  # the mailbox (and asyncio) only when --run-id is given

    if not is_name(text):
        raise argparse.ArgumentTypeError(f"not a run name: {text!r}")
    return text


def add_follow_up_arguments(command: argparse.ArgumentParser) -> None:
    """``teamrt continue``'s arguments after the run."""
    command.add_argument("--prompt", required=True, help="what the lead should do next")
    command.add_argument(
        "--budget-usd", type=_positive_float,
        help="the run's new dollar budget, in all: above what it has spent (needed when its budget ran out)",
    )  # fmt: skip
    command.add_argument(
        "--budget-tokens", type=_positive_int,
        help="the run's new token budget, in all: above what it has spent",
    )  # fmt: skip
    command.add_argument(
        "--max-turns", type=_positive_int,
        help="stop the lead after this many model turns in this round (default: the team's limit, per round)",
    )  # fmt: skip
    command.add_argument("--quiet", action="store_true", help="print only the answer: no progress, no totals")
    command.add_argument("--json", action="store_true", help="print one JSON object at the end: the result")


def _add_serve_command(commands: argparse._SubParsersAction[_Parser]) -> None:
    def port(text: str) -> int:
        if not text.isdigit() or not 1 <= int(text) <= 65535:
            raise argparse.ArgumentTypeError(f"not a port number (1 to 65535): {text!r}")
        return int(text)

    serve = commands.add_parser(
        "serve",
        help="show the TUI in a browser (each page runs its own teamrt tui)",
        description="Serve the TUI to browsers with textual-serve: each page opened runs teamrt tui in a"
        " process of its own, on this machine, with this environment (the same home and TEAMRT_DB)."
        " Bound to 127.0.0.1 unless --host says otherwise; any other address needs a token, from the"
        " environment variable TEAMRT_SERVE_TOKEN, which every request must then carry (the address"
        " printed on start sets it as a cookie). Ctrl-C stops it. See docs/serve.md.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=port, default=8000, help="the port to listen on (default: 8000)")
    serve.add_argument(
        "--public-url",
        metavar="URL",
        help="the address people open, when it is not http://HOST:PORT (behind a proxy, or with --host"
        " 0.0.0.0)",
    )


def _add_queue_commands(commands: argparse._SubParsersAction[_Parser], ls: argparse.ArgumentParser) -> None:
    """``teamrt submit`` and ``teamrt queue``, and ``ls --batch``."""

    def quota(text: str) -> tuple[str, int]:
        user, _, number = text.rpartition("=")
        if not user or not number.isdigit() or int(number) > 1_000_000:
            raise argparse.ArgumentTypeError(
                f"expected USER=N (N a whole number, 0 removes it), got {text!r}"
            )
        return user, int(number)

    def priority(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None

    submit = commands.add_parser(
        "submit",
        help="queue a run for the workers of the server database (teamrt worker)",
        description="Record a run in the queue of the server database TEAMRT_DB and hand it to a worker"
        " (teamrt worker): the team of TEAMFILE (its text is sent: workers cannot read your files), else"
        " the built-in team --team NAME, else the built-in default team; the worker clones --repo at"
        " --ref and pushes the run's integration branch back to it. Prints the run's id. The submitter is"
        " TEAMRT_USER, else your login name. See docs/queue.md.",
    )
    submit.add_argument(
        "teamfile", nargs="?", metavar="TEAMFILE", help="a team file (TOML); see docs/team-file.md"
    )
    submit.add_argument("--team", metavar="NAME", help="a built-in team (default: default)")
    submit.add_argument("--prompt", help="the task (a team file may give a default)")
    submit.add_argument("--repo", metavar="URL", help="the repository the worker clones and pushes back to")
    submit.add_argument(
        "--ref", metavar="REF", help="the branch, tag or commit to start from (default: its HEAD)"
    )
    submit.add_argument("--model", help="every agent's model (as teamrt run --model)")
    submit.add_argument("--budget-usd", type=_positive_float, help="the run's hard dollar budget")
    submit.add_argument(
        "--priority", type=priority, default=0, help="higher runs first (default: 0); low ones can wait long"
    )
    submit.add_argument(
        "--key",
        metavar="KEY",
        help="an idempotency key: a second submission with it is refused, naming the first run",
    )
    submit.add_argument(
        "--batch", metavar="BATCH",
        help="the batch the run belongs to: its --budget-usd is reserved from the batch's budget, all or"
        " nothing",
    )  # fmt: skip
    submit.add_argument(
        "--batch-budget-usd",
        type=_positive_float,
        metavar="USD",
        help="the budget of a new batch (its first run)",
    )
    submit.add_argument("--queue", metavar="POOL", help="the queue whose workers take it (default: teamrt)")
    queue = commands.add_parser(
        "queue",
        help="show the queue's workers, jobs and waiting runs; set a submitter's quota",
        description="The workers of the queue in TEAMRT_DB with the age of their last heartbeat, its jobs"
        " counted by queue and status, and the runs not yet ended. --quota USER=N lets USER have at most N"
        " runs running at once (0 removes the limit).",
    )
    queue.add_argument("--json", action="store_true", help="print it as one JSON object")
    queue.add_argument("--quota", type=quota, metavar="USER=N", help="set USER's running limit (0: none)")
    ls.add_argument(
        "--batch",
        metavar="BATCH",
        help="only the runs of a batch (teamrt submit --batch), with its spend and budget",
    )


def _add_worker_command(
    commands: argparse._SubParsersAction[_Parser],
    run: argparse.ArgumentParser,
    resume: argparse.ArgumentParser,
) -> None:
    """``teamrt worker``, and the hidden ``--queued`` mode of ``run`` and ``resume`` (a worker's children)."""
    worker = commands.add_parser(
        "worker",
        help="run queued runs (teamrt submit) on this machine until stopped",
        description="A worker of the queue in the server database TEAMRT_DB: it takes submitted runs from its"
        " queue, clones each run's repository into the run's directory, runs it as a process of its own"
        " (teamrt run, or teamrt resume after a crash) and pushes the run's integration branch back to the"
        " repository. Runs whose worker died are resumed by another worker. Every worker must share"
        " TEAMRT_HOME (the run directories) and have a distinct TEAMRT_HOST. Ctrl-C (SIGTERM) stops taking"
        " runs and waits for those running. See docs/queue.md.",
    )
    worker.add_argument("--slots", type=_positive_int, default=1, help="runs at once (default: 1)")
    worker.add_argument("--queue", metavar="POOL", help="the queue to take runs from (default: teamrt)")
    run.add_argument("--queued", metavar="RUN", help=argparse.SUPPRESS)
    resume.add_argument("--queued", action="store_true", help=argparse.SUPPRESS)


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
    run.add_argument(
        "--continue", dest="continue_run", action="store_true",
        help="go on with the newest run of this repository (this directory outside git) on --prompt, as"
        " teamrt continue does; --budget-usd, --budget-tokens and --max-turns apply to it",
    )  # fmt: skip
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
    follow_up = commands.add_parser(
        "continue",
        help="give a run that ended a follow-up prompt: its next round",
        description="Go on with a run that ended (done, failed, blocked, stopped, or out of budget) on a"
        " new prompt: a new user turn to the same lead, its whole conversation kept (so the prompt cache"
        " still holds), the same agents, branches and integration branch, in the same run (its id,"
        " directory and store). A run out of budget needs --budget-usd (or --budget-tokens): the run's new"
        " total, above what it spent. A live run is refused (tell its lead with teamrt send); a crashed"
        " one too (teamrt resume it first). teamrt show lists the rounds; teamrt run --continue goes on"
        " with the newest run here.",
    )
    follow_up.add_argument("run", metavar="RUN", help="the run's id, as teamrt ls shows it")
    add_follow_up_arguments(follow_up)
    follow_up.add_argument(
        "--detach", action="store_true",
        help="go on in the background and print the run's id (follow it with: teamrt logs RUN -f)",
    )  # fmt: skip
    follow_up.add_argument(
        "--accept-loss", action="store_true",
        help="go on even though the store lacks what the run's directory shows was done (as teamrt resume"
        " --accept-loss does): the loss is recorded, mail never recorded as read is read again",
    )  # fmt: skip
    init = commands.add_parser(
        "init",
        help="write .teamrt/team.toml, the team of 'teamrt run --prompt', with your test command",
        description="Write the built-in team, commented, to .teamrt/team.toml at the top of this git"
        " repository (this directory outside git), where 'teamrt run --prompt' finds it; commit it to"
        " share it. The project's test command, told from its files without running anything (pytest,"
        " unittest, cargo test, go test, npm/pnpm/yarn test, make test, tox, nox), is allowed to agents"
        " and made the merge gate; init says what it found and where, or that it found none. An"
        " existing file is left alone unless --force. Then the project's Claude Code Setup hooks of"
        " trigger 'init' run (as on 'claude --init'; the repository's only once trusted), a line each;"
        " one that blocks makes init fail.",
    )
    init.add_argument("--force", action="store_true", help="overwrite an existing .teamrt/team.toml")
    setup = init.add_mutually_exclusive_group()
    setup.add_argument(
        "--setup-only",
        action="store_true",
        help="only run the Setup hooks of trigger 'init' (as 'claude --init-only'); write nothing",
    )
    setup.add_argument(
        "--maintenance",
        action="store_true",
        help="only run the Setup hooks of trigger 'maintenance' (as 'claude --maintenance'); write nothing",
    )
    setup.add_argument(
        "--no-setup", action="store_true", help="write the team file without running the Setup hooks"
    )
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
    mcp.add_argument(
        "--prompts", action="store_true",
        help="start the servers to list their prompts: the /mcp__<server>__<prompt> commands a task or a"
        " message to an agent may start with",
    )  # fmt: skip
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
        description="Deliver TEXT from you into AGENT's mailbox; the agent reads it between its turns."
        " Says where the message went, then, on a terminal, waits a few seconds for the agent to read it"
        " and says when it did (or what it is busy with). teamrt logs RUN shows it too: sent and read.",
    )
    send.add_argument("run", metavar="RUN", help="the run's id")
    send.add_argument("agent", metavar="AGENT", help="the agent to tell")
    send.add_argument("text", metavar="TEXT", help="the message")
    waiting = send.add_mutually_exclusive_group()
    waiting.add_argument(
        "--wait", type=_seconds, metavar="SECONDS",
        help="wait up to SECONDS for the agent to read it (default: 10 on a terminal, none in a pipe)",
    )  # fmt: skip
    waiting.add_argument("--no-wait", action="store_true", help="say where it went and return at once")
    stop = commands.add_parser(
        "stop",
        help="ask a live run's supervisor to stop the run or one agent",
        description="Send a stop request to the supervisor of a live run: stop AGENT, or the whole"
        " run when no AGENT is given. A crashed or finished run is refused. A queued run (teamrt submit),"
        " or one waiting for a worker, is stopped at once: its job is cancelled.",
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
    answer.add_argument(
        "--always",
        action="store_true",
        help="with allow: allow it and every later call like it, as the rule the ask names (the run adds it"
        " to .claude/settings.local.json, as Claude Code's \"don't ask again\" does, and to its live rules)",
    )
    tui = commands.add_parser(
        "tui",
        help="watch runs live in a terminal UI, and step in by mail",
        description="The runs list, and for one run: its agents as a tree with what each is doing now,"
        " the selected agent's transcript, mail and worktree, the task list and the event log. Message"
        " (m) or stop (x) an agent, approve or deny (a/d) a waiting permission ask, resume (r) a crashed"
        " run. Press ? in the TUI for every key.",
    )
    tui.add_argument("run", metavar="RUN", nargs="?", help="open this run (default: the runs list)")
    _add_serve_command(commands)
    diff = commands.add_parser(
        "diff",
        help="print the diff of a run's work, or of one agent's",
        description="The diff of AGENT's work against the commit its worktree was cut from: its worktree"
        " as it is now while git still knows it (uncommitted changes and new files included), else its"
        " branch teamrt/RUN-AGENT. Without AGENT, all the run merged: its integration branch against the"
        " commit the run started from. On a terminal it is coloured; through a pipe it is the patch"
        " itself (teamrt diff RUN | git apply), escape sequences and other controls in it made inert."
        " git runs no external diff, text conversion or hook of the repository's.",
    )
    diff.add_argument("run", metavar="RUN", help="the run's id")
    diff.add_argument("agent", metavar="AGENT", nargs="?", help="a worktree agent (default: the whole run)")
    shown = diff.add_mutually_exclusive_group()
    shown.add_argument("--stat", action="store_true", help="only the summary: files changed, lines +/-")
    shown.add_argument("--name-only", action="store_true", help="only the names of the files changed")
    diff.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto",
        help="colour the diff: auto (on a terminal, unless NO_COLOR is set), always or never",
    )  # fmt: skip
    transcript = commands.add_parser(
        "transcript",
        help="print an agent's conversation, tool calls folded",
        description="AGENT's conversation as it went: its prompt, what it said, each tool call on a line"
        " with its result in a line or two, the mail it read, and where it was restarted, compacted or"
        " given a follow-up prompt. Thinking is left out unless --thinking.",
    )
    transcript.add_argument("run", metavar="RUN", help="the run's id")
    transcript.add_argument("agent", metavar="AGENT", help="the agent (teamrt show RUN lists them)")
    transcript.add_argument("--full", action="store_true", help="tool inputs and results whole")
    transcript.add_argument("--thinking", action="store_true", help="show the model's thinking too")
    transcript.add_argument("--json", action="store_true", help="print the stored messages as JSON")
    transcript.add_argument(
        "--color", choices=("auto", "always", "never"), default="auto",
        help="colour it: auto (on a terminal, unless NO_COLOR is set), always or never",
    )  # fmt: skip
    apply = commands.add_parser(
        "apply",
        help="bring a finished run's integration branch onto your current branch",
        description="Fast-forward your current branch to the run's integration branch (teamrt/RUN),"
        " or merge it when your branch has moved on (asked on a terminal, else with --yes); --squash"
        " makes one commit instead, with a message drafted from the run. Refused when"
        " your working tree has uncommitted changes; a conflicting merge is undone. First it lists every"
        " protected path the run's commits change (.claude, .mcp.json, CLAUDE.md, AGENTS.md, .teamrt,"
        " the team file), symlink leaving the tree and hidden index entry, and refuses unless each such"
        " path is named with --allow-protected.",
    )
    apply.add_argument("run", metavar="RUN", help="the run's id")
    apply.add_argument("--yes", action="store_true", help="make a merge commit without asking")
    apply.add_argument(
        "--squash", action="store_true",
        help="land the run as one commit on your branch, its message drafted from the run (prompt, the lead's"
        " answer, each agent's merged work and task, the gates, run id and cost)",
    )  # fmt: skip
    apply.add_argument(
        "--edit", action="store_true", help="with --squash: edit the drafted message in $VISUAL/$EDITOR first"
    )
    apply.add_argument(
        "--allow-protected", action="append", default=[], metavar="PATH",
        help="take the run's changes to this protected path (repeatable); its changes are shown first",
    )  # fmt: skip
    gc = commands.add_parser(
        "gc",
        help="remove the worktrees and branches of finished runs (--runs: the runs themselves)",
        description="For every finished run: remove its worktrees and its agents' branches, and its"
        " integration branch once applied. Work not merged is kept and said so: a worktree or branch"
        " with commits the integration branch (or your HEAD) lacks, or with uncommitted changes; so is"
        " an integration branch not applied. Live and crashed runs are left alone. With --runs"
        " --older-than AGE, each finished run that ended longer ago than AGE goes whole: its worktrees"
        " and branches as above, then its run directory and its rows in the database; one that keeps"
        " work (as above), crashed, or ran in a repository now gone is kept, and said why.",
    )
    gc.add_argument(
        "--force", action="store_true",
        help="remove unmerged worktrees and branches, and integration branches not applied, too (with"
        " --runs: crashed runs as well; a live run never)",
    )  # fmt: skip
    gc.add_argument(
        "--dry-run", action="store_true", help="say what would be removed and kept; change nothing"
    )
    gc.add_argument("--runs", action="store_true", help="remove old finished runs too (needs --older-than)")
    gc.add_argument(
        "--older-than", type=_age, metavar="AGE",
        help="with --runs: the runs that ended longer ago than AGE, a number and a unit: 30d, 12h, 2w, 90m",
    )  # fmt: skip
    _add_worker_command(commands, run, resume)
    _add_queue_commands(commands, ls)
    return parser
