"""Run eventsourcing's own recorder test cases against trajlog's recorders.

    python peers/eventsourcing/run.py [pytest args]

The cases ship in eventsourcing's wheel (``eventsourcing/tests/persistence.py``,
``eventsourcing/tests/application.py``), installed at the version pinned in
peers/requirements.txt, so nothing is fetched: ``test_trajlog_recorders.py``
subclasses them (``create_recorder()`` -> a trajlog recorder on a fresh store
file).  Exits non-zero on any failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PIN = re.search(r"^eventsourcing\[crypto\]==(\S+)$", (ROOT / "requirements.txt").read_text(),
                re.MULTILINE)

# Nothing is deselected: every case of the cases we subclass runs.  Not
# subclassed: TranscoderTestCase (the JSON transcoder, no recorder involved)
# and the PostgreSQL-only cases.
DESELECT: dict[str, str] = {}


def main(argv: list[str]) -> int:
    assert PIN is not None, "eventsourcing is not pinned in peers/requirements.txt"
    if version("eventsourcing") != PIN.group(1):
        print(f"eventsourcing {version('eventsourcing')} is installed; the pin is "
              f"{PIN.group(1)}: pip install -r peers/requirements.txt", file=sys.stderr)
        return 2
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rfE",
            str(HERE / "test_trajlog_recorders.py"), "--rootdir", str(HERE)]
    for node, reason in DESELECT.items():
        print(f"deselect {node}: {reason}")
        args += ["--deselect", node]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT.parent / "src"), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(args + argv, cwd=HERE, env=env, capture_output=True, text=True)
    sys.stdout.write(proc.stdout[-4000:])
    sys.stderr.write(proc.stderr[-4000:])
    passed = re.search(r"(\d+) passed", proc.stdout)
    print(f"eventsourcing {PIN.group(1)}: {passed.group(1) if passed else 0} passed, "
          f"{len(DESELECT)} deselected")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
