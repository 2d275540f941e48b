"""PyTorch model factories benchmarked by the benchtrail suites."""
