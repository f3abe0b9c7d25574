"""``teamrt demo``: the example teams on the built-in sim model (``teamrt.demos``), or the mailbox at work.

Always offline: an API key is never used. ``research`` and ``coding`` run the teams of ``examples/``
(``teamrt.demos.teams``), ``mailbox`` shows the mailbox between real processes (``teamrt.demos.mailbox``).
"""

from __future__ import annotations

import argparse

from teamrt.demos import mailbox, teams


def handle(args: argparse.Namespace) -> int:
    if args.which == "mailbox":
        return mailbox.run(rounds=args.rounds)
    return teams.run(args.which, tree=args.tree)
