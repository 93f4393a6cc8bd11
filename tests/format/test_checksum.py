"""Known answers: our XXH3-64 (C, written from the public specification) equals
the ``xxhash`` package, an independent build of the reference implementation."""

from __future__ import annotations

import random

import pytest
import xxhash

SEEDS = (0, 1, 0x9E3779B185EBCA87, 2**64 - 1, 0x1B4E28BA2FA111D2)
# XXH3-64 changes algorithm at these input lengths; every class is covered.
SIZE_CLASSES = ((0, 0), (1, 3), (4, 8), (9, 16), (17, 128), (129, 240), (241, 1024),
                (1025, 70_000), (70_001, 300_000))


def _data(n: int, rng: random.Random) -> bytes:
    return rng.randbytes(n)


def test_checksum_every_length_0_to_2048(kernel):
    rng = random.Random(1)
    data = _data(2048 + 8, rng)
    for seed in SEEDS:
        for n in range(2049):
            got = kernel.checksum(data[:n], seed)
            assert got == xxhash.xxh3_64_intdigest(data[:n], seed=seed), (n, seed)


def test_checksum_unaligned_inputs(kernel):
    rng = random.Random(2)
    data = _data(4096, rng)
    view = memoryview(data)
    for start in range(1, 8):
        for n in (3, 7, 16, 100, 200, 239, 241, 1000, 3000):
            piece = view[start:start + n]
            assert kernel.checksum(piece, 7) == xxhash.xxh3_64_intdigest(piece, seed=7)


def test_checksum_random_cases_every_size_class(kernel):
    """>= 10,000 random (length, seed) cases spread over every size class."""
    rng = random.Random(3)
    cases = 0
    big = _data(300_001, rng)
    for lo, hi in SIZE_CLASSES:
        # long inputs cost more; the reference kernel is xxhash itself
        count = 1300 if hi <= 1024 else 600 if kernel.NAME == "c" else 20
        for _ in range(count):
            n = rng.randint(lo, hi)
            start = rng.randint(0, len(big) - n)
            seed = rng.getrandbits(64)
            piece = big[start:start + n]
            assert kernel.checksum(piece, seed) == xxhash.xxh3_64_intdigest(piece, seed=seed)
            cases += 1
    assert kernel.NAME != "c" or cases >= 10_000


@pytest.mark.parametrize("n", [0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025])
def test_checksum_boundaries_all_seeds(kernel, n):
    data = bytes(range(256)) * 5
    for seed in SEEDS:
        assert kernel.checksum(data[:n], seed) == xxhash.xxh3_64_intdigest(data[:n], seed=seed)


def _rows(bodies: list[bytes], key: int, firsts: list[int]) -> list[int]:
    """first seq, length and true body check of each body."""
    out: list[int] = []
    for body, first in zip(bodies, firsts, strict=True):
        out += [first, len(body), xxhash.xxh3_64_intdigest(body, seed=(key + first) % 2**64)]
    return out


def test_check_bodies_flags_each_row_as_its_own_checksum_would(kernel):
    """check_bodies (many chunk rows' body checks in one call) gives, row by
    row, what one checksum a row gives -- the seed wrapping mod 2**64, every
    size class, a damaged body or check failing only its own row."""
    rng = random.Random(4)
    key = 2**64 - 3   # key + first seq wraps
    bodies = [_data(rng.choice([0, 1, 17, 200, 241, 1500, 5000]), rng) for _ in range(40)]
    firsts = [i * 7 for i in range(40)]
    rows = _rows(bodies, key, firsts)
    buf = b"".join(bodies)
    assert kernel.check_bodies(buf, key, rows) == b"\x01" * 40
    assert kernel.check_bodies(memoryview(buf), key, rows) == b"\x01" * 40
    assert kernel.check_bodies(b"", key, []) == b""
    bad = list(rows)
    bad[3 * 5 + 2] ^= 1                 # row 5's check
    bad[3 * 9] += 1                     # row 9's first seq (its seed)
    damaged = bytearray(buf)
    at = sum(len(b) for b in bodies[:20])
    damaged[at + len(bodies[20]) - 1] ^= 0x80 if bodies[20] else 0   # row 20's last byte
    flags = kernel.check_bodies(bytes(damaged), key, bad)
    expect = [i not in (5, 9) and (i != 20 or not bodies[20]) for i in range(40)]
    assert list(flags) == [int(x) for x in expect]


def test_check_bodies_a_body_past_the_end_fails_with_every_row_after_it(kernel):
    bodies = [b"a" * 10, b"b" * 20, b"c" * 30]
    rows = _rows(bodies, 5, [0, 1, 2])
    buf = b"".join(bodies)
    assert kernel.check_bodies(buf[:-1], 5, rows) == b"\x01\x01\x00"
    huge = list(rows)
    huge[3 * 1 + 1] = 2**64 - 1         # a length no buffer holds (no wrap-around)
    assert kernel.check_bodies(buf, 5, huge) == b"\x01\x00\x00"
    assert kernel.check_bodies(buf + b"extra", 5, rows) == b"\x01\x01\x01"
