"""Frame codec unit cases, after LevelDB's log_test.cc and etcd's wal_test.go,
run against both kernels: exact verdict, status, offset and exception type."""

from __future__ import annotations

import pytest
import xxhash

from kits.framekit import KEY, OTHER_KEY, forge, make_log, payloads, reseal_header
from trajlog import codec, errors
from trajlog._format import HEADER_SIZE, MAX_RAW, MAX_STORED, Cursor, FrameType, Status
from trajlog.codec import Verdict, Watermark


def scan(kernel, buf, **kw):
    return codec.scan(buf, KEY, kernel=kernel, **kw)


# --- round trips ------------------------------------------------------------

def test_frame_empty_log_is_clean(kernel):
    report = scan(kernel, b"")
    assert (report.verdict, report.status, report.frames, report.last_seq) == (
        Verdict.CLEAN, Status.END, 0, None)


def test_frame_round_trip_many_sizes(kernel):
    items = [bytes(range(n % 256)) * (n // 256 + 1) for n in range(0, 70)] + [b"x" * 70_000]
    log, offsets = make_log(kernel, items)
    frames = list(codec.iter_frames(log, KEY, kernel=kernel))
    assert [bytes(f.payload) for f in frames] == items
    assert [f.seq for f in frames] == list(range(len(items)))
    assert [f.offset for f in frames] == offsets
    assert all(f.offset % 8 == 0 for f in frames)
    assert len(log) % 8 == 0
    report = scan(kernel, log)
    assert report.verdict is Verdict.CLEAN and report.frames == len(items)
    assert report.last_seq == len(items) - 1 and report.valid_len == len(log)


def test_frame_header_fields(kernel):
    log, _ = make_log(kernel, [b"hello"])
    h = codec.decode_header(log, kernel=kernel)
    assert (h.seq, h.type, h.flags, h.stored_len, h.raw_len) == (0, FrameType.EVENT, 0, 5, 5)
    assert log[:2] == b"\xa7\xf1" and len(log) == 48
    assert h.payload_check == xxhash.xxh3_64_intdigest(b"hello", seed=KEY ^ 0)
    assert h.chain == xxhash.xxh3_64_intdigest(log[0:12] + log[16:32], seed=KEY)
    assert int.from_bytes(log[12:16], "little") == (
        xxhash.xxh3_64_intdigest(log[0:12] + log[16:40], seed=KEY) & 0xFFFFFFFF)
    assert log[45:48] == b"\0\0\0"


def test_frame_encode_continues_cursor(kernel):
    items = payloads(6)
    whole, _ = make_log(kernel, items)
    first, cur = codec.encode(items[:2], KEY, codec.start_cursor(KEY), kernel=kernel)
    second, cur2 = codec.encode(items[2:], KEY, cur, kernel=kernel)
    assert first + second == whole
    assert cur2.next_seq == 6 and cur2.offset == len(whole)


def test_frame_fork_cursor_starts_mid_log(kernel):
    items = payloads(5)
    log, _ = make_log(kernel, items)
    parent = list(codec.iter_frames(log, KEY, kernel=kernel))
    child_cursor = Cursor(0, 3, parent[2].chain)
    child, _ = codec.encode([b"own"], OTHER_KEY, child_cursor, kernel=kernel)
    frames = list(codec.iter_frames(child, OTHER_KEY, child_cursor, kernel=kernel))
    assert [(f.seq, bytes(f.payload)) for f in frames] == [(3, b"own")]
    # The chain binds the child to that parent prefix: another seed fails.
    assert codec.scan(child, OTHER_KEY, Cursor(0, 3, parent[1].chain),
                      kernel=kernel).status == Status.BAD_CHAIN


def test_frame_optional_type_is_read(kernel):
    log, _ = make_log(kernel, [b"a", b"b"], types=[FrameType.EVENT, 0x80])
    assert [f.type for f in codec.iter_frames(log, KEY, kernel=kernel)] == [2, 0x80]


# --- encode refusals: typed error, nothing produced ----------------------------

@pytest.mark.parametrize("kwargs, exc", [
    ({"types": 0}, errors.InvalidArgumentError),
    ({"types": 7}, errors.InvalidArgumentError),
    ({"types": 300}, errors.InvalidArgumentError),
    ({"flags": [4]}, errors.InvalidArgumentError),
    ({"flags": [2]}, errors.InvalidArgumentError),          # dict without zstd
    ({"raw_lens": [3]}, errors.InvalidArgumentError),       # raw != stored, uncompressed
    ({"flags": [1], "raw_lens": [MAX_RAW + 1]}, errors.PayloadTooLargeError),
])
def test_frame_encode_rejects_bad_fields(kernel, kwargs, exc):
    with pytest.raises(exc):
        codec.encode([b"abcd"], KEY, codec.start_cursor(KEY), kernel=kernel, **kwargs)


def test_frame_encode_too_large_payload(kernel):
    big = bytes(MAX_STORED + 1)
    with pytest.raises(errors.PayloadTooLargeError):
        codec.encode([b"ok", big], KEY, codec.start_cursor(KEY), kernel=kernel)


def test_frame_encode_max_payload_fits(kernel):
    top = bytes(MAX_STORED)
    log, cur = codec.encode([top], KEY, codec.start_cursor(KEY), kernel=kernel)
    assert len(log) == HEADER_SIZE + MAX_STORED and cur.next_seq == 1


def test_frame_encode_batch_all_or_nothing(kernel):
    status, out, cur = kernel.encode_batch(KEY, [b"a", b"b", b"c"], [2, 2, 0],
                                           codec.start_cursor(KEY))
    assert (status, out, cur) == (Status.INVALID_ARG, b"", codec.start_cursor(KEY))


def test_frame_encode_rejects_str_and_bad_key(kernel):
    with pytest.raises(TypeError):
        codec.encode(["text"], KEY, codec.start_cursor(KEY), kernel=kernel)
    with pytest.raises(errors.InvalidArgumentError):
        codec.encode([b"x"], 2**64, codec.start_cursor(KEY), kernel=kernel)


def test_frame_encode_seq_limit(kernel):
    top = Cursor(0, 2**63 - 1, KEY)
    _, cur = codec.encode([b"last"], KEY, top, kernel=kernel)
    assert cur.next_seq == 2**63
    with pytest.raises(errors.InvalidArgumentError):
        codec.encode([b"one more"], KEY, cur, kernel=kernel)


# --- torn tails -----------------------------------------------------------------

def test_frame_truncated_trailing_frame_is_torn(kernel):
    log, offsets = make_log(kernel, payloads(4, 300))
    for cut in range(offsets[-1] + 1, len(log)):
        report = scan(kernel, log[:cut])
        assert report.verdict is Verdict.TORN, cut
        assert report.status == Status.TRUNCATED
        assert report.valid_len == offsets[-1] and report.frames == 3
        assert report.torn_bytes == cut - offsets[-1]


def test_frame_bad_length_at_end_is_torn(kernel):
    """A verified header whose body runs past the end: the header landed, the body did not."""
    log, offsets = make_log(kernel, payloads(3, 64))
    report = scan(kernel, log[:offsets[-1] + HEADER_SIZE + 3])
    assert (report.verdict, report.status) == (Verdict.TORN, Status.TRUNCATED)


def test_frame_zero_tail_is_torn(kernel):
    log, _ = make_log(kernel, payloads(3))
    for extra in (1, 39, 40, 4096):
        report = scan(kernel, log + bytes(extra))
        assert (report.verdict, report.status, report.valid_len) == (
            Verdict.TORN, Status.ZERO_TAIL, len(log))


def test_frame_torn_tail_strict_raises(kernel):
    log, offsets = make_log(kernel, payloads(3))
    cut = log[:offsets[-1] + 10]
    assert [f.seq for f in codec.iter_frames(cut, KEY, kernel=kernel)] == [0, 1]
    with pytest.raises(errors.TornTailError) as info:
        list(codec.iter_frames(cut, KEY, strict=True, kernel=kernel))
    assert info.value.offset == offsets[-1] and info.value.seq == 2
    with pytest.raises(errors.TornTailError):
        codec.verify(cut, KEY, strict=True, kernel=kernel)
    assert codec.verify(cut, KEY, kernel=kernel).verdict is Verdict.TORN


def test_frame_torn_write_zeroed_last_sector(kernel):
    """etcd TestOpenOnTornWrite: the last frame's sector never reached the disk."""
    log, offsets = make_log(kernel, payloads(3, 2000))
    damaged = bytearray(log)
    sector = (offsets[-1] + HEADER_SIZE) // 512 * 512 + 512
    damaged[sector:sector + 512] = bytes(512)
    report = scan(kernel, bytes(damaged))
    assert (report.verdict, report.status, report.valid_len) == (
        Verdict.TORN, Status.BAD_PAYLOAD, offsets[-1])


# --- corruption -----------------------------------------------------------------

def test_frame_checksum_mismatch_not_last_is_corrupt(kernel):
    log, offsets = make_log(kernel, payloads(4))
    damaged = bytearray(log)
    damaged[offsets[1] + HEADER_SIZE + 3] ^= 1
    report = scan(kernel, bytes(damaged))
    assert (report.verdict, report.status, report.valid_len) == (
        Verdict.CORRUPT, Status.BAD_PAYLOAD, offsets[1])
    with pytest.raises(errors.ChecksumError) as info:
        codec.verify(bytes(damaged), KEY, session="s1", kernel=kernel)
    assert (info.value.offset, info.value.seq, info.value.session) == (offsets[1], 1, "s1")
    assert f"seq=1 at offset {offsets[1]}" in str(info.value)


def test_frame_checksum_mismatch_last_without_zero_sector_is_corrupt(kernel):
    log, offsets = make_log(kernel, payloads(3))
    damaged = bytearray(log)
    damaged[offsets[-1] + HEADER_SIZE] ^= 0x80
    assert scan(kernel, bytes(damaged)).verdict is Verdict.CORRUPT
    # ... unless the watermark says the last frame was never acknowledged.
    assert scan(kernel, bytes(damaged), watermark=1).verdict is Verdict.TORN


def test_frame_bad_length_not_at_end_is_corrupt(kernel):
    log, offsets = make_log(kernel, payloads(4))
    damaged = bytearray(log)
    damaged[offsets[1] + 4] ^= 0x04  # stored_len: the header check catches it before use
    report = scan(kernel, bytes(damaged))
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_HEADER)


def test_frame_bad_magic_is_corrupt(kernel):
    log, offsets = make_log(kernel, payloads(3))
    damaged = bytearray(log)
    damaged[offsets[1]] = 0x00
    report = scan(kernel, bytes(damaged))
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_MAGIC)


