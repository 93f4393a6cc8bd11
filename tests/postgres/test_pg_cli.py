"""The command line on a PostgreSQL store: ``--db postgresql://...`` with
``--tenant``, the owner's ``migrate``, and no password in what it prints."""

from __future__ import annotations

import subprocess
import sys
import uuid

import trajlog
from kits.pgcluster import Cluster


def _cli(*args: str, env_tenant: str | None = None) -> subprocess.CompletedProcess[str]:
    import os
    env = {k: v for k, v in os.environ.items() if k not in ("TRAJLOG_DB", "TRAJLOG_TENANT")}
    if env_tenant is not None:
        env["TRAJLOG_TENANT"] = env_tenant
    return subprocess.run([sys.executable, "-m", "trajlog", *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False)


def test_pg_cli_migrate_then_tenant_scoped_commands(pg: Cluster):
    made = _cli("--db", pg.owner_url, "migrate")
    assert made.returncode == 0, made.stderr
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    with trajlog.open(pg.app_url, tenant=tenant) as store:
        s = store.create_session(metadata={"title": "on the server"})
        s.append("user/message", {"content": "hello from postgres"})
    mine = _cli("--db", pg.app_url, "--tenant", tenant, "ls")
    assert mine.returncode == 0, mine.stderr
    assert s.id[:8] in mine.stdout and "on the server" in mine.stdout
    assert _cli("--db", pg.app_url, "ls", env_tenant=tenant).stdout == mine.stdout
    other = _cli("--db", pg.app_url, "--tenant", "someone-else", "ls")
    assert other.returncode == 0 and s.id[:8] not in other.stdout
    shown = _cli("--db", pg.app_url, "--tenant", tenant, "show", s.id[:8])
    assert shown.returncode == 0 and "hello from postgres" in shown.stdout
    verified = _cli("--db", pg.app_url, "--tenant", tenant, "verify", s.id[:8])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for out in (mine, other, shown, verified, made):
        assert "client-secret" not in out.stdout + out.stderr   # (the app role's password)
