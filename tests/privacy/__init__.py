"""Tests of redaction, privacy modes, erasure and retention, proven on the raw
bytes of the database files."""
