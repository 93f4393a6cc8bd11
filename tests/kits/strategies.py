"""Hypothesis strategies: payload batches, valid logs, and the damage they suffer."""

from __future__ import annotations

from hypothesis import strategies as st

from trajlog._format import HEADER_SIZE

keys = st.integers(min_value=0, max_value=2**64 - 1)
# Mostly small payloads, some crossing sector boundaries, a few large.
payload = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=100, max_size=1400),
    st.builds(lambda n, b: (b * (n // max(len(b), 1) + 1))[:n],
              st.integers(2000, 20_000), st.binary(min_size=1, max_size=16)),
)
payload_lists = st.lists(payload, min_size=1, max_size=12)


def frame_offsets(items: list[bytes]) -> list[int]:
    """Start offset of each frame, plus the end of the log as the last entry."""
    out, pos = [], 0
    for item in items:
        out.append(pos)
        pos += HEADER_SIZE + len(item) + (-len(item) & 7)
    return [*out, pos]