def test_frame_seq_gap_and_duplicate(kernel):
    log, offsets = make_log(kernel, payloads(4))
    dropped = log[:offsets[1]] + log[offsets[2]:]
    report = scan(kernel, dropped)
    assert (report.verdict, report.status, report.valid_len) == (
        Verdict.CORRUPT, Status.SEQ_MISMATCH, offsets[1])
    with pytest.raises(errors.SequenceError):
        codec.verify(dropped, KEY, kernel=kernel)
    duplicated = log[:offsets[2]] + log[offsets[1]:]
    assert scan(kernel, duplicated).status == Status.SEQ_MISMATCH


def test_frame_chain_mismatch(kernel):
    """A frame from another log of the same session, at the right seq, but
    written after a different history."""
    log_a, offsets_a = make_log(kernel, payloads(3))
    log_b, offsets_b = make_log(kernel, [b"other", *payloads(3)[1:]])
    spliced = log_a[:offsets_a[1]] + log_b[offsets_b[1]:]
    report = scan(kernel, spliced)
    assert (report.verdict, report.status, report.valid_len) == (
        Verdict.CORRUPT, Status.BAD_CHAIN, offsets_a[1])
    with pytest.raises(errors.ChainError):
        codec.verify(spliced, KEY, kernel=kernel)


