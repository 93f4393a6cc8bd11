"""The JSON rules on MessagePack bytes (``json_ok``) and the write path's one
framing call (``encode_events``), under both kernels, and the C kernel
against the Python reference on the same bytes -- valid, damaged and hostile
MessagePack alike."""

from __future__ import annotations

import math
import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kits.framekit import KEY
from kits.strategies import keys, payload_lists
from trajlog import errors
from trajlog._format import EVENT_JSON_DEPTH, MASK64, MAX_SEQ, MAX_STORED, Cursor, Status
from trajlog.codec.chunks import RAW, ChunkCompressor
from trajlog.codec.records import encode_chunks
from trajlog.events import MAX_DEPTH, check_json

ENC = msgspec.msgpack.Encoder()


def payload(data):
    """An event payload as the writer makes it: [type, time, data]."""
    return ENC.encode(("x/y", 1, data))


def nested(depth):
    """``depth`` dicts, one inside the other."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"n": value}
    return value


# --- the rules, byte by byte ---------------------------------------------------------

OK = [
    b"\xc0", b"\xc2", b"\xc3", b"\x00", b"\x7f", b"\xe0", b"\xff",
    b"\xcc\xff", b"\xcd\x00\x01", b"\xce\x00\x00\x00\x01", b"\xcf" + bytes(8),
    b"\xd0\x80", b"\xd1\x00\x00", b"\xd2" + bytes(4), b"\xd3" + bytes(8),
    b"\xca" + struct.pack(">f", 1.5), b"\xcb" + struct.pack(">d", -2.25),
    b"\xcb" + struct.pack(">d", 5e-324),            # subnormal: finite
    b"\xa0", b"\xa3abc", b"\xd9\x01x", b"\xda\x00\x01x", b"\xdb\x00\x00\x00\x01x",
    b"\xa2\xff\xfe",                                # text is not decoded
    b"\x90", b"\x80", b"\xdc\x00\x00", b"\xdd" + bytes(4), b"\xde\x00\x00", b"\xdf" + bytes(4),
    b"\x92\x01\xc0", b"\x81\xa1k\x91\xc3", b"\xde\x00\x01\xa1k\x01",
]

REFUSED = [
    b"",                                            # no value
    b"\xc1",                                        # never used
    b"\xc4\x01x", b"\xc5\x00\x01x", b"\xc6\x00\x00\x00\x01x",      # bin
    b"\xd4\x01\x00", b"\xd5\x01\x00\x00", b"\xc7\x01\x01x",        # ext
    b"\xd6\xff" + bytes(4),                         # the timestamp ext
    b"\xca" + struct.pack(">f", math.nan), b"\xca" + struct.pack(">f", math.inf),
    b"\xcb" + struct.pack(">d", math.nan), b"\xcb" + struct.pack(">d", -math.inf),
    b"\xcb\x7f\xf0\x00\x00\x00\x00\x00\x01",        # a signalling NaN
    b"\x81\x01\x01", b"\x81\xc0\x01", b"\x81\x90\x01", b"\x81\xc4\x00\x01",  # non-str keys
    b"\x82\xa1k\x01\x01\x01",                       # the second key
    b"\xc0\xc0",                                    # a trailing byte
    b"\x91", b"\x81\xa1k", b"\xa3ab", b"\xcd\x00", b"\xcb\x00",  # truncated
    b"\xd9", b"\xda\x00", b"\xdb\x00\x00\x00", b"\xdc\x00", b"\xdf\x00\x00\x00",
    b"\xdd\xff\xff\xff\xff\xc0",                    # a count the bytes cannot hold
    b"\xdf\x80\x00\x00\x00",
    b"\x91\xc4\x00",                                # bin inside an array
]


@pytest.mark.parametrize("data", OK)
def test_json_accepts(kernel, data):
    assert kernel.json_ok(data, 8)


@pytest.mark.parametrize("data", REFUSED)
def test_json_refuses(kernel, data):
    assert not kernel.json_ok(data, 8)


def test_json_depth_is_the_containers_nesting(kernel):
    for depth in range(0, 6):
        value = b"\x91" * depth + b"\xc0"   # depth arrays around nil
        assert kernel.json_ok(value, 3) == (depth <= 3)
    assert kernel.json_ok(b"\xc0", 0) and not kernel.json_ok(b"\x90", 0)
    # an empty container counts like a full one
    assert kernel.json_ok(b"\x91" * 2 + b"\x90", 3) and not kernel.json_ok(b"\x91" * 3 + b"\x90", 3)
    # the depth is clamped to 128: deeper values are refused whatever is asked
    deep = b"\x91" * 128 + b"\xc0"
    assert kernel.json_ok(deep, 128) and kernel.json_ok(deep, 10**6)
    assert not kernel.json_ok(b"\x91" + deep, 10**6)


# --- the same verdict as check_json on what msgspec encodes -----------------------------

def test_json_event_depth_is_check_jsons(kernel):
    # data may nest MAX_DEPTH containers (depths 0..63); one more is refused
    assert kernel.json_ok(payload(nested(MAX_DEPTH)), EVENT_JSON_DEPTH)
    assert not kernel.json_ok(payload(nested(MAX_DEPTH + 1)), EVENT_JSON_DEPTH)
    check_json(nested(MAX_DEPTH))
    with pytest.raises(errors.SerializationError):
        check_json(nested(MAX_DEPTH + 1))


scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(),
                    st.text(max_size=8), st.binary(max_size=4))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(-3, 3), st.none()), inner,
                        max_size=4)),
    max_leaves=20)


@given(data=values)
def test_json_verdict_is_check_jsons(kernel, data):
    """What the core refuses on the bytes is what check_json refuses on the
    values, for every value of the built-in types msgspec encodes."""
    try:
        check_json(data)
        ok = True
    except errors.SerializationError:
        ok = False
    try:
        raw = payload(data)
    except (UnicodeEncodeError, OverflowError):   # check_json leaves these to the encoder
        return
    assert kernel.json_ok(raw, EVENT_JSON_DEPTH) == ok


# --- C and Python on the same bytes ------------------------------------------------------

def mutated(data: bytes, at: int, byte: int) -> bytes:
    if not data:
        return bytes([byte])
    at %= len(data)
    return data[:at] + bytes([byte]) + data[at + 1:]


@given(data=st.binary(max_size=64), depth=st.integers(0, 140))
def test_json_diff_random_bytes(both_kernels, data, depth):
    c, py = both_kernels
    assert c.json_ok(data, depth) == py.json_ok(data, depth)


@given(value=values, at=st.integers(0, 1000), byte=st.integers(0, 255),
       cut=st.integers(0, 1000), depth=st.integers(0, 70))
def test_json_diff_damaged_msgpack(both_kernels, value, at, byte, cut, depth):
    """Valid encodings with one byte changed, cut short, or extended: the
    hostile inputs that reach the length and count paths."""
    c, py = both_kernels
    try:
        raw = ENC.encode(value)
    except (UnicodeEncodeError, OverflowError):
        return
    for data in (raw, mutated(raw, at, byte), raw[:cut % (len(raw) + 1)], raw + bytes([byte])):
        assert c.json_ok(data, depth) == py.json_ok(data, depth)


@given(head=st.sampled_from([0xD9, 0xDA, 0xDB, 0xDC, 0xDD, 0xDE, 0xDF, 0xCA, 0xCB]),
       size=st.sampled_from([0, 1, 2, 0x7F, 0xFF, 0xFFFF, 2**31, 2**32 - 1]),
       tail=st.binary(max_size=16))
def test_json_diff_hostile_lengths(both_kernels, head, size, tail):
    """Lengths and counts far past the end of the bytes."""
    c, py = both_kernels
    for width in (1, 2, 4):
        data = bytes([head]) + (size % 256**width).to_bytes(width, "big") + tail
        for wrap in (b"", b"\x91", b"\x81\xa1k"):
            assert c.json_ok(wrap + data, 9) == py.json_ok(wrap + data, 9)


# --- encode_events: the write path's one call ---------------------------------------------

@given(items=payload_lists, key=keys, seq=st.integers(0, MAX_SEQ))
def test_events_frames_are_encode_batchs(kernel, items, key, seq):
    cursor = Cursor(0, seq, key)
    status, frames, end, check, failed = kernel.encode_events(key, items, cursor, 0)
    want = kernel.encode_batch(key, items, [2] * len(items), cursor)
    if want[0] != Status.OK:
        assert (status, frames, end, check) == (want[0], b"", cursor, 0)
        return
    assert (status, frames, end, failed) == (Status.OK, want[1], want[2], 0)
    assert check == kernel.checksum(frames, (key + seq) & MASK64)


@given(items=payload_lists, key=keys, seq=st.integers(0, MAX_SEQ), depth=st.integers(0, 9))
def test_events_diff(both_kernels, items, key, seq, depth):
    c, py = both_kernels
    cursor = Cursor(0, seq, key)
    assert c.encode_events(key, items, cursor, depth) == py.encode_events(key, items, cursor,
                                                                          depth)


def test_events_refuse_all_or_nothing(kernel):
    good, bad = payload({"a": 1}), payload({"a": math.nan})
    cursor = Cursor(0, 5, KEY)
    assert kernel.encode_events(KEY, [good, good, bad, bad], cursor, EVENT_JSON_DEPTH) == (
        Status.NOT_JSON, b"", cursor, 0, 2)
    # without the JSON rules the same bytes frame
    assert kernel.encode_events(KEY, [good, bad], cursor, 0)[0] == Status.OK
    too_big = b"\xc0" * (MAX_STORED + 1)
    assert kernel.encode_events(KEY, [good, too_big], cursor, 0) == (
        Status.TOO_LARGE, b"", cursor, 0, 1)
    assert kernel.encode_events(KEY, [], cursor, 1) == (Status.OK, b"", cursor, 0, 0)
    for odd in (Cursor(0, MAX_SEQ, KEY), Cursor(-1, 0, KEY), Cursor(0, 0, 2**64)):
        assert kernel.encode_events(KEY, [good, good], odd, 0)[0] == Status.INVALID_ARG
    assert kernel.encode_events(KEY, [good], cursor, -1)[0] == Status.INVALID_ARG
    assert kernel.strerror(Status.NOT_JSON) == "payload is not JSON-compatible"


# --- encode_chunks: the check, and a refusal's message ------------------------------------

def test_chunks_one_event_is_one_raw_row_with_the_frames_check(kernel):
    chunks, end = encode_chunks(KEY, [payload({"a": 1})], Cursor(0, 0, KEY), ChunkCompressor(),
                                kernel=kernel, json_depth=EVENT_JSON_DEPTH)
    (row,) = chunks
    assert (row.n, row.codec, row.raw_len, end.next_seq) == (1, RAW, len(row.body), 1)
    assert row.body_check == kernel.checksum(row.body, KEY)


def test_chunks_refusal_is_explained_then_typed(kernel):
    rows = [payload({"a": 1}), payload({"b": [1, math.inf]})]
    seen = []
    with pytest.raises(errors.SerializationError, match="not JSON-compatible"):
        encode_chunks(KEY, rows, Cursor(0, 0, KEY), ChunkCompressor(), kernel=kernel,
                      json_depth=EVENT_JSON_DEPTH, explain=seen.append)
    assert seen == [1]

    def explain(i):
        check_json([{"a": 1}, {"b": [1, math.inf]}][i], "data")
    with pytest.raises(errors.SerializationError) as info:
        encode_chunks(KEY, rows, Cursor(0, 0, KEY), ChunkCompressor(), kernel=kernel,
                      json_depth=EVENT_JSON_DEPTH, explain=explain)
    assert info.value.path == "data.b[1]"


# --- the write path frames in one kernel call ---------------------------------------------

def test_append_frames_in_one_kernel_call(store, monkeypatch):
    """A single append asks the kernel once (frames, JSON rules and the row's
    body check together); a batch whose frames make one raw row, once too."""
    from trajlog._backend import get_kernel
    kernel = get_kernel()
    calls: list[str] = []
    inside: list[str] = []   # (the reference kernel calls its own functions)

    def counted(name, real):
        def call(*args, **kwargs):
            if not inside:
                calls.append(name)
            inside.append(name)
            try:
                return real(*args, **kwargs)
            finally:
                inside.pop()
        return call
    for name in ("encode_events", "encode_batch", "checksum", "json_ok"):
        monkeypatch.setattr(kernel, name, counted(name, getattr(kernel, name)))
    session = store.create_session(cwd="/one")
    calls.clear()
    session.append("note/x", {"n": 1})
    assert calls == ["encode_events"]
    calls.clear()
    session.append_batch([("note/x", {"n": i}) for i in range(5)])
    assert calls == ["encode_events"]
