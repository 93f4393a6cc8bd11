"""Tests of the projections: views folded from the log, the context builder and
the facts that expire."""
