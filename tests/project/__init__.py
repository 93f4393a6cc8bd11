"""Tests of the repository as a whole: its layers and rooms, the event-type registry, the public
surface, packaging, and the docs (every example runs, every page is current)."""
