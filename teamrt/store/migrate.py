"""Schema versions: Alembic from the first table.

Opening a store for writing upgrades it to ``HEAD``; a store at a revision
this teamrt does not know was written by a newer one and is refused. The
common case, a store already at ``HEAD``, is one query and never imports
Alembic (about 0.3 s).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from teamrt.store.errors import SchemaTooNew

if TYPE_CHECKING:
    from alembic.config import Config

# The newest revision under migrations/versions; a test holds the two equal.
HEAD = "0005"
MIGRATIONS = Path(__file__).with_name("migrations")


def current_revision(connection: Connection) -> str | None:
    """The revision stamped in the database, or None for an empty one."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one_or_none()


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return {script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


# PostgreSQL advisory lock taken around an upgrade: hosts starting runs at once migrate one at a time.
UPGRADE_LOCK = 0x7465616D7274  # "teamrt"


def upgrade(connection: Connection, where: str) -> None:
    """Bring the database behind ``connection`` to ``HEAD``; refuse one from a newer teamrt."""
    revision = current_revision(connection)
    connection.commit()
    if revision == HEAD:
        return
    if connection.dialect.name != "postgresql":
        _upgrade(connection, where, revision)
        return
    connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": UPGRADE_LOCK})
    try:
        _upgrade(connection, where, current_revision(connection))  # another host may have done it
    finally:
        connection.commit()
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": UPGRADE_LOCK})
        connection.commit()


def _upgrade(connection: Connection, where: str, revision: str | None) -> None:
    connection.commit()
    if revision == HEAD:
        return
    if revision is not None and revision not in known_revisions():
        raise SchemaTooNew(where, revision, HEAD)
    from alembic import command

    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
    connection.commit()


def is_newer(revision: str | None) -> bool:
    """True for a revision this teamrt does not know (it imports Alembic unless at HEAD)."""
    return revision is not None and revision != HEAD and revision not in known_revisions()
