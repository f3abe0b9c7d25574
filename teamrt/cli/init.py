"""``teamrt init``: the built-in team, commented, at ``<top>/.teamrt/team.toml``, with the project's test
command allowed and made the merge gate.

The test command is told from the project's files, nothing run (``teamrt.testcommand``); init says in a
line what it found and in which file, or that it found none (the gate stays empty). The file it writes is
the built-in team's text with two lines changed, so every comment stays, and it is loaded before it is
written: what init writes always loads.

Then init runs the project's Claude Code ``Setup`` hooks of trigger ``init``, as ``claude --init`` does
(``teamrt.claudecode.setup_hooks``): ``--setup-only`` runs them without writing (``claude --init-only``),
``--maintenance`` runs those of trigger ``maintenance`` (``claude --maintenance``), ``--no-setup`` writes
without them. Each hook's outcome is a line; one that blocks makes init exit non-zero with its reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from teamrt import home
from teamrt.cli.output import EXIT_FAILED
from teamrt.terminal import clean_line

if TYPE_CHECKING:
    from teamrt.testcommand import Found

ALLOW_OPENING = "allow = [\n"
"""The built-in team's allow list opens with this line; the test command's rule goes first in it."""
GATES_LINE = re.compile(r"^gates = \[\].*$", re.MULTILINE)
"""The built-in team's gate line (with its comment); it becomes the test command's."""


def handle(args: argparse.Namespace) -> int:
    from teamrt.runtime.teamrun import DEFAULT_TEAM, TEAM_FILE
    from teamrt.testcommand import find_test_commands

    project = home.project_root()
    target = project / home.DEFAULT_HOME / TEAM_FILE
    if args.setup_only or args.maintenance:
        return run_setup_hooks(project, target, "maintenance" if args.maintenance else "init", alone=True)
    if target.exists() and not args.force:
        print(f"teamrt: {target} exists already; edit it, or overwrite it with teamrt init --force",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILED
    found = find_test_commands(project)
    text = DEFAULT_TEAM.read_text(encoding="utf-8")
    if found:
        text = with_test_command(text, found[0].runner.rule, found[0].runner.gate)
    _write_checked(target, text, project)
    for line in report(found):
        print(line)
    print(f"wrote {target}: the team 'teamrt run --prompt ...' starts here; every key: docs/team-file.md")
    return 0 if args.no_setup else run_setup_hooks(project, target, "init", alone=False)


def run_setup_hooks(project: Path, team_file: Path, trigger: str, *, alone: bool) -> int:
    """Run ``project``'s Setup hooks of ``trigger`` in the sandbox of the team at ``team_file`` (the
    built-in policy when there is none yet); a line each; EXIT_FAILED when one blocked. ``alone``: init
    does nothing else, so it says when there are none."""
    from teamrt.claudecode.setup_hooks import outside_run, run_setup
    from teamrt.team import load_team

    policy = load_team(team_file, project=project).sandbox if team_file.is_file() else None
    done = run_setup(project, trigger, outside_run(project, home.runs_path() / "setup-hooks", policy))
    for line in done.lines:
        print(line, file=sys.stderr if line.startswith("teamrt: warning:") else sys.stdout)
    if done.blocked is not None:
        print(clean_line(f"teamrt: a Setup hook blocked {trigger}: {done.blocked}"), file=sys.stderr)
        return EXIT_FAILED
    if alone and not done.ran:
        print(f"teamrt: no Setup hooks of trigger {trigger!r} to run")
    return 0


def with_test_command(text: str, rule: str, gate: str) -> str:
    """The built-in team's ``text`` with ``rule`` first in its allow list and ``gate`` its one gate."""
    if text.count(ALLOW_OPENING) != 1 or len(GATES_LINE.findall(text)) != 1:
        raise AssertionError("the built-in team's allow list or gate line is not where init writes")
    comment = "  # the project's test command, found by teamrt init\n"
    text = text.replace(ALLOW_OPENING, f"{ALLOW_OPENING}  {json.dumps(rule)},{comment}", 1)
    gates = f"gates = [{json.dumps(gate)}]  # the test command again, found by teamrt init"
    return GATES_LINE.sub(lambda _: gates, text, count=1)


def report(found: list[Found]) -> list[str]:
    """What init says about the test command: what it found and where, in lines safe for a terminal."""
    from teamrt.testcommand import RUNNERS

    if not found:
        names = ", ".join(dict.fromkeys(r.name.split()[0] for r in RUNNERS))
        return [
            f"teamrt: found no test command (looked for {names}); the merge gate stays empty:"
            " add yours to [merge] gates and to [permissions] allow"
        ]
    first, rest = found[0], found[1:]
    lines = [
        clean_line(
            f"teamrt: found {first.runner.name} ({first.source}): gate {first.runner.gate!r},"
            f" allowed {first.runner.rule}"
        )
    ]
    if rest:
        others = "; ".join(f"{f.runner.name} ({f.source})" for f in rest)
        lines.append(clean_line(f"teamrt: also found {others}: not used; add them yourself if you want them"))
    return lines


def _write_checked(target: Path, text: str, project: Path) -> None:
    """Write ``text`` to ``target`` once it loads as a team file (the whole file at once, never half)."""
    from teamrt.team import load_team

    target.parent.mkdir(mode=home.DIR_MODE, parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".team.", suffix=".toml")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        load_team(Path(temporary), project=project)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
