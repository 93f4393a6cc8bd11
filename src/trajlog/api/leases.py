"""Writer leases: one writer per session at a time, and who counts as alive.

A lease names its holder (``host:pid:token:nonce``, where the token tells one
process from a later one that got the same pid) and is written in the session's
head row, so every process sees it.  :func:`lease_is_live` is the liveness
rule; :class:`Leases` is one store's bookkeeping of the leases it holds (a
nesting depth per session: the row names the store, not a handle).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time as time_mod
import uuid
from builtins import open as builtins_open
from collections.abc import Callable
from contextlib import AbstractContextManager

from ..errors import ArgumentTypeError, InvalidArgumentError, LeaseHeldError, TrajlogError
from ..events import now_ms
from ..storage import Lease, Writer

HOST = socket.gethostname()


def check_wait(wait: object) -> None:
    """``wait`` for a lease: True (no limit), False or None (none), or a number
    of seconds >= 0 (infinity: no limit); anything else is the caller's
    mistake, named before any lease is touched."""
    if wait is None or isinstance(wait, bool):
        return
    if not isinstance(wait, (int, float)):
        raise ArgumentTypeError(f"wait must be seconds (a number) or a bool, not "
                                f"{type(wait).__name__}")
    if not wait >= 0:   # (also NaN: a deadline it makes would never pass)
        raise InvalidArgumentError(f"wait must be >= 0 seconds, not {wait!r}")


def _pid_alive(pid: int) -> bool:
    """A process with this pid exists and is not a zombie: a writer killed
    but not yet reaped (in a container whose PID 1 never reaps: forever)
    still answers ``kill(pid, 0)``, but it will never write again."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return _proc_state(pid) not in ("Z", "X")


def _proc_state(pid: int) -> str | None:
    """The state letter of a process (field 3 of /proc/pid/stat; None elsewhere)."""
    try:
        with builtins_open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode("ascii", "replace")
    except (OSError, IndexError):
        return None


