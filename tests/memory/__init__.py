"""Tests of scoped, typed memory: gates, merges, versions, scopes and who owns
them."""
