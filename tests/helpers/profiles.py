"""A worker's operator profile (torch.profiler's self CPU time per operator), as the re-check records it."""

def worker_profile(iterations: int, ops: dict[str, float]) -> dict:
    return {"iterations": iterations, "trace": "/tmp/t.json", "wall_ms": 5.0,
            "operators": [{"name": k, "self_cpu_us": v, "count": iterations} for k, v in ops.items()]}