def test_frame_from_other_session_is_corrupt(kernel):
    log, offsets = make_log(kernel, payloads(3))
    other, other_offsets = make_log(kernel, payloads(3), key=OTHER_KEY)
    spliced = log[:offsets[2]] + other[other_offsets[2]:] + log[offsets[2]:]
    report = scan(kernel, spliced)
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_HEADER)


def test_frame_non_zero_padding(kernel):
    frame = forge(b"abc", pad=b"\0\0\0\0\x01")
    report = scan(kernel, frame)
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_PADDING)


def test_frame_unknown_mandatory_type_is_unsupported(kernel):
    frame = forge(b"future", type_=7)
    report = scan(kernel, frame)
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.UNSUPPORTED)
    with pytest.raises(errors.UnsupportedFormatError):
        report.raise_for()
    assert scan(kernel, forge(b"x", flags=4)).status == Status.UNSUPPORTED


@pytest.mark.parametrize("fields", [
    {"type_": 0},
    {"stored_len": MAX_STORED + 1},
    {"raw_len": 3},                   # uncompressed, raw != stored
    {"flags": 2},                     # dictionary without zstd
    {"flags": 1, "raw_len": MAX_RAW + 1},
    {"seq": 2**63},
])
def test_frame_validated_header_out_of_range(kernel, fields):
    frame = forge(b"payload!", **fields)
    report = codec.scan(frame, KEY, Cursor(0, fields.get("seq", 0), KEY), kernel=kernel)
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_FIELD)


def test_frame_decompression_bomb_lie_is_bounded(kernel):
    """raw_len is bounded before anything would be decompressed."""
    frame = forge(b"\x28\xb5\x2f\xfd" + bytes(8), flags=1, raw_len=2**32 - 1)
    assert scan(kernel, frame).status == Status.BAD_FIELD


def test_frame_zeroed_middle_frame_is_a_hole(kernel):
    """A zeroed sector followed by valid frames is corruption, not a torn tail."""
    log, offsets = make_log(kernel, payloads(6, 1500))
    damaged = bytearray(log)
    sector = (offsets[2] + HEADER_SIZE) // 512 * 512 + 512
    damaged[sector:sector + 512] = bytes(512)
    report = scan(kernel, bytes(damaged))
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_PAYLOAD)
    assert "hole" in report.reason


