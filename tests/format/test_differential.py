"""Differential tests: the C kernel and the Python reference kernel, in one
process, on the same inputs -- byte-identical encodes, identical scans on
random bytes and on valid logs damaged every way a disk or a bug damages them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kits.framekit import KEY, OTHER_KEY
from kits.strategies import frame_offsets, keys, payload_lists
from trajlog import codec
from trajlog._format import MAX_SEQ, Cursor

cursors = st.builds(Cursor, st.just(0), st.integers(0, MAX_SEQ), keys)


def both_scan(both, buf, key, cursor, max_frames=2**40, collect=True):
    c, py = both
    got_c = c.scan(buf, key, cursor, max_frames, collect)
    got_py = py.scan(buf, key, cursor, max_frames, collect)
    assert got_c == got_py
    return got_c


def both_reports(both, buf, key, cursor=None, watermark=None):
    c, py = both
    rc = codec.scan(buf, key, cursor, watermark=watermark, kernel=c)
    rp = codec.scan(buf, key, cursor, watermark=watermark, kernel=py)
    assert rc == rp
    return rc


def encode_both(both, items, key, cursor, types=None, flags=None, raw_lens=None):
    c, py = both
    types = [2] * len(items) if types is None else types
    got_c = c.encode_batch(key, items, types, cursor, flags, raw_lens)
    got_py = py.encode_batch(key, items, types, cursor, flags, raw_lens)
    assert got_c == got_py
    return got_c


@pytest.fixture(scope="session")
def both(both_kernels):
    return both_kernels


@given(items=payload_lists, key=keys, cursor=cursors)
def test_diff_encode_identical(both, items, key, cursor):
    status, log, _ = encode_both(both, items, key, cursor)
    if status == 0:
        both_scan(both, log, key, Cursor(0, cursor.next_seq, cursor.chain))


@given(data=st.data(), items=st.lists(st.binary(max_size=40), min_size=1, max_size=5))
def test_diff_encode_odd_arguments(both, data, items):
    n = len(items)
    types = data.draw(st.lists(st.integers(-2, 300), min_size=n, max_size=n))
    flags = data.draw(st.none() | st.lists(st.integers(-1, 9), min_size=n, max_size=n))
    raw = data.draw(st.none() | st.lists(st.integers(-1, 2**33), min_size=n, max_size=n))
    seq = data.draw(st.integers(0, 2**64 - 1))
    encode_both(both, items, KEY, Cursor(0, seq, KEY), types, flags, raw)


@given(buf=st.binary(max_size=4096), key=keys, seq=st.integers(0, 2**64 - 1),
       chain=keys, cap=st.integers(0, 50), collect=st.booleans())
def test_diff_scan_random_bytes(both, buf, key, seq, chain, cap, collect):
    both_scan(both, buf, key, Cursor(0, seq, chain), cap, collect)
    both_reports(both, buf, key, Cursor(0, seq, chain))
    c, py = both
    assert c.decode_header(buf) == py.decode_header(buf)
    assert c.find_frame(buf, key, 0, 0) == py.find_frame(buf, key, 0, 0)


@given(buf=st.binary(min_size=40, max_size=600))
def test_diff_scan_random_bytes_behind_magic(both, buf):
    """Random bytes that at least start like a frame reach the later checks."""
    data = b"\xa7\xf1" + buf[2:]
    both_scan(both, data, KEY, codec.start_cursor(KEY))
    both_reports(both, data, KEY)


@given(items=payload_lists, data=st.data())
def test_diff_scan_damaged_logs(both, items, data):
    c, _ = both
    _, log, _ = c.encode_batch(KEY, items, [2] * len(items), codec.start_cursor(KEY))
    offs = frame_offsets(items)
    n = len(items)
    kind = data.draw(st.sampled_from(
        ["truncate", "flip", "zero_sector", "garble_sector", "swap", "duplicate", "drop",
         "other_session", "append_zero"]))
    buf = bytearray(log)
    if kind == "truncate":
        buf = buf[:data.draw(st.integers(0, len(buf)))]
    elif kind == "flip":
        pos = data.draw(st.integers(0, len(buf) - 1))
        buf[pos] ^= 1 << data.draw(st.integers(0, 7))
    elif kind in ("zero_sector", "garble_sector"):
        sector = data.draw(st.integers(0, (len(buf) - 1) // 512)) * 512
        fill = bytes(512) if kind == "zero_sector" else data.draw(
            st.binary(min_size=512, max_size=512))
        buf[sector:sector + 512] = fill[:len(buf) - sector]
    elif kind in ("swap", "duplicate", "drop") and n >= 2:
        i = data.draw(st.integers(0, n - 2))
        a, b, e = offs[i], offs[i + 1], offs[i + 2]
        if kind == "swap":
            buf = buf[:a] + buf[b:e] + buf[a:b] + buf[e:]
        elif kind == "duplicate":
            buf = buf[:b] + buf[a:b] + buf[b:]
        else:
            buf = buf[:a] + buf[b:]
    elif kind == "other_session":
        _, other, _ = c.encode_batch(OTHER_KEY, items, [2] * n, codec.start_cursor(OTHER_KEY))
        i = data.draw(st.integers(0, n - 1))
        buf = buf[:offs[i]] + other[offs[i]:offs[i + 1]] + buf[offs[i + 1]:]
    elif kind == "append_zero":
        buf += bytes(data.draw(st.integers(1, 1024)))
    damaged = bytes(buf)
    both_scan(both, damaged, KEY, codec.start_cursor(KEY), data.draw(st.integers(1, 20)))
    watermark = data.draw(st.none() | st.integers(-1, n - 1))
    both_reports(both, damaged, KEY, watermark=watermark)
