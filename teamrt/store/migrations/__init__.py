"""Alembic migrations of the run store."""
