"""How to compress event payloads: the measurement behind FORMAT.md section 4.5.

On the benchmark workload (benchmarks/workload.py) it compares, per event:

* serializers: orjson, msgspec JSON, msgspec MessagePack (encode and decode rates,
  bytes);
* no compression; per-event zstd above a size threshold (256 B ... 4 KiB) at
  levels 1 and 3; and a store-level trained dictionary (64 KiB, trained on the
  first half of the small events) applied to the small events of the second half.

It prints stored payload bytes per event, compression and decompression cost
per event (microseconds, on this machine), and the ratio of every figure to the
uncompressed MessagePack baseline of the same run.  Last line: JSON.

    python benchmarks/bench_compression.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import orjson
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workload


def timed(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 10_000 if args.quick else 50_000
    events = workload.events(n)
    items = [[t, 1_767_225_600_000 + i, d] for i, (t, d) in enumerate(events)]
    results: dict[str, Any] = {"events": n, "serializers": {}, "compression": {}}

    print(f"{n:,} events\n\nserializer        encode/s    decode/s   bytes/event")
    encoded: dict[str, list[bytes]] = {}
    for name, enc, dec in (("orjson", orjson.dumps, orjson.loads),
                           ("msgspec-json", msgspec.json.encode, msgspec.json.decode),
                           ("msgspec-msgpack", msgspec.msgpack.encode,
                            msgspec.msgpack.decode)):
        te, blobs = timed(lambda enc=enc: [enc(x) for x in items])
        td, _ = timed(lambda dec=dec, blobs=blobs: [dec(b) for b in blobs])
        size = sum(map(len, blobs)) / n
        encoded[name] = blobs
        results["serializers"][name] = {"encode_per_s": n / te, "decode_per_s": n / td,
                                        "bytes_per_event": size}
        print(f"{name:<16}{n / te:>10,.0f}  {n / td:>10,.0f}  {size:>10,.0f}")

    raw = encoded["msgspec-msgpack"]
    base = sum(map(len, raw)) / n
    print(f"\ncompression (msgpack payloads; baseline {base:,.0f} B/event)")
    print(f"{'scheme':<28}{'B/event':>9}{'ratio':>7}{'comp us/ev':>12}{'dec us/ev':>11}")

    def report(name: str, stored: list[bytes], tc: float, td: float) -> None:
        size = sum(map(len, stored)) / n
        results["compression"][name] = {"bytes_per_event": size, "ratio_to_raw": size / base,
                                        "compress_us_per_event": tc / n * 1e6,
                                        "decompress_us_per_event": td / n * 1e6}
        print(f"{name:<28}{size:>9,.0f}{size / base:>7.2f}{tc / n * 1e6:>12.2f}"
              f"{td / n * 1e6:>11.2f}")

    report("none", raw, 0.0, 0.0)
    for level in (1, 3):
        cctx, dctx = zstandard.ZstdCompressor(level=level), zstandard.ZstdDecompressor()
        for threshold in (256, 512, 1024, 4096):
            def comp(cctx=cctx, threshold=threshold) -> list[tuple[bytes, bool]]:
                out = []
                for b in raw:
                    if len(b) >= threshold:
                        c = cctx.compress(b)
                        out.append((c, True) if len(c) < len(b) - len(b) // 16 else (b, False))
                    else:
                        out.append((b, False))
                return out
            tc, packed = timed(comp)
            td, _ = timed(lambda packed=packed, dctx=dctx: [dctx.decompress(c) if z else c
                                                            for c, z in packed])
            report(f"zstd-{level} >= {threshold} B", [c for c, _ in packed], tc, td)

    # A trained dictionary for the small events (train on the first half).
    small = [b for b in raw[: n // 2] if len(b) < 1024]
    dict_data = zstandard.train_dictionary(64 * 1024, small)
    for level in (1, 3):
        plain = zstandard.ZstdCompressor(level=level)
        cdict = zstandard.ZstdCompressor(level=level, dict_data=dict_data)
        ddict = zstandard.ZstdDecompressor(dict_data=dict_data)
        dplain = zstandard.ZstdDecompressor()
        second = raw[n // 2:]
        def comp2(plain=plain, cdict=cdict, second=second) -> list[tuple[bytes, int]]:
            out = []
            for b in second:
                if len(b) >= 512:
                    out.append((plain.compress(b), 1))
                elif len(b) >= 32:
                    c = cdict.compress(b)
                    out.append((c, 2) if len(c) < len(b) else (b, 0))
                else:
                    out.append((b, 0))
            return out
        tc, packed = timed(comp2)
        td, _ = timed(lambda packed=packed, ddict=ddict, dplain=dplain: [
            ddict.decompress(c) if z == 2 else dplain.decompress(c) if z == 1 else c
            for c, z in packed])
        # scale to the whole run: the second half stands for every event
        stored = [c for c, _ in packed] * 2
        report(f"zstd-{level} >= 512 + dict < 512", stored, tc * 2, td * 2)
    print(json.dumps({"bench": "compression", "quick": args.quick, **results}))


if __name__ == "__main__":
    main()
