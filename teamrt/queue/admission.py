"""``teamrt submit``: a run request checked, recorded and deferred, all in one transaction.

The run's ``queue_runs`` row, its batch reservation (under the batch row's lock, all or
nothing) and its first attempt's job commit together, so a submission either is queued
with its job or left no trace. What a worker will hand to git (the repository URL and
ref) is checked here, before anything is stored: a worker never sees a URL that could
make git run a command (``ext::``), read a descriptor (``fd::``) or take an option.
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError

from teamrt.queue.connect import DEFAULT_POOL, reaching
from teamrt.queue.jobs import MAX_PRIORITY, QueueError, defer_in
from teamrt.store import queue_tables as q
from teamrt.store.engine import describe
from teamrt.store.migrate import upgrade
from teamrt.store.ownership import now_in_database

USER_ENV = "TEAMRT_USER"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
"""A submitter, a batch or a pool: no spaces, no controls, no leading punctuation."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_HELPER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*::")  # git's ``<transport>::<address>``: a remote helper
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
SCHEMES = ("https", "http", "ssh", "git", "file")
_REF = re.compile(r"(?![-./])(?!.*(?:\.\.|@\{|//|/\.))[^\x00-\x20\x7f~^:?*\[\\]+(?<![/.])(?<!\.lock)")
MAX_URL = 2048
MAX_REF = 255
MAX_KEY = 255
MAX_PROMPT = 1024 * 1024
_CENT = 1e-9  # float slack when a reservation exactly fills a batch


class Refused(QueueError):
    """A submission that is not queued."""


@dataclass(frozen=True, slots=True)
class Request:
    """What ``teamrt submit`` was asked, checked (``check``) before it is stored."""

    submitter: str
    prompt: str
    team_file: str | None  # the team file's text; None: the built-in team ``team_name``
    team_name: str
    model: str | None = None
    repo_url: str | None = None
    repo_ref: str | None = None
    pool: str = DEFAULT_POOL
    priority: int = 0
    budget_usd: float | None = None
    idem_key: str | None = None
    batch: str | None = None
    batch_budget_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Admitted:
    run_id: str
    job_id: int
    batch_left_usd: float | None = None
    """What the batch has left to reserve after this run; None outside a batch."""


def submitter() -> str:
    """Who submits: ``TEAMRT_USER``, else the login name."""
    name = os.environ.get(USER_ENV) or getpass.getuser()
    if not NAME.fullmatch(name):
        raise Refused(f"{USER_ENV}={name[:60]!r} is not a user name (letters, digits, '.', '_', '@', '-')")
    return name


def check_repo(url: str) -> str:
    """A repository URL a worker may give ``git clone``, or Refused in one line."""
    shown = repr(url[:80])
    if len(url) > MAX_URL or _CONTROL.search(url):
        raise Refused(f"--repo {shown}: a URL of at most {MAX_URL} characters, with no control characters")
    if url.startswith("-") or not url.strip():
        raise Refused(f"--repo {shown}: not a repository URL (it would be read as an option)")
    if _HELPER.match(url):
        raise Refused(f"--repo {shown}: git remote helpers (such as ext:: and fd::) are refused")
    scheme = _SCHEME.match(url)
    if scheme is not None and scheme.group(1).lower() not in SCHEMES:
        raise Refused(f"--repo {shown}: scheme {scheme.group(1)!r} refused (one of {', '.join(SCHEMES)})")
    return url


def check_ref(ref: str) -> str:
    """A branch, tag or commit name, or Refused in one line."""
    if len(ref) > MAX_REF or not _REF.fullmatch(ref):
        raise Refused(
            f"--ref {ref[:80]!r}: not a branch, tag or commit name (no leading '-', no spaces or controls)"
        )
    return ref


