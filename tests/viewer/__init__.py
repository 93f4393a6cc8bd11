"""The viewer tests (a package, so that its conftest is not the top-level
``conftest`` that other test modules import from)."""
