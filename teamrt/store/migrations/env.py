"""Alembic environment for the run store.

teamrt calls it with a connection in ``config.attributes["connection"]``
(see ``teamrt.store.migrate``). A developer adding a migration runs, from the
repository root::

    .venv/bin/alembic -c teamrt/store/migrations/alembic.ini revision --autogenerate -m "what changed"

which compares the models with a scratch SQLite database at head.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from teamrt.store.schema import Base

config = context.config
target_metadata = Base.metadata


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url", "sqlite://"))
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
