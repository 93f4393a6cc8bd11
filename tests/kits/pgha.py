"""A throwaway high-availability PostgreSQL cluster for the failover test:
one etcd member and two PostgreSQL nodes managed by Patroni with
synchronous replication (``synchronous_mode: true``), all on loopback in a
temporary directory, every process stopped by its PID.

API::

    ha = start()                 # raises HaError when it cannot start
    ha.admin_url / ha.app_url    # multi-host URLs, target_session_attrs=read-write
    ha.leader()                  # the node that is the primary now (or None)
    ha.kill_leader()             # SIGKILL of the leader's postmaster and Patroni
    ha.stop()

Needs Debian's ``patroni`` and ``etcd-server`` packages (``make ha``
installs them) and the PostgreSQL binaries of :mod:`kits.pgcluster`.  As
root, every process runs as the ``postgres`` user (initdb refuses root).
Patroni's configuration is written as JSON (YAML reads it).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from kits.pgcluster import PGBIN, _free_port, _roles, _url

TTL, LOOP_WAIT, RETRY_TIMEOUT = 10, 2, 5   # Patroni's DCS timings (failover ~ ttl)


class HaError(RuntimeError):
    """The HA cluster could not be started."""


@dataclass
class Node:
    name: str
    pg_port: int
    rest_port: int
    datadir: Path
    proc: subprocess.Popen[bytes] | None = None

    def status(self, endpoint: str) -> int:
        """The HTTP status of Patroni's health endpoint (0: no answer)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.rest_port}/{endpoint}",
                                        timeout=1) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def postmaster(self) -> int | None:
        try:
            return int((self.datadir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


@dataclass
class HaCluster:
    tmp: Path
    nodes: list[Node]
    etcd: subprocess.Popen[bytes] | None = None
    killed: list[int] = field(default_factory=list)
    database: str = "trajlog"

    def _hosts(self) -> str:
        return ",".join(f"127.0.0.1:{n.pg_port}" for n in self.nodes)

    @property
    def admin_url(self) -> str:
        return (f"postgresql://postgres@{self._hosts()}/{self.database}"
                "?target_session_attrs=read-write&connect_timeout=2")

    @property
    def owner_url(self) -> str:
        from kits.pgcluster import OWNER
        return _url(self.admin_url, OWNER, self.database)

    @property
    def app_url(self) -> str:
        from kits.pgcluster import CLIENT, CLIENT_PASSWORD
        return _url(self.admin_url, CLIENT, self.database, CLIENT_PASSWORD)

    def logs(self, chars: int = 2500) -> str:
        """The tails of etcd's and each Patroni's log (for a failure's message)."""
        out = []
        for name in ["etcd", *(n.name for n in self.nodes)]:
            path = self.tmp / f"{name}.log"
            text = path.read_text(errors="replace")[-chars:] if path.exists() else ""
            out.append(f"--- {name}.log\n{text}")
        return "\n".join(out)

    def leader(self) -> Node | None:
        return next((n for n in self.nodes if n.status("primary") == 200), None)

    def sync_streaming(self) -> bool:
        """The leader streams to a synchronous standby now (Patroni's /sync
        answers from its DCS record, which may outlive the streaming)."""
        node = self.leader()
        if node is None:
            return False
        try:
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{node.pg_port}/postgres",
                                 autocommit=True, connect_timeout=2) as conn:
                row = conn.execute("SELECT count(*) FROM pg_stat_replication WHERE state = "
                                   "'streaming' AND sync_state = 'sync'").fetchone()
        except psycopg.Error:
            return False
        return bool(row and row[0])

    def sync_standby(self) -> Node | None:
        return next((n for n in self.nodes if n.status("sync") == 200), None)

    def kill_leader(self, patroni: bool = True) -> Node:
        """SIGKILL the leader's postmaster (and its Patroni, so that no one
        restarts it: the other node must take over)."""
        node = self.leader()
        if node is None:
            raise HaError("no leader to kill")
        pm = node.postmaster()
        if patroni and node.proc is not None:
            os.kill(node.proc.pid, signal.SIGKILL)
            node.proc.wait(10)
            self.killed.append(node.proc.pid)
        if pm is not None:
            os.kill(pm, signal.SIGKILL)
            self.killed.append(pm)
        return node

    def stop(self) -> None:
        """Patroni by its PID (it stops its PostgreSQL), then any postmaster
        left (by the PID in its data directory), then etcd; the directory goes."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        for node in self.nodes:
            if node.proc is not None:
                try:
                    node.proc.wait(30)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(10)
            pm = node.postmaster()
            if pm is not None:
                _stop_pid(pm, signal.SIGQUIT)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(10)
            except subprocess.TimeoutExpired:
                self.etcd.kill()
                self.etcd.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _stop_pid(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
        for _ in range(200):
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _user() -> dict[str, Any]:
    """Popen arguments that run a process as ``postgres`` when we are root."""
    if os.getuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def _patroni_config(tmp: Path, node: Node, etcd_port: int) -> dict[str, Any]:
    return {
        "scope": f"trajlog-{tmp.name}",
        "name": node.name,
        "restapi": {"listen": f"127.0.0.1:{node.rest_port}",
                    "connect_address": f"127.0.0.1:{node.rest_port}"},
        "etcd3": {"hosts": f"127.0.0.1:{etcd_port}"},
        "bootstrap": {
            "dcs": {"ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                    "synchronous_mode": True,
                    "postgresql": {"use_pg_rewind": True, "parameters": {
                        "wal_level": "replica", "hot_standby": "on", "max_wal_senders": 5,
                        "max_connections": 200, "fsync": "on"}}},
            "initdb": [{"encoding": "UTF8"}, {"auth": "trust"}],
            "pg_hba": ["host all all 127.0.0.1/32 trust",
                       "host replication all 127.0.0.1/32 trust",
                       "local all all trust", "local replication all trust"],
        },
        "postgresql": {
            "listen": f"127.0.0.1:{node.pg_port}",
            "connect_address": f"127.0.0.1:{node.pg_port}",
            "data_dir": str(node.datadir),
            "bin_dir": str(PGBIN),
            "pgpass": str(tmp / f"pgpass-{node.name}"),
            "parameters": {"unix_socket_directories": str(tmp)},
            "authentication": {"superuser": {"username": "postgres"},
                               "replication": {"username": "postgres"}},
        },
    }


def _wait(what: str, ok: Any, seconds: float, log: Path | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise HaError(f"{what}: not within {seconds:.0f} s\n{tail}")
        time.sleep(0.2)


def start() -> HaCluster:
    """etcd, then Patroni n1 (it bootstraps the leader), then Patroni n2
    (a replica that becomes the synchronous standby); the roles and the
    database made on the leader."""
    for tool in ("patroni", "etcd"):
        if shutil.which(tool) is None:
            raise HaError(f"no {tool} (install Debian's patroni and etcd-server: make ha)")
    tmp = Path(tempfile.mkdtemp(prefix="trajlog-ha-"))
    if os.getuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    nodes = [Node(f"n{k}", _free_port(), _free_port(), tmp / f"n{k}") for k in (1, 2)]
    ha = HaCluster(tmp, nodes)
    env = {**os.environ, "HOME": str(tmp)}
    try:
        client, peer = _free_port(), _free_port()
        with open(tmp / "etcd.log", "wb") as log:
            ha.etcd = subprocess.Popen(
                ["etcd", "--name", "e1", "--data-dir", str(tmp / "etcd"),
                 "--listen-client-urls", f"http://127.0.0.1:{client}",
                 "--advertise-client-urls", f"http://127.0.0.1:{client}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", f"e1=http://127.0.0.1:{peer}"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp, **_user())
        _wait("etcd", lambda: _http_ok(f"http://127.0.0.1:{client}/health"), 30,
              tmp / "etcd.log")
        for node in nodes:
            config = tmp / f"{node.name}.yml"
            config.write_text(json.dumps(_patroni_config(tmp, node, client), indent=1))
            with open(tmp / f"{node.name}.log", "wb") as log:
                node.proc = subprocess.Popen(["patroni", str(config)], stdout=log,
                                             stderr=subprocess.STDOUT, env=env, cwd=tmp,
                                             **_user())
            if node is nodes[0]:
                _wait("the first node leading", lambda: nodes[0].status("primary") == 200, 90,
                      tmp / "n1.log")
        _wait("a synchronous standby", lambda: ha.sync_standby() is not None, 120,
              tmp / "n2.log")
        with psycopg.connect(_url(ha.admin_url, "postgres", "postgres"),
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{ha.database}"')
        _roles(ha.admin_url, ha.database)
    except BaseException:
        ha.stop()
        raise
    return ha


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


__all__ = ["HaCluster", "HaError", "Node", "start"]
