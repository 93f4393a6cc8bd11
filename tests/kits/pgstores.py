"""The suite's PostgreSQL run: every store a test opens by a file path opens on PostgreSQL.

With ``TRAJLOG_TEST_DB=postgresql`` (``make test-pg``), ``tests/conftest.py`` calls
:meth:`Server.start` once per run and :func:`install`: from then on a store opened by a file
path -- ``trajlog.open(path)``, ``Store(path)``, the asyncio store, the adapters, the CLI's
``--db`` -- runs on a :class:`trajlog.storage.postgres.PostgresBackend` instead of the file.

* The file stays, as a marker: opening a path that holds nothing writes a line naming a random
  token there (atomically: racing openers agree on one), and the store's tenant is a digest of
  that token and the path's resolved form.  So a reopen -- in this process or a child -- sees
  what was written; two paths are isolated as two files are (by the backend's row-level
  security, the rule a tenant lives under in production); a file deleted and made again is a
  new store; a marker copied to another path is a new, empty store (the copy of an empty
  template, as the fuzz harness makes one); ``os.path.exists`` and the CLI's checks see a store.
* A path that holds anything else (a SQLite store, a trajlog 0.1 file, another program's file,
  an empty file) or whose folder is missing stays on SQLite, so what a test expects of such a
  file -- a migration, a refusal, an error -- is what it gets.
* ``":memory:"`` is a fresh tenant per open: private like an in-memory SQLite store, so the
  tests (and the Agents SDK's suite, whose sessions default to it) still run on PostgreSQL.
* Child processes (the crash kit's children, the CLI's subprocess tests, the race kit) open
  the same stores: :meth:`Server.start` puts the switch and the server's URL in the environment
  and ``tests/kits/pgsite/`` (its ``sitecustomize``) first on ``PYTHONPATH``, which installs the
  same redirect in every Python child when it imports trajlog.
* The server is a throwaway cluster of Debian's server (``tests/kits/pgcluster.py``; or a
  database made in ``TRAJLOG_PG_URL``'s cluster) stopped by its PID at the end, with one schema
  made by the owner role; the stores connect as the application role, which owns no table.  A
  cluster that does not start fails the run.  A store given its own ``backend=`` is left alone.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_DB = "TRAJLOG_TEST_DB"          # "postgresql": the redirect is on
ENV_URL = "TRAJLOG_TEST_PG_URL"     # the server the stores go to (set for the children)
ENV_SCHEMA = "TRAJLOG_TEST_PG_SCHEMA"   # the run's schema in it
SITE = Path(__file__).resolve().parent / "pgsite"
MARKER = b"trajlog test store on PostgreSQL, token "
_MARK = "_trajlog_pg_redirect"


def active() -> bool:
    """True in the suite's PostgreSQL run."""
    return os.environ.get(ENV_DB, "sqlite") == "postgresql"


