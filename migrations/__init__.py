"""Alembic migrations: the only way Threadline's schema is created or changed."""
