"""``teamrt continue RUN --prompt PROMPT`` as a user runs it, killed in the middle of the round
(``tests/runtime/test_continue.py``).

``python -m tests.helpers.procs.rounds RUN PROMPT``: the process's simulator plays the lead (``lead``):
round one it answers at once; round two it first calls Glob, and when Glob's result comes back, the
simulator SIGKILLs this very process (``kill``), as a crash does, before the round's answer. Played again
without the kill (a resume), it answers the round.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from teamrt import cli
from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer

PROMPT = "ROUND TWO: list the text files"
ROUND_ONE = "round one is done"
ROUND_TWO = "round two is done: notes.txt"


def lead(kill: bool) -> Callable[[SimRequest], Reply]:
    def play(request: SimRequest) -> Reply:
        if PROMPT in request.last_user_text:
            return Reply().call("Glob", {"pattern": "*.txt"})
        if request.tool_outcomes:  # Glob's result: the round's answer, or the crash
            if kill:
                os.kill(os.getpid(), signal.SIGKILL)
            return Reply().say(ROUND_TWO)
        return Reply().say(ROUND_ONE)

    return play


@contextmanager
def server(*, kill: bool) -> Iterator[SimServer]:
    """A simulator playing the lead, killing its process at round two's second turn when ``kill``."""
    with SimServer({"lead": lead(kill)}) as sim:
        yield sim


def main() -> int:
    import teamrt.sim

    run_id, prompt = sys.argv[1], sys.argv[2]
    with server(kill=True) as sim:
        teamrt.sim._shared = sim  # the process's own simulator, as ``open_model`` finds it
        return cli.main(["continue", run_id, "--prompt", prompt])


if __name__ == "__main__":
    sys.exit(main())