def marker(path: str) -> str | None:
    """The token of the marker file at ``path`` (None: no file, or not a marker)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(MARKER) + 64)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None
    if not head.startswith(MARKER):
        return None
    return head[len(MARKER):].strip().decode("ascii", "replace")


def claim(path: str) -> str:
    """The token of the store at ``path``, writing a new marker if nothing is there; racing
    openers (threads or processes) agree on the first one linked in."""
    token = marker(path)
    if token is not None:
        return token
    fresh = uuid.uuid4().hex
    tmp = f"{path}.{fresh}.tmp"
    with open(tmp, "wb") as f:
        f.write(MARKER + fresh.encode() + b"\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    token = marker(path)
    if token is None:  # another opener put something else there meanwhile
        raise FileExistsError(f"{path}: not a trajlog test marker")
    return token


def tenant_of(path: str | os.PathLike[str]) -> str:
    """The tenant of the store at ``path``: its marker's token and its resolved path;
    ``":memory:"`` a new one each time."""
    name = os.fspath(path)
    if name == ":memory:":
        return "m" + uuid.uuid4().hex[:24]
    real = os.path.realpath(os.path.abspath(name))
    token = claim(real)
    return "t" + hashlib.blake2b(f"{token}\0{real}".encode(), digest_size=12).hexdigest()


def is_url(path: object) -> bool:
    """A location that already names a server (the factory opens it as it is)."""
    return isinstance(path, str) and "://" in path


def redirected(path: object) -> bool:
    """Whether a store at ``path`` goes to PostgreSQL in this run: ``":memory:"``, or a
    path in an existing folder that holds nothing or a marker."""
    if not isinstance(path, (str, os.PathLike)) or is_url(path):
        return False
    name = os.fspath(path)
    if not isinstance(name, str) or not name:
        return False
    if name == ":memory:":
        return True
    real = os.path.realpath(os.path.abspath(name))
    if not os.path.isdir(os.path.dirname(real)):
        return False
    return not os.path.lexists(real) or marker(real) is not None


def backend_for(path: str | os.PathLike[str], durability: str, lock_timeout_ms: int) -> Any:
    """The PostgreSQL backend that stands for the store at ``path``, as the application role
    (it owns no table); its ``path`` is the one it was opened by, as on SQLite, so a test that
    reopens ``store.path`` reopens this store."""
    from trajlog.storage.postgres import PostgresBackend

    backend = PostgresBackend(os.environ[ENV_URL], durability=durability,
                              lock_timeout_ms=lock_timeout_ms, tenant=tenant_of(path),
                              schema=os.environ[ENV_SCHEMA])
    backend.path = os.fspath(path)
    return backend


def install(store_module: Any = None) -> None:
    """Open every store of a file path on PostgreSQL from now on (idempotent);
    ``store_module`` is ``trajlog.api.store`` while it is being imported."""
    if store_module is None:
        from trajlog.api import store as store_module

    original: Callable[..., None] = store_module.Store.__init__
    if getattr(original, _MARK, False):
        return

    def __init__(self: Any, path: Any, *args: Any, **kwargs: Any) -> None:
        durability = kwargs.get("durability", args[0] if args else "full")
        timeout = kwargs.get("lock_timeout_ms", kwargs.get("busy_timeout_ms", 10_000))
        valid = (durability in ("full", "normal") and type(timeout) is int
                 and 0 <= timeout < 2**31 and kwargs.get("tenant") is None)
        # invalid arguments (and a tenant, which names a server's store) go to Store as they
        # are: it refuses them before any backend
        made = None
        if kwargs.get("backend") is None and valid and redirected(path):
            made = kwargs["backend"] = backend_for(path, durability, timeout)
        try:
            original(self, path, *args, **kwargs)
        except BaseException:
            if made is not None:   # Store refused another argument: the backend is ours to close
                made.close()
            raise

    setattr(__init__, _MARK, True)
    __init__.__doc__ = original.__doc__
    store_module.Store.__init__ = __init__  # type: ignore[method-assign]
    _wrap_probes(store_module)


def _wrap_probes(store_module: Any) -> None:
    """``schema_of`` and ``migrate`` of a marker: a store on PostgreSQL is at the current
    schema once opened (the backend checks its version at open), so the CLI's checks before
    a read, and ``trajlog migrate``, treat it as the SQLite file they stand for."""
    from trajlog.storage.schema import SCHEMA_VERSION

    schema_of, migrate = store_module.schema_of, store_module.migrate

    def schema_of_marker(path: Any) -> int | None:
        if isinstance(path, (str, os.PathLike)) and marker(os.fspath(path)) is not None:
            return SCHEMA_VERSION
        return schema_of(path)

    def migrate_marker(path: Any, **kwargs: Any) -> int:
        if isinstance(path, (str, os.PathLike)) and marker(os.fspath(path)) is not None:
            store_module.Store(path).close()
            return SCHEMA_VERSION
        return migrate(path, **kwargs)

    swaps = {id(schema_of): schema_of_marker, id(migrate): migrate_marker}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "trajlog" or name.startswith("trajlog.")):
            continue
        for attr in ("schema_of", "migrate", "migrate_store"):
            value = getattr(module, attr, None)
            if value is not None and id(value) in swaps:
                setattr(module, attr, swaps[id(value)])


def child_env() -> None:
    """What a child process needs to open the same stores: the switch, the server and
    ``pgsite`` first on ``PYTHONPATH``."""
    os.environ[ENV_DB] = "postgresql"
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(SITE) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(SITE), *parts])


class Server:
    """The run's server (``kits.pgcluster``: a throwaway cluster, or a database of
    ``TRAJLOG_PG_URL``'s) and one schema in it, made by the owner role; stopped by
    :meth:`stop`.  A run's child processes find both in the environment."""

    def __init__(self) -> None:
        self.cluster: Any = None

    def start(self) -> str:
        """Start the server (or raise: the run fails) and return the application URL."""
        ensure_importable()
        from kits import pgcluster

        self.cluster = pgcluster.start()
        os.environ[ENV_SCHEMA] = self.cluster.new_schema("suite")
        os.environ[ENV_URL] = self.cluster.app_url
        child_env()
        return str(self.cluster.app_url)

    def stores(self) -> int:
        """How many stores (tenants) hold a session or a memory in the run's schema: the
        proof that the redirect took."""
        from psycopg import sql

        with self.cluster.connect() as conn:   # (the superuser: row-level security aside)
            query = sql.SQL("SELECT count(*) FROM (SELECT tenant_id FROM {s}.sessions UNION "
                            "SELECT tenant_id FROM {s}.memories) AS t").format(
                s=sql.Identifier(os.environ[ENV_SCHEMA]))
            row = conn.execute(query).fetchone()
        return int(row[0]) if row else 0

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            self.cluster = None


def ensure_importable() -> None:
    """Let ``kits.pgcluster`` import outside pytest (the peers' runners)."""
    tests = str(Path(__file__).resolve().parents[1])
    if tests not in sys.path:
        sys.path.insert(0, tests)
