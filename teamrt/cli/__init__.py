"""The ``teamrt`` command.

Mistakes a user can make (a bad argument, an unusable run directory) end in
one line on stderr and a non-zero exit, never a traceback: each is a
``teamrt.errors.UserError``, told here, once. Each command's module is
imported only once it is asked for (``COMMANDS``), so ``teamrt --help`` and a
usage mistake load argparse, not the runtime.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable

from teamrt.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, error
from teamrt.cli.parser import build_parser
from teamrt.errors import UserError

COMMANDS = {
    "run": "run", "resume": "run", "init": "init", "continue": "continuing",
    "ls": "inspect", "show": "inspect", "logs": "inspect", "send": "inspect", "stop": "inspect",
    "answer": "inspect",
    "agents": "project", "mcp": "project", "trust": "project",
    "models": "models",
    "apply": "git", "gc": "gc",
    "diff": "review", "transcript": "review",
    "demo": "demo",
    "tui": "tui",
    "worker": "worker",
    "serve": "serve",
    "submit": "queue", "queue": "queue",
}  # fmt: skip
"""Each command's module in ``teamrt.cli``: its ``handle(args)`` does the command, giving the exit status."""


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
        module = "continuing" if getattr(args, "continue_run", False) else COMMANDS[args.command]
        handle: Callable[[argparse.Namespace], int] = importlib.import_module(f"teamrt.cli.{module}").handle
        status = handle(args)
        sys.stdout.flush()  # a reader gone by now (`| head`) is met here, not as a warning at exit
        return status
    except BrokenPipeError:  # the reader went away (`teamrt models | head`); say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except (UserError, OSError) as e:  # OSError: a file or directory the person can see to
        error(e)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("teamrt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
