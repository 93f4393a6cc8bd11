"""Every exception trajlog raises, and the one function that builds codec errors.

The kernels (C and pure Python) return status codes and never raise for bad
data; :func:`error_for` turns a status into an exception through one table, so
the type and the message of an error cannot depend on the kernel.  Errors carry
where they happened (``offset``, ``seq``, ``session``) as attributes and in
their message, e.g. ``payload checksum mismatch in frame seq=17 at offset 4096
(session 1b4e28ba)``.
"""

from __future__ import annotations

from ._format import MESSAGES, Status


class TrajlogError(Exception):
    """Base class of everything this package raises on purpose."""


class InvalidArgumentError(TrajlogError, ValueError):
    """An argument has an acceptable type but an unacceptable value."""


class ArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of a type the call does not take (the message names it);
    a ``TypeError`` as well as an :class:`InvalidArgumentError`."""


class PayloadTooLargeError(InvalidArgumentError):
    """A payload or its decompressed size is over the format's limit."""


class BackendUnavailableError(TrajlogError, ImportError):
    """The requested kernel cannot be loaded (e.g. the C core was not built)."""


class FormatError(TrajlogError, ValueError):
    """Bytes that are not a valid trajlog log.

    Attributes give the location: ``status`` (a :class:`~trajlog.codec.Status`),
    ``offset`` (byte offset of the failing frame), ``seq`` (the seq that frame
    should have carried), ``session`` (id, when known) and ``reason``.
    """

    status: Status
    offset: int | None
    seq: int | None
    session: str | None
    reason: str

    def __init__(self, status: int, reason: str, *, offset: int | None = None,
                 seq: int | None = None, session: str | None = None) -> None:
        self.status = Status(status)
        self.reason = reason
        self.offset = offset
        self.seq = seq
        self.session = session
        where = []
        if seq is not None:
            where.append(f"frame seq={seq}")
        if offset is not None:
            where.append(f"at offset {offset}")
        text = reason + (" in " + " ".join(where) if where else "")
        if session is not None:
            text += f" (session {session})"
        super().__init__(text)


class ImportFormatError(TrajlogError, ValueError):
    """A file handed to an importer is not what its format says: a line that
    does not parse, a record of the wrong shape, a truncated document, or a
    trajlog export that fails its checks.

    Attributes: ``file``, ``line`` (1-based, None for a whole-document format),
    ``offset`` (byte offset of the bad record or of the point where parsing
    failed), ``reason``, ``valid`` -- how many records before it were
    valid (nothing of the session they belong to was written) -- and
    ``torn``: the file ends inside its very first record (a write cut off
    before anything usable), not damage.
    """

    file: str
    line: int | None
    offset: int | None
    reason: str
    valid: int
    torn: bool

    def __init__(self, file: str, reason: str, *, line: int | None = None,
                 offset: int | None = None, valid: int = 0, torn: bool = False) -> None:
        self.file, self.line, self.offset, self.reason, self.valid, self.torn = (
            str(file), line, offset, reason, valid, torn)
        where = [str(file)]
        if line is not None:
            where.append(f"line {line}")
        if offset is not None:
            where.append(f"byte {offset}")
        super().__init__(f"{', '.join(where)}: {reason} ({valid} valid record"
                         f"{'' if valid == 1 else 's'} before it)")


class TornTailError(FormatError):
    """The log ends in an incomplete write above its durable watermark.

    Raised only when the caller asked for strict reading; by default a torn
    tail is reported (``ScanReport.verdict == "torn"``) and dropped.
    """


class CorruptionError(FormatError):
    """A defect inside data that was acknowledged as durable: refuse, never repair."""


class ChecksumError(CorruptionError):
    """A complete frame whose magic, header check or payload check is wrong."""


class ChainError(CorruptionError):
    """A frame that does not follow the previous one (dropped, swapped, spliced)."""


class SequenceError(CorruptionError):
    """A frame whose seq is not the expected next one (gap, duplicate, regression)."""


class UnsupportedFormatError(FormatError):
    """A frame type or flag from a newer format version than this reader's."""


class SerializationError(InvalidArgumentError):
    """Event data that is not JSON-compatible: a value of another type, a
    non-string key, NaN or an infinity, a lone surrogate, an integer outside
    64 bits, or nesting deeper than the limit.  ``path`` says where."""

    def __init__(self, message: str, path: str = "$") -> None:
        self.path = path
        super().__init__(f"{message} at {path}")


class ValidationError(InvalidArgumentError):
    """An event of a known type whose shape or place in the log is wrong, e.g.
    a ``tool/result`` for a call that never started."""


