"""Run LangGraph's checkpointer conformance suite against TrajlogSaver.

    python peers/langgraph_checkpoint/run.py

The suite is ``langgraph-checkpoint-conformance`` (pinned in
peers/requirements.txt): its ``validate()`` is the spec, so the test file here
(test_conformance.py) registers our saver with it and checks the report --
there is no sdist test tree to unpack.  Exits non-zero on any failure and
prints the counts.

Deselected: nothing.  Not claimed (validate() skips them itself, because the
saver does not override them): ``delete_for_runs`` and ``prune`` -- both remove
single checkpoints from the middle of a thread, which an append-only log can
only hide (see the saver's documentation).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from postgres import stores  # type: ignore[import-not-found]  # noqa: E402  (peers/postgres.py)

DESELECT: list[str] = []      # (node id, reason) pairs would go here; none are needed


def main() -> int:
    with stores() as backend:   # on PostgreSQL: the child's stores go to the run's server
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
               "--rootdir", str(HERE), "-c", os.devnull, str(HERE / "test_conformance.py"),
               *[f"--deselect={d}" for d in DESELECT]]
        proc = subprocess.run(cmd, cwd=HERE, env=env, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    spec = [int(n) for n in re.findall(r"conformance: (\d+) passed", proc.stdout)]
    tests = re.search(r"(\d+) passed", proc.stdout.splitlines()[-1] if proc.stdout else "")
    print(f"langgraph-checkpoint-conformance ({backend}): {sum(spec)} spec tests passed over "
          f"{len(spec)} variants ({', '.join(map(str, spec))}); "
          f"pytest: {tests.group(1) if tests else 0} passed, {len(DESELECT)} deselected; "
          "not claimed: delete_for_runs, prune")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
