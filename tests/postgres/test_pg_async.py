"""The asyncio face on PostgreSQL: concurrent tasks append to one session
(through group commit's worker) and read it back."""

from __future__ import annotations

import asyncio

from kits.pgcluster import Cluster
from trajlog.api.async_store import open as aopen
from trajlog.storage.postgres import PostgresBackend


def test_pg_async_tasks_append_and_read(pg: Cluster, schema: str):
    async def main() -> None:
        backend = PostgresBackend(pg.app_url, schema=schema, tenant="acme")
        async with await aopen(backend=backend) as store:
            s = await store.create_session()
            got = await asyncio.gather(*(s.append("note/x", {"i": i}) for i in range(50)))
            assert sorted(e.seq for e in got) == list(range(50))
            events = [e async for e in s.events()]
            assert [e.seq for e in events] == list(range(50))
            assert (await s.verify()).ok

    asyncio.run(main())
