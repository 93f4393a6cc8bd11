"""The peers' suites with our adapters on PostgreSQL (``make peers-pg``).

With ``TRAJLOG_TEST_DB=postgresql``, :func:`stores` starts the run's server as the test suite
does (``tests/kits/pgstores.py``: a throwaway cluster of Debian's server, or
``TRAJLOG_TEST_PG_URL``) and redirects every store the adapters open by a path -- in this
process and in its children -- to a tenant of it; it stops the cluster at the end.  Without
the switch it does nothing: the runs are on SQLite files, as always.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


@contextmanager
def stores() -> Iterator[str]:
    """Yield the backend the run's stores are on ("sqlite" or "postgresql")."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    from kits import pgstores  # type: ignore[import-not-found]

    if not pgstores.active():
        yield "sqlite"
        return
    server = pgstores.Server()
    try:
        server.start()      # a server that does not start raises: the run fails
        pgstores.install()
        yield "postgresql"
        stored = server.stores()
        print(f"{stored} trajlog stores on PostgreSQL held sessions or memories")
        if not stored:
            raise RuntimeError("TRAJLOG_TEST_DB=postgresql: no store went to PostgreSQL")
    finally:
        server.stop()
