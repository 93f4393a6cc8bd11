"""Everything above storage/ goes through the Backend protocol and nothing else.

A backend that offers exactly the protocol's methods -- each a delegation to
the SQLite backend, recorded -- runs the whole API: if the api reached for
anything the protocol does not name (a connection, an SQL statement, a
private attribute), it would fail here with an AttributeError.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import trajlog
from trajlog import projections
from trajlog.storage import SQLiteBackend, base


def _methods(protocol: type) -> list[str]:
    """The names a protocol declares, its own and its base protocols'."""
    return sorted({n for cls in protocol.__mro__ if cls.__module__ == base.__name__
                   for n in vars(cls) if not n.startswith("_")})


READER_METHODS = _methods(base.Reader)
WRITER_METHODS = _methods(base.Writer)


def _delegate(target: Any, names: list[str], calls: Counter[str], kind: str) -> type:
    """A class with exactly ``names``, each forwarding to ``target``."""
    ns: dict[str, Any] = {}
    for name in names:
        def forward(self: Any, *args: Any, _n: str = name, **kwargs: Any) -> Any:
            calls[f"{kind}.{_n}"] += 1
            return getattr(target(), _n)(*args, **kwargs)
        ns[name] = forward
    return type(f"Only{kind}", (), ns)


class ProtocolOnlyBackend:
    """The Backend protocol, nothing more, over a real SQLite backend."""

    def __init__(self, path: str) -> None:
        self._real = SQLiteBackend(path)
        self.path = self._real.path
        self.durability = self._real.durability
        self.max_session_seq = self._real.max_session_seq
        self.calls: Counter[str] = Counter()
        real = self._real
        reader_cls = _delegate(real.reader, READER_METHODS, self.calls, "Reader")
        self._reader = reader_cls()

    @property
    def closed(self) -> bool:
        return self._real.closed

    @property
    def foreign_commits(self) -> int:
        return self._real.foreign_commits

    def reader(self) -> Any:
        self.calls["reader"] += 1
        return self._reader

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[Any]:
        self.calls["snapshot"] += 1
        with self._real.snapshot() as snap:
            yield _delegate(lambda: snap, READER_METHODS, self.calls, "Snapshot")()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        self.calls["transaction"] += 1
        with self._real.transaction() as tx:
            names = [*READER_METHODS, *(n for n in WRITER_METHODS if n != "foreign_commit")]
            only = _delegate(lambda: tx, names, self.calls, "Writer")()
            only.foreign_commit = tx.foreign_commit
            yield only

    def purge(self) -> base.Purge:
        self.calls["purge"] += 1
        return self._real.purge()

    def size(self) -> int:
        self.calls["size"] += 1
        return self._real.size()

    def lease_alive(self, lease: base.Lease) -> bool | None:
        self.calls["lease_alive"] += 1
        return self._real.lease_alive(lease)

    def memory_index(self, present: bool) -> None:
        self.calls["memory_index"] += 1
        self._real.memory_index(present)

    def search_index(self, present: bool) -> None:
        self.calls["search_index"] += 1
        self._real.search_index(present)

    def close(self) -> None:
        self._real.close()


def test_backend_seam_the_whole_api_runs_on_the_protocol_alone(tmp_path):
    backend = ProtocolOnlyBackend(str(tmp_path / "seam.db"))
    with trajlog.open(backend=backend) as store:
        s = store.create_session(cwd="/r", agent_preset="coder")
        with s.turn():
            s.append("user/message", {"content": "go"}, idempotency_key="u1")
            with s.step():
                s.append("assistant/message", {"content": "x", "tool_calls": [
                    {"id": "c1", "name": "read", "arguments": {}}]})
                s.append("tool/call", {"call_id": "c1", "name": "read", "arguments": {}})
                s.append("tool/result", {"call_id": "c1", "output": "ok", "is_error": False})
        s.append("user/message", {"content": "go"}, idempotency_key="u1")   # a retry
        s.append_batch([("note/a", {"n": 1}), ("note/b", {"n": 2})])
        s.compact(0, 6, "the first turn")
        s.mark(7, "rejected", "no", source="human:a")
        assert s.verify().ok and len(s.tail(3)) == 3 and s.get(1).type == "user/message"
        child = s.fork(3)
        sub = s.spawn_subagent("review", call_id=None)
        assert child.verify().ok and [c.id for c in s.children()] == [child.id, sub.id]
        with s.turn():
            s.append("user/message", {"content": "crash here"})
            s.append("assistant/message", {"content": "", "tool_calls": [
                {"id": "c2", "name": "run"}]})
            turn_open = s.inspect()[1]
        assert turn_open.outcome == "refused"   # this store's own turn is still being written
        assert store.load(s.id).verify().ok
        assert projections.model_history(s) and projections.status(s).turn_open_since is None
        projections.checkpoint(s)
        assert [h.id for h in store.sessions()] == [s.id, child.id]
        assert [(h.session_id, h.seq) for h in store.search("crash")] == [(s.id, 14)]
        store.erase(s.id, 14, reason="r")
        assert not store.search("crash") and store.rebuild_search_index() >= 10
    used = {k.split(".")[0] for k in backend.calls}
    assert {"Reader", "Writer", "Snapshot", "transaction"} <= used
    assert backend.calls["Writer.append"] >= 10


def test_verify_reads_index_rows_and_marks_with_their_chunk_rows(tmp_path):
    """A verification reads the index rows and marks with the chunk rows
    (``log_range``: one call, one round trip on a server), not once a row:
    the calls do not grow with the number of rows."""
    backend = ProtocolOnlyBackend(str(tmp_path / "seam.db"))
    with trajlog.open(backend=backend, repack=False) as store:
        s = store.create_session()
        for i in range(300):   # 300 rows, each with an index row and marks
            with s.turn():
                s.append("user/message", {"content": f"m{i}"})
        rows = store._e.backend._real.reader().chunk_sizes(s._ref.sid)[0]
        assert rows >= 300
        backend.calls.clear()
        assert s.verify().ok
        per_row = Counter({k.split(".")[-1]: n for k, n in backend.calls.items()
                           if k.split(".")[-1] in ("index_rows", "marks", "log_range", "chunks")})
        assert per_row["log_range"] <= 2, per_row
        assert per_row["index_rows"] + per_row["marks"] <= 1, per_row   # (beyond the head)
        assert per_row["chunks"] == 0, per_row
