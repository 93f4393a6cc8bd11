"""Tests of the session API (src/trajlog/api): appends and reads, forks and
subagents, retries, cancellation, checks, checkpoints, runs, replay, typed
errors."""
