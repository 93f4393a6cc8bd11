"""Print the tamper matrix as a markdown table (``--write``: also store it in
MATRIX.md next to this file; ``--full``: details not cut short).

    PYTHONPATH=src python tests/adversarial/matrix.py [--write] [--full]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent):          # matrix_kit, and the shared tests/tamper.py
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import matrix_kit  # noqa: E402


def main(argv: list[str]) -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trajlog-matrix-") as tmp:
        work = Path(tmp)
        template = matrix_kit.build_template(str(work / "template.db"))
        results = [(row, matrix_kit.run_row(row, template, work)) for row in matrix_kit.ROWS]
    text = matrix_kit.markdown(results, width=10_000 if "--full" in argv else 240)
    sys.stdout.write(text)
    sys.stderr.write(f"{len(results)} rows in {time.monotonic() - start:.1f} s\n")
    if "--write" in argv:
        (HERE / "MATRIX.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
