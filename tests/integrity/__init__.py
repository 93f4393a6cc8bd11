"""Tests that the store stays correct, or says why, when things go wrong: crashes,
power loss, I/O errors, byte damage, races, recovery, adversarial findings."""
