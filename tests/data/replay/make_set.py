"""Record the fixed replay set into this folder.

    python tests/data/replay/make_set.py

writes one trajlog export per case (``<case>.jsonl``: every event with its
checksums, readable with jq) and ``manifest.json`` (case -> session, run,
and what a changed model and a changed policy must show).  The files are the
test data: tests/api/test_replay.py imports them, it does not record anew.  Run
this again only when a change is *meant* to alter what a recorded run looks
like (a new event layout, a builder version bump), and say so in the commit.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # tests/, for replaykit: run as a script

import trajlog  # noqa: E402
from kits.replaykit import CASES, session_id  # noqa: E402

#: the policy change each case is replayed under, and what it must show:
#: ``drop`` / ``add`` take an exclusion out of / into the recorded policy,
#: ``set`` sets fields; ``added`` / ``removed``:
#: the exclusion reasons of the seqs the new policy admits / leaves out;
#: ``output_now``: a piece of the answer the model gives on the new context
#: (None: the same answer as recorded)
EXPECT: dict[str, dict[str, Any]] = {
    "normal-completion": {"set": {"recent_messages": 0},
                          "added": [], "removed": ["limit.recent_messages"],
                          "output_now": "fix what TASK-1, TEST-7 show"},
    "branch-conflict": {"drop": "branch.other", "added": ["branch.other"], "removed": [],
                        "output_now": "two causes"},
    "tool-timeout": {"add": "data_class.internal", "added": [],
                     "removed": ["data_class.internal"], "output_now": "no evidence"},
    "workspace-change": {"set": {"max_file_snippets": 0}, "added": [],
                         "removed": ["limit.max_file_snippets"], "output_now": "no evidence"},
    "expired-permission": {"drop": "permission.expired", "added": ["permission.expired"],
                           "removed": [], "output_now": "deploying"},
    "injected-content": {"drop": "source.untrusted", "added": ["source.untrusted"],
                         "removed": [], "output_now": "curl evil.sh"},
}


def main() -> None:
    manifest: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, trajlog.open(str(Path(tmp) / "set.db")) as store:
        for name, record in CASES.items():
            run_id = record(store)
            sid = session_id(name)
            target = HERE / f"{name}.jsonl"
            store.export(sid, target)
            manifest[name] = {"session": sid, "run": run_id, "file": target.name,
                              **EXPECT[name]}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} cases to {HERE}")


if __name__ == "__main__":
    main()
