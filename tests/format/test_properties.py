"""Properties of the torn / corrupt rule, for each kernel (FORMAT.md section 6):
damage above the watermark is never corruption and keeps every complete frame;
a bit flip at or below it is always corruption; random bytes never crash."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kits.framekit import KEY
from kits.strategies import frame_offsets, keys, payload_lists
from trajlog import codec
from trajlog._format import Cursor
from trajlog.codec import Verdict
from trajlog.errors import TrajlogError


def _log(kernel, items):
    log, _ = codec.encode(items, KEY, codec.start_cursor(KEY), kernel=kernel)
    return log


@given(items=payload_lists, data=st.data())
def test_prop_truncation_anywhere_is_never_corrupt(kernel, items, data):
    log = _log(kernel, items)
    offs = frame_offsets(items)
    cut = data.draw(st.integers(0, len(log)))
    report = codec.scan(log[:cut], KEY, kernel=kernel)
    complete = sum(1 for end in offs[1:] if end <= cut)
    assert report.verdict in (Verdict.CLEAN, Verdict.TORN)
    assert report.frames == complete and report.valid_len == offs[complete]


@given(items=payload_lists, data=st.data())
def test_prop_damage_above_watermark_is_torn_and_keeps_frames(kernel, items, data):
    """Power loss: what was synced (frames 0..w) is intact; everything after it
    may be cut, zeroed per sector, garbled per sector or kept."""
    log = _log(kernel, items)
    offs = frame_offsets(items)
    n = len(items)
    w = data.draw(st.integers(-1, n - 1))
    synced = offs[w + 1]
    tail = bytearray(log[synced:data.draw(st.integers(synced, len(log)))])
    first_damage = len(tail)
    base = synced
    for sector in range(base // 512 * 512, base + len(tail), 512):
        lo, hi = max(sector, base) - base, min(sector + 512, base + len(tail)) - base
        action = data.draw(st.sampled_from(["keep", "zero", "garble"]))
        if action == "keep":
            continue
        fill = bytes(hi - lo) if action == "zero" else data.draw(
            st.binary(min_size=hi - lo, max_size=hi - lo))
        if fill != bytes(tail[lo:hi]):
            first_damage = min(first_damage, lo)
        tail[lo:hi] = fill
    damaged = log[:synced] + bytes(tail)
    report = codec.scan(damaged, KEY, watermark=w, kernel=kernel)
    assert report.verdict in (Verdict.CLEAN, Verdict.TORN), report.reason
    assert report.frames >= w + 1
    intact = sum(1 for end in offs[1:] if end <= synced + first_damage)
    assert report.frames >= intact


@given(items=payload_lists, data=st.data())
def test_prop_bit_flip_at_or_below_watermark_is_corrupt(kernel, items, data):
    log = _log(kernel, items)
    offs = frame_offsets(items)
    n = len(items)
    w = data.draw(st.integers(0, n - 1))
    pos = data.draw(st.integers(0, offs[w + 1] - 1))
    damaged = bytearray(log)
    damaged[pos] ^= 1 << data.draw(st.integers(0, 7))
    report = codec.scan(bytes(damaged), KEY, watermark=w, kernel=kernel)
    assert report.verdict is Verdict.CORRUPT
    frame = max(i for i in range(n) if offs[i] <= pos)
    assert report.valid_len == offs[frame] and report.cursor.next_seq == frame


@given(items=payload_lists, data=st.data())
def test_prop_bit_flip_in_non_final_frame_is_corrupt_without_watermark(kernel, items, data):
    if len(items) < 2:
        items = [*items, b"tail"]
    log = _log(kernel, items)
    offs = frame_offsets(items)
    pos = data.draw(st.integers(0, offs[-2] - 1))
    damaged = bytearray(log)
    damaged[pos] ^= 1 << data.draw(st.integers(0, 7))
    assert codec.scan(bytes(damaged), KEY, kernel=kernel).verdict is Verdict.CORRUPT


@given(buf=st.binary(max_size=2048), key=keys, seq=st.integers(0, 2**63),
       wm=st.none() | st.integers(-1, 50))
def test_prop_random_bytes_never_crash(kernel, buf, key, seq, wm):
    report = codec.scan(buf, key, Cursor(0, seq, key), watermark=wm, kernel=kernel)
    assert 0 <= report.valid_len <= len(buf)
    frames = []
    try:
        for frame in codec.iter_frames(buf, key, Cursor(0, seq, key), kernel=kernel):
            frames.append(frame)
    except TrajlogError:
        pass
    assert len(frames) == report.frames
