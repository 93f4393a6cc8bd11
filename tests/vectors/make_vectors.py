"""Generate the golden frame vectors (run once; the outputs are frozen in git).

    TRAJLOG_BACKEND=python python tests/vectors/make_vectors.py

They pin the on-disk format itself, not just agreement between the kernels: a
change to either kernel that alters one byte fails tests/format/test_vectors.py.
Regenerate only together with a FORMAT.md version bump.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from trajlog import codec
from trajlog._backend import load_kernel
from trajlog._format import Cursor

HERE = Path(__file__).resolve().parent


def cases() -> list[dict]:
    key = codec.session_key(uuid.UUID("1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
                            kernel=load_kernel("python"))
    fork_key = codec.session_key(uuid.UUID("6fa459ea-ee8a-3ca4-894e-db77e160355e"),
                                 kernel=load_kernel("python"))
    sizes = [0, 1, 7, 8, 9, 16, 17, 128, 129, 240, 241, 200, 1300, 4096]
    pattern = bytes((i * 37 + 11) & 0xFF for i in range(4096))
    frames = [{"payload": pattern[:n].hex(), "type": 2, "flags": 0, "raw_len": n}
              for n in sizes]
    frames += [{"payload": b"hdr".hex(), "type": t, "flags": 0, "raw_len": 3}
               for t in (1, 3, 4, 5, 6, 0x80, 0xFF)]
    frames.append({"payload": "28b52ffd0000", "type": 2, "flags": 1, "raw_len": 1000})
    frames.append({"payload": "28b52ffd0001", "type": 2, "flags": 3, "raw_len": 64})
    return [
        {"name": "log", "key": key, "cursor": [0, 0, key], "frames": frames},
        {"name": "fork", "key": fork_key, "cursor": [0, 5, 0x0123456789ABCDEF],
         "frames": frames[:4]},
    ]


def main() -> None:
    py = load_kernel("python")
    out = []
    for case in cases():
        payloads = [bytes.fromhex(f["payload"]) for f in case["frames"]]
        log, end = codec.encode(payloads, case["key"], Cursor(*case["cursor"]),
                                types=[f["type"] for f in case["frames"]],
                                flags=[f["flags"] for f in case["frames"]],
                                raw_lens=[f["raw_len"] for f in case["frames"]], kernel=py)
        (HERE / f"{case['name']}_v1.bin").write_bytes(log)
        headers = [h._asdict() for h in py.scan(log, case["key"], Cursor(*case["cursor"]),
                                                10_000, True)[1]]
        out.append({**case, "headers": headers, "end_cursor": list(end)})
    (HERE / "frames_v1.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
