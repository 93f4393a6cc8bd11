"""Group commit: concurrent writes of one process share a transaction.

Every write becomes a :class:`Request` (a function of the transaction's
:class:`~trajlog.storage.base.Writer`).  Whichever calling thread finds no
commit in progress becomes the leader: it takes every queued request into one
transaction, commits it (durable when COMMIT returns, under
``synchronous=FULL``) and wakes exactly the callers it committed.  If more
requests arrived meanwhile it promotes the oldest waiting caller to lead the
next commit, so nobody waits on a commit that does not carry its request.  A
lone thread pays no hand-off; concurrent threads share one fsync.

With several requests in one transaction, each runs in a savepoint: one that
fails (a refusal, a constraint, an unexpected error) is rolled back alone and
fails alone; the others commit.  A failure of the transaction itself, or of
its commit, fails every request in it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreClosedError, unexpected
from .base import Backend, Writer


def _locked() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(slots=True)
class Request:
    """One caller's write: ``apply(writer)`` runs inside the transaction and
    returns the caller's result.  ``key`` names what the request writes (a
    session), for ``on_failure``."""

    apply: Callable[[Writer], Any]
    key: Any = None
    done: bool = False
    result: Any = None
    error: BaseException | None = None
    wake: threading.Lock = field(default_factory=_locked)


class GroupCommit:
    """The group-commit queue of one backend.

    ``refusals`` are the exception types a request raises before it writes
    anything (validation): they fail the request without touching the
    transaction.  ``on_failure(key)`` is told when a request's writes were
    rolled back (``key=None``: the whole transaction), so that caches kept in
    step with the log can be dropped; ``on_foreign()`` when another connection
    committed since this backend's last transaction.
    """

    def __init__(self, backend: Backend, refusals: tuple[type[BaseException], ...],
                 on_failure: Callable[[Any], None],
                 on_foreign: Callable[[], None] = lambda: None) -> None:
        self._backend = backend
        self._refusals = refusals
        self._on_failure = on_failure
        self._on_foreign = on_foreign
        self._mutex = threading.Lock()  # guards _queue and _leader
        self._queue: list[Request] = []
        self._leader = False

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
        if follower:
            request.wake.acquire()  # released when done, or when promoted to lead
        if not request.done:
            pending = [request]
            with self._mutex:
                pending += self._queue
                self._queue = []
            try:
                self.commit(pending)
            finally:
                for req in pending:
                    req.done = True
                    if req is not request:
                        req.wake.release()
                with self._mutex:
                    promoted = self._queue.pop(0) if self._queue else None
                    if promoted is None:
                        self._leader = False
                if promoted is not None:
                    promoted.wake.release()  # it leads the next commit; ours is done
        if request.error is not None:
            raise request.error
        return request.result

    def commit(self, batch: list[Request]) -> None:
        """Run ``batch`` in one transaction; every request ends with a result
        or an error (nothing raised here)."""
        isolate = len(batch) > 1
        try:
            with self._backend.transaction() as tx:
                if tx.foreign_commit:
                    self._on_foreign()
                for req in batch:
                    if not isolate:
                        try:
                            req.result = req.apply(tx)
                        except self._refusals as exc:
                            req.error = exc
                        continue
                    try:
                        with tx.savepoint():
                            req.result = req.apply(tx)
                    except self._refusals as exc:
                        req.error = exc
                    except Exception as exc:
                        if not tx.in_transaction():
                            raise  # the transaction is gone: the batch fails
                        self._on_failure(req.key)
                        req.error = unexpected(exc)
        except BaseException as exc:
            self._on_failure(None)  # the transaction failed: caches may be ahead of the log
            for req in batch:
                if req.error is None:
                    req.error = unexpected(exc) if isinstance(exc, Exception) else exc
                req.result = None


__all__ = ["GroupCommit", "Request"]
