"""Tests of the trajlog command line, mostly run as a subprocess as a user runs
it."""
