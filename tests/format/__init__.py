"""Tests of the frame format and of the two kernels that read and write it:
frames, checksums, golden vectors, C vs Python, properties, kernel selection,
envelope fields."""
