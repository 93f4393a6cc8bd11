"""Events: the immutable value callers get back, and the payload of an EVENT frame.

Event payload v1 (the bytes inside an EVENT frame, before optional zstd) is a
MessagePack array, in this order, with trailing unset fields left out:

    [type, time, data, source, causal_parent, workspace_revision,
     data_class, idempotency_key, supersedes, branch_id, schema_version]

(``supersedes``, ``branch_id`` and ``schema_version`` came later, as trailing
fields: a payload written before them is a prefix of this layout and decodes
unchanged.  ``schema_version`` is written only for a type whose registry
version is above 1 -- absent means 1 -- so a version-1 event costs no byte:
docs/event-schemas.md.)

The seq is not in the payload: it is the frame's, and it seeds the payload
check, so a payload moved to another seq fails verification.  Keeping it out
lets a payload be serialized and compressed before its seq is known, outside
the write lock.

``data`` is JSON-compatible: ``None``, ``bool``, 64-bit ``int``, finite
``float``, ``str``, lists and string-keyed dicts, nested at most
:data:`MAX_DEPTH` deep.  MessagePack rather than JSON because msgspec's
MessagePack codec measured fastest of orjson, msgspec-JSON and
msgspec-MessagePack on the benchmark workload (encode 1.2 M/s vs 0.26 M/s for
orjson; decode 0.38 M/s vs 0.21 M/s; 6 % smaller) -- see benchmarks/README.md.
MessagePack would also carry bytes, integer keys or NaN, so the data is checked
against the JSON rules before it is encoded, with the path of the first
offending value in the error.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NoReturn

import msgspec

from .errors import SerializationError, ValidationError
from .event_types import SHAPES, TYPE_RE, VERSIONS

MAX_DEPTH = 64
DATA_CLASSES = ("public", "internal", "internal-redacted", "restricted")
_TYPE_RE = TYPE_RE
MAX_TYPE_LEN = 128


class Event(msgspec.Struct, frozen=True, array_like=True, omit_defaults=True, gc=False):
    """One event of a session's log: ``seq``, ``type``, ``time`` (epoch ms),
    ``data`` and the envelope (``source`` ... ``schema_version``, ``None`` when
    not given: see :data:`ENVELOPE_FIELDS`).  Immutable: no field can be reassigned.

    ``data`` is decoded afresh for every event handed out, so it belongs to
    the caller: changing it changes nothing in the store or in any other
    Event.  (``seq`` is the last field only so that the payload encoding,
    which leaves it out, stays a prefix of the struct.)
    """

    type: str
    time: int
    data: Any
    source: str | None = None
    causal_parent: int | None = None
    workspace_revision: str | None = None
    data_class: str | None = None
    idempotency_key: str | None = None
    supersedes: int | None = None
    branch_id: str | None = None
    schema_version: int | None = None
    seq: int = -1

    @property
    def envelope(self) -> dict[str, Any]:
        """The envelope fields that are set."""
        return envelope_of(self)


def envelope_of(event: Any) -> dict[str, Any]:
    """The envelope fields of an event (or a lazy one) that are set."""
    return {k: v for k in ENVELOPE_FIELDS if (v := getattr(event, k)) is not None}


# The envelope: optional metadata beside an event's data, in the payload's
# order.  Every list of envelope fields in trajlog is this one.  ``supersedes``:
# the seq of an earlier event whose fact this one replaces; ``branch_id``: the
# branch (approach) the event belongs to, so that facts of different
# approaches do not mix (FORMAT.md, "Event payload"); ``schema_version``: the
# version of its type's schema the event was written under, when above 1.
ENVELOPE_FIELDS = ("source", "causal_parent", "workspace_revision", "data_class",
                   "idempotency_key", "supersedes", "branch_id", "schema_version")
_N_FIELDS = 3 + len(ENVELOPE_FIELDS)


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is read-only (it is shared with trajlog's "
                    "cache): copy.deepcopy() it, or dict() / list() a level, to change it")


class FrozenDict(dict[str, Any]):
    """A read-only JSON object: a ``dict`` (equal to one, serialised as one)
    whose changing methods raise ``TypeError``.  What a cached view hands out
    (see :func:`freeze`); ``copy.copy`` / ``copy.deepcopy`` / pickling give
    a plain, mutable ``dict``."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return _PLAIN_DECODER.decode(_ENCODER.encode(self))  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A read-only JSON array: a ``list`` whose changing methods raise
    ``TypeError`` (see :class:`FrozenDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return _PLAIN_DECODER.decode(_ENCODER.encode(self))  # type: ignore[no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_set_item, _set_index = dict.__setitem__, list.__setitem__


def freeze(value: Any) -> Any:
    """``value`` (a decoded JSON value, not shared) with every dict and list
    in it read-only (:class:`FrozenDict`, :class:`FrozenList`): the form in
    which a cached value is handed out to many callers.  A scalar is itself;
    the cost is one shallow copy per container."""
    t = type(value)
    if t is dict:
        out = FrozenDict(value)
        for k, v in value.items():
            tv = type(v)
            if tv is dict or tv is list:
                _set_item(out, k, freeze(v))
        return out
    if t is list:
        items = FrozenList(value)
        for i, v in enumerate(value):
            tv = type(v)
            if tv is dict or tv is list:
                _set_index(items, i, freeze(v))
        return items
    return value


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The immutable header of a session, written once at creation (its
    ``metadata`` read-only all the way down)."""

    id: str
    cwd: str
    parent_session: str | None
    seed_length: int
    origin: str | None
    delegation_depth: int
    agent_preset: str | None
    created_at: int
    metadata: Mapping[str, Any]
    #: None for a header that passed its check; otherwise what is wrong with
    #: it (its fields are then as stored, untrusted; reads and appends refuse).
    damage: str | None = None

    def __post_init__(self) -> None:
        # a header is handed out by every handle and listing: nothing in it may change
        metadata = self.metadata
        if isinstance(metadata, Mapping) and (type(metadata) is not MappingProxyType or any(
                type(v) is dict or type(v) is list for v in metadata.values())):
            object.__setattr__(self, "metadata", MappingProxyType(
                {k: freeze(v) for k, v in metadata.items()}))


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(Event)
_PLAIN_DECODER = msgspec.msgpack.Decoder()
_set = msgspec.structs.force_setattr


def encode_event(event: Event) -> bytes:
    """The event payload v1 bytes (uncompressed), without the seq."""
    fields = [event.type, event.time, event.data, event.source, event.causal_parent,
              event.workspace_revision, event.data_class, event.idempotency_key,
              event.supersedes, event.branch_id, event.schema_version]
    n = _N_FIELDS
    while n > 3 and fields[n - 1] is None:
        n -= 1
    return _ENCODER.encode(fields[:n] if n < _N_FIELDS else fields)


def decode_event(payload: Any, seq: int) -> Event:
    """Decode event payload v1 bytes into an :class:`Event` at ``seq``."""
    event = _DECODER.decode(payload)
    _set(event, "seq", seq)
    return event


_UNSET: Any = msgspec.UNSET


class LazyEvent(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An :class:`Event` whose ``data`` is decoded on first access (then kept).

    Same fields, same immutability; what ``events(lazy=True)`` yields.  It
    holds the verified payload bytes until ``data`` is read, so it stays valid
    after the iteration has moved on.  ``event()`` gives the plain Event."""

    type: str
    time: int
    raw: msgspec.Raw
    source: str | None = None
    causal_parent: int | None = None
    workspace_revision: str | None = None
    data_class: str | None = None
    idempotency_key: str | None = None
    supersedes: int | None = None
    branch_id: str | None = None
    schema_version: int | None = None
    seq: int = -1
    decoded: Any = _UNSET

    @property
    def data(self) -> Any:
        value = self.decoded
        if value is _UNSET:
            value = _DATA_DECODER.decode(self.raw)
            _set(self, "decoded", value)
        return value

    @property
    def envelope(self) -> dict[str, Any]:
        """The envelope fields that are set."""
        return envelope_of(self)

    def event(self) -> Event:
        return Event(self.type, self.time, self.data, self.source, self.causal_parent,
                     self.workspace_revision, self.data_class, self.idempotency_key,
                     self.supersedes, self.branch_id, self.schema_version, self.seq)


_LAZY_DECODER = msgspec.msgpack.Decoder(LazyEvent)
_DATA_DECODER = msgspec.msgpack.Decoder()


def decode_lazy(payload: Any, seq: int) -> LazyEvent:
    """Decode event payload v1 bytes into a :class:`LazyEvent` at ``seq``."""
    event = _LAZY_DECODER.decode(payload)
    _set(event, "seq", seq)
    return event


class _TypeOnly(msgspec.Struct, array_like=True, gc=False):
    """The first element of an event payload; msgspec skips the rest in C."""

    type: str


_TYPE_DECODER = msgspec.msgpack.Decoder(_TypeOnly)


def peek_type(payload: Any) -> str | None:
    """The type of an event payload v1 without building its data (a third of
    the cost of a full decode); None when the bytes do not decode -- the caller
    then decodes the whole payload, and the error surfaces there."""
    try:
        return _TYPE_DECODER.decode(payload).type
    except msgspec.DecodeError:
        return None


def with_seq(event: Event, seq: int) -> Event:
    """Give a freshly built, not yet shared event its seq."""
    _set(event, "seq", seq)
    return event


def now_ms() -> int:
    """The clock events are stamped with: epoch milliseconds."""
    return time.time_ns() // 1_000_000


def check_json(value: Any, path: str = "$") -> Any:
    """Raise :class:`SerializationError` unless ``value`` is JSON-compatible;
    return what to store.

    That is ``value`` itself when it is made of the built-in types only.  A
    value holding subclasses (``OrderedDict``, ``IntEnum``, a dict whose
    ``keys()`` or ``__iter__`` lie) is replaced by a plain copy of what the
    encoder would really write -- its stored contents, not what its methods
    say -- and that copy is checked: no bytes, NaN or int key gets past the
    check through an overridden method, and no caller code runs later, under
    the write lock."""
    try:
        _check(value, 0)
        return value
    except _NotPlain:
        pass
    except _Bad as bad:
        raise SerializationError(bad.message, path + "".join(reversed(bad.path))) from None
    try:
        # first the shape: only JSON types and their subclasses, not too deep
        # (a cycle is), since the encoder would also take a set, a UUID or a
        # dataclass beside the subclass, and recurse into a cycle
        _check_shape(value, 0)
    except _Bad as bad:
        raise SerializationError(bad.message, path + "".join(reversed(bad.path))) from None
    try:
        plain = _PLAIN_DECODER.decode(_ENCODER.encode(value))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.DecodeError) as exc:
        raise SerializationError(f"not JSON-compatible: {exc}", path) from None
    try:
        _check(plain, 0)
    except _Bad as bad:
        raise SerializationError(bad.message, path + "".join(reversed(bad.path))) from None
    except _NotPlain:  # pragma: no cover - a decoded value is built-in types only
        raise SerializationError("not JSON-compatible", path) from None
    return plain


def check_text(value: str, path: str) -> None:
    """Raise :class:`SerializationError` unless ``value`` is storable text
    (UTF-8: no lone surrogate)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SerializationError(f"{exc.reason} at character {exc.start}", path) from None


def plain_str(value: str) -> str:
    """An exact ``str`` with the characters of ``value`` (a subclass's
    methods are never called again)."""
    return value if type(value) is str else str.__getitem__(value, slice(None))


class _NotPlain(Exception):
    """Internal: a subclass of a JSON type was met (see :func:`check_json`)."""


class _Bad(Exception):
    """Internal: the first offending value; the path is built while unwinding,
    so the common, valid case never formats a path."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.path: list[str] = []


def _check(value: Any, depth: int) -> None:
    t = type(value)
    if t is str or t is bool or value is None:
        return
    if t is int:
        if -(2**63) <= value < 2**64:
            return
        raise _Bad("integer does not fit in 64 bits")
    if t is float:
        if value - value == 0.0:  # false for NaN and the infinities
            return
        raise _Bad(f"{value!r} is not valid JSON (NaN and infinities are not)")
    if depth >= MAX_DEPTH:
        raise _Bad(f"nesting deeper than {MAX_DEPTH}")
    if t is dict:
        for k, v in value.items():
            if type(k) is not str:
                if isinstance(k, str):
                    raise _NotPlain
                raise _Bad(f"dict key {k!r} is not a str")
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            try:
                _check(v, depth + 1)
            except _Bad as bad:
                bad.path.append(f".{k}")
                raise
        return
    if t is list or t is tuple:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            try:
                _check(v, depth + 1)
            except _Bad as bad:
                bad.path.append(f"[{i}]")
                raise
        return
    if isinstance(value, (str, int, float, dict, list, tuple)):
        # subclasses (IntEnum, OrderedDict, ...): check_json copies them
        raise _NotPlain
    raise _Bad(f"{type(value).__name__} is not JSON-compatible")


# check_json's walk alone, for a loop over many values: ``walk_json(value, 0)``
# returns when ``value`` is made of the built-in JSON types only (check_json
# would return it as is) and raises one of NOT_WALKED otherwise -- then
# check_json(value) gives what to store, or the precise error.  (Any other
# error is the value's own -- a subclass's ``__class__`` that raises -- and
# check_json would raise it too.)
walk_json = _check
NOT_WALKED = (_NotPlain, _Bad)


def _check_shape(value: Any, depth: int) -> None:
    """Like :func:`_check`, but a subclass of a JSON type is taken, and its
    stored contents are walked (``dict.items``, ``list.__iter__``: never its
    own methods) -- what the encoder will write."""
    if isinstance(value, (str, int, float)) or value is None:
        return
    if depth >= MAX_DEPTH:
        raise _Bad(f"nesting deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        for k, v in dict.items(value):
            if not isinstance(k, str):
                raise _Bad(f"dict key {k!r} is not a str")
            try:
                _check_shape(v, depth + 1)
            except _Bad as bad:
                bad.path.append(f".{str.__str__(k)}")
                raise
        return
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        for i, v in enumerate(items):
            try:
                _check_shape(v, depth + 1)
            except _Bad as bad:
                bad.path.append(f"[{i}]")
                raise
        return
    raise _Bad(f"{type(value).__name__} is not JSON-compatible")


def check_type(type_: Any) -> str:
    """Validate an event type name: ``segment/segment``, lowercase, <= 128 chars."""
    if not isinstance(type_, str):
        raise TypeError(f"event type must be str, not {type(type_).__name__}")
    if len(type_) > MAX_TYPE_LEN or not _TYPE_RE.fullmatch(type_):
        raise ValidationError(
            f"event type {type_!r} is not a lowercase name like 'tool/result'")
    return type_


# ---------------------------------------------------------------------------
# Shapes of the known types (declared in trajlog.event_types); more fields are allowed.

KNOWN_SHAPES = frozenset(SHAPES)
# JSON type name -> the Python types stored as it (a tuple is stored as a JSON array)
_KINDS: dict[str, tuple[type, ...]] = {"str": (str,), "bool": (bool,), "int": (int,),
                                       "list": (list, tuple),
                                       "null": (type(None),), "list[tool_call]": (list, tuple)}


def _field_rule(type_: str, key: str, spec: str,
                ) -> tuple[str, frozenset[type], tuple[type, ...], bool, str]:
    """One shape field: (key, the exact types that pass at once, the kinds
    that pass, required, the refusal of a wrong kind).  A list of tool calls
    never passes at once: its entries are checked."""
    required = not spec.endswith("?")
    names = spec.rstrip("?").split("|")
    kinds = tuple(k for n in names for k in _KINDS[n])
    if required:
        said = " or ".join(k.__name__ for k in kinds)
    elif names == ["list[tool_call]"]:
        said = "a list"
    else:
        said = " or ".join(n for n in names if n != "null")
    exact = frozenset() if "list[tool_call]" in names else frozenset(kinds)
    return key, exact, kinds, required, f"{type_} field {key!r} must be {said}"


# type -> its field rules
_RULES = {t: tuple(_field_rule(t, k, v) for k, v in shape.items())
          for t, shape in SHAPES.items()}
_ABSENT: Any = object()


def _require(data: Mapping[str, Any], type_: str, key: str, kinds: tuple[type, ...]) -> Any:
    if key not in data:
        raise ValidationError(f"{type_} needs a {key!r} field")
    value = data[key]
    if not isinstance(value, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ValidationError(f"{type_} field {key!r} must be {names}")
    return value


def _check_calls(calls: Any) -> None:
    """Each requested tool call is ``{id: str, name: str}``, ids unique."""
    seen = set()
    for call in calls:
        if not isinstance(call, dict):
            raise ValidationError("each tool call must be a dict")
        call_id = _require(call, "tool call", "id", (str,))
        _require(call, "tool call", "name", (str,))
        if call_id in seen:
            raise ValidationError(f"tool call id {call_id!r} appears twice")
        seen.add(call_id)


def check_shape(type_: str, data: Any) -> None:
    """Check the minimal shape of a known event type's data (its ``shape`` in
    :mod:`trajlog.event_types`); unknown types pass."""
    rules = _RULES.get(type_)
    if rules is None:
        return
    if not isinstance(data, dict):
        raise ValidationError(f"{type_} data must be a dict")
    if isinstance(data.get("erased"), dict):
        # An erased event's replacement (``data["erased"]`` and the ids that
        # pair it), e.g. imported from an export of an erased event: every
        # reader and projection already takes it as a tombstone.
        return
    for key, exact, kinds, required, refusal in rules:
        value = data.get(key, _ABSENT)
        if type(value) in exact:
            continue   # (the common case: one lookup)
        if value is _ABSENT:
            if required:
                raise ValidationError(f"{type_} needs a {key!r} field")
            continue
        if not isinstance(value, kinds) or (type(value) is bool and bool not in kinds):
            raise ValidationError(refusal)   # (an int field takes no bool)
        if not exact:
            _check_calls(value)


def check_envelope(source: Any, causal_parent: Any, workspace_revision: Any, data_class: Any,
                   idempotency_key: Any, supersedes: Any = None, branch_id: Any = None,
                   schema_version: Any = None, *, type_: str | None = None) -> None:
    """Type- and value-check the optional envelope fields.  (That
    ``supersedes`` names an *earlier* seq is checked at append, once the new
    event's seq is known.)  With ``type_``, a ``schema_version`` newer than
    the registry's for it is refused: no reader could take it."""
    for name, value in (("source", source), ("workspace_revision", workspace_revision),
                        ("idempotency_key", idempotency_key), ("branch_id", branch_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be str or None, not {type(value).__name__}")
        if isinstance(value, str) and (not value or len(value) > 512):
            raise ValidationError(f"{name} must be 1 to 512 characters")
    for name, value in (("causal_parent", causal_parent), ("supersedes", supersedes)):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be int or None, not {type(value).__name__}")
        if not 0 <= value < 2**63:
            raise ValidationError(f"{name} must be a seq (0 <= seq < 2**63)")
    if schema_version is not None and (type(schema_version) is not int
                                       or not 1 <= schema_version < 2**31):
        raise ValidationError("schema_version must be an int >= 1")
    if schema_version is not None and type_ is not None and (
            schema_version > (known := VERSIONS.get(type_, 1))):
        raise ValidationError(f"schema_version {schema_version} of {type_} is newer than "
                              f"this trajlog knows (version {known})")
    if data_class is not None and data_class not in DATA_CLASSES:
        raise ValidationError(f"data_class must be one of {', '.join(DATA_CLASSES)}")


__all__ = ["DATA_CLASSES", "ENVELOPE_FIELDS", "NOT_WALKED", "Event", "FrozenDict", "FrozenList",
           "LazyEvent", "SessionHeader", "check_json", "check_text", "decode_event",
           "decode_lazy", "encode_event", "freeze", "plain_str", "walk_json"]
