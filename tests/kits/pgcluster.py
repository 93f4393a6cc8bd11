"""A throwaway PostgreSQL cluster for tests (and CI): ``initdb`` + ``pg_ctl``
in a temporary directory, loopback on a free port and a unix socket in that
directory, ``fsync`` off (the suite kills processes, never the machine: what a killed
server wrote is in the OS's page cache when it restarts, so an fsync costs only time -- a
slow disk's worth per commit), stopped by its postmaster's PID.

API (small on purpose; the whole-suite runs reuse it)::

    cluster = start()            # raises PgClusterError when it cannot start
    cluster.admin_url            # superuser, the test database
    cluster.owner_url            # trajlog_owner: may create schemas (owns them)
    cluster.app_url              # trajlog_client: a login member of trajlog_app
    cluster.new_schema()         # a fresh trajlog schema, made as the owner
    cluster.stop()
    open_store(url, schema, tenant="acme")   # trajlog.open on a PostgresBackend

Roles: ``trajlog_owner`` (LOGIN, CREATE on the database), ``trajlog_app``
(NOLOGIN: the store's privileges are granted to it) and ``trajlog_client``
(LOGIN, member of ``trajlog_app``, password ``client-secret``).  None is a
superuser or bypasses row-level security.

``TRAJLOG_PG_URL``, when set, is a superuser URL of an existing cluster:
the kit makes a database of its own there (dropped by :meth:`stop`) instead
of starting a cluster.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

PGBIN = Path(os.environ.get("TRAJLOG_PGBIN", "/usr/lib/postgresql/15/bin"))
OWNER, APP, CLIENT = "trajlog_owner", "trajlog_app", "trajlog_client"
CLIENT_PASSWORD = "client-secret"


class PgClusterError(RuntimeError):
    """The cluster could not be started (never a skip: a test run fails)."""


def _url(base: str, user: str, database: str, password: str | None = None) -> str:
    parts = urlsplit(base)
    host = parts.netloc.rsplit("@", 1)[-1]
    auth = user if password is None else f"{user}:{password}"
    return urlunsplit((parts.scheme, f"{auth}@{host}", f"/{database}", parts.query, ""))


@dataclass
class Cluster:
    """A running cluster (or a database of an existing one) with the roles."""

    admin_url: str
    database: str
    datadir: Path | None = None      # None: an existing cluster's database
    tmp: Path | None = None
    schemas: list[str] = field(default_factory=list)

    @property
    def owner_url(self) -> str:
        return _url(self.admin_url, OWNER, self.database)

    @property
    def app_url(self) -> str:
        return _url(self.admin_url, CLIENT, self.database, CLIENT_PASSWORD)

    def connect(self, url: str | None = None) -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection (the superuser's by default)."""
        return psycopg.connect(url or self.admin_url, autocommit=True)

    def new_schema(self, prefix: str = "t") -> str:
        """A fresh trajlog schema, made (and owned) by the owner role."""
        from trajlog.storage.postgres import PostgresBackend

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        PostgresBackend(self.owner_url, schema=name).close()
        self.schemas.append(name)
        return name

    def stop(self) -> None:
        """Stop the postmaster by its PID (a fast shutdown) and remove the
        directory; or drop the database made in an existing cluster."""
        if self.datadir is None:
            with psycopg.connect(_url(self.admin_url, _user(self.admin_url), "postgres"),
                                 autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
            return
        pidfile = self.datadir / "postmaster.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().split()[0])
            try:
                os.kill(pid, signal.SIGINT)
                for _ in range(600):
                    os.kill(pid, 0)
                    time.sleep(0.05)
            except ProcessLookupError:
                pass
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)


def _user(url: str) -> str:
    netloc = urlsplit(url).netloc
    return netloc.rsplit("@", 1)[0].split(":")[0] if "@" in netloc else "postgres"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres() -> list[str]:
    return ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []


# (the server's own binaries run without what a sanitized test run preloads into Python:
# initdb under an ASan preload hangs; the sanitizers are for trajlog's C core)
_SERVER_ENV = {k: v for k, v in os.environ.items()
               if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PYTHONMALLOC")}


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=_SERVER_ENV)
    if done.returncode != 0:
        raise PgClusterError(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def _roles(admin_url: str, database: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for role, options in ((OWNER, "LOGIN"), (APP, "NOLOGIN"),
                              (CLIENT, f"LOGIN PASSWORD '{CLIENT_PASSWORD}'")):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchall():
                conn.execute(f"CREATE ROLE {role} {options} NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"GRANT {APP} TO {CLIENT}")
        conn.execute(f'GRANT CREATE, CONNECT ON DATABASE "{database}" TO {OWNER}')


def start() -> Cluster:
    """A running cluster with the roles made, or ``TRAJLOG_PG_URL``'s."""
    existing = os.environ.get("TRAJLOG_PG_URL")
    if existing:
        database = f"trajlog_{uuid.uuid4().hex[:10]}"
        try:
            with psycopg.connect(existing, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
        except psycopg.Error as exc:
            raise PgClusterError(f"TRAJLOG_PG_URL: cannot create a database: {exc}") from exc
        admin = _url(existing, _user(existing), database)
        _roles(admin, database)
        return Cluster(admin, database)
    if not (PGBIN / "initdb").exists():
        raise PgClusterError(f"no PostgreSQL binaries in {PGBIN} (install the postgresql "
                             "package: make install-test)")
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-pg-"))
    datadir = tmp / "data"
    if os.getuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    port = _free_port()
    cluster = Cluster(f"postgresql://postgres@127.0.0.1:{port}/trajlog", "trajlog", datadir, tmp)
    try:
        _run([*_as_postgres(), str(PGBIN / "initdb"), "-D", str(datadir), "-U", "postgres",
              "--auth=trust", "-E", "UTF8", "--no-sync"], "initdb")
        _run([*_as_postgres(), str(PGBIN / "pg_ctl"), "-D", str(datadir), "-l",
              str(tmp / "log"), "-w", "-t", "60", "start", "-o",
              f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={tmp} "
              "-c fsync=off -c max_connections=200"], "pg_ctl start")
        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE trajlog")
        _roles(cluster.admin_url, "trajlog")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def open_store(url: str, schema: str, tenant: str = "", *, durability: str = "full",
               lock_timeout_ms: int = 10_000, vacuum_full: bool = False,
               **options: Any) -> Any:
    """``trajlog.open`` of a PostgreSQL store (until ``open`` takes a URL)."""
    import trajlog
    from trajlog.storage.postgres import PostgresBackend

    backend = PostgresBackend(url, schema=schema, tenant=tenant, durability=durability,
                              lock_timeout_ms=lock_timeout_ms, vacuum_full=vacuum_full)
    return trajlog.open(backend=backend, **options)


__all__ = ["APP", "CLIENT", "CLIENT_PASSWORD", "OWNER", "Cluster", "PgClusterError", "open_store",
           "start"]
