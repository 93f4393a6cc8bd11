"""Tests of the SQLite layer: schema and triggers, chunk rows, repack, the
migration of old stores, the storage seam every layer above goes through."""
