import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from infrastructure.persistence.engine import build_engine
from infrastructure.persistence.migrations import described_by_tables
from infrastructure.persistence.tables import metadata
from infrastructure.settings import Settings

config = context.config


def _url() -> str:
    return config.attributes.get("database_url") or config.get_main_option("sqlalchemy.url") or Settings().database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=described_by_tables,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = build_engine(_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
