"""Verdicts, thresholds and quarantine, baselines, gating and the comment."""
