"""Benchmark suite framework: definitions, ids, presets and serialization."""
