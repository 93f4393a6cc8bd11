"""LangGraph's checkpointer on trajlog: :class:`TrajlogSaver`.

    saver = TrajlogSaver.open("trajlog.db")        # or TrajlogSaver(trajlog_store)
    graph = builder.compile(checkpointer=saver)
    graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

One trajlog session per thread (id ``uuid5(NAMESPACE, thread_id)``, the thread id
in its metadata); a checkpoint is a ``checkpoint/put`` event, pending writes are
``checkpoint/writes`` events (see :mod:`._log` for the shapes), so a thread's
history is a verified, append-only log that trajlog's tools read.  ``checkpoint_ns``
is a field: the namespaces of a thread share its session and never see each
other's checkpoints.

* ``put`` is one durable append (with the mirrored messages, :mod:`._mirror`, in
  the same transaction); ``put_writes`` one append, idempotent: a retry of the
  same writes writes nothing (trajlog's idempotency key), and when the log does
  hold a (task_id, idx) twice the first wins -- except for a batch of special
  channels only (ERROR, INTERRUPT, ...), which replaces, as SqliteSaver does.
* ``get_tuple`` of the latest checkpoint scans back from the end of the log
  (never the whole log) and keeps what it found, brought up to date from the
  session's last seq on every call -- so it stays right when other processes
  append.  A read by id and ``list`` index the thread once per process.
* ``delete_thread`` deletes the thread's session (``Store.delete_session``) and
  a later ``put`` starts the next one (:mod:`._threads`).  A thread whose
  copies still inherit its events: its own erased, a ``checkpoint/delete``
  marker appended; reads start after it (the copies' events: hidden).
* ``copy_thread`` is a trajlog fork of the source at its last event: nothing is
  copied.  A target that already has a session gets the source's live
  checkpoints and writes appended instead (one transaction).
* under the store's redaction policy, serialized values are stored as trees
  whose strings the scanners mask in place (:mod:`._log`): a masked secret
  never breaks a checkpoint; a value the saver cannot open (a serde type
  other than msgpack, JSON or bytes: an encrypting one) is refused with
  ``UnredactableValueError`` when the policy would change its text.
* ``erase_message`` erases one message from a thread: its mirrored events and
  every checkpoint and write that copied its text (``Store.erase`` of a
  mirrored event alone does not reach those copies), the live ones appended
  again without it (:mod:`._forget`).
* ``delete_for_runs`` and ``prune`` are not offered (see the report in the
  adapter's documentation): they remove single checkpoints from the middle of a
  log, which an append-only log can only hide.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import hashlib
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import msgspec
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ...aio import AsyncSession, AsyncStore
from ...api.store import Store
from ...api.store import open as open_store
from ...errors import (
    SerializationError,
    SessionDeletedError,
    TrajlogError,
    UnredactableValueError,
    ValidationError,
)
from ...events import Event
from ._forget import ERASED, MessageErasure, forget_message
from ._log import (
    ADAPTER,
    PUT,
    WRITES,
    Head,
    ThreadLog,
    generation_id,
    pack,
    pack_tree,
    session_id_of,
    unpack,
)
from ._mirror import Mirror
from ._threads import delete_thread, forget_thread, open_thread

T = TypeVar("T")
_THREADS = 1024                       # threads whose index this process keeps
_PREFETCH = 32                        # a listing of more checkpoints reads them in one pass
_KEY = msgspec.msgpack.Encoder()
_MISSING = object()


def _metadata_value(metadata: Any, path: str) -> Any:
    cur = metadata
    for part in path.split("."):
        cur = cur.get(part, _MISSING) if isinstance(cur, dict) else _MISSING
        if cur is _MISSING:
            return None
    return cur


def _matches(metadata: Any, filter: dict[str, Any] | None) -> bool:
    return not filter or all(_metadata_value(metadata, k) == v for k, v in filter.items())


class TrajlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer (sync and async) that keeps each thread as a
    trajlog session.

    ``store``: a :class:`trajlog.Store` (or a :class:`trajlog.aio.AsyncStore`).
    ``serde``: LangGraph's serializer (default: its ``JsonPlusSerializer``).
    ``messages_channel``: the state channel whose messages are mirrored as
    trajlog's message and tool events (None: mirror nothing).
    ``async_appends``: the async methods append through :mod:`trajlog.aio`
    (awaiting the group commit) rather than running the sync call in the
    loop's executor (the default: measured faster for a graph's sequential
    puts, benchmarks/bench_langgraph.py).
    """

    def __init__(self, store: Store | AsyncStore, *,
                 serde: SerializerProtocol | None = None,
                 messages_channel: str | None = "messages",
                 async_appends: bool = False) -> None:
        super().__init__(serde=serde)
        self.store: Store = store.sync if isinstance(store, AsyncStore) else store
        self.messages_channel = messages_channel
        self.async_appends = async_appends
        self._threads: OrderedDict[str, ThreadLog] = OrderedDict()
        self._mirrors: dict[str, Mirror] = {}
        self._generations: dict[str, int] = {}   # thread -> its session's generation, if not 0
        self._lock = threading.Lock()       # the thread table (executor threads share it)
        self._owned = False

    @classmethod
    def open(cls, path: str = "trajlog.db", **options: Any) -> TrajlogSaver:
        """A saver on a store of its own at ``path`` (closed by :meth:`close`);
        ``options`` go to the saver, ``durability`` to :func:`trajlog.open`."""
        durability = options.pop("durability", "full")
        saver = cls(open_store(path, durability), **options)
        saver._owned = True
        return saver

    def close(self) -> None:
        """Close the store if this saver opened it."""
        if self._owned:
            self.store.close()

    def __enter__(self) -> TrajlogSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- threads ---------------------------------------------------------------------

    @staticmethod
    def session_id(thread_id: str) -> str:
        """The id of the trajlog session that holds ``thread_id`` (``uuid5``)."""
        return session_id_of(str(thread_id))

    def _thread(self, thread_id: str, *, create: bool) -> ThreadLog | None:
        sid = generation_id(thread_id, self._generations.get(thread_id, 0))
        with self._lock:
            t = self._threads.get(sid)
            if t is not None:
                self._threads.move_to_end(sid)
                return t
        sid, n, found = open_thread(self, thread_id)
        fresh = False
        if found is not None:
            session = found
        elif not create:
            return None
        else:
            try:
                session = self.store.create_session(
                    metadata={"thread_id": thread_id, "adapter": ADAPTER,
                              **({"generation": n} if n else {})}, session_id=sid)
                fresh = True
            except SessionDeletedError:
                raise
            except TrajlogError:       # another process created it meanwhile
                session = self.store.session(sid)
        with self._lock:
            known = self._threads.get(sid)
            if known is not None:          # another thread of this process got there first
                return known
            t = ThreadLog(session)
            if fresh:                      # an empty log: the index is complete already
                t.full = True
            t.on_event = self._mirrors.setdefault(sid, Mirror()).fold
            self._threads[sid] = t
            while len(self._threads) > _THREADS:
                old, _ = self._threads.popitem(last=False)
                self._mirrors.pop(old, None)
            return t

    def _mirror(self, t: ThreadLog) -> Mirror:
        with self._lock:
            mirror = self._mirrors.setdefault(t.session.id, Mirror())
        t.on_event = mirror.fold
        return mirror

    # -- serialized values -------------------------------------------------------------

    def _pack(self, typed: tuple[str, bytes], event_type: str, where: str) -> builtins.list[Any]:
        """A serialized value as the event stores it.  Under a redaction policy,
        as a tree whose strings the scanners mask in place (:func:`._log.pack_tree`):
        masking the serde's bytes would break their lengths.  A value the saver
        cannot open is stored as text only if the policy finds nothing to change
        in it; otherwise :class:`UnredactableValueError` (nothing is written)."""
        policy = self.store.redaction
        if policy is None:
            return pack(typed)
        tree = pack_tree(typed)
        if tree is not None:
            return tree
        text = pack(typed)
        for scanner in policy.scanners:
            for f in scanner.scan(text[2]):
                if policy.actions.get(f.kind, policy.default) != "allow":
                    raise UnredactableValueError(event_type, where, f.kind, typed[0])
        return text

    # -- building tuples ---------------------------------------------------------------

    def _pending(self, events: list[Event]) -> list[PendingWrite]:
        found: dict[tuple[str, int], tuple[str, str, int, str, list[str]]] = {}
        for ev in events:
            d = ev.data
            if not isinstance(d, dict) or "writes" not in d:
                continue        # erased
            task_id, path, replace = d["task_id"], d.get("task_path", ""), d.get("replace")
            for idx, channel, value in d["writes"]:
                key = (task_id, idx)
                if replace or key not in found:
                    found[key] = (path, task_id, idx, channel, value)
        rows = sorted(found.values(), key=lambda r: writes_sort_key(r[0], r[1], r[2]))
        return [(r[1], r[3], self.serde.loads_typed(unpack(r[4]))) for r in rows]

    def _metadata(self, d: dict[str, Any]) -> Any:
        return (d["metadata"] if "metadata" in d
                else self.serde.loads_typed(unpack(d["metadata_typed"])))

    def _tuple(self, thread_id: str, ns: str, put: Event,
               writes: list[Event]) -> CheckpointTuple | None:
        d = put.data
        if not isinstance(d, dict) or "checkpoint" not in d:
            return None         # erased since it was indexed
        checkpoint = self.serde.loads_typed(unpack(d["checkpoint"]))
        metadata = self._metadata(d)
        parent = d.get("parent")
        return CheckpointTuple(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                              "checkpoint_id": d["id"]}},
            checkpoint, cast(CheckpointMetadata, metadata),
            ({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns,
                               "checkpoint_id": parent}} if parent else None),
            self._pending(writes))

    def _read(self, t: ThreadLog, thread_id: str, ns: str,
              head: Head | None) -> CheckpointTuple | None:
        if head is None:
            return None
        seq, _, writes = head
        with t.lock:
            put, write_events = t.get(seq), [t.get(w) for w in writes]
        return self._tuple(thread_id, ns, put, write_events)

    # -- the sync interface ------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, or the newest of
        its thread and namespace), with its pending writes; None if there is none."""
        c = config["configurable"]
        thread_id, ns = str(c["thread_id"]), c.get("checkpoint_ns", "")
        t = self._thread(thread_id, create=False)
        if t is None:
            return None
        cid = get_checkpoint_id(config)
        with t.lock:
            head = t.entry(ns, cid) if cid else t.head(ns)
        return self._read(t, thread_id, ns, head)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (descending id): of ``config``'s thread (and
        namespace, if it names one; every thread for None), whose metadata
        matches ``filter``, with ids below ``before``'s, at most ``limit``."""
        before_id = get_checkpoint_id(before) if before else None
        if config is not None:
            c = config["configurable"]
            threads = [str(c["thread_id"])]
            ns: str | None = c.get("checkpoint_ns")
            exact = get_checkpoint_id(config)
        else:
            threads = [str(h.metadata["thread_id"]) for h in self.store.sessions()
                       if h.metadata.get("adapter") == ADAPTER]
            ns = exact = None
        found: builtins.list[tuple[str, str, int, str, ThreadLog]] = []
        for thread_id in threads:
            t = self._thread(thread_id, create=False)
            if t is None:
                continue
            with t.lock:
                found.extend((cid, space, seq, thread_id, t)
                             for cid, space, seq in t.entries(ns, before_id)
                             if exact is None or cid == exact)
        found.sort(key=lambda f: f[0], reverse=True)
        ahead: dict[tuple[str, int], Event] = {}
        if len(threads) == 1 and len(found) > _PREFETCH and (limit is None or limit > _PREFETCH):
            t0 = found[0][4]
            with t0.lock:   # most of a thread: one pass beats a query per event
                wanted = {f[2] for f in found} | {w for f in found
                                                  for w in t0.writes_of(f[1], f[0])}
                ahead = {(threads[0], s): ev for s, ev in t0.prefetch(wanted).items()}
        count = 0
        for cid, space, seq, thread_id, t in found:
            if limit is not None and count >= limit:
                return
            with t.lock:
                put = ahead.get((thread_id, seq)) or t.get(seq)
                writes = t.writes_of(space, cid)
            if filter and (not isinstance(put.data, dict) or "checkpoint" not in put.data
                           or not _matches(self._metadata(put.data), filter)):
                continue
            with t.lock:
                write_events = [ahead.get((thread_id, w)) or t.get(w) for w in writes]
            tup = self._tuple(thread_id, space, put, write_events)
            if tup is not None:
                count += 1
                yield tup

    def _put_items(self, t: ThreadLog, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions,
                   ) -> tuple[builtins.list[tuple[str, Any]], dict[str, Any]]:
        """The mirrored messages and the ``checkpoint/put`` data of one checkpoint."""
        c = config["configurable"]
        ns = c.get("checkpoint_ns", "")
        md = get_checkpoint_metadata(config, metadata)
        data: dict[str, Any] = {"ns": ns, "id": checkpoint["id"],
                                "parent": c.get("checkpoint_id"),
                                "checkpoint": self._pack(self.serde.dumps_typed(checkpoint), PUT,
                                                         "$.checkpoint"),
                                "metadata": md, "new_versions": dict(new_versions)}
        mirrored: builtins.list[tuple[str, Any]] = []
        if self.messages_channel is not None and ns == "":
            messages = checkpoint["channel_values"].get(self.messages_channel)
            if messages:
                t.ensure_full()         # the mirror's state comes from the whole log
                t.catch_up()
                mirrored = self._mirror(t).items(messages)
        return mirrored, data

    def _attempts(self, mirrored: builtins.list[tuple[str, Any]],
                  data: dict[str, Any]) -> Iterator[builtins.list[tuple[str, Any]]]:
        """What to append, then what to try if trajlog refuses it (before writing
        anything): the checkpoint alone (the mirror never blocks a checkpoint),
        then with metadata that is not JSON through the serde (filters decode it)."""
        yield [*mirrored, (PUT, data)]
        if mirrored:
            yield [(PUT, data)]
        typed = {k: v for k, v in data.items() if k != "metadata"}
        typed["metadata_typed"] = self._pack(self.serde.dumps_typed(data["metadata"]), PUT,
                                             "$.metadata_typed")
        if mirrored:
            yield [*mirrored, (PUT, typed)]
        yield [(PUT, typed)]

    def _locked_items(self, t: ThreadLog, *args: Any) -> tuple[
            builtins.list[tuple[str, Any]], dict[str, Any]]:
        with t.lock:
            return self._put_items(t, *args)

    @staticmethod
    def _saved(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
        c = config["configurable"]
        return {"configurable": {"thread_id": c["thread_id"],
                                 "checkpoint_ns": c.get("checkpoint_ns", ""),
                                 "checkpoint_id": checkpoint["id"]}}

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        """Store a checkpoint (one durable append); returns its config."""
        thread = str(config["configurable"]["thread_id"])
        for again in (True, False):   # (deleted by another process: its next generation)
            t = self._thread(thread, create=True)
            assert t is not None
            try:
                return self._put(t, config, checkpoint, metadata, new_versions)
            except SessionDeletedError:
                forget_thread(self, thread, t.session.id)
                if not again:
                    raise
        raise AssertionError("unreachable")

    def _put(self, t: ThreadLog, config: RunnableConfig, checkpoint: Checkpoint,
             metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        with t.lock:
            mirrored, data = self._put_items(t, config, checkpoint, metadata, new_versions)
            attempts = list(self._attempts(mirrored, data))
            for i, items in enumerate(attempts):
                try:
                    events = t.session.append_batch(items)
                    break
                except (ValidationError, SerializationError):
                    if i == len(attempts) - 1:
                        raise
            t.note(events)
        return self._saved(config, checkpoint)

    def _writes_item(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                     task_id: str, task_path: str) -> tuple[str, Any, dict[str, Any]]:
        c = config["configurable"]
        data = {"ns": c.get("checkpoint_ns", ""), "checkpoint_id": str(c["checkpoint_id"]),
                "task_id": task_id, "task_path": task_path,
                "replace": all(w[0] in WRITES_IDX_MAP for w in writes),
                "writes": [[WRITES_IDX_MAP.get(ch, idx), ch,
                            self._pack(self.serde.dumps_typed(v), WRITES, f"$.writes[{idx}][2]")]
                           for idx, (ch, v) in enumerate(writes)]}
        # the same writes again (a retry, from any process) write nothing
        key = "w:" + hashlib.blake2b(_KEY.encode(data), digest_size=16).hexdigest()
        return WRITES, data, {"idempotency_key": key}

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store the writes of a task for the checkpoint ``config`` names."""
        if not writes:
            return
        t = self._thread(str(config["configurable"]["thread_id"]), create=True)
        assert t is not None
        item = self._writes_item(config, writes, task_id, task_path)
        events = t.session.append_batch([item])
        with t.lock:
            t.note(events)

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's session (``Store.delete_session``); a later
        ``put`` starts the thread again in a new session, never the deleted
        one.  A thread whose copies read its events: its own events erased and
        a marker appended instead (:func:`._threads.delete_thread`)."""
        delete_thread(self, str(thread_id))

    ERASED = ERASED     # what erase_message leaves in place of a message's text

    def erase_message(self, thread_id: str, message_id: str, *, reason: str,
                      actor: str | None = "langgraph") -> MessageErasure:
        """Erase a message from the thread: its mirrored events, and its text
        wherever the thread's checkpoints and writes copied it (the input
        checkpoint and its writes hold it before it has an id; every later
        checkpoint holds it).  Each put or write that holds a string equal to
        the message's text (its content, or each text block of it) is erased
        (``Store.erase``: tombstone, purge) and, if it is live, appended again
        with that string replaced by :attr:`ERASED` -- the same checkpoint id,
        so the thread's history and its latest checkpoint stay readable and the
        graph goes on -- followed by a ``checkpoint/forget`` marker (the mirror
        does not mirror the message again).  Copies of the thread
        (:meth:`copy_thread`) and the thread it was copied from are treated
        alike: they read the same events.

        The message is found by ``message_id`` in the mirrored events or, if
        those were erased already, in the checkpoints.  Raises
        :class:`~trajlog.errors.ErasureError`, before anything changes, when
        the thread or the message is not there or a value holding the text
        is stored in a form the saver cannot open."""
        return forget_message(self, str(thread_id), message_id, reason=reason, actor=actor)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Make ``target`` a copy of ``source``: a trajlog fork at the source's last
        event (no copy).  A target that exists already gets the source's live
        checkpoints and writes appended in one transaction."""
        src = self._thread(str(source_thread_id), create=False)
        if src is None:
            return
        target = str(target_thread_id)
        with src.lock:
            last = src.catch_up()
            if last < 0:
                return
            sid, n, found = open_thread(self, target)
            if found is None:
                try:
                    src.session.fork(last, session_id=sid, metadata={
                        "thread_id": target, "adapter": ADAPTER,
                        "copied_from": str(source_thread_id), **({"generation": n} if n else {})})
                    return
                except TrajlogError:
                    pass            # created meanwhile: append to it below
            base, last = src.live_seqs()
            items = [(ev.type, ev.data) for ev in src.session.events(base, last)
                     if ev.type in (PUT, WRITES) and isinstance(ev.data, dict)
                     and ("checkpoint" in ev.data or "writes" in ev.data)]
        dst = self._thread(target, create=True)
        assert dst is not None
        if items:
            with dst.lock:
                dst.note(dst.session.append_batch(items))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A new channel version, greater than ``current``: SqliteSaver's scheme
        (the counter, 32 digits, then a random part) with the random part in
        hex after a letter -- SqliteSaver's ``0.<16 digits>`` passes the Luhn
        check one time in ten, and a redaction policy would mask it as a card
        number inside every checkpoint that holds it."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(current.split(".")[0])
        return f"{current_v + 1:032}.r{random.getrandbits(64):016x}"

    # -- the async interface -------------------------------------------------------------

    async def _blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(fn, *args, **kwargs))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple`, off the event loop."""
        return await self._blocking(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list`, read off the event loop."""
        found = await self._blocking(lambda: [*self.list(config, filter=filter, before=before,
                                                         limit=limit)])
        for tup in found:
            yield tup

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions,
                   ) -> RunnableConfig:
        """:meth:`put`, awaiting the group commit."""
        if not self.async_appends:
            return await self._blocking(self.put, config, checkpoint, metadata, new_versions)
        t = await self._blocking(self._thread, str(config["configurable"]["thread_id"]),
                                 create=True)
        assert t is not None
        mirrored, data = await self._blocking(self._locked_items, t, config, checkpoint,
                                              metadata, new_versions)
        session = AsyncSession(t.session)
        attempts = list(self._attempts(mirrored, data))
        for i, items in enumerate(attempts):
            try:
                events = await session.append_batch(items)
                break
            except (ValidationError, SerializationError):
                if i == len(attempts) - 1:
                    raise
        with t.lock:
            t.note(events)
        return self._saved(config, checkpoint)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """:meth:`put_writes`, awaiting the group commit."""
        if not writes:
            return
        if not self.async_appends:
            return await self._blocking(self.put_writes, config, writes, task_id, task_path)
        t = await self._blocking(self._thread, str(config["configurable"]["thread_id"]),
                                 create=True)
        assert t is not None
        item = self._writes_item(config, writes, task_id, task_path)
        events = await AsyncSession(t.session).append_batch([item])
        with t.lock:
            t.note(events)

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread`, off the event loop."""
        await self._blocking(self.delete_thread, thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread`, off the event loop."""
        await self._blocking(self.copy_thread, source_thread_id, target_thread_id)


__all__ = ["ADAPTER", "MessageErasure", "TrajlogSaver"]
