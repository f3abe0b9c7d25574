"""``teamrt apply``: a run's integration branch onto the person's branch (``teamrt gc`` is ``cli.gc``).

``apply`` brings a finished run's integration branch onto the current branch (``teamrt.worktree.apply``):
it lists first what the run's commits change of the protected paths, and asks before a merge commit (on a
terminal; elsewhere it says to run again with ``--yes``); ``--squash`` lands the run as one commit with a
message drafted from the run (``runs.applymsg``, ``worktree.squash``), ``--edit`` opens it in $EDITOR.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from teamrt import home
from teamrt.cli.output import EXIT_FAILED
from teamrt.runs import query as runs
from teamrt.terminal import clean_line
from teamrt.worktree import apply as applying
from teamrt.worktree.apply import ApplyError, Plan, apply, plan_apply


def handle(args: argparse.Namespace) -> int:
    return _apply(args)


def _apply(args: argparse.Namespace) -> int:
    run_dir = home.existing_run_dir(args.run)
    with runs.reading(run_dir, args.run) as reader:
        run = reader.run()
    status = runs.run_status(run)
    if status in (*runs.OWNED, runs.CRASHED):
        raise ApplyError(f"run {run.id} is {status}; apply it once it has ended")
    if args.edit and not args.squash:
        raise ApplyError("--edit edits the message of a squashed commit: use it with --squash")
    plan = plan_apply(run, run_dir)
    for line in applying.listing(plan):
        print(line)
    applying.check_allowed(plan, args.allow_protected)
    shown = applying.allowed_changes(plan, args.allow_protected)
    if shown:
        print(f"the changes you allowed, to {', '.join(sorted(args.allow_protected))}:\n{shown}")
    if args.squash:
        return _squash(args, plan, run_dir)
    if plan.how == "merge" and not args.yes and not _confirmed(plan):
        print("teamrt: nothing was changed", file=sys.stderr)
        return EXIT_FAILED
    print(apply(plan))
    return 0


def _squash(args: argparse.Namespace, plan: Plan, run_dir: Path) -> int:
    """``apply --squash``: one commit with a message drafted from the run (``--edit``: the person's)."""
    from teamrt.runs.applymsg import draft
    from teamrt.worktree.squash import squash

    if plan.how == "up-to-date":
        print(apply(plan))
        return 0
    message = draft(run_dir, plan.run)
    if args.edit:
        message = edited(message)
    print(squash(plan, message, strip_comments=args.edit))
    return 0


SHOWN_COMMITS = 10
"""Of the commits a merge would bring, those listed before the question."""


def _confirmed(plan: Plan) -> bool:
    """Whether the person wants the merge commit ``plan`` needs: asked on a terminal (stdin and stdout),
    after what will happen is shown; without one, ApplyError saying how to make it."""
    commits = plan.repo.run("log", "--no-color", "--format=%h %s", f"{plan.head}..{plan.tip}").splitlines()
    said = (
        f"{plan.branch} has moved on since run {plan.run} started: applying it makes a merge commit of"
        f" {plan.integration} ({len(commits)} commit(s)) on {plan.branch}"
    )
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ApplyError(f"{said}. Run again with --yes to make the merge commit, or --squash for one commit")
    print(f"{said}:")
    for line in commits[:SHOWN_COMMITS]:
        print(f"  {clean_line(line)}")  # a commit's subject is an agent's
    if len(commits) > SHOWN_COMMITS:
        print(f"  ... and {len(commits) - SHOWN_COMMITS} more (git log {plan.head[:12]}..{plan.integration})")
    try:
        reply = input("Merge? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print()
        return False
    return reply.strip().lower() in ("y", "yes")


COMMENT = (
    "\n# The message of the commit teamrt apply --squash makes, drafted from the run. Lines starting"
    "\n# with '#' are dropped; an empty message cancels the apply.\n"
)


def edited(draft: str) -> str:
    """``draft`` as the person leaves it in their editor ($VISUAL, $EDITOR, else vi), comment lines
    dropped; ApplyError when the editor fails or the message is left empty (nothing is changed)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="teamrt-apply-") as tmp:
        path = Path(tmp) / "SQUASH_EDITMSG"
        path.write_text(draft + COMMENT, encoding="utf-8")
        done = subprocess.run(["sh", "-c", f'{editor} "$@"', editor, str(path)], check=False)
        if done.returncode != 0:
            raise ApplyError(
                f"the editor ({clean_line(editor)}) exited {done.returncode}; nothing was changed"
            )
        text = path.read_text(encoding="utf-8", errors="replace")
    if not "".join(x for x in text.splitlines() if not x.startswith("#")).strip():
        raise ApplyError("the commit message was left empty; nothing was changed")
    return text
