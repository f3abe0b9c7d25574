"""Errors of the run store. Each carries its facts in fields; its text is one line for the user.

Those a person meets and can act on (a run missing, taken, owned or of another schema, a store that
stopped or would not open) are ``UserError`` as well, so the CLI tells them in one line; the journal's
own refusals (``StoreClosed``, ``InvalidTransition``, ``TaskUnavailable``) are not: they are bugs or
the model's business.
"""

from __future__ import annotations

from teamrt.errors import TeamrtError, UserError


def database_reason(error: Exception) -> str:
    """A database driver's error in one line: its first (PostgreSQL's psycopg adds hints below)."""
    orig = getattr(error, "orig", None)
    text = str(orig) if orig is not None else type(error).__name__
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


class StoreError(TeamrtError):
    """Base class for every store error."""


class RunNotFound(StoreError, UserError):
    def __init__(self, run: str, where: str) -> None:
        self.run = run
        self.where = where
        super().__init__(f"no run named {run!r} in {where}")


class RunExists(StoreError, UserError):
    def __init__(self, run: str, where: str) -> None:
        self.run = run
        self.where = where
        super().__init__(f"run {run!r} already exists in {where}")


class RunOwned(StoreError, UserError):
    """A live process owns the run; a second owner is refused."""

    def __init__(self, run: str, host: str, pid: int, heartbeat_age: float | None) -> None:
        self.run = run
        self.host = host
        self.pid = pid
        self.heartbeat_age = heartbeat_age
        beat = "" if heartbeat_age is None else f", heartbeat {heartbeat_age:.0f} s ago"
        super().__init__(f"run {run!r} is live: owned by pid {pid} on {host}{beat}; stop that process first")


class SchemaTooNew(StoreError, UserError):
    """The store was written by a newer teamrt; opening it could lose what that version wrote."""

    def __init__(self, where: str, revision: str, head: str) -> None:
        self.where = where
        self.revision = revision
        self.head = head
        super().__init__(
            f"{where} was written by a newer teamrt (schema {revision}, this one knows up to {head});"
            " upgrade teamrt to open it"
        )


class SchemaTooOld(StoreError, UserError):
    """A reader met an older schema that it may not upgrade, because a live owner holds the run."""

    def __init__(self, where: str, revision: str | None, head: str) -> None:
        self.where = where
        self.revision = revision
        self.head = head
        super().__init__(
            f"{where} has schema {revision or 'none'} and is held by an older teamrt;"
            f" this one reads schema {head} once that run stops"
        )


class StoreWriteFailed(StoreError, UserError):
    """A write could not be made durable (disk full, I/O error); the store accepts no more writes.

    Everything committed before stays intact; the caller whose write failed
    was never told it had succeeded.
    """

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(
            f"the run store {where} stopped: {reason}. Nothing after the last commit was kept;"
            " fix the cause, then resume the run"
        )


class RunTakenOver(StoreWriteFailed):
    """Another owner took the run (its lease's token moved on): this process may write to it no more.

    Raised by the fence every write transaction checks, so a stale owner (one
    that was wedged while another host resumed the run) never writes over the
    new owner's work.
    """

    def __init__(self, run: str, where: str, token: int, now: int, host: str | None, pid: int | None) -> None:
        self.run = run
        self.token = token
        self.now = now
        by = f"pid {pid} on {host}" if host is not None else "another owner"
        reason = f"run {run!r} was taken over by {by} (lease {now}, this process held {token})"
        Exception.__init__(
            self, f"{reason}; this process stopped writing to it, and nothing after its last commit was kept"
        )
        self.where = where
        self.reason = reason


class StoreOpenFailed(StoreError, UserError):
    """The store could not be opened for writing (a full disk, a failing device): nothing was taken over."""

    def __init__(self, where: str, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(
            f"cannot open the run store {where} for writing: {reason}; fix the cause, then try again"
        )


class StoreClosed(StoreError):
    def __init__(self, where: str) -> None:
        self.where = where
        super().__init__(f"the run store {where} is closed")


class NotFound(StoreError, UserError, LookupError):
    """An agent, tool call or task that this run does not have."""

    def __init__(self, what: str, key: object) -> None:
        self.what = what
        self.key = key
        super().__init__(f"no {what} {key!r} in this run")


class InvalidTransition(StoreError, ValueError):
    """A state change the journal does not allow, such as ``done -> running``."""

    def __init__(self, what: str, key: object, current: str, wanted: str) -> None:
        self.what = what
        self.key = key
        self.current = current
        self.wanted = wanted
        super().__init__(f"{what} {key!r} cannot go from {current!r} to {wanted!r}")


class TaskUnavailable(StoreError):
    """A claim that lost: the task is taken, blocked or finished."""

    def __init__(self, task_id: int, reason: str, owner: str | None, blocked_by: tuple[int, ...]) -> None:
        self.task_id = task_id
        self.reason = reason
        self.owner = owner
        self.blocked_by = blocked_by
        super().__init__(f"task {task_id} cannot be claimed: {reason}")
