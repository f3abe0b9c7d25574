"""The queue of runs (PostgreSQL only): Procrastinate's schema and teamrt's queue tables.

Revision ID: 0005
Revises: 0004

The library's tables, types, procedures and triggers come from the SQL file the
installed ``procrastinate`` ships (``procrastinate/sql/schema.sql``), applied only when
that is exactly the pinned version and file: another version could carry other SQL,
and this revision must mean one schema on every database it stamps.

A later library version is taken as later revisions, one per library migration:
its ``procrastinate/sql/migrations/<version>_NN_pre_*.sql`` files are applied (each
pinned by sha256, as here) in a revision deployed *before* the workers run the new
library, and its ``*_post_*.sql`` files in a revision applied *after* every worker
runs it, as the library's migration guide orders them; ``PROCRASTINATE_VERSION``
moves with them.

SQLite stores are one run's file each, with no queue: nothing happens there.
"""

from __future__ import annotations

import hashlib
from importlib import metadata, resources

import sqlalchemy as sa
from alembic import context, op

from teamrt.errors import UserError

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

PROCRASTINATE_VERSION = "3.10.0"
SCHEMA_SHA256 = "c70ec4b400a60ad9592787653aae5ae77ae41bf801d56b5bd2712751a07f2009"


class QueueSchemaMismatch(UserError):
    """The installed library is not the one this revision's SQL was checked against."""


def library_schema() -> str:
    """The pinned library's ``schema.sql``, or QueueSchemaMismatch in one line."""
    try:
        version = metadata.version("procrastinate")
    except metadata.PackageNotFoundError:
        version = "none"
    if version != PROCRASTINATE_VERSION:
        raise QueueSchemaMismatch(
            f"migration 0005 applies procrastinate {PROCRASTINATE_VERSION}'s schema, but {version} is"
            f" installed: install procrastinate=={PROCRASTINATE_VERSION}"
        )
    sql = resources.files("procrastinate").joinpath("sql", "schema.sql").read_bytes()
    found = hashlib.sha256(sql).hexdigest()
    if found != SCHEMA_SHA256:
        raise QueueSchemaMismatch(
            f"procrastinate {version}'s sql/schema.sql has sha256 {found}, not the pinned {SCHEMA_SHA256}:"
            " the installed package was changed; reinstall it"
        )
    return sql.decode()


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    sql = library_schema()
    if context.is_offline_mode():  # ``alembic upgrade --sql``: the file as it is
        op.get_context().impl.static_output(sql)
    else:
        # the driver's own cursor, in the migration's transaction: the file is many statements with no
        # parameters (SQLAlchemy would read its ``:name`` and ``%`` as placeholders)
        with bind.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(sql)

    op.create_table(
        "batches",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("submitter", sa.String(128), nullable=False),
        sa.Column("budget_usd", sa.Double(), nullable=False),
        sa.Column("reserved_usd", sa.Double(), nullable=False, server_default="0"),
        sa.Column("spent_usd", sa.Double(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "queue_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("submitter", sa.String(128), nullable=False),
        sa.Column("batch_id", sa.String(128), sa.ForeignKey("batches.id"), nullable=True),
        sa.Column("team_file", sa.Text(), nullable=True),
        sa.Column("team_name", sa.String(255), nullable=True),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("repo_url", sa.Text(), nullable=True),
        sa.Column("repo_ref", sa.String(255), nullable=True),
        sa.Column("pool", sa.String(64), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("budget_usd", sa.Double(), nullable=True),
        sa.Column("idem_key", sa.String(255), nullable=True, unique=True),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("stop_requested_at", sa.Double(), nullable=True),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("end_status", sa.String(16), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=True),
    )
    op.create_index("ix_queue_runs_submitter_ended", "queue_runs", ["submitter", "ended_at"])
    op.create_index("ix_queue_runs_batch", "queue_runs", ["batch_id"])
    op.create_table(
        "run_jobs",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("queue_runs.run_id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("worker_host", sa.String(255), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("ended_at", sa.Double(), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
    )
    op.create_index("ix_run_jobs_job", "run_jobs", ["job_id"])
    op.create_table(
        "user_quotas",
        sa.Column("submitter", sa.String(128), primary_key=True),
        sa.Column("max_running", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in ("user_quotas", "run_jobs", "queue_runs", "batches"):
        op.drop_table(table)
    # the library ships no downgrade; its objects all carry its prefix
    op.execute(
        "DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs,"
        " procrastinate_workers CASCADE"
    )
    op.execute(
        "DROP TYPE IF EXISTS procrastinate_job_status, procrastinate_job_event_type,"
        " procrastinate_job_to_defer_v1 CASCADE"
    )
