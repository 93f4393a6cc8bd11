"""The golden importer tests map other agents' files in pure Python: their
outcome does not depend on the kernel, so the light runs (the pure-Python
kernel, the sanitizer build, the sdist round trip: ``TRAJLOG_GOLDEN=0``) skip
them; the exports' tests, which frame and scan bytes, run everywhere."""

from __future__ import annotations

import os

GOLDEN = ["test_aider.py", "test_claude_code.py", "test_codex.py", "test_inspect_ai.py",
          "test_openhands.py", "test_realdata.py", "test_swe_agent.py"]

collect_ignore = GOLDEN if os.environ.get("TRAJLOG_GOLDEN", "1") == "0" else []