class InvalidStateError(TrajlogError):
    """An operation that the session's current state does not allow, e.g. a
    turn opened inside another turn."""


class ImportConflictError(InvalidStateError):
    """An import would change a session the store already holds under the same
    id with different events (nothing was written)."""


class ForkUnavailableError(InvalidStateError):
    """The turn to cut a fork at is still open (no ``turn/end`` yet)."""


class DelegationLimitError(InvalidStateError):
    """A subagent would be deeper than the store's delegation limit."""


class ContextBudgetError(TrajlogError):
    """The core of a context (task contract, human decisions, summary) does not
    fit the policy's budget; the builder refuses rather than drop core facts."""


class StoreError(TrajlogError):
    """Storage failed; the underlying apsw exception, if any, is ``__cause__``."""


class StoreDamagedError(StoreError):
    """SQLite found the database file itself damaged (a malformed page, a
    file that is not a database): nothing trajlog wrote can be read there."""


class StoreClosedError(StoreError):
    """The store (or session handle) was closed."""


class StoreBusyError(StoreError):
    """The database stayed locked by another connection past the lock timeout,
    or refused a transaction that may succeed if run again: retryable."""


class HeadMovedError(StoreBusyError):
    """An append did not start at its session's next seq: another writer moved
    the head since this one read it.  Nothing was written; the writer refreshes
    that one session and tries again.  Carries ``sid`` (the backend's key)."""

    def __init__(self, message: str, *, sid: int | None = None) -> None:
        self.sid = sid
        super().__init__(message)


class TransactionConflictError(StoreBusyError):
    """The database ended a transaction to break a deadlock or a serialization
    conflict with another one; nothing of it was written, and running it
    again may succeed (group commit does, a bounded number of times)."""


class SchemaError(StoreError):
    """The database file is not a trajlog store this version can open (unknown
    schema version, failed pragma read-back, SQLite too old)."""


class MigrationError(SchemaError):
    """A store could not be brought to this version's schema; nothing was
    changed (the migration was abandoned).  ``session`` names the session
    that failed, when one did."""

    def __init__(self, message: str, *, session: str | None) -> None:
        self.session = session
        super().__init__(message)


class SessionNotFoundError(StoreError, KeyError):
    """No session with that id in this store."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "session not found"


class LeaseHeldError(StoreError):
    """Another live writer holds the session's writer lease."""


class HeadMismatchError(CorruptionError):
    """The session head (the durable watermark) and the stored log disagree:
    rows are missing at the end, or exist beyond the head, or the chain does
    not reach the head's chain."""


class LiveWriterError(LeaseHeldError):
    """Recovery refused: the session's writer is still live and its log is
    open (a turn, a step or a tool call).  Carries ``session``, ``seq`` (the
    open turn's start, or the last seq), ``offset`` (None) and ``reason``."""

    def __init__(self, reason: str, *, session: str, seq: int | None) -> None:
        self.reason = reason
        self.session = session
        self.seq = seq
        self.offset: int | None = None
        super().__init__(f"{reason} (session {session}, seq {seq})")


class UnbalancedLogError(InvalidStateError):
    """Recovery refused: the log's turn and step markers do not nest (a
    ``turn/start`` inside an open turn, a step outside a turn, an end without
    its start -- written by a foreign writer or an older trajlog), so what is
    open cannot be told and nothing is appended.  The events stay readable.
    Carries ``session``, ``seq`` (the first such marker), ``offset`` (None)
    and ``reason``."""

    def __init__(self, reason: str, *, session: str, seq: int | None) -> None:
        self.reason = reason
        self.session = session
        self.seq = seq
        self.offset: int | None = None
        super().__init__(f"{reason} (session {session}, seq {seq})")


class IdempotencyConflictError(InvalidArgumentError):
    """An idempotency key reused for a different event."""


class LogMovedError(InvalidStateError):
    """A write that expected the log to end at a given seq found that another
    writer moved it (recovery then analyses the log again)."""


class MemoryAccessError(TrajlogError):
    """A memory read or write outside the identity's scopes: another tenant's
    item, another user's or another session's, or a scope the identity does
    not name.  Never "best effort": the item is not returned."""


