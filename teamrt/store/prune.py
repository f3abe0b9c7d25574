"""Forgetting a run in a database that holds every run (``TEAMRT_DB``): ``forget_run``.

A run's own SQLite file lives in its run directory and goes with it
(``teamrt gc --runs``); a server database keeps every run's rows side by
side, so pruning a run there deletes its rows, every table's, in one
transaction, children before parents. The run's row is read under a row lock
first: a run that an owner took again meanwhile (a resume, a follow-up on
another host) is refused, never deleted under it.
"""

from __future__ import annotations

from sqlalchemy import delete, or_, select

from teamrt.store import engine as eng
from teamrt.store import tables as t
from teamrt.store.errors import RunOwned
from teamrt.store.schema import Base


def forget_run(url: str, run: str, token: int) -> int:
    """Delete every row of ``run`` from the database at ``url``; how many rows went (0: it had none).

    ``token``: the run's lease (``RunRecord.owner_token``) when the caller judged it finished or crashed.
    Raises RunOwned when it has been taken since (a resume, a follow-up), or is running under an owner
    it was not judged with."""
    engine = eng.writer_engine(url)
    try:
        with engine.begin() as conn:
            row = conn.execute(
                select(t.runs.c.status, t.runs.c.owner_host, t.runs.c.owner_pid, t.runs.c.owner_token)
                .where(t.runs.c.id == run)
                .with_for_update()
            ).first()
            if row is None:
                return 0
            if row.owner_token != token:
                raise RunOwned(run, row.owner_host or "another host", row.owner_pid or 0, None)
            tasks = select(t.tasks.c.id).where(t.tasks.c.run_id == run).scalar_subquery()
            blockers = t.task_blockers.c
            gone = conn.execute(
                delete(t.task_blockers).where(
                    or_(blockers.task_id.in_(tasks), blockers.blocker_id.in_(tasks))
                )
            ).rowcount
            for table in reversed(Base.metadata.sorted_tables):  # a table before those it refers to
                if "run_id" in table.c:
                    gone += conn.execute(delete(table).where(table.c.run_id == run)).rowcount
            gone += conn.execute(delete(t.runs).where(t.runs.c.id == run)).rowcount
            return gone
    finally:
        engine.dispose()
