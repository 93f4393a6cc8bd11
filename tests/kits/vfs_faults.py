"""A fault-injecting SQLite VFS for trajlog's reliability tests (apsw).

One VFS, :class:`FaultVFS`, inherits every file operation from the default
VFS and hands each ``xWrite`` / ``xSync`` / ``xTruncate`` (and ``xDelete``) to
the *plan* currently installed on it:

* :class:`PowerLoss` -- records the pre-image of every write not yet covered
  by an ``xSync`` of its file.  At write number ``K`` the machine "loses
  power": every file of the store except ``-shm`` is copied into memory and,
  for each unsynced write (newest first), each 512-byte sector it touched is
  kept (40%, it reached the disk), restored to its pre-image (40%; bytes past
  the old end of file become zeros) or zeroed (20%, torn), with a seeded RNG.
  From then on every ``xWrite``/``xSync``/``xTruncate``/``xDelete`` raises
  :class:`Crash`, so the workload stops exactly at the crash point.
  :meth:`PowerLoss.restore` writes the image to a fresh directory.
  ``sync_failure_drops=True`` adds the Linux "fsyncgate" behaviour for a
  failed ``xSync`` of an :class:`IOFaults` plan (see :class:`Faulty`): the
  writes it should have made durable are marked clean but are not on disk,
  and a later successful ``xSync`` does not bring them back.

* :class:`IOFaults` -- fails operation number ``K`` (counting only the chosen
  kinds) with ``SQLITE_IOERR_WRITE`` / ``SQLITE_IOERR_FSYNC`` or ``SQLITE_FULL``,
  once or for every operation from ``K`` on.

* :class:`Faulty` -- both at once (I/O errors first, then power loss).

Route a trajlog store through it with a URI path::

    with FaultVFS("crashvfs") as vfs:
        vfs.plan = PowerLoss(crash_at=120, seed=7)
        store = trajlog.open(uri(path, "crashvfs"))

SQLite hands the main database to ``xOpen`` as an ``apsw.URIFilename`` and the
``-wal`` / ``-journal`` files as plain ``str`` (Appendix B: an early harness
missed every WAL write because of this); :func:`file_name` handles both, and
:attr:`FaultVFS.opened` records what was seen so a test can assert the WAL
really went through the shim.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import apsw

SECTOR = 512
KEEP, RESTORE, ZERO = "keep", "restore", "zero"


class Crash(apsw.IOError):
    """Raised by every write-side VFS call after the simulated power loss.

    A subclass of ``apsw.IOError`` so that SQLite sees ``SQLITE_IOERR`` and
    code that translates apsw errors treats it like a dead disk.
    """


def file_name(name: Any) -> str | None:
    """The path of a file SQLite opens: a ``URIFilename`` for the main
    database, a ``str`` for ``-wal`` / ``-journal``, ``None`` for temp files."""
    if name is None:
        return None
    if hasattr(name, "filename"):
        return str(name.filename())
    return str(name)


def uri(path: str | os.PathLike[str], vfs: str) -> str:
    """``file:`` URI opening ``path`` through the VFS named ``vfs``."""
    return f"file:{os.path.abspath(os.fspath(path))}?vfs={vfs}"


def is_shm(path: str) -> bool:
    return path.endswith("-shm")


# ---------------------------------------------------------------------------
# Plans


class Plan:
    """Pass-through plan; subclasses override the hooks they need."""

    def __init__(self) -> None:
        self.lock = threading.RLock()

    # Each hook is called with the plan's lock held.
    def before_write(self, f: FaultFile, data: bytes, offset: int) -> None: ...
    def after_write(self, f: FaultFile, data: bytes, offset: int) -> None: ...
    def before_sync(self, f: FaultFile, flags: int) -> None: ...
    def after_sync(self, f: FaultFile, flags: int) -> None: ...
    def before_truncate(self, f: FaultFile, size: int) -> None: ...
    def before_delete(self, path: str) -> None: ...
    def sync_failed(self, f: FaultFile, exc: BaseException) -> None: ...


@dataclass
class _Pending:
    """One write (or truncate) not yet covered by an xSync of its file."""

    offset: int
    old: bytes          # the bytes it replaced (shorter than length past the old EOF)
    length: int
    truncate: bool = False


@dataclass
class CrashReport:
    """What the power loss did to the unsynced writes."""

    crash_at: int
    files: dict[str, int] = field(default_factory=dict)       # name -> size in the image
    unsynced_writes: int = 0
    sectors: dict[str, int] = field(default_factory=lambda: {KEEP: 0, RESTORE: 0, ZERO: 0})
    dropped_bytes: int = 0   # bytes of writes lost to failed syncs (sync_failure_drops)


class PowerLoss(Plan):
    """Power loss at write number ``crash_at`` (1-based; ``None``: never, only
    count).  ``keep``/``restore``/``zero`` are the per-sector odds.
    ``lying_sync``: a disk that acknowledges ``xSync`` without making anything
    durable (to check that the harness would see the loss)."""

    def __init__(self, crash_at: int | None, seed: int = 0, *, keep: float = 0.4,
                 restore: float = 0.4, sync_failure_drops: bool = False,
                 lying_sync: bool = False) -> None:
        super().__init__()
        self.lying_sync = lying_sync
        self.crash_at = crash_at
        self.rng = random.Random(seed)
        self.p_keep, self.p_restore = keep, keep + restore
        self.sync_failure_drops = sync_failure_drops
        self.writes = 0            # xWrite calls seen (the crash clock)
        self.syncs = 0
        self.pending: dict[str, list[_Pending]] = {}
        # sync_failure_drops: per file, byte offset -> the byte really on disk
        # (-1: past the end of the file on disk) for bytes a failed sync lost.
        self.lost: dict[str, dict[int, int]] = {}
        self.paths: set[str] = set()
        self.crashed = False
        self.crash_file: str | None = None   # the file whose write met the power loss
        self.image: dict[str, bytes] | None = None
        self.report: CrashReport | None = None

    # -- recording -----------------------------------------------------------

    def _dead(self) -> None:
        if self.crashed:
            raise Crash("the machine lost power")

    def before_write(self, f: FaultFile, data: bytes, offset: int) -> None:
        self._dead()
        self.writes += 1
        if self.crash_at is not None and self.writes >= self.crash_at:
            self.crash_file = f.path
            self.crash()
            raise Crash(f"power lost at write {self.writes}")
        if f.path is None or is_shm(f.path):
            return
        size = f.base_size()
        old = f.base_read(min(len(data), size - offset), offset) if offset < size else b""
        lost = self.lost.get(f.path)
        if lost:
            # A rewrite makes these bytes dirty again: what is on disk under them
            # is what a failed sync left there, not what the process reads.
            buf = bytearray(old) + bytes(len(data) - len(old))
            for i in range(len(data)):
                b = lost.pop(offset + i, None)
                if b is not None:
                    buf[i] = max(b, 0)
            old = bytes(buf)
        self.paths.add(f.path)
        self.pending.setdefault(f.path, []).append(_Pending(offset, bytes(old), len(data)))

    def before_truncate(self, f: FaultFile, size: int) -> None:
        self._dead()
        if f.path is None or is_shm(f.path):
            return
        cur = f.base_size()
        if size < cur:
            old = f.base_read(cur - size, size)
            self.pending.setdefault(f.path, []).append(
                _Pending(size, bytes(old), cur - size, truncate=True))

    def before_sync(self, f: FaultFile, flags: int) -> None:
        self._dead()

    def after_sync(self, f: FaultFile, flags: int) -> None:
        self.syncs += 1
        if f.path is not None and not self.lying_sync:
            self.pending[f.path] = []          # now durable

    def sync_failed(self, f: FaultFile, exc: BaseException) -> None:
        """The sync failed.  With ``sync_failure_drops`` the kernel marks the
        pages clean without writing them: they are lost on power loss, and no
        later sync brings them back.  Otherwise they stay pending."""
        if not self.sync_failure_drops or f.path is None:
            return
        lost = self.lost.setdefault(f.path, {})
        for p in self.pending.get(f.path, []):          # oldest first: the oldest wins
            if p.truncate:
                continue
            for i in range(p.length):
                if p.offset + i not in lost:
                    lost[p.offset + i] = p.old[i] if i < len(p.old) else -1
        self.pending[f.path] = []

    def before_delete(self, path: str) -> None:
        self._dead()
        self.pending.pop(path, None)
        self.lost.pop(path, None)

    # -- the crash -----------------------------------------------------------

    def _choose(self) -> str:
        r = self.rng.random()
        return KEEP if r < self.p_keep else RESTORE if r < self.p_restore else ZERO

    def crash(self) -> dict[str, bytes]:
        """Take the power-loss image now and kill every later write."""
        if self.crashed:
            assert self.image is not None
            return self.image
        self.crashed = True
        report = CrashReport(self.writes)
        image: dict[str, bytes] = {}
        dirs = {os.path.dirname(p) for p in self.paths}
        files: set[str] = set()
        for d in dirs:
            for entry in os.listdir(d):
                full = os.path.join(d, entry)
                if os.path.isfile(full) and not is_shm(full):
                    files.add(full)
        for path in sorted(files):
            with open(path, "rb") as fh:
                buf = bytearray(fh.read())
            for p in reversed(self.pending.get(path, [])):   # newest first
                report.unsynced_writes += 1
                if p.truncate:
                    # A truncation either reached the disk or did not.
                    if self._choose() != KEEP:
                        if len(buf) < p.offset + p.length:
                            buf.extend(bytes(p.offset + p.length - len(buf)))
                        buf[p.offset:p.offset + p.length] = p.old
                    continue
                end = p.offset + p.length
                if len(buf) < end:   # a later truncation cut it off; it may come back
                    buf.extend(bytes(end - len(buf)))
                s = p.offset
                while s < end:
                    e = min(end, (s // SECTOR + 1) * SECTOR)
                    how = self._choose()
                    report.sectors[how] += 1
                    if how == RESTORE:
                        lo, hi = s - p.offset, e - p.offset
                        old = p.old[lo:hi]
                        buf[s:e] = old + bytes((e - s) - len(old))   # zero past the old EOF
                    elif how == ZERO:
                        buf[s:e] = bytes(e - s)
                    s = e
            for off, b in self.lost.get(path, {}).items():
                report.dropped_bytes += 1
                if off < len(buf):
                    buf[off] = 0 if b < 0 else b
            name = os.path.basename(path)
            image[name] = bytes(buf)
            report.files[name] = len(buf)
        self.image, self.report = image, report
        return image

    def restore(self, directory: str | os.PathLike[str]) -> Path:
        """Write the power-loss image into ``directory`` (created); returns it."""
        if self.image is None:
            raise RuntimeError("no crash happened")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        for name, data in self.image.items():
            (out / name).write_bytes(data)
        return out


class IOFaults(Plan):
    """Fail operation number ``at`` (1-based, counting the ``kinds`` given:
    ``"write"``, ``"sync"``) with ``error`` = ``"ioerr"`` (``SQLITE_IOERR_WRITE``
    / ``SQLITE_IOERR_FSYNC``) or ``"full"`` (``SQLITE_FULL``); ``forever``: also
    every later one.  ``at=None`` only counts."""

    CODES: ClassVar[dict[tuple[str, str], int]] = {
        ("ioerr", "write"): apsw.SQLITE_IOERR_WRITE,
        ("ioerr", "sync"): apsw.SQLITE_IOERR_FSYNC,
        ("ioerr", "truncate"): apsw.SQLITE_IOERR_TRUNCATE,
        ("full", "write"): apsw.SQLITE_FULL,
        ("full", "sync"): apsw.SQLITE_FULL,
        ("full", "truncate"): apsw.SQLITE_FULL,
    }

    def __init__(self, at: int | None, *, kinds: Iterable[str] = ("write", "sync"),
                 error: str = "ioerr", forever: bool = False) -> None:
        super().__init__()
        self.at = at
        self.kinds = frozenset(kinds)
        if error not in ("ioerr", "full"):
            raise ValueError(error)
        self.error = error
        self.forever = forever
        self.ops = 0
        self.fired: list[tuple[int, str, str | None]] = []   # (op number, kind, file)
        self.log: list[tuple[str, str | None]] = []           # every counted op: (kind, file)
        self.enabled = True

    def _op(self, kind: str, f: FaultFile) -> None:
        if kind not in self.kinds or not self.enabled:
            return
        if f.path is not None and is_shm(f.path):
            return
        self.ops += 1
        self.log.append((kind, f.path))
        if self.at is not None and (self.ops == self.at or (self.forever and self.ops > self.at)):
            self.fired.append((self.ops, kind, f.path))
            raise apsw.exception_for(self.CODES[self.error, kind])

    def before_write(self, f: FaultFile, data: bytes, offset: int) -> None:
        self._op("write", f)

    def before_sync(self, f: FaultFile, flags: int) -> None:
        self._op("sync", f)

    def before_truncate(self, f: FaultFile, size: int) -> None:
        self._op("truncate", f)


class Faulty(Plan):
    """I/O faults and power loss together.  Each hook runs the fault plan
    first; a failed sync is reported to the power-loss plan (which, with
    ``sync_failure_drops``, forgets that sync's writes)."""

    def __init__(self, faults: IOFaults, power: PowerLoss) -> None:
        super().__init__()
        self.faults, self.power = faults, power

    def before_write(self, f: FaultFile, data: bytes, offset: int) -> None:
        self.power._dead()
        self.faults.before_write(f, data, offset)
        self.power.before_write(f, data, offset)

    def before_sync(self, f: FaultFile, flags: int) -> None:
        self.power.before_sync(f, flags)
        try:
            self.faults.before_sync(f, flags)
        except apsw.Error as exc:
            self.power.sync_failed(f, exc)
            raise

    def after_sync(self, f: FaultFile, flags: int) -> None:
        self.power.after_sync(f, flags)

    def before_truncate(self, f: FaultFile, size: int) -> None:
        self.power._dead()
        self.faults.before_truncate(f, size)
        self.power.before_truncate(f, size)

    def before_delete(self, path: str) -> None:
        self.power.before_delete(path)


# ---------------------------------------------------------------------------
# The VFS


class FaultFile(apsw.VFSFile):
    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]) -> None:
        self.vfs = vfs
        self.path = file_name(name)
        vfs.opened.append((type(name).__name__, self.path))
        super().__init__("", name, flags)   # "" : the default VFS does the real I/O

    def base_size(self) -> int:
        return int(super().xFileSize())

    def base_read(self, amount: int, offset: int) -> bytes:
        return bytes(super().xRead(amount, offset)) if amount > 0 else b""

    def xWrite(self, data: bytes, offset: int) -> None:
        plan = self.vfs.plan
        with plan.lock:
            plan.before_write(self, data, offset)
            super().xWrite(data, offset)
            plan.after_write(self, data, offset)

    def xSync(self, flags: int) -> None:
        plan = self.vfs.plan
        with plan.lock:
            plan.before_sync(self, flags)
            try:
                super().xSync(flags)
            except apsw.Error as exc:
                plan.sync_failed(self, exc)
                raise
            plan.after_sync(self, flags)

    def xTruncate(self, newsize: int) -> None:
        plan = self.vfs.plan
        with plan.lock:
            plan.before_truncate(self, newsize)
            super().xTruncate(newsize)


class FaultVFS(apsw.VFS):
    """The default VFS with a replaceable :class:`Plan` in front of writes.

    A context manager: registers on enter (constructor), unregisters on exit.
    """

    def __init__(self, name: str = "faultvfs") -> None:
        self.name = name
        self.plan: Plan = Plan()
        self.opened: list[tuple[str, str | None]] = []
        super().__init__(name, "")

    def xOpen(self, name: Any, flags: list[int]) -> FaultFile:
        return FaultFile(self, name, flags)

    def xDelete(self, filename: str, syncdir: bool) -> None:
        plan = self.plan
        with plan.lock:
            plan.before_delete(str(filename))
            super().xDelete(filename, syncdir)

    def uri(self, path: str | os.PathLike[str]) -> str:
        return uri(path, self.name)

    def saw_wal(self) -> bool:
        """True if a ``-wal`` file was opened through this VFS."""
        return any(p is not None and p.endswith("-wal") for _, p in self.opened)

    def __enter__(self) -> FaultVFS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unregister()
