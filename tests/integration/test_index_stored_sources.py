"""Sources stored before sources were split into passages become searchable when the operator upgrades:
`threadline migrate` indexes them (once)."""

import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import create_async_engine

from infrastructure.persistence import migrations
from infrastructure.persistence.tables import organizations, source_passages, sources, threads
from tests.databases import fresh_database, off_the_loop

THREADLINE = Path(sys.executable).with_name("threadline")


async def _migrate(url: str, tmp_path: Path) -> str:
    env = os.environ | {"THREADLINE_DATABASE_URL": url, "THREADLINE_DATA_DIR": str(tmp_path)}
    process = await asyncio.create_subprocess_exec(str(THREADLINE), "migrate", env=env, stdout=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return out.decode()


async def test_migrate_indexes_the_sources_stored_before_sources_were_indexed(tmp_path: Path) -> None:
    async with off_the_loop(fresh_database(tmp_path)) as url:
        await asyncio.to_thread(migrations.upgrade, url, "0010")  # the release before passages
        engine = create_async_engine(url)
        org_id, thread_id, source_id, now = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), datetime.now(UTC)
        try:
            async with engine.begin() as conn:
                await conn.execute(insert(organizations).values(id=org_id, name="Acme", slug="acme", created_at=now))
                await conn.execute(
                    insert(threads).values(
                        id=thread_id,
                        org_id=org_id,
                        title="",
                        metadata={},
                        message_count=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
                await conn.execute(
                    insert(sources).values(
                        id=source_id,
                        org_id=org_id,
                        thread_id=thread_id,
                        kind="text",
                        name="handbook.md",
                        origin_type="upload",
                        mime_type="text/markdown",
                        size=60,
                        created_by="user",
                        text="# Refunds\n\nRefunds are paid within fourteen days of the return.",
                        created_at=now,
                    )
                )
            assert "1 stored source(s) indexed" in await _migrate(url, tmp_path)
            async with engine.connect() as conn:
                texts = (await conn.execute(select(source_passages.c.text, source_passages.c.heading))).all()
            assert [(t.heading, "fourteen days" in t.text) for t in texts] == [("Refunds", True)]

            assert "indexed" not in await _migrate(url, tmp_path)  # once
            async with engine.connect() as conn:
                assert (await conn.execute(select(func.count()).select_from(source_passages))).scalar() == 1
        finally:
            await engine.dispose()
