"""Benchmark definitions the tests run: tiny models and function benchmarks, some wrong on purpose."""
