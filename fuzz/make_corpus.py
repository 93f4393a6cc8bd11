"""Write the small seed corpus under fuzz/corpus/ (committed; regenerate with
``python fuzz/make_corpus.py``).  Seeds are valid logs and their damaged
variants, laid out as each harness reads its input."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
VECTORS = HERE.parent / "tests" / "vectors"


def main() -> None:
    rng = random.Random(7)
    cases = json.loads((VECTORS / "frames_v1.json").read_text())
    log_case = cases[0]
    key = log_case["key"]
    log = (VECTORS / "log_v1.bin").read_bytes()
    offsets = [h["offset"] for h in log_case["headers"]]
    variants = {"clean": log, "empty": b"", "zero_tail": log + bytes(600),
                "truncated": log[: offsets[-1] + 20], "short_header": log[: offsets[-1] + 7]}
    flipped = bytearray(log)
    flipped[offsets[3] + 45] ^= 4
    variants["flip"] = bytes(flipped)
    zeroed = bytearray(log)
    zeroed[1024:1536] = bytes(512)
    variants["zero_sector"] = bytes(zeroed)
    variants["swap"] = log[: offsets[1]] + log[offsets[2]: offsets[3]] + \
        log[offsets[1]: offsets[2]] + log[offsets[3]:]
    out = HERE / "corpus"
    for name, data in variants.items():
        (out / "scan" / f"{name}.bin").write_bytes(struct.pack("<Q", key) + b"\x05" + data)
        (out / "decode" / f"{name}.bin").write_bytes(data[:40])
    (out / "decode" / "random.bin").write_bytes(rng.randbytes(40))
    for i, (count, size) in enumerate([(1, 0), (3, 10), (8, 200), (2, 1300), (32, 5)]):
        header = struct.pack("<QQ", rng.getrandbits(64), i * 1000) + bytes([count - 1])
        spec = b"".join(bytes([rng.randrange(8)]) + struct.pack("<H", size) for _ in range(count))
        (out / "roundtrip" / f"batch{i}.bin").write_bytes(
            header + spec + rng.randbytes(count * size))


if __name__ == "__main__":
    main()
