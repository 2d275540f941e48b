"""The worker process: the only place a benchmark executes."""
