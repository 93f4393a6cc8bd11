"""trajlog as the event store of the eventsourcing library: its recorders.

The recorders implement eventsourcing's ``AggregateRecorder``,
``ApplicationRecorder``, ``TrackingRecorder`` and ``ProcessRecorder`` on one
trajlog store, and ``TrajlogFactory`` is the infrastructure factory that an
``Application`` finds by its environment::

    from eventsourcing.application import Application
    app = Application(env={"PERSISTENCE_MODULE": "trajlog.adapters.eventsourcing",
                           "TRAJLOG_DBNAME": "trajlog.db"})

How eventsourcing maps onto trajlog (every recorder has a ``name``, the
factory's purpose, which namespaces its sessions):

* an originator (an aggregate) is a session, ``uuid5(NAMESPACE,
  "<name>/aggregate/<originator id>")``; each stored event one
  ``eventsourcing/event`` event ``{"v", "topic", "state" | "state_b64"}``.
  Its seqs run in version order: the versions of one originator must
  increase (what eventsourcing writes).  A version not above the last one
  stored is refused with ``IntegrityError`` -- a duplicate, as in the SQLite
  recorder, but also a lower version never stored (the SQLite recorder would
  accept that one);
* the application sequence is one more session, ``<name>/application``: each
  notification an ``eventsourcing/notification`` event (the stored event and
  ``originator_id``), notification id = seq + 1.  Ids are contiguous because
  a session's seqs are (the schema refuses a gap), also across threads and
  processes;
* tracking: a session per upstream application, ``<name>/tracking/<app>``,
  one ``eventsourcing/tracking {"n"}`` event per tracking record.

``insert_events`` writes every session it touches in one transaction
(:meth:`trajlog.Store.append_atomic`), each originator and tracking session
expected to end where this recorder last saw it: a writer that got there
first moves the log, the transaction writes nothing, and the recorder reads
the log again -- then refuses a duplicate or retries.  State bytes that are
UTF-8 (what eventsourcing's JSON transcoder writes) are kept as text, other
bytes (compressed or encrypted state) as base64.

Under the store's redaction policy the scanners must not edit that text
where it has structure (a span masked inside JSON can take an escape or a
closing quote with it; inside base64 it is no longer base64): state in which
the policy finds something is stored decoded, as ``state_json`` (the JSON
value, whose strings the scanners mask in place; encoded again on read), or,
for bytes, as ``state_hex`` (``h`` + lowercase hex, which no built-in rule
matches).  UTF-8 state that is not JSON (or JSON with numbers beyond 2**53)
with a finding is refused with :class:`~trajlog.errors.UnredactableValueError`.
What the application compresses or encrypts is opaque to the scanners.

An erased event (``Store.erase``) has no state, version or topic left: reading
it -- replaying its aggregate, selecting its notification -- raises
:class:`~trajlog.errors.ErasedEventError`.  The application sequence keeps a
copy of every event's state: erase the notification with the event.
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    ListenNotifySubscription,
    Notification,
    OperationalError,
    ProcessRecorder,
    StoredEvent,
    Tracking,
    TrackingRecorder,
)
from eventsourcing.utils import Environment, EnvType, resolve_topic

from ..api import Session, Store
from ..api.store import open as open_store
from ..errors import (
    LogMovedError,
    SessionNotFoundError,
)
from ..events import Event
from ._es_state import EVENT, NOTIFICATION
from ._es_state import erased as _erased
from ._es_state import noted as _noted
from ._es_state import stored_bytes as _bytes
from ._es_state import to_payload as _state
from ._es_versions import Versions as _Versions
from ._es_versions import field as _field

#: Namespace of the session ids: ``uuid5(NAMESPACE, "<name>/<kind>/<key>")``.
NAMESPACE = uuid.UUID("f81ee4f1-80ef-42d2-95ea-5e1171eb681e")
TRACKING = "eventsourcing/tracking"
_RETRIES = 100        # conflicts in a row before giving up (each means another writer won)
_CACHED = 10_000      # heads kept per recorder
_POLL = 0.1           # seconds: how often a subscription looks for other processes' writes
@functools.lru_cache(maxsize=_CACHED)
def _uuid5(name: str) -> str:
    """A session id (cached: every read and write asks for one)."""
    return str(uuid.uuid5(NAMESPACE, name))


@functools.lru_cache(maxsize=_CACHED)
def _uuid_of(key: str) -> uuid.UUID:
    """An originator id from its key (cached: a page of notifications names
    few originators many times; a UUID is immutable)."""
    return uuid.UUID(key)


class TrajlogRecorder:
    """What every recorder shares: the store, the session ids, the cached
    heads, and the atomic write of events and tracking."""

    _LOGGED = False   # does insert_events also write the application sequence?
    _TRACKS = False   # does insert_events take a tracking record?

    def __init__(self, store: Store, *, name: str = "events",
                 originator_id_type: str = "uuid") -> None:
        if originator_id_type not in ("uuid", "text"):
            raise ValueError("originator_id_type must be 'uuid' or 'text'")
        self.store = store
        self.name = name
        self.originator_id_type = originator_id_type
        self.log_id = self._sid("application", "")
        # session id -> (last seq, last version or tracking id): what this
        # recorder last saw; a stale entry only costs a retry (expect_last)
        self._heads: dict[str, tuple[int, int | None]] = {}
        self._sessions: dict[str, Session] = {}
        self._listeners: set[threading.Event] = set()

    def _sid(self, kind: str, key: str) -> str:
        return _uuid5(f"{self.name}/{kind}/{key}")

    def session_id_of(self, originator_id: uuid.UUID | str) -> str:
        """The id of the trajlog session holding an originator's events."""
        return self._sid("aggregate", self._key(originator_id))

    def _key(self, originator_id: uuid.UUID | str) -> str:
        return originator_id.hex if isinstance(originator_id, uuid.UUID) else originator_id

    def _originator(self, key: str) -> uuid.UUID | str:
        return uuid.UUID(key) if self.originator_id_type == "uuid" else key

    def _session(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            try:
                session = self.store.session(session_id)
            except SessionNotFoundError:
                return None
            self._cache(session)
        return session

    def _cache(self, session: Session) -> None:
        sessions = self._sessions
        if session.id not in sessions:
            if len(sessions) >= _CACHED:
                sessions.pop(next(iter(sessions)))
            sessions[session.id] = session

    def _head(self, session_id: str, field: str,
              guess: bool = False) -> tuple[int, int | None]:
        """(last seq, ``field`` of the last event) of a session: from what this
        recorder last saw, else read.  ``guess``: a session it never saw is
        taken for a new one (empty), unread -- the append's ``expect_last``
        checks it, and a retry after a refusal reads it."""
        head = self._heads.get(session_id)
        if head is None:
            if guess and session_id not in self._sessions:
                return -1, None
            session = self._session(session_id)
            last = session.tail(1) if session is not None else []
            head = ((last[0].seq, _field(last[0], session_id, field)) if last
                    else (-1, None))
        return head

    def _note_head(self, session_id: str, last: Event) -> None:
        """Keep what a read found at the end of an originator's log."""
        data = last.data
        if isinstance(data, Mapping) and isinstance(data.get("v"), int):
            self._keep(session_id, (last.seq, data["v"]))

    def _keep(self, session_id: str, head: tuple[int, int | None]) -> None:
        heads = self._heads
        if len(heads) >= _CACHED and session_id not in heads:
            heads.pop(next(iter(heads)))
        heads[session_id] = head

    def _write(self, stored_events: Sequence[StoredEvent],
               tracking: Tracking | None) -> list[Event]:
        """Write the events (and the tracking record) in one transaction;
        return the notification events (none if not ``_LOGGED``)."""
        keys = [self._key(stored.originator_id) for stored in stored_events]
        groups: dict[str, list[StoredEvent]] = {}
        for key, stored in zip(keys, stored_events, strict=True):
            groups.setdefault(key, []).append(stored)
        for key, group in groups.items():
            versions = [s.originator_version for s in group]
            if any(b <= a for a, b in itertools.pairwise(versions)):
                raise IntegrityError(f"originator {key}: versions {versions} do not increase")
        track_sid = None if tracking is None else self._sid("tracking",
                                                            tracking.application_name)
        policy = self.store.redaction
        # each stored event's payload, made once (a retry reuses it) and shared
        # by its notification: its state decoded once
        items: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        notes: list[tuple[str, dict[str, Any]]] | None = None
        for attempt in range(_RETRIES):
            writes: list[tuple[str, list[tuple[str, dict[str, Any]]], int | None]] = []
            create: dict[str, dict[str, Any]] = {}
            keep: list[tuple[str, int | None]] = []
            for key, group in groups.items():
                sid = self._sid("aggregate", key)
                # (an originator never seen is most often a new aggregate: no read)
                last_seq, last_version = self._head(sid, "v", attempt == 0)
                first = group[0].originator_version
                if last_version is not None and first <= last_version:
                    raise IntegrityError(f"originator {key} has version {last_version}: "
                                         f"version {first} cannot follow it")
                made = items.get(key)
                if made is None:
                    made = items[key] = [(EVENT, {"v": s.originator_version, "topic": s.topic,
                                                  **_state(s.state, policy)}) for s in group]
                writes.append((sid, made, last_seq))
                create[sid] = {"eventsourcing": {"recorder": self.name, "originator_id": key}}
                keep.append((sid, group[-1].originator_version))
            if tracking is not None and track_sid is not None:
                last_seq, last_id = self._head(track_sid, "n")
                if last_id is not None and tracking.notification_id <= last_id:
                    raise IntegrityError(f"application {tracking.application_name!r} is "
                                         f"tracked at {last_id}: {tracking.notification_id} "
                                         "cannot follow it")
                writes.append((track_sid, [(TRACKING, {"n": tracking.notification_id})],
                               last_seq))
                create[track_sid] = {"eventsourcing": {
                    "recorder": self.name, "tracking": tracking.application_name}}
                keep.append((track_sid, tracking.notification_id))
            if self._LOGGED and stored_events:
                if notes is None:
                    at = {key: iter(made) for key, made in items.items()}
                    notes = [(NOTIFICATION, _noted(key, next(at[key])[1], s, policy))
                             for key, s in zip(keys, stored_events, strict=True)]
                writes.append((self.log_id, notes, None))
                create[self.log_id] = {"eventsourcing": {"recorder": self.name,
                                                         "application_sequence": True}}
            if not writes:
                return []
            try:
                # cached handles spare the store two look-ups per session
                handles = [(self._sessions.get(w[0], w[0]), w[1], w[2]) for w in writes]
                done = self.store._append_atomic(handles, create)
            except LogMovedError:
                for sid, _ in keep:  # another writer won: read those logs again
                    self._heads.pop(sid, None)
                continue
            written = [events for _, events in done]
            for session, _ in done:  # the next write and read of it need no look-up
                self._cache(session)
            for (sid, value), events in zip(keep, written, strict=False):
                self._keep(sid, (events[-1].seq, value))
            if self._LOGGED and stored_events:
                for listener in list(self._listeners):
                    listener.set()
                return written[-1]
            return []
        raise OperationalError(f"gave up after {_RETRIES} write conflicts in a row")

    def select_events(self, originator_id: uuid.UUID | str, *, gt: int | None = None,
                      lte: int | None = None, desc: bool = False,
                      limit: int | None = None) -> Sequence[StoredEvent]:
        """The originator's stored events with version above ``gt`` and up to
        ``lte``, in version order (``desc``: newest first), at most ``limit``."""
        key = self._key(originator_id)
        sid = self._sid("aggregate", key)
        session = self._session(sid)
        if session is None or (limit is not None and limit == 0):
            return []
        if limit is not None and limit < 0:
            limit = None
        if gt is None and lte is None:
            # the whole log, its tail or its start: one read, one head read
            read = (list(session.events(0)) if limit is None else session.tail(limit) if desc
                    else list(session.events(0, limit - 1)))
            if read and (desc or limit is None):
                # the read ended at the log's last event: the next insert's head
                self._note_head(sid, read[-1])
        else:
            last = session.last_seq
            if last < 0:
                return []
            lo, hi = 0, last
            versions = _Versions(session, last)
            if gt is not None:
                lo = versions.first_above(gt)
            if lte is not None:
                hi = versions.last_at_most(lte)
            if limit is not None:
                if desc:
                    lo = max(lo, hi - limit + 1)
                else:
                    hi = min(hi, lo + limit - 1)
            if lo > hi:
                return []
            read = list(session.events(lo, hi))
            if read and hi == last:
                self._note_head(sid, read[-1])
        oid = self._originator(key)
        events = [ev for ev in read if ev.type == EVENT]
        sid = session.id
        try:
            found = []
            for ev in events:
                data = ev.data
                text = data.get("state")   # (UTF-8 state: the usual one, encoded here)
                found.append(StoredEvent(
                    originator_id=oid, originator_version=data["v"], topic=data["topic"],
                    state=text.encode() if type(text) is str else _bytes(ev, sid)))
        except (KeyError, TypeError, AttributeError):
            _erased(sid, events, ("v", "topic"))
            raise
        if desc:
            found.reverse()
        return found


class TrajlogAggregateRecorder(TrajlogRecorder, AggregateRecorder):
    """Stored events by originator, each originator a trajlog session."""

    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """Write the events in one transaction (``IntegrityError``, nothing
        written, if a version is not above its originator's last one)."""
        self._write(stored_events, None)
        return None


class TrajlogApplicationRecorder(TrajlogAggregateRecorder, ApplicationRecorder):
    """The aggregate recorder plus the application sequence (one session
    whose seq + 1 is the notification id)."""

    _LOGGED = True

    def insert_events(self, stored_events: Sequence[StoredEvent],
                      **kwargs: Any) -> Sequence[int] | None:
        """Write the events and their notifications in one transaction;
        return the notification ids."""
        tracking = kwargs.get("tracking") if self._TRACKS else None
        return [ev.seq + 1 for ev in self._write(stored_events, tracking)]

    def select_notifications(self, start: int | None, limit: int, stop: int | None = None,
                             topics: Sequence[str] = (), *,
                             inclusive_of_start: bool = True) -> Sequence[Notification]:
        """Notifications from ``start`` (after it, unless ``inclusive_of_start``)
        up to ``stop``, of the ``topics`` (all if empty), at most ``limit``."""
        session = self._session(self.log_id)
        if session is None or limit <= 0:
            return []
        first = 1 if start is None else start if inclusive_of_start else start + 1
        first = max(first, 1)
        found: list[Notification] = []
        wanted = frozenset(topics)
        sid = session.id
        originator = self._originator if self.originator_id_type == "text" else _uuid_of
        # read in windows from ``first``: a page of the usual log (notifications
        # only, no topic filter) is one window of ``limit`` events, one head
        # read, and nothing past the page decoded
        lo, width = first - 1, limit
        while len(found) < limit:
            hi = lo + width - 1 if stop is None else min(lo + width, stop) - 1
            if lo > hi:
                break
            read = 0
            for ev in session.events(lo, hi):
                read += 1
                data = ev.data
                if ev.type != NOTIFICATION:
                    continue
                try:
                    topic = data["topic"]
                    if wanted and topic not in wanted:
                        continue
                    text = data.get("state")
                    found.append(Notification(
                        id=ev.seq + 1, originator_id=originator(data["originator_id"]),
                        originator_version=data["v"], topic=topic,
                        state=text.encode() if type(text) is str else _bytes(ev, sid)))
                except (KeyError, TypeError, AttributeError):
                    _erased(sid, [ev], ("topic", "originator_id", "v"))
                    raise
                if len(found) >= limit:
                    break
            if read < hi - lo + 1:
                break   # the log ends before ``hi``
            lo, width = hi + 1, width * 2
        return found

    def max_notification_id(self) -> int | None:
        """The last notification id (None before the first event)."""
        session = self._session(self.log_id)
        last = -1 if session is None else session.last_seq
        return None if last < 0 else last + 1

    def subscribe(self, gt: int | None = None,
                  topics: Sequence[str] = ()) -> TrajlogSubscription:
        """Notifications after ``gt``, then new ones as they are recorded."""
        return TrajlogSubscription(self, gt=gt, topics=topics)


class TrajlogSubscription(ListenNotifySubscription[TrajlogApplicationRecorder]):
    """Woken by this recorder's inserts at once, and every ``_POLL`` seconds
    for the writes of other recorders and processes (trajlog has no
    cross-process notification)."""

    def __init__(self, recorder: TrajlogApplicationRecorder, gt: int | None = None,
                 topics: Sequence[str] = ()) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        recorder._listeners.add(self._has_been_notified)
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._has_been_stopped:
            time.sleep(_POLL)
            self._has_been_notified.set()

    def stop(self) -> None:
        """Stop the subscription (and its poller)."""
        super().stop()
        self._recorder._listeners.discard(self._has_been_notified)


class TrajlogTrackingRecorder(TrajlogRecorder, TrackingRecorder):
    """Tracking records: a session per upstream application."""

    def insert_tracking(self, tracking: Tracking) -> None:
        """Record ``tracking`` (``IntegrityError`` unless its id is above the
        application's last one)."""
        self._write([], tracking)

    def max_tracking_id(self, application_name: str) -> int | None:
        """The last notification id tracked for ``application_name``."""
        session = self._session(self._sid("tracking", application_name))
        last = session.tail(1) if session is not None else []
        return (cast(int, _field(last[0], session.id, "n"))
                if last and session is not None else None)


class TrajlogProcessRecorder(TrajlogTrackingRecorder, TrajlogApplicationRecorder,
                             ProcessRecorder):
    """Events, their notifications and a tracking record, in one transaction."""

    _TRACKS = True


class TrajlogFactory(InfrastructureFactory[TrajlogTrackingRecorder]):
    """The infrastructure factory: ``PERSISTENCE_MODULE=trajlog.adapters.eventsourcing``.

    Environment: ``TRAJLOG_DBNAME`` (the store's path, required; ``:memory:``
    for a private one), ``TRAJLOG_DURABILITY`` (``full`` or ``normal``),
    ``ORIGINATOR_ID_TYPE`` (``uuid`` or ``text``)."""

    TRAJLOG_DBNAME = "TRAJLOG_DBNAME"
    TRAJLOG_DURABILITY = "TRAJLOG_DURABILITY"
    ORIGINATOR_ID_TYPE = "ORIGINATOR_ID_TYPE"

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        path = self.env.get(self.TRAJLOG_DBNAME)
        if not path:
            keys = ", ".join(self.env.create_keys(self.TRAJLOG_DBNAME))
            raise OSError(f"trajlog store path not found in environment with keys: {keys}")
        self.id_type = self.env.get(self.ORIGINATOR_ID_TYPE, "uuid") or "uuid"
        if self.id_type not in ("uuid", "text"):
            raise OSError(f"Invalid {self.ORIGINATOR_ID_TYPE} {self.id_type!r}, "
                          "must be 'uuid' or 'text'")
        self.store = open_store(path, self.env.get(self.TRAJLOG_DURABILITY, "full") or "full")

    def _topic(self, key: str, default: type[TrajlogRecorder]) -> type[Any]:
        topic = self.env.get(key)
        return resolve_topic(topic) if topic else default

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        """The recorder of ``purpose`` (``events``, ``snapshots``)."""
        return TrajlogAggregateRecorder(self.store, name=purpose,
                                        originator_id_type=self.id_type)

    def application_recorder(self) -> ApplicationRecorder:
        """The application recorder (its events are the ``events`` purpose's)."""
        cls = self._topic(self.APPLICATION_RECORDER_TOPIC, TrajlogApplicationRecorder)
        return cast(ApplicationRecorder, cls(self.store, originator_id_type=self.id_type))

    def tracking_recorder(self, tracking_recorder_class: type[TrajlogTrackingRecorder]
                          | None = None) -> TrajlogTrackingRecorder:
        """A tracking recorder (of ``tracking_recorder_class`` if given)."""
        cls = tracking_recorder_class or self._topic(self.TRACKING_RECORDER_TOPIC,
                                                     TrajlogTrackingRecorder)
        return cast(TrajlogTrackingRecorder, cls(self.store, originator_id_type=self.id_type))

    def process_recorder(self) -> ProcessRecorder:
        """The process recorder."""
        cls = self._topic(self.PROCESS_RECORDER_TOPIC, TrajlogProcessRecorder)
        return cast(ProcessRecorder, cls(self.store, originator_id_type=self.id_type))

    def close(self) -> None:
        """Close the store."""
        self.store.close()


Factory = TrajlogFactory

__all__ = [
    "EVENT",
    "NAMESPACE",
    "NOTIFICATION",
    "TRACKING",
    "Factory",
    "TrajlogAggregateRecorder",
    "TrajlogApplicationRecorder",
    "TrajlogFactory",
    "TrajlogProcessRecorder",
    "TrajlogRecorder",
    "TrajlogSubscription",
    "TrajlogTrackingRecorder",
]
