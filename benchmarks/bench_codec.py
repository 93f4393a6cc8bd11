"""Frame codec throughput: encode_batch and scan (verify) for both kernels.

Payloads of 200 B, 1.3 KB and 64 KB; reports MB/s (payload + frame bytes
processed) and frames/s for each kernel, and the C/Python ratio, all measured
in this one process.  Best of several repeats; the machine is noisy, so read
ratios, not absolutes.

The working set is 4 MiB of frames, the size of the chunks the store reads and
verifies at a time (so the bytes are in cache, as they are right after SQLite
returned them).  A second "cold" measurement at 1.3 KB scans a 64 MiB buffer,
which on a 2-vCPU VM is bound by memory bandwidth for both kernels alike.

    python benchmarks/bench_codec.py [--quick]

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from collections.abc import Callable

from trajlog import codec
from trajlog._backend import load_kernel
from trajlog._format import MAX_SEQ

SIZES = {"200B": 200, "1.3KB": 1300, "64KB": 65536}


def best_of(fn: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cpus"
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs (< 60 s)")
    args = parser.parse_args()
    total_bytes = 4 * 1024 * 1024
    repeats = 5 if args.quick else 15
    kernels = {"c": load_kernel("c"), "python": load_kernel("python")}
    key = codec.session_key(bytes(range(16)))
    rng = random.Random(1)
    results: dict[str, dict[str, float]] = {}
    print(f"machine: {machine()}")
    print(f"{'size':<7}{'kernel':<8}{'encode MB/s':>13}{'encode fr/s':>14}"
          f"{'scan MB/s':>12}{'scan fr/s':>14}")
    for label, size in SIZES.items():
        n = max(16, total_bytes // size)
        base = rng.randbytes(size + 64)
        payloads = [base[i % 64:i % 64 + size] for i in range(n)]
        log = b""
        row: dict[str, float] = {}
        for name, k in kernels.items():
            items = payloads  # the same frames for both kernels
            cur = codec.start_cursor(key)
            enc_t = best_of(lambda k=k, items=items, cur=cur: k.encode_batch(
                key, items, [2] * len(items), cur), repeats)
            status, data, _ = k.encode_batch(key, items, [2] * len(items), cur)
            assert status == 0
            if name == "c":
                log = data
            scan_t = best_of(lambda k=k, data=data, cur=cur: k.scan(data, key, cur, MAX_SEQ,
                                                                     False), repeats)
            status, _, end, _ = k.scan(data, key, cur, MAX_SEQ, False)
            assert status == 1 and end.next_seq == len(items)
            row[f"{name}_encode_MBps"] = len(data) / enc_t / 1e6
            row[f"{name}_encode_fps"] = len(items) / enc_t
            row[f"{name}_scan_MBps"] = len(data) / scan_t / 1e6
            row[f"{name}_scan_fps"] = len(items) / scan_t
            print(f"{label:<7}{name:<8}{row[f'{name}_encode_MBps']:>13,.0f}"
                  f"{row[f'{name}_encode_fps']:>14,.0f}{row[f'{name}_scan_MBps']:>12,.0f}"
                  f"{row[f'{name}_scan_fps']:>14,.0f}")
        row["encode_ratio_c_over_python"] = row["c_encode_fps"] / row["python_encode_fps"]
        row["scan_ratio_c_over_python"] = row["c_scan_fps"] / row["python_scan_fps"]
        row["frame_bytes"] = len(log) / n
        print(f"{'':<7}ratio C/Python: encode {row['encode_ratio_c_over_python']:.1f}x, "
              f"scan {row['scan_ratio_c_over_python']:.1f}x")
        results[label] = row
    # Cold: a buffer far larger than the caches.
    cold_n = (16 if args.quick else 64) * 1024 * 1024 // 1300
    base = rng.randbytes(1400)
    cold = [base[i % 64:i % 64 + 1300] for i in range(cold_n)]
    cur = codec.start_cursor(key)
    row = {}
    for name, k in kernels.items():
        _, data, _ = kernels["c"].encode_batch(key, cold, [2] * cold_n, cur)
        t = best_of(lambda k=k, data=data: k.scan(data, key, cur, MAX_SEQ, False), 3)
        row[f"{name}_scan_MBps"] = len(data) / t / 1e6
    row["scan_ratio_c_over_python"] = row["c_scan_MBps"] / row["python_scan_MBps"]
    results["1.3KB-cold"] = row
    print(f"1.3KB cold ({len(data) >> 20} MiB): scan C {row['c_scan_MBps']:,.0f} MB/s, "
          f"Python {row['python_scan_MBps']:,.0f} MB/s, "
          f"ratio {row['scan_ratio_c_over_python']:.1f}x")
    print(json.dumps({"bench": "codec", "machine": machine(), "quick": args.quick,
                      "results": results}))


if __name__ == "__main__":
    main()
