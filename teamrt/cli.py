"""The ``teamrt`` command.

Mistakes a user can make (a bad argument, an unusable run directory) end in
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from . import __version__
from .mailbox import MailboxError

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
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version and usage errors: argparse has printed them
        return e.code if isinstance(e.code, int) else EXIT_FAILED
    try:
        return _run(args)
    except (MailboxError, OSError) as e:
        print(f"teamrt: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("teamrt: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from .demos import mailbox as demo

        return demo.run(rounds=args.rounds)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse allows no other


if __name__ == "__main__":
    raise SystemExit(main())
