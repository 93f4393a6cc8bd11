"""The damage simulation behind fuzz/damage_table.py, small enough for CI:
with the watermark, power loss never costs a synced frame and media damage is
always corruption."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fuzz"))

from damage_table import simulate


def test_damage_table_with_watermark(kernel):
    table = simulate(300 if kernel.NAME == "c" else 120, seed=11, kernel=kernel)
    assert sum(r["cases"] for r in table.values()) == (300 if kernel.NAME == "c" else 120)
    for name, row in table.items():
        assert row.get("synced frames lost", 0) == 0, name
        assert row.get("misclassified with wm", 0) == 0, name
        if name.startswith("media"):
            assert row.get("wm corrupt", 0) == row["cases"], name
        else:
            assert row.get("wm corrupt", 0) == 0, name
