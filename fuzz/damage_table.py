"""The damage table: random logs, damaged as power loss and failing media damage
them, classified with and without the durable watermark.

    python fuzz/damage_table.py [--logs 20000] [--seed 7] [--kernel c|python]

Per iteration: build 1-30 frames of 0-20,000 bytes; pick how many were synced
(the watermark); then either damage only the unsynced tail the way a power loss
does (cut it; per 512-byte sector zero it, garble it or keep it; or lose only
its first sector while later ones landed) or damage the synced part the way
media do (flip a bit, garble or zero a sector, swap two frames).  Prints a
markdown table (one row per kind of damage) and, last, one JSON
line.  Exits non-zero if any synced frame was lost with a watermark or any
media damage with a watermark was not called corrupt.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from types import ModuleType

from trajlog import codec
from trajlog._backend import load_kernel
from trajlog._format import HEADER_SIZE
from trajlog.codec import Verdict

SECTOR = 512


def _offsets(items: list[bytes]) -> list[int]:
    out, pos = [], 0
    for item in items:
        out.append(pos)
        pos += HEADER_SIZE + len(item) + (-len(item) & 7)
    return [*out, pos]


def _power_loss(rng: random.Random, log: bytes, synced: int) -> tuple[str, bytes]:
    tail = bytearray(log[synced:rng.randint(synced, len(log))])
    mode = rng.choice(["cut", "sectors", "reorder"])
    if mode == "sectors":
        start = synced // SECTOR * SECTOR
        for s in range(start, synced + len(tail), SECTOR):
            lo, hi = max(s, synced) - synced, min(s + SECTOR, synced + len(tail)) - synced
            action = rng.random()
            if action < 0.4:
                tail[lo:hi] = bytes(hi - lo)
            elif action < 0.6:
                tail[lo:hi] = rng.randbytes(hi - lo)
    elif mode == "reorder" and tail:
        # the first unsynced sector was lost while later ones reached the disk
        first = min(len(tail), (synced // SECTOR + 1) * SECTOR - synced)
        tail[:first] = bytes(first)
    return f"power loss ({mode})", log[:synced] + bytes(tail)


def _media(rng: random.Random, log: bytes, offs: list[int], w: int) -> tuple[str, bytes]:
    end = offs[w + 1]
    buf = bytearray(log)
    kind = rng.choice(["bit flip", "garbage sector", "zeroed sector", "swapped frames"])
    if kind == "swapped frames" and w < 1:
        kind = "bit flip"
    if kind == "bit flip":
        pos = rng.randrange(end)
        buf[pos] ^= 1 << rng.randrange(8)
    elif kind in ("garbage sector", "zeroed sector"):
        frame = rng.randint(0, w)
        pos = rng.randrange(offs[frame], offs[frame + 1])
        s = pos // SECTOR * SECTOR
        hi = min(s + SECTOR, len(buf))
        buf[s:hi] = bytes(hi - s) if kind == "zeroed sector" else rng.randbytes(hi - s)
        if buf[:end] == log[:end]:
            buf[pos] ^= 0xFF  # the synced part already held these bytes: damage it anyway
    else:
        i = rng.randint(0, w - 1)
        a, b, e = offs[i], offs[i + 1], offs[i + 2]
        buf = buf[:a] + buf[b:e] + buf[a:b] + buf[e:]
    return f"media: {kind}", bytes(buf)


def simulate(logs: int, seed: int, kernel: ModuleType) -> dict[str, dict[str, int]]:
    """Run the simulation; returns counters per damage kind."""
    rng = random.Random(seed)
    key = codec.session_key(bytes(range(16)), kernel=kernel)
    table: dict[str, Counter[str]] = defaultdict(Counter)
    for _ in range(logs):
        n = rng.randint(1, 30)
        items = [rng.randbytes(rng.choice([rng.randint(0, 200), rng.randint(0, 20_000)]))
                 for _ in range(n)]
        log, _ = codec.encode(items, key, codec.start_cursor(key), kernel=kernel)
        offs = _offsets(items)
        w = rng.randint(-1, n - 1)
        if rng.random() < 0.5 or w < 0:
            name, damaged = _power_loss(rng, log, offs[w + 1])
            expect_corrupt = False
        else:
            name, damaged = _media(rng, log, offs, w)
            expect_corrupt = True
        with_wm = codec.scan(damaged, key, watermark=w, kernel=kernel)
        without = codec.scan(damaged, key, kernel=kernel)
        row = table[name]
        row["cases"] += 1
        row[f"wm {with_wm.verdict.value}"] += 1
        row[f"no-wm {without.verdict.value}"] += 1
        if not expect_corrupt and with_wm.frames < w + 1:
            row["synced frames lost"] += (w + 1) - with_wm.frames
        if expect_corrupt != (with_wm.verdict is Verdict.CORRUPT):
            row["misclassified with wm"] += 1
    return {k: dict(v) for k, v in sorted(table.items())}


def render(table: dict[str, dict[str, int]]) -> str:
    cols = ["cases", "wm clean", "wm torn", "wm corrupt", "synced frames lost",
            "misclassified with wm", "no-wm clean", "no-wm torn", "no-wm corrupt"]
    lines = ["| damage | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for name, row in table.items():
        lines.append(f"| {name} | " + " | ".join(f"{row.get(c, 0):,}" for c in cols) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logs", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--kernel", choices=["c", "python"], default="c")
    parser.add_argument("--quick", action="store_true", help="2,000 logs")
    args = parser.parse_args()
    logs = 2000 if args.quick else args.logs
    table = simulate(logs, args.seed, load_kernel(args.kernel))
    print(render(table))
    lost = sum(r.get("synced frames lost", 0) for r in table.values())
    wrong = sum(r.get("misclassified with wm", 0) for r in table.values())
    print(json.dumps({"bench": "damage_table", "logs": logs, "seed": args.seed,
                      "kernel": args.kernel, "synced_frames_lost": lost,
                      "misclassified_with_watermark": wrong, "table": table}))
    return 1 if lost or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
