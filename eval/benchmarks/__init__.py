"""Readers of benchmark ground truth and prediction files (clear errors that name the file and the problem)."""
