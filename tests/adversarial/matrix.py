"""Print the tamper matrix as a markdown table (``--write``: also store it in
MATRIX.md next to this file; ``--full``: details not cut short; ``--summary``:
the table of outcome counts per table and connection that
docs/guarantees.md shows).

    PYTHONPATH=src python tests/adversarial/matrix.py [--write] [--full] [--summary]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent):          # matrix_kit, and the shared tests/kits/tamper.py
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import matrix_kit  # noqa: E402


def main(argv: list[str]) -> int:
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trajlog-matrix-") as tmp:
        work = Path(tmp)
        template = matrix_kit.build_template(str(work / "template.db"))
        results = [(row, matrix_kit.run_row(row, template, work)) for row in matrix_kit.ROWS]
    if "--summary" in argv:
        sys.stdout.write(summary(results))
        return 0
    text = matrix_kit.markdown(results, width=10_000 if "--full" in argv else 240)
    sys.stdout.write(text)
    sys.stderr.write(f"{len(results)} rows in {time.monotonic() - start:.1f} s\n")
    if "--write" in argv:
        (HERE / "MATRIX.md").write_text(text, encoding="utf-8")
    return 0


def summary(results: list[tuple[matrix_kit.Row, matrix_kit.Result]]) -> str:
    """Rows per (table, connection): how many ended in each outcome, and how
    many ended otherwise than expected (a defect)."""
    modes = [m for m in matrix_kit.MODES if any(r.mode == m for r, _ in results)]
    tables = list(dict.fromkeys(r.case.table for r, _ in results))
    short = {matrix_kit.REFUSED: "refused", matrix_kit.AT_OPEN: "at open",
             matrix_kit.FOUND: "verify", matrix_kit.HARMLESS: "harmless",
             matrix_kit.LIMIT: "limit"}
    lines = ["| table | " + " | ".join(matrix_kit.MODE_TEXT[m] for m in modes) + " |",
             "|---|" + "---|" * len(modes)]
    for table in tables:
        cells = []
        for mode in modes:
            got = [(row, res) for row, res in results if row.case.table == table
                   and row.mode == mode]
            if not got:
                cells.append("")
                continue
            counts = {short.get(res.actual, res.actual): 0 for _, res in got}
            for _, res in got:
                counts[short.get(res.actual, res.actual)] += 1
            bad = sum(res.actual != row.expected for row, res in got)
            cells.append(", ".join(f"{n} {k}" for k, n in counts.items())
                         + (f" (**{bad} defects**)" if bad else ""))
        lines.append(f"| {table} | " + " | ".join(cells) + " |")
    total = len(results)
    bad = sum(res.actual != row.expected for row, res in results)
    lines.append("")
    lines.append(f"{total} rows; {bad} ended otherwise than expected.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
