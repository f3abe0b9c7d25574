"""``teamrt submit`` and ``teamrt queue``: runs handed to the workers of a server database's queue.

``submit`` reads the team file's text here (a worker on another machine cannot read
the submitter's files), checks it with the team-file parser, and records the run and
its first job in one transaction (``teamrt.queue.admission``); the run id goes to
stdout, one line about it to stderr. ``queue`` shows the workers, the jobs and the
runs waiting (``teamrt.queue.fleet``), or sets a submitter's quota.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from teamrt import home
from teamrt.cli.output import print_json
from teamrt.mailbox import is_name
from teamrt.queue import admission, fleet
from teamrt.queue.connect import DEFAULT_POOL, queue_url
from teamrt.terminal import clean_line

BUILT_IN_TEAMS = Path(__file__).resolve().parents[1] / "teams"
DEFAULT_TEAM = "default"


def handle(args: argparse.Namespace) -> int:
    if args.command == "submit":
        return _submit(args)
    return _queue(args)


def _submit(args: argparse.Namespace) -> int:
    url = queue_url()
    team_file, team_name, team_prompt = _team(args.teamfile, args.team)
    prompt = args.prompt if args.prompt is not None else team_prompt
    if prompt is None:
        raise admission.Refused("--prompt is needed: say what the team should do")
    request = admission.check(
        admission.Request(
            submitter=admission.submitter(), prompt=prompt, team_file=team_file, team_name=team_name,
            model=args.model, repo_url=args.repo, repo_ref=args.ref, pool=args.queue or DEFAULT_POOL,
            priority=args.priority, budget_usd=args.budget_usd, idem_key=args.key, batch=args.batch,
            batch_budget_usd=args.batch_budget_usd,
        )
    )  # fmt: skip
    admitted = admission.submit(url, home.new_run_id(), request)
    print(admitted.run_id, flush=True)
    said = f"teamrt: queued run {admitted.run_id} (job {admitted.job_id}, queue {request.pool}"
    said += f", priority {request.priority})"
    if request.batch is not None:
        said += f"; batch {request.batch}: ${admitted.batch_left_usd or 0.0:.2f} left to reserve"
    print(clean_line(said), file=sys.stderr)
    return 0


def _team(path: str | None, name: str | None) -> tuple[str | None, str, str | None]:
    """The team to send: ``(its file's text or None for a built-in, what was named, its default prompt)``."""
    if path is not None and name is not None:
        raise admission.Refused("give a team file or --team NAME, not both")
    if path is None:
        chosen = name or DEFAULT_TEAM
        if not is_name(chosen) or not (BUILT_IN_TEAMS / f"{chosen}.toml").is_file():
            known = ", ".join(sorted(p.stem for p in BUILT_IN_TEAMS.glob("*.toml")))
            raise admission.Refused(f"no built-in team {chosen[:60]!r} (built-in: {known})")
        return None, chosen, None
    text = _read_team(Path(path))
    return text, path, _checked_prompt(Path(path), text)


def _read_team(path: Path) -> str:
    """The team file's text: a regular file of at most the parser's limit, UTF-8."""
    from teamrt.team import MAX_BYTES, TeamFileError, read_bytes

    try:
        data = read_bytes(path)
    except OSError as e:
        raise TeamFileError(path, f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:  # it grew after its size was checked
        raise TeamFileError(path, f"over {MAX_BYTES // 1024} KiB; a team file is a short TOML file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TeamFileError(path, f"not UTF-8 text (byte {e.start})") from None


def _checked_prompt(path: Path, text: str) -> str | None:
    """Check the team file's text with the team-file parser, in an empty project (the run's repository is
    not here): an agent the file names may be defined there, so only that is let through. Returns the
    file's default prompt."""
    from teamrt.team import TeamFileError, load_team

    with tempfile.TemporaryDirectory(prefix="teamrt-submit-") as scratch:
        copy = Path(scratch) / "team.toml"
        copy.write_text(text, encoding="utf-8")
        try:
            return load_team(copy, project=Path(scratch)).prompt
        except TeamFileError as e:
            if "has no definition" in e.problem:  # the repository's own agent, maybe
                return None
            raise TeamFileError(path, e.problem) from None


def _queue(args: argparse.Namespace) -> int:
    url = queue_url()
    if args.quota is not None:
        user, limit = args.quota
        print(clean_line(fleet.set_quota(url, user, limit)))
        return 0
    view = fleet.read_fleet(url)
    if args.json:
        print_json(fleet.fleet_json(view))
    else:
        print("\n".join(fleet.render_fleet(view)))
    return 0
