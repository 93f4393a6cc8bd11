"""The ``trajlog`` command line: ``trajlog demo`` and the inspection tools."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Sequence
from typing import TextIO

from . import __version__, codec
from ._backend import get_kernel
from ._format import HEADER_SIZE


def _demo_frames() -> tuple[bytes, int, list[bytes]]:
    """A small recorded turn, encoded as frames: (log bytes, session key, payloads)."""
    events = [
        {"type": "turn/start", "data": {}},
        {"type": "user/message", "data": {"content": "fix the login bug"}},
        {"type": "assistant/message", "data": {
            "content": "reading it",
            "tool_calls": [{"id": "c1", "name": "read", "arguments": {"path": "login.ts"}}]}},
        {"type": "tool/call", "data": {"call_id": "c1", "name": "read",
                                       "arguments": {"path": "login.ts"}}},
        {"type": "tool/result", "data": {"call_id": "c1", "output": "export function login("
                                         + "x" * 900 + ")", "is_error": False}},
        {"type": "assistant/message", "data": {"content": "the token check is inverted"}},
        {"type": "turn/end", "data": {"interrupted": False}},
    ]
    payloads = [json.dumps(e, separators=(",", ":")).encode() for e in events]
    key = codec.session_key(uuid.UUID(int=0x1B4E28BA2FA111D2883F0016D3CCA427))
    log, _ = codec.encode(payloads, key, codec.start_cursor(key))
    return log, key, payloads


def _damage_cases(log: bytes, key: int) -> list[tuple[str, bytes]]:
    frames = list(codec.iter_frames(log, key))
    third = frames[2].offset
    last = frames[-1].offset
    flipped = bytearray(log)
    flipped[third + HEADER_SIZE + 5] ^= 0x10
    zeroed = bytearray(log)
    sector = (frames[4].offset + HEADER_SIZE) // 512 * 512 + 512
    zeroed[sector:sector + 512] = bytes(512)
    swapped = bytearray(log[:frames[1].offset]) + log[frames[2].offset:frames[3].offset] + \
        log[frames[1].offset:frames[2].offset] + log[frames[3].offset:]
    return [
        ("intact log", log),
        ("power loss mid-append (cut inside the last frame)", log[: last + 20]),
        ("zero-filled tail after the last frame", log + bytes(4096)),
        ("one bit flipped in frame 2's payload", bytes(flipped)),
        ("a 512-byte sector of frame 4 zeroed", bytes(zeroed)),
        ("frames 1 and 2 swapped", bytes(swapped)),
    ]


def demo(out: TextIO | None = None) -> int:
    """Encode a session, damage it in several ways, and print each scan verdict."""
    write = (out or sys.stdout).write
    log, key, payloads = _demo_frames()
    write(f"trajlog {__version__} demo  (kernel: {get_kernel().NAME})\n\n")
    write(f"encoded {len(payloads)} events into {len(log)} bytes of frames "
          f"({sum(map(len, payloads))} payload bytes)\n\n")
    last_seq = len(payloads) - 1
    write(f"{'damage':<52} {'no watermark':<14} {'watermark seq=' + str(last_seq - 1):<20} "
          "frames kept\n")
    for name, data in _damage_cases(log, key):
        plain = codec.scan(data, key)
        marked = codec.scan(data, key, watermark=last_seq - 1)
        write(f"{name:<52} {plain.verdict.value:<14} {marked.verdict.value:<20} "
              f"{marked.frames}\n")
        if marked.verdict is codec.Verdict.CORRUPT:
            write(f"{'':<4}-> {marked.error('1b4e28ba')}\n")
    write("\nA defect after the watermark is a torn write and is dropped; at or below it,\n"
          "it is corruption and is refused with its offset, seq and reason.\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="trajlog", description=__doc__)
    parser.add_argument("--version", action="version", version=f"trajlog {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="encode, damage and verify a small session log")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
