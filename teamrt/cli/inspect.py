"""``teamrt ls``, ``show``, ``logs``, ``send``, ``stop`` and ``answer``: runs seen and steered from outside.

Each reads a run's store through ``teamrt.runs`` (``query`` for the facts, ``report`` for what ``ls``
and ``show`` print, ``follow`` for the event log) or acts on it by mail (``steer``); none writes the
store. A message that went through the database to a run on another host says so on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from teamrt import home
from teamrt.cli.output import EXIT_FAILED, print_json
from teamrt.errors import UserError
from teamrt.models.pricing import load_prices_file, with_overrides
from teamrt.runs import follow, personmail, query, report, steer
from teamrt.runs.report import Prices
from teamrt.runs.steer import Sent
from teamrt.terminal import clean_line


def handle(args: argparse.Namespace) -> int:
    if args.command == "ls":
        return _ls(args)
    if args.command == "logs":
        return _logs(args)
    if args.command == "stop":  # a queued run, or one waiting for a worker, has no owner to mail
        from teamrt.queue.stopping import stop_if_queued

        said = stop_if_queued(args.run, args.agent)
        if said is not None:
            print(clean_line(said))
            return 0
    run_dir = home.existing_run_dir(args.run)
    if args.command == "show" and args.json:
        print_json(report.show_json(run_dir, args.run))
    elif args.command == "show":
        prices = _prices_file(args.prices) if args.prices is not None else None
        print("\n".join(report.render_show(run_dir, args.run, full=args.full, prices=prices)))
    elif args.command == "send":
        _send(args, run_dir)
    elif args.command == "answer":
        if args.always and args.verdict != "allow":
            raise UserError("--always goes with allow: teamrt answer RUN ASK allow --always")
        allow = args.verdict == "allow"
        sent = steer.answer(run_dir, args.run, args.ask, allow, args.reason, always=args.always)
        verdict = "allow always" if args.always else args.verdict
        print(
            f"sent {verdict} for {args.ask} to the supervisor of run {args.run} (message {sent.message.id})"
        )
        _note(sent)
    else:
        sent, created = steer.stop(run_dir, args.run, args.agent)
        what = f"agent {args.agent}" if args.agent else "the run"
        print(f"asked the supervisor of run {args.run} to stop {what} (message {sent.message.id})")
        _note(sent)
        if created:
            print(
                "teamrt: note: this run had no supervisor mailbox yet; the request waits there",
                file=sys.stderr,
            )
    return 0


DEFAULT_WAIT_S = 10.0
"""How long ``send`` waits on a terminal for the agent to read the message (``--wait``, ``--no-wait``)."""


def _send(args: argparse.Namespace, run_dir: Path) -> None:
    """``send``: where the message went, then (on a terminal, or with ``--wait``) whether the agent
    read it: waits up to the seconds given, never when the agent will not read it soon."""
    from teamrt.runs import receipt

    sent, _ = steer.send(run_dir, args.run, args.agent, args.text)
    print(clean_line(receipt.delivered_line(sent, args.agent)), flush=True)
    now = receipt.standing(run_dir, args.run, args.agent)
    said = receipt.expectation(args.run, args.agent, now)
    if said is not None:
        print(clean_line(said))
        return
    wait = 0.0 if args.no_wait else args.wait if args.wait is not None else DEFAULT_WAIT_S
    if wait <= 0 or (args.wait is None and not sys.stdout.isatty()):
        return
    took = receipt.read_after(run_dir, args.run, args.agent, sent.message.id, wait)
    if took is not None:
        print(f"read by {args.agent} after {took:.1f}s")
        return
    now = receipt.standing(run_dir, args.run, args.agent)
    said = receipt.expectation(args.run, args.agent, now) or receipt.busy_line(
        args.run, args.agent, now, wait
    )
    print(clean_line(said))


def _ls(args: argparse.Namespace) -> int:
    runs_dir = home.runs_path()
    if args.batch is not None:
        return _ls_batch(args, runs_dir)
    summaries = query.list_runs(runs_dir)
    if args.json:
        print_json([report.summary_json(s) for s in summaries])
    else:
        print("\n".join(report.render_ls(summaries, runs_dir)))
    return 0


def _ls_batch(args: argparse.Namespace, runs_dir: Path) -> int:
    """``ls --batch B``: the batch's spend against its budget, then its runs."""
    from teamrt.queue import fleet

    batch, summaries = fleet.batch_runs(runs_dir, args.batch)
    if args.json:
        print_json({"batch": fleet.batch_json(batch), "runs": [report.summary_json(s) for s in summaries]})
    else:
        print(clean_line(fleet.batch_line(batch)))
        if summaries:
            print("\n".join(report.render_ls(summaries, runs_dir)))
    return 0


def _note(sent: Sent) -> None:
    """On stderr, for a message that went through the database to a run on another host."""
    said = steer.describe(sent)
    if said is not None:
        print(f"teamrt: note: {clean_line(said)}", file=sys.stderr)


def _logs(args: argparse.Namespace) -> int:
    """``logs``: a line per event (``--json``: a JSON object per line); ``-f`` follows the run to its end
    and says how it ended (on stderr with ``--json``, so that stdout stays JSON Lines)."""
    render = follow.event_json if args.json else follow.format_event
    mail = personmail.mail_json if args.json else personmail.format_mail  # a person's mail: sent, read
    run_dir = home.existing_run_dir(args.run)
    status = follow.follow(
        run_dir, args.run, lambda line: print(line, flush=True), follow=args.follow, render=render, mail=mail
    )
    if not args.follow:
        return 0
    print(f"run {args.run} ended: {status}", file=sys.stderr if args.json else sys.stdout)
    return 0 if status == "done" else EXIT_FAILED


def _prices_file(path: Path) -> Prices:
    """``show --prices FILE``: the catalog with FILE laid over it (a bad file raises ``SettingsError``)."""
    return Prices(with_overrides(load_prices_file(path)), str(path))