def test_frame_watermark_rules(kernel):
    log, offsets = make_log(kernel, payloads(5))
    frames = list(codec.iter_frames(log, KEY, kernel=kernel))
    cut = log[:offsets[3] + 5]
    assert scan(kernel, cut, watermark=2).verdict is Verdict.TORN
    assert scan(kernel, cut, watermark=3).verdict is Verdict.CORRUPT
    assert scan(kernel, cut, watermark=-1).verdict is Verdict.TORN
    # a clean log that ends before the watermark lost acknowledged frames
    short = log[:offsets[3]]
    report = scan(kernel, short, watermark=4)
    assert report.verdict is Verdict.CORRUPT and "before the durable watermark" in report.reason
    with pytest.raises(errors.CorruptionError):
        list(codec.iter_frames(short, KEY, watermark=4, kernel=kernel))
    # the frame at the watermark must carry the recorded chain
    good = Watermark(2, frames[2].chain)
    assert scan(kernel, log, watermark=good).verdict is Verdict.CLEAN
    bad = Watermark(2, frames[1].chain)
    report = scan(kernel, log, watermark=bad)
    assert (report.verdict, report.status) == (Verdict.CORRUPT, Status.BAD_CHAIN)
    with pytest.raises(errors.ChainError):
        list(codec.iter_frames(log, KEY, watermark=bad, kernel=kernel))


def test_frame_corrupt_stops_iteration_after_good_frames(kernel):
    log, offsets = make_log(kernel, payloads(4))
    damaged = bytearray(log)
    damaged[offsets[2] + HEADER_SIZE] ^= 1
    seen = []
    with pytest.raises(errors.ChecksumError):
        for f in codec.iter_frames(bytes(damaged), KEY, kernel=kernel):
            seen.append(f.seq)
    assert seen == [0, 1]


# --- resumable scanning ---------------------------------------------------------

def test_frame_scan_resumes_with_more(kernel):
    log, _ = make_log(kernel, payloads(5))
    cur = codec.start_cursor(KEY)
    seen = []
    while True:
        status, frames, cur, _ = kernel.scan(log, KEY, cur, 2, True)
        seen += [f.seq for f in frames]
        if status != Status.MORE:
            break
    assert status == Status.END and seen == [0, 1, 2, 3, 4] and cur.offset == len(log)


def test_frame_scan_resumes_after_tail_grows(kernel):
    log, offsets = make_log(kernel, payloads(3))
    status, _, cur, _ = kernel.scan(log[:offsets[2] + 7], KEY, codec.start_cursor(KEY), 99, False)
    assert status == Status.TRUNCATED and cur.offset == offsets[2] and cur.next_seq == 2
    status, _, cur, _ = kernel.scan(log, KEY, cur, 99, False)
    assert status == Status.END and cur.next_seq == 3


def test_frame_scan_invalid_cursor(kernel):
    log, _ = make_log(kernel, payloads(2))
    assert kernel.scan(log, KEY, Cursor(3, 0, KEY), 9, False)[0] == Status.INVALID_ARG
    assert kernel.scan(log, KEY, Cursor(len(log) + 8, 0, KEY), 9, False)[0] == Status.INVALID_ARG


# --- decode_header --------------------------------------------------------------

def test_frame_decode_header_refusals(kernel):
    log, _ = make_log(kernel, [b"abc"])
    with pytest.raises(errors.TornTailError):
        codec.decode_header(log[:39], kernel=kernel)
    with pytest.raises(errors.ChecksumError):
        codec.decode_header(b"\0" * 40, kernel=kernel)
    with pytest.raises(errors.CorruptionError):
        codec.decode_header(forge(b"x", stored_len=MAX_STORED + 8), kernel=kernel)
    # no key is needed: a frame of any session decodes
    h = codec.decode_header(make_log(kernel, [b"abc"], key=OTHER_KEY)[0], kernel=kernel)
    assert h.stored_len == 3


def test_frame_find_frame(kernel):
    log, offsets = make_log(kernel, payloads(4))
    assert kernel.find_frame(log, KEY, 1, 0) == offsets[1]
    assert kernel.find_frame(log, KEY, offsets[1], 2) == offsets[2]
    assert kernel.find_frame(log, KEY, offsets[3] + 1, 0) == -1
    assert kernel.find_frame(log, OTHER_KEY, 0, 0) == -1


def test_frame_reseal_helper_is_honest(kernel):
    """The forging helper produces frames the kernels accept, so the refusals
    above are caused by the one field each test breaks."""
    frame = bytearray(forge(b"abcdefgh"))
    assert scan(kernel, bytes(frame)).verdict is Verdict.CLEAN
    frame[16:24] = (5).to_bytes(8, "little")
    reseal_header(frame, KEY, KEY)
    assert scan(kernel, bytes(frame)).status == Status.SEQ_MISMATCH