def check(request: Request) -> Request:
    """Refuse, in one line, a request a worker could not or must not run."""
    if not request.prompt.strip():
        raise Refused("--prompt is empty: say what the team should do")
    if len(request.prompt) > MAX_PROMPT or "\x00" in request.prompt:
        raise Refused(f"--prompt: at most {MAX_PROMPT // 1024} KiB of text, with no NUL characters")
    if request.repo_url is not None:
        check_repo(request.repo_url)
    if request.repo_ref is not None:
        if request.repo_url is None:
            raise Refused("--ref goes with --repo: the ref of which repository?")
        check_ref(request.repo_ref)
    if request.model is not None and (not 0 < len(request.model) <= 128 or _CONTROL.search(request.model)):
        raise Refused(f"--model {request.model[:60]!r}: not a model name")
    if not NAME.fullmatch(request.pool) or len(request.pool) > 64:
        raise Refused(f"--queue {request.pool[:60]!r}: a queue name is letters, digits, '.', '_' and '-'")
    if abs(request.priority) > MAX_PRIORITY:
        raise Refused(f"--priority {request.priority}: from -{MAX_PRIORITY:_} to {MAX_PRIORITY:_}")
    if request.idem_key is not None and (
        not 0 < len(request.idem_key) <= MAX_KEY or _CONTROL.search(request.idem_key)
    ):
        raise Refused(f"--key: 1 to {MAX_KEY} characters, with no control characters")
    if request.batch is not None:
        if not NAME.fullmatch(request.batch):
            raise Refused(
                f"--batch {request.batch[:60]!r}: a batch name is letters, digits, '.', '_' and '-'"
            )
        if request.budget_usd is None:
            raise Refused("--batch needs --budget-usd: each run's whole budget is reserved from the batch")
    elif request.batch_budget_usd is not None:
        raise Refused("--batch-budget-usd goes with --batch")
    return request


def submit(url: str, run_id: str, request: Request) -> Admitted:
    """Record the run, reserve its budget from its batch, defer its first attempt: all or nothing."""
    with reaching(url) as engine, engine.connect() as conn:
        upgrade(conn, describe(url))  # the queue's tables come with the schema (migration 0005)
        try:
            with conn.begin():
                left = _reserve(conn, request) if request.batch is not None else None
                conn.execute(insert(q.queue_runs).values(_row(conn, run_id, request)))
                return Admitted(run_id, defer_in(conn, run_id, 1), left)
        except IntegrityError:
            first = _first_with_key(conn, request.idem_key)
            if first is None:
                raise
            raise Refused(f"--key {request.idem_key!r} was used already, by run {first}") from None


def _row(conn: Connection, run_id: str, r: Request) -> dict[str, object]:
    return {
        "run_id": run_id, "submitter": r.submitter, "batch_id": r.batch, "team_file": r.team_file,
        "team_name": r.team_name[:255], "prompt": r.prompt, "model": r.model, "repo_url": r.repo_url,
        "repo_ref": r.repo_ref, "pool": r.pool, "priority": r.priority, "budget_usd": r.budget_usd,
        "idem_key": r.idem_key, "submitted_at": now_in_database(conn),
    }  # fmt: skip


def _first_with_key(conn: Connection, key: str | None) -> str | None:
    if key is None:
        return None
    with conn.begin():
        return conn.execute(select(q.queue_runs.c.run_id).where(q.queue_runs.c.idem_key == key)).scalar()


def _reserve(conn: Connection, r: Request) -> float:
    """Reserve the run's whole budget from its batch (made by this submission when it gives
    ``batch_budget_usd``), under the batch row's lock; returns what the batch has left."""
    assert r.batch is not None and r.budget_usd is not None
    if r.batch_budget_usd is not None:  # made once; a concurrent first submission is met by the conflict
        conn.execute(
            pg_insert(q.batches)
            .values(id=r.batch, submitter=r.submitter, budget_usd=r.batch_budget_usd,
                    created_at=now_in_database(conn))
            .on_conflict_do_nothing(index_elements=["id"])
        )  # fmt: skip
    batch = conn.execute(select(q.batches).where(q.batches.c.id == r.batch).with_for_update()).first()
    if batch is None:
        raise Refused(f"no batch {r.batch!r}: the first run of a batch gives --batch-budget-usd")
    if batch.submitter != r.submitter:
        raise Refused(f"batch {r.batch!r} is {batch.submitter}'s; name a batch of your own")
    if r.batch_budget_usd is not None and abs(batch.budget_usd - r.batch_budget_usd) > _CENT:
        raise Refused(
            f"batch {r.batch!r} has a budget of ${batch.budget_usd:.2f} already; leave out --batch-budget-usd"
        )
    left = batch.budget_usd - batch.reserved_usd - batch.spent_usd
    if r.budget_usd > left + _CENT:
        raise Refused(
            f"batch {r.batch!r} cannot cover this run's ${r.budget_usd:.2f}: ${left:.2f} of its"
            f" ${batch.budget_usd:.2f} is left (${batch.reserved_usd:.2f} reserved,"
            f" ${batch.spent_usd:.2f} spent)"
        )
    conn.execute(
        update(q.batches)
        .where(q.batches.c.id == r.batch)
        .values(reserved_usd=q.batches.c.reserved_usd + r.budget_usd)
    )
    return float(left - r.budget_usd)
