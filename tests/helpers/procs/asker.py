"""``teamrt run`` in the foreground as a person runs it at a terminal (``tests/cli/test_inline_asks.py``).

``python -m tests.helpers.procs.asker PLAY ARGS...`` runs ``teamrt run ARGS`` with this process's simulator
playing the lead, one call a turn, as ``PLAYS[PLAY]`` lists them; the last turn answers with what the
calls' results said (``is_error`` marked ``!``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from teamrt import cli
from teamrt.models import Reply
from teamrt.sim import SimRequest, SimServer

ESCAPES = "printf 'x\x1b]0;pwned\x07\x1b[2J'"
PLAYS: dict[str, list[tuple[str, dict[str, str]]]] = {
    # always for echo; echo again (allowed by the rule, not asked); a compound command (no rule: denied with a
    # note); a Write (allowed once)
    "day": [
        ("Bash", {"command": "echo one"}),
        ("Bash", {"command": "echo two"}),
        ("Bash", {"command": "echo three && rm -rf gone"}),
        ("Write", {"file_path": "note.txt", "content": "hello\n"}),
    ],
    "escapes": [("Bash", {"command": ESCAPES})],
    "one": [("Bash", {"command": "echo one"})],
}


def lead(calls: list[tuple[str, dict[str, str]]]) -> Callable[[SimRequest], Reply]:
    def play(request: SimRequest) -> Reply:
        if request.turns < len(calls):
            tool, args = calls[request.turns]
            return Reply().call(tool, args)
        said = [("!" if o.is_error else "") + " ".join(o.output.split())[:80] for o in request.tool_outcomes]
        return Reply().say("results: " + " | ".join(said))

    return play


def main() -> int:
    import teamrt.sim

    play, argv = sys.argv[1], sys.argv[2:]
    with SimServer({"lead": lead(PLAYS[play])}) as sim:
        teamrt.sim._shared = sim  # the process's own simulator, as ``open_model`` finds it
        return cli.main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main())