def _proc_stat_start(pid: int | None) -> int | None:
    """Start time of a process in clock ticks since boot (/proc; None elsewhere)."""
    try:
        with builtins_open("/proc/self/stat" if pid is None else f"/proc/{pid}/stat",
                           "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])  # field 22, starttime
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        with builtins_open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def process_token(pid: int | None = None) -> str | None:
    """Who a process is, beyond its pid: the boot it belongs to and its start
    time (``None``: this process).  Two processes never share a token; a
    restarted writer that got its old pid back does not get its old token."""
    start, boot = _proc_stat_start(pid), _boot_id()
    return None if start is None or boot is None else f"{boot}/{start}"


def _started_ms(pid: int) -> int | None:
    """Wall-clock start of a process in ms (second resolution; /proc only)."""
    start = _proc_stat_start(pid)
    try:
        with builtins_open("/proc/stat") as f:
            btime = next(int(x.split()[1]) for x in f if x.startswith("btime"))
    except (OSError, StopIteration, ValueError):
        return None
    if start is None:
        return None
    return (btime * 1000) + start * 1000 // os.sysconf("SC_CLK_TCK")


def new_writer_id() -> str:
    """``host:pid:token:nonce`` for a store opened by this process."""
    return f"{HOST}:{os.getpid()}:{process_token() or '-'}:{uuid.uuid4().hex[:12]}"


# The writer ids of this process's stores that are open: a lease this process
# took through a store since closed (or lost, or garbage-collected) is dead,
# whatever the pid says -- e.g. a store closed after its file went away
# could not clear its lease row.
_OPEN_WRITERS: set[str] = set()


def writer_opened(writer_id: str) -> None:
    _OPEN_WRITERS.add(writer_id)


def writer_closed(writer_id: str) -> None:
    _OPEN_WRITERS.discard(writer_id)


def lease_is_live(owner: str | None, host: str | None, pid: int | None,
                  started_ms: int | None, heartbeat_ms: int | None, ttl_ms: int) -> bool:
    """The liveness rule of a writer lease.

    On this host, a lease is live while the very process that took it exists:
    a process with its pid, that is the same process -- the same boot and start
    time as recorded in the lease owner's token, or, for a lease without a
    token, a process that started before the lease was taken.  (A restarted
    writer that got its old pid back, or any pid reused after a reboot, does not
    keep the lease alive.)  From another host, a lease is live while its
    heartbeat is younger than ``ttl_ms``.  A lease that is not live may be taken
    over.  A zombie (killed, not yet reaped) is not alive; and a lease of this
    very process is live only while the store that took it is open.
    """
    if host != HOST or pid is None:
        return heartbeat_ms is not None and now_ms() - heartbeat_ms <= ttl_ms
    if pid == os.getpid() and owner is not None and owner.startswith(
            f"{HOST}:{pid}:{process_token() or '-'}:"):
        return owner in _OPEN_WRITERS  # this very process: it knows its open stores
    if not _pid_alive(pid):
        return False
    parts = (owner or "").split(":")
    recorded = parts[2] if len(parts) >= 4 and "/" in parts[2] else None
    current = process_token(None if pid == os.getpid() else pid)
    if recorded is not None and current is not None:
        return recorded == current
    begun = _started_ms(pid)
    if begun is not None and started_ms is not None:
        return begun <= started_ms + 2000  # btime has one-second resolution
    return True


class Leases:
    """The writer leases one store holds, and the checks every append makes.

    ``transaction()`` opens a write transaction; ``on_change(sid)`` is told
    when this store takes or gives up a lease, so that state cached about the
    session's head is re-read.
    """

    def __init__(self, transaction: Callable[[], AbstractContextManager[Writer]],
                 writer_id: str, ttl_ms: int, on_change: Callable[[int], None],
                 alive: Callable[[Lease], bool | None] = lambda lease: None) -> None:
        self._transaction = transaction
        self._alive = alive   # the backend's verdict (Backend.lease_alive), if it has one
        self.writer_id = writer_id
        self.ttl_ms = ttl_ms
        self._on_change = on_change
        self._held: dict[int, int] = {}   # sid -> nesting depth
        self._turns: set[int] = set()     # sids whose lease a raw turn/start took
        self._lock = threading.Lock()     # guards _held; taken before the write lock

    def holds(self, sid: int) -> bool:
        return sid in self._held

    def in_block(self, sid: int) -> bool:
        """This store holds the lease through a ``lease()`` / ``turn()`` block
        (not only for a raw ``turn/start``: :meth:`turn_op`)."""
        return self._held.get(sid, 0) > (1 if sid in self._turns else 0)

    def foreign_live(self, lease: Lease) -> bool:
        """True if ``lease`` is held, live, by another writer than this store."""
        if lease.owner is None or lease.owner == self.writer_id:
            return False
        return self.live(lease)

    def live(self, lease: Lease) -> bool:
        """The liveness of ``lease``: the backend's verdict, else :func:`lease_is_live`."""
        verdict = self._alive(lease)
        return lease_is_live(*lease, self.ttl_ms) if verdict is None else verdict

    def check(self, tx: Writer, sid: int, session: str, lease: Lease) -> Lease:
        """Inside an append's transaction: refuse a live foreign lease; keep
        this store's own lease alive (a heartbeat every ``ttl / 4``).  Returns
        the lease as it now stands."""
        if lease.owner is None:   # (most appends: nobody holds it)
            return lease
        if lease.owner != self.writer_id and self.live(lease):  # (foreign_live)
            raise LeaseHeldError(
                f"session {session} is being written by {lease.owner} (pid {lease.pid} on "
                f"{lease.host}); wait for its lease or let it expire")
        if lease.owner == self.writer_id:
            now = now_ms()
            if lease.heartbeat_ms is None or now - lease.heartbeat_ms > self.ttl_ms // 4:
                tx.heartbeat(sid, lease.owner, now)
                return lease._replace(heartbeat_ms=now)
        return lease

    def acquire(self, sid: int, session: str, wait: float | bool,
                abort: threading.Event | None = None) -> bool:
        """Take the lease (re-entrant): at once, or polling for ``wait`` seconds
        (True: no limit).  A lease whose holder died is taken over.  Once
        ``abort`` is set (its waiter was cancelled) the polling stops without
        the lease: returns False; True when the lease was taken."""
        check_wait(wait)
        deadline = None if wait is True else time_mod.monotonic() + float(wait or 0)
        delay = 0.005
        while True:
            if abort is not None and abort.is_set():
                return False
            with self._lock:
                depth = self._held.get(sid, 0)
                if depth:
                    self._held[sid] = depth + 1
                    return True
                try:
                    with self._transaction() as tx:
                        lease = tx.head(sid).lease
                        if self.foreign_live(lease):
                            raise LeaseHeldError(
                                f"session {session} is being written by {lease.owner} "
                                f"(pid {lease.pid} on {lease.host})")
                        now = now_ms()
                        tx.set_lease(sid, Lease(self.writer_id, HOST, os.getpid(), now, now))
                        self._on_change(sid)
                    self._held[sid] = 1
                    return True
                except LeaseHeldError:
                    if deadline is not None and time_mod.monotonic() >= deadline:
                        raise
            if abort is not None:
                abort.wait(delay)   # (woken at once by a cancellation)
            else:
                time_mod.sleep(delay)
            delay = min(delay * 2, 0.25)

    # A raw turn/start (no lease() / turn() block) takes the lease in its own
    # append's transaction, and its turn/end gives it back in the same way:
    # no extra commit per turn (an fsync each, outside group commit).

    def turn_op(self, sid: int, marker: str | None) -> str | None:
        """Before appending events whose last turn marker is ``marker``: what
        the append's transaction does to the lease -- ``"take"`` (a raw
        ``turn/start`` without one), ``"give"`` (the ``turn/end`` of such a
        turn, no block open), ``"drop"`` (that end while a block still holds
        the lease: only the turn's share is dropped), or None."""
        if marker is None:   # (most appends: no lock taken)
            return None
        with self._lock:
            if marker == "turn/start" and sid not in self._held:
                return "take"
            if marker == "turn/end" and sid in self._turns:
                return "give" if self._held.get(sid) == 1 else "drop"
        return None

    def apply_turn_op(self, tx: Writer, sid: int, op: str | None, lease: Lease) -> Lease:
        """Inside the append's transaction, after its checks (a live foreign
        lease was refused by :meth:`check`): write what ``op`` asks; returns
        the lease as it now stands."""
        if op == "take" and lease.owner != self.writer_id:
            now = now_ms()
            lease = Lease(self.writer_id, HOST, os.getpid(), now, now)
            tx.set_lease(sid, lease)
        elif op == "give" and lease.owner == self.writer_id:
            lease = Lease()
            tx.set_lease(sid, lease)
        return lease

    def after_turn_op(self, sid: int, op: str | None, ok: bool) -> None:
        """After that append committed (``ok``) or failed: the bookkeeping of
        what its transaction did.  Never raises: a lease row that has to be
        written again and cannot be stays known to be held (retried at close)."""
        if op is None or not ok:
            return
        with contextlib.suppress(TrajlogError), self._lock:
            depth = self._held.get(sid, 0)
            if op == "take":
                self._held[sid] = depth + 1   # (a block that began meanwhile shares it)
                self._turns.add(sid)
                return
            self._turns.discard(sid)
            if depth <= 1:
                self._held.pop(sid, None)
                return
            self._held[sid] = depth - 1
            if op == "give":
                # a block began after the decision: its lease row was just cleared
                with self._transaction() as tx:
                    now = now_ms()
                    if not self.foreign_live(tx.head(sid).lease):
                        tx.set_lease(sid, Lease(self.writer_id, HOST, os.getpid(), now, now))
                    self._on_change(sid)

    def release(self, sid: int, *, force: bool = False) -> None:
        """Leave one lease block; the outermost exit (or ``force``) clears the
        row.  If that write fails the lease stays held -- and known to be held,
        so that :meth:`release_all` (at close) or the next exit retries."""
        with self._lock:
            depth = self._held.get(sid, 0)
            if depth > 1 and not force:
                self._held[sid] = depth - 1
                return
            if not depth:
                return
            with self._transaction() as tx:
                if tx.head(sid).lease.owner == self.writer_id:
                    tx.set_lease(sid, Lease())
                    self._on_change(sid)
            del self._held[sid]
            self._turns.discard(sid)

    def release_all(self) -> None:
        for sid in list(self._held):
            with contextlib.suppress(TrajlogError):
                self.release(sid, force=True)


__all__ = ["HOST", "Leases", "lease_is_live", "new_writer_id", "process_token",
           "writer_closed", "writer_opened"]
