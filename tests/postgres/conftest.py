"""The PostgreSQL tests' cluster: one throwaway cluster for the session
(``kits.pgcluster``; ``TRAJLOG_PG_URL`` points at an existing one), a fresh
schema per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kits import pgcluster


@pytest.fixture(scope="session")
def pg() -> Iterator[pgcluster.Cluster]:
    cluster = pgcluster.start()   # (raises when it cannot start: never a skip)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def schema(pg: pgcluster.Cluster) -> str:
    """A fresh trajlog schema, owned by the owner role."""
    return pg.new_schema()
