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
