"""Group commit: concurrent writes of one process share a transaction.

Every write becomes a :class:`Request` (a function of the transaction's
:class:`~trajlog.storage.base.Writer`).  Whichever calling thread finds no
commit in progress becomes the leader: it takes every queued request into one
transaction, commits it (durable when COMMIT returns, under
``synchronous=FULL``) and wakes exactly the callers it committed.  If more
requests arrived meanwhile it promotes the oldest waiting caller to lead the
next commit, so nobody waits on a commit that does not carry its request.  A
lone thread pays no hand-off (:meth:`GroupCommit.call` commits inline, with no
request object, when no commit is in progress); concurrent threads share one
fsync.

With several requests in one transaction, each runs in a savepoint: one that
fails (a refusal, a constraint, an unexpected error) is rolled back alone and
fails alone; the others commit.  A failure of the transaction itself, or of
its commit, fails every request in it.

Concurrency across processes is per session (the seam's contract): the
transaction first locks the heads of every session its requests declare, in
sid order, so two group commits never wait on each other in a cycle.  A
request refused because another writer moved its session's head
(``HeadMovedError``: nothing written) has that session's cached state
dropped and runs once more; a transaction the database ended to break a
deadlock or a serialization conflict (``TransactionConflictError``) runs
again whole, up to :data:`ATTEMPTS` times.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import HeadMovedError, StoreClosedError, TransactionConflictError, unexpected
from .base import Backend, Writer

#: how many times a transaction ended by a deadlock or serialization conflict runs
ATTEMPTS = 8


def _locked() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(slots=True, eq=False)
class Request:
    """One caller's write: ``apply(writer)`` runs inside the transaction and
    returns the caller's result.  ``key`` names what the request writes (a
    session's sid), for ``on_failure``; ``sessions`` the sids of any other
    sessions it writes (their heads are locked, in order, before it runs).
    A request with a ``callback`` is
    asynchronous: nobody waits on ``wake``; ``callback(request)`` is called,
    from the committing thread, once it is done."""

    apply: Callable[[Writer], Any]
    key: Any = None
    sessions: tuple[int, ...] = ()
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    wake: threading.Lock = field(default_factory=_locked)
    callback: Callable[[Request], None] | None = None


class GroupCommit:
    """The group-commit queue of one backend.

    ``refusals`` are the exception types a request raises before it writes
    anything (validation): they fail the request without touching the
    transaction.  ``on_failure(key)`` is told when a request's writes were
    rolled back (``key=None``: the whole transaction), so that caches kept in
    step with the log can be dropped; ``on_foreign()`` when another connection
    committed since this backend's last transaction.

    Threads call :meth:`submit` and wait; asyncio tasks call
    :meth:`submit_async` and await their callback.  Both share one queue: a
    waiting thread leads the commits while one is waiting, a worker thread
    leads them when only asynchronous requests are queued.
    """

    def __init__(self, backend: Backend, refusals: tuple[type[BaseException], ...],
                 on_failure: Callable[[Any], None],
                 on_foreign: Callable[[], None] = lambda: None) -> None:
        self._backend = backend
        self._refusals = refusals
        self._on_failure = on_failure
        self._on_foreign = on_foreign
        self._mutex = threading.Lock()  # guards _queue, _leader and _worker_due
        self._queue: list[Request] = []
        self._leader = False
        self._worker: threading.Thread | None = None
        self._worker_due = threading.Condition(self._mutex)
        self._lead_async = False
        self._stopped = False

    def submit(self, request: Request) -> Any:
        """Queue ``request``; lead a group commit or wait for one to carry it.
        Returns the request's result or raises its error."""
        with self._mutex:
            if self._backend.closed:
                raise StoreClosedError("the store is closed")
            follower = self._leader
            if follower:
                self._queue.append(request)
            else:
                self._leader = True
        return self._settle(request, follower)

    def call(self, apply: Callable[..., Any], key: Any = None, args: tuple[Any, ...] = (),
             ) -> Any:
        """``submit(Request(lambda tx: apply(tx, *args), key))``, with a fast
        path: when no commit is in progress (so nobody is queued) the caller
        commits ``apply`` alone, inline -- no request object, no closure, no
        hand-off, no callback -- and then passes the lead to whoever queued
        meanwhile."""
        mutex = self._mutex
        with mutex:
            if self._backend.closed:
                raise StoreClosedError("the store is closed")
            if self._leader:
                request = Request(lambda tx: apply(tx, *args), key)
                self._queue.append(request)
            else:
                self._leader = True
                request = None
        if request is not None:
            return self._settle(request, True)
        try:
            result, error = self._commit_one(apply, args, key)
        finally:
            with mutex:
                if self._queue:
                    self._pass_lead(sync=True)
                else:
                    self._leader = False
        if error is not None:
            raise error
        return result

    def _settle(self, request: Request, follower: bool) -> Any:
        """(``request`` submitted.)  Wait for the commit that carries it, or
        lead it; its result, or its error raised."""
        if follower:
            request.wake.acquire()  # released when done, or when promoted to lead
        if not request.done:
            self._lead([request], sync=True)
        if request.error is not None:
            raise request.error
        return request.result

    def submit_async(self, request: Request) -> None:
        """Queue an asynchronous request (``request.callback`` set); returns at
        once.  Raises ``StoreClosedError`` if the store is closed."""
        assert request.callback is not None
        with self._mutex:
            if self._backend.closed or self._stopped:
                raise StoreClosedError("the store is closed")
            self._queue.append(request)
            if self._leader:
                return
            self._leader = True
            self._start_worker()

    def _start_worker(self) -> None:
        """(mutex held) Hand the lead to the worker thread."""
        self._lead_async = True
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="trajlog-commit",
                                            daemon=True)
            self._worker.start()
        self._worker_due.notify()

    def _work(self) -> None:
        while True:
            with self._mutex:
                while not self._lead_async and not self._stopped:
                    self._worker_due.wait()
                if self._stopped:
                    return
                self._lead_async = False
            self._lead([], sync=False)

    def _lead(self, first: list[Request], *, sync: bool) -> None:
        """Commit what is queued, batch after batch, then hand the lead on: to
        the oldest waiting thread, to the worker (only asynchronous requests
        left), or to nobody (queue empty)."""
        pending = first
        mine = first[0] if first else None
        while True:
            with self._mutex:
                pending += self._queue
                self._queue = []
            try:
                self.commit(pending)
            finally:
                for req in pending:
                    req.done = True
                    if req.callback is not None:
                        req.callback(req)
                    elif req is not mine:
                        req.wake.release()
            with self._mutex:
                if not self._queue:
                    self._leader = False
                    return
                if not self._pass_lead(sync):
                    return
            pending, first = [], []

    def _pass_lead(self, sync: bool) -> bool:
        """(mutex held, queue not empty.)  Promote the oldest waiting thread to
        lead the next commit, or -- an asynchronous request first -- hand the
        lead to the worker (``sync``: the caller is a thread that returns).
        True when the caller keeps the lead (it is the worker)."""
        head = self._queue[0]
        if head.callback is None:
            self._queue.pop(0)
            head.wake.release()  # it leads the next commit
            return False
        if sync:
            self._start_worker()  # our caller returns; the worker goes on
            return False
        return True

    def stop(self) -> None:
        """Stop the worker thread (the store is closing)."""
        with self._mutex:
            self._stopped = True
            self._worker_due.notify_all()
            worker = self._worker
        if worker is not None:
            worker.join(10)

    def _commit_one(self, apply: Callable[..., Any], args: tuple[Any, ...],
                    key: Any = None) -> tuple[Any, BaseException | None]:
        """:meth:`commit` of one request, without its object: ``(result,
        error)`` of ``apply(tx, *args)``, nothing raised.  A refusal leaves the
        transaction to commit (it wrote nothing but, maybe, its own lease's
        heartbeat)."""
        for attempt in range(ATTEMPTS):
            result: Any = None
            error: BaseException | None = None
            try:
                with self._backend.transaction() as tx:
                    if tx.foreign_commit:
                        self._on_foreign()
                    try:
                        try:   # (_apply inline: this is every lone append's path)
                            result = apply(tx, *args)
                        except HeadMovedError:
                            if not tx.in_transaction():
                                raise
                            self._on_failure(key)
                            result = apply(tx, *args)
                    except self._refusals as exc:
                        error = exc
            except TransactionConflictError as exc:
                self._on_failure(None)
                if attempt + 1 < ATTEMPTS:
                    _backoff(attempt)
                    continue
                return None, exc
            except BaseException as exc:
                self._on_failure(None)  # the transaction failed: caches may be ahead of the log
                if error is None:
                    error = unexpected(exc) if isinstance(exc, Exception) else exc
                result = None
            return result, error
        raise AssertionError("unreachable")  # (the loop returns)

    def _apply(self, tx: Writer, apply: Callable[..., Any], args: tuple[Any, ...],
               key: Any) -> Any:
        """``apply(tx, *args)``; once more, with the session's cached state
        dropped, if another writer had moved its head (nothing was written)."""
        try:
            return apply(tx, *args)
        except HeadMovedError:
            if not tx.in_transaction():
                raise
            self._on_failure(key)
            return apply(tx, *args)

    def commit(self, batch: list[Request]) -> None:
        """Run ``batch`` in one transaction (again, whole, if the database
        ends it in a conflict); every request ends with a result or an error
        (nothing raised here)."""
        for attempt in range(ATTEMPTS):
            try:
                self._commit_batch(batch)
                return
            except TransactionConflictError as exc:
                self._on_failure(None)
                if attempt + 1 < ATTEMPTS:
                    for req in batch:
                        req.error, req.result = None, None
                    _backoff(attempt)
                    continue
                failed: BaseException = exc
            except BaseException as exc:
                self._on_failure(None)  # the transaction failed: caches may be ahead of the log
                failed = exc
            for req in batch:
                if req.error is None:
                    req.error = unexpected(failed) if isinstance(failed, Exception) else failed
                req.result = None
            return

    def _commit_batch(self, batch: list[Request]) -> None:
        """One try of :meth:`commit`: a failure of the transaction raises."""
        isolate = len(batch) > 1
        with self._backend.transaction() as tx:
            if tx.foreign_commit:
                self._on_foreign()
            if isolate or batch[0].sessions:
                tx.lock_heads(_sessions(batch))
            for req in batch:
                if not isolate:
                    try:
                        req.result = self._apply(tx, req.apply, (), req.key)
                    except self._refusals as exc:
                        req.error = exc
                    continue
                try:
                    with tx.savepoint():
                        req.result = self._apply(tx, req.apply, (), req.key)
                except self._refusals as exc:
                    req.error = exc
                except Exception as exc:
                    if not tx.in_transaction():
                        raise  # the transaction is gone: the batch fails (or runs again)
                    self._on_failure(req.key)
                    req.error = unexpected(exc)


def _sessions(batch: Sequence[Request]) -> list[int]:
    """The sids the batch's requests write, in order."""
    sids: set[int] = set()
    for req in batch:
        if type(req.key) is int:
            sids.add(req.key)
        sids.update(req.sessions)
    return sorted(sids)


def _backoff(attempt: int) -> None:
    """A short random wait before a conflicting transaction runs again, so
    that the transactions that collided do not collide again in step."""
    time.sleep(random.uniform(0, 0.002 * (1 << min(attempt, 6))))


__all__ = ["ATTEMPTS", "GroupCommit", "Request"]