class MemoryNotFoundError(TrajlogError, KeyError):
    """No memory item with that id in this store."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "memory item not found"


class GlobalScopeReadOnlyError(MemoryAccessError):
    """A run-time write to global scope (written at deploy time only)."""


class PromotionRefusedError(InvalidStateError):
    """A write or promotion that a memory gate refuses; ``rule`` names the
    gate (e.g. ``"instruction-poisoning"``) and the message says why."""

    rule = "gate"

    def __init__(self, message: str) -> None:
        super().__init__(f"{message} [{self.rule}]")


class InstructionPoisoningError(PromotionRefusedError):
    """Content from user messages or tool output would become policy."""

    rule = "instruction-poisoning"


class PrecedentPoisoningError(PromotionRefusedError):
    """An episode (one exception, one case) would become policy, or reach
    tenant scope without an approval."""

    rule = "precedent-poisoning"


class CrossScopeError(PromotionRefusedError):
    """An item would lift itself across scopes (user to tenant, tenant or
    anything to global)."""

    rule = "cross-scope-contamination"


class UnverifiedFactError(PromotionRefusedError):
    """A fact would reach tenant scope without verification evidence (a human
    approval, a record system, or independent corroboration)."""

    rule = "unverified-fact"


class MemoryStateError(InvalidStateError):
    """A state change the item's state does not allow (e.g. restoring an item
    that is not quarantined, changing a revoked one)."""


class ErasureError(InvalidStateError):
    """An erasure that cannot be done (an event the log does not hold, a
    structural marker whose removal would unbalance the log)."""


class ErasedEventError(ErasureError):
    """A reader needs the payload of an event that was erased (an adapter
    that rebuilds state from it: an eventsourcing aggregate, its
    notifications).  Carries ``session`` and ``seq``."""

    def __init__(self, session: str, seq: int, what: str) -> None:
        self.session, self.seq = session, seq
        super().__init__(f"seq {seq} of session {session} was erased: {what}")


class SessionDeletedError(StoreError):
    """The session was deleted (:meth:`trajlog.Store.delete_session`): its
    id is kept only as the record of the deletion, and no append, import,
    fork or adapter write brings it back.  Carries ``session``, ``actor``,
    ``reason`` and ``deleted_ms`` (None where the refusal came from the
    database's own guard, which knows only the session)."""

    def __init__(self, message: str, *, session: str | None = None, actor: str | None = None,
                 reason: str | None = None, deleted_ms: int | None = None) -> None:
        self.session, self.actor, self.reason, self.deleted_ms = (session, actor, reason,
                                                                   deleted_ms)
        super().__init__(message)


class DependentSessionsError(InvalidStateError):
    """A deletion refused: other sessions depend on this one (forks whose
    inherited prefix is its log, subagents it spawned).  ``dependents`` names
    them; delete them first."""

    def __init__(self, session: str, dependents: list[str]) -> None:
        self.session, self.dependents = session, list(dependents)
        super().__init__(f"session {session} has {len(dependents)} live dependent "
                         f"session(s) ({', '.join(dependents)}): delete them first")


class RedactionRefusedError(InvalidArgumentError):
    """A payload holds a finding whose kind the redaction policy refuses:
    nothing was written.  Carries ``event_type`` (the event's type, or
    ``memory/<type>`` for a memory item), ``path`` (the JSON path of the
    string) and ``kind`` -- never the matched text."""

    def __init__(self, event_type: str, path: str, kind: str) -> None:
        self.event_type, self.path, self.kind = event_type, path, kind
        super().__init__(f"{event_type} holds a {kind} at {path}: the redaction policy "
                         "refuses it (nothing was written)")


class UnredactableValueError(RedactionRefusedError):
    """A payload holds a finding inside a value the writer cannot open (an
    adapter's serialized value in a format it cannot decode): masking the
    span there would corrupt the value, so nothing was written.  Carries
    ``event_type``, ``path`` and ``kind`` like :class:`RedactionRefusedError`
    and ``format`` (the value's format)."""

    def __init__(self, event_type: str, path: str, kind: str, format: str) -> None:
        super().__init__(event_type, path, kind)
        self.format = format
        self.args = (f"{event_type} holds a {kind} at {path}, inside a {format!r} value "
                     "that cannot be redacted without corrupting it (nothing was written)",)


class RedactionPausedError(InvalidStateError):
    """The session is paused by the redaction policy (a ``hash`` finding
    appended ``redaction/paused``): only closing markers, audit and
    ``redaction/*`` events are taken until a ``redaction/resumed``.
    Carries ``session``, ``seq`` (where the refused event would have gone)
    and ``event_type``."""

    def __init__(self, session: str, seq: int, event_type: str) -> None:
        self.session, self.seq, self.event_type = session, seq, event_type
        super().__init__(f"session {session} is paused by the redaction policy: "
                         f"{event_type} refused at seq {seq} (append redaction/resumed "
                         "to go on)")


class SessionClosedError(InvalidStateError):
    """The session was closed (its log holds ``session/closed``): it takes no
    more events.  Closing is final; fork it to go on from it.  Carries
    ``session``, ``seq`` (where the refused event would have gone),
    ``event_type`` and ``closed_at`` (the seq of its ``session/closed``)."""

    def __init__(self, session: str, seq: int, event_type: str, closed_at: int) -> None:
        self.session, self.seq, self.event_type = session, seq, event_type
        self.closed_at = closed_at
        super().__init__(f"session {session} was closed at seq {closed_at}: {event_type} "
                         f"refused at seq {seq} (fork it to go on)")


class RetentionRulesError(InvalidArgumentError):
    """Store retention rules that do not hold together; says which rule
    (``rule``: its kind, or None for the rules as a whole) and why."""

    def __init__(self, rule: str | None, why: str) -> None:
        self.rule = rule
        super().__init__(f"retention rule {rule!r}: {why}" if rule is not None
                         else f"retention rules: {why}")


class StoredRetentionRulesError(RetentionRulesError):
    """The retention rules stored in a store (its global ``policy`` item
    under the reserved key) do not read as rules: ``item`` and ``version``
    say which stored version, ``rule`` which rule (None: the value as a
    whole)."""

    def __init__(self, item: str, version: int, rule: str | None, why: str) -> None:
        self.item = item
        self.version = version
        super().__init__(rule, f"{why} (stored in memory item {item} version {version})")


class ReplayError(InvalidArgumentError):
    """A run that cannot be replayed: no such run in the session, or it
    recorded nothing a model input can be rebuilt from (no
    ``context/injection`` answered by an ``assistant/message``).  Carries
    ``session``, ``run_id`` and ``seq`` (where the log says so, or None)."""

    def __init__(self, session: str, run_id: str, seq: int | None, why: str) -> None:
        self.session, self.run_id, self.seq = session, run_id, seq
        where = f" at seq {seq}" if seq is not None else ""
        super().__init__(f"run {run_id} of session {session}{where}: {why}")



class BranchError(InvalidArgumentError):
    """A branch operation refused, nothing written (the message names session, branch, seq)."""

class BranchNotFoundError(BranchError):
    """No ``branch/started`` names the branch."""

class BranchPointError(BranchError):
    """A start or rebase point that is no earlier main-line event, or does not advance."""

class BranchStateError(BranchError):
    """The branch is merged, abandoned (it takes nothing more) or already started."""

class MergeGateError(BranchError):
    """A merge whose status its gate does not give, or whose lists are malformed."""

# The table: what a status means on its own.  error_for() may escalate a
# torn-looking status to CorruptionError when the watermark says so.
_CLASSES: dict[Status, type[TrajlogError]] = {
    Status.TRUNCATED: TornTailError,
    Status.ZERO_TAIL: TornTailError,
    Status.BAD_MAGIC: ChecksumError,
    Status.BAD_HEADER: ChecksumError,
    Status.BAD_PAYLOAD: ChecksumError,
    Status.BAD_CHAIN: ChainError,
    Status.SEQ_MISMATCH: SequenceError,
    Status.BAD_FIELD: CorruptionError,
    Status.BAD_PADDING: CorruptionError,
    Status.UNSUPPORTED: UnsupportedFormatError,
    Status.TOO_LARGE: PayloadTooLargeError,
    Status.BUFFER_TOO_SMALL: InvalidArgumentError,
    Status.INVALID_ARG: InvalidArgumentError,
    Status.NOT_JSON: SerializationError,
}


def error_for(status: int, *, reason: str | None = None, offset: int | None = None,
              seq: int | None = None, session: str | None = None,
              corrupt: bool = False) -> TrajlogError:
    """Build the exception for a failing kernel status.

    ``corrupt=True`` marks a defect that classification placed at or below the
    durable watermark (or before a later valid frame): a torn-looking status
    then becomes :class:`CorruptionError`, because acknowledged data is gone.
    ``reason`` overrides the status's standard sentence.
    """
    st = Status(status)
    if st in (Status.OK, Status.END, Status.MORE):
        raise ValueError(f"status {st.name} is not an error")
    cls = _CLASSES[st]
    text = reason or MESSAGES[st]
    if corrupt and not issubclass(cls, (CorruptionError, UnsupportedFormatError)):
        cls = CorruptionError
    if issubclass(cls, FormatError):
        return cls(st, text, offset=offset, seq=seq, session=session)
    return cls(text)


def head_mismatch(status: int, reason: str, *, seq: int | None, session: str | None,
                  offset: int | None = None) -> HeadMismatchError:
    """The session head and the stored log disagree (see :class:`HeadMismatchError`)."""
    return HeadMismatchError(status, reason, offset=offset, seq=seq, session=session)


def header_mismatch(session: str, reason: str = "check mismatch") -> CorruptionError:
    """A session header whose stored check does not match its fields (or
    whose metadata does not decode)."""
    return CorruptionError(Status.BAD_HEADER, f"session header: {reason}", session=session)


def index_mismatch(session: str, seq: int, reason: str) -> CorruptionError:
    """An index row (a copy, never the authority) that disagrees with the
    frame it names: found when a decision would have used it."""
    return CorruptionError(Status.BAD_FIELD, f"the index row of seq {seq} differs from its "
                           f"frame: {reason}", seq=seq, session=session)


def orphaned_rows(path: str, what: str) -> CorruptionError:
    """Rows of a store that belong to no session header (found at open)."""
    return CorruptionError(Status.BAD_HEADER, f"{path!r}: {what} (a header deleted or moved "
                           "outside trajlog); the store is refused, so that no acknowledged "
                           "event is silently unlisted")


def row_damaged(path: str, table: str, sid: int | None, reason: str) -> CorruptionError:
    """A stored row whose values SQLite returns but trajlog cannot have
    written (a type changed, text that is not UTF-8, marks that do not
    decode): damage to the file, named by store, table and session."""
    whose = "" if sid is None else f" of internal session {sid}"
    return CorruptionError(Status.BAD_FIELD, f"{path!r}: a row of {table}{whose} is damaged: "
                           f"{reason}")


def record_damaged(reason: str, *, status: int = Status.BAD_FIELD, session: str | None = None,
                   seq: int | None = None) -> CorruptionError:
    """A memory version, a tombstone or an erased row that does not verify
    (or does not keep an erasure's promise): the reason names which."""
    return CorruptionError(status, reason, seq=seq, session=session)


def session_deleted(session: str, reason: str, actor: str | None,
                    deleted_ms: int) -> SessionDeletedError:
    """What reading, writing or importing a deleted session raises."""
    return SessionDeletedError(f"session {session} was deleted by {actor or 'an unnamed actor'} "
                               f"at {deleted_ms} ms since the epoch ({reason}); only the record "
                               "of its deletion remains", session=session, actor=actor,
                               reason=reason, deleted_ms=deleted_ms)


def repack_refused(session: str | None, seq: int, reason: str) -> CorruptionError:
    """A repack that would not keep every frame byte for byte: nothing written."""
    return CorruptionError(Status.BAD_FIELD, f"repack refused: {reason}", seq=seq,
                           session=session)


def unexpected(exc: Exception) -> TrajlogError:
    """A write failure as its caller sees it: trajlog errors as they are, an
    unexpected one wrapped in :class:`StoreError` (the cause kept)."""
    if isinstance(exc, TrajlogError):
        return exc
    wrapped = StoreError(f"the write failed: {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped


__all__ = ["ArgumentTypeError", "BackendUnavailableError", "BranchError", "BranchNotFoundError",
           "BranchPointError", "BranchStateError", "ChainError", "ChecksumError", "CorruptionError",
           "CrossScopeError", "DelegationLimitError", "DependentSessionsError", "ErasedEventError",
           "ErasureError", "ForkUnavailableError", "FormatError", "GlobalScopeReadOnlyError",
           "HeadMismatchError", "HeadMovedError", "IdempotencyConflictError", "ImportConflictError",
           "ImportFormatError", "InstructionPoisoningError", "InvalidArgumentError",
           "InvalidStateError", "LeaseHeldError", "LiveWriterError", "LogMovedError",
           "MemoryAccessError", "MemoryNotFoundError", "MemoryStateError", "MergeGateError",
           "MigrationError", "PayloadTooLargeError", "PrecedentPoisoningError",
           "PromotionRefusedError", "RedactionPausedError", "RedactionRefusedError", "ReplayError",
           "RetentionRulesError", "SchemaError", "SequenceError", "SerializationError",
           "SessionClosedError", "SessionDeletedError", "SessionNotFoundError", "StoreBusyError",
           "StoreClosedError", "StoreDamagedError", "StoreError", "StoredRetentionRulesError",
           "TornTailError", "TrajlogError", "TransactionConflictError", "UnbalancedLogError",
           "UnredactableValueError", "UnsupportedFormatError", "UnverifiedFactError",
           "ValidationError", "error_for", "head_mismatch", "header_mismatch", "index_mismatch",
           "orphaned_rows", "record_damaged", "repack_refused", "row_damaged", "session_deleted",
           "unexpected"]
