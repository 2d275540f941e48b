"""Records of models run eager and compiled (execution and compilation series) and the two sides' results
that the compiler summary tests compare: a CPU device and a GPU one."""

import dataclasses

from tests.helpers.records import record, results, spread

CPU, GPU = "c2-standard-16", "g2-standard-8"
MiB = 2**20


def case(model: str, config: str, median: float | None, device: str = CPU, *, status: str = "ok",
         peak_mib: float | None = None):
    """An execution record of ``model`` under ``config`` on ``device`` with samples around ``median`` µs."""
    memory = {"peak_rss_bytes": 3000 * MiB}
    if peak_mib is not None:
        memory["max_memory_allocated_bytes"] = int(peak_mib * MiB)
    r = record(f"{model}-{config}-{device}", spread(median) if median is not None else (), status=status,
               memory=memory)
    return dataclasses.replace(r, name=f"{model}.{config}.inference-bs1.{device}", device_name=device,
                               module_name=f"{model}.{config}.x86_64", compile_config=config)


def compiled(model: str, config: str, metric: str, samples, device: str = CPU, status: str = "ok"):
    """A compilation record ``<module>-<metric>`` (ms)."""
    r = record(f"{model}-{config}-{metric}", samples, status=status, kind="compilation", metric=metric,
               unit="ms")
    return dataclasses.replace(r, name=f"{model}.{config}.x86_64.{metric}", device_name=device, task=None,
                               module_name=f"{model}.{config}.x86_64", compile_config=config)


def head_results():
    return [results(
        # CPU: speedups 2, 4 and 1; m4 fails to compile. Pass rate 3/4.
        case("m1", "eager", 100.0), case("m2", "eager", 200.0), case("m3", "eager", 300.0),
        case("m4", "eager", 400.0),
        case("m1", "inductor", 50.0), case("m2", "inductor", 50.0), case("m3", "inductor", 300.0),
        case("m4", "inductor", None, status="failed"),
        compiled("m1", "inductor", "compile_time_cold_ms", (1000.0, 1200.0, 1100.0)),
        compiled("m2", "inductor", "compile_time_cold_ms", (3000.0,)),
        compiled("m3", "inductor", "compile_time_cold_ms", (2000.0,)),
        compiled("m4", "inductor", "compile_time_cold_ms", (), status="failed"),
        compiled("m1", "inductor", "compile_time_warm_ms", (100.0, 120.0)),
        compiled("m2", "inductor", "compile_time_warm_ms", (300.0,)),
        compiled("m1", "inductor", "graph_breaks", (0.0,)),
    ), results(
        # GPU: speedups 2 and 2; allocator peaks 1000/800 and 600/600 MiB: ratios 1.25 and 1.0.
        case("m1", "eager", 10.0, GPU, peak_mib=1000), case("m2", "eager", 20.0, GPU, peak_mib=600),
        case("m1", "inductor", 5.0, GPU, peak_mib=800), case("m2", "inductor", 10.0, GPU, peak_mib=600),
    )]


def base_results():
    return [results(
        # CPU: speedups 2, 2, 1, 1, all ok; cold compile times 1000, 2000, 2500, 4000 ms; no warm samples.
        case("m1", "eager", 100.0), case("m2", "eager", 200.0), case("m3", "eager", 300.0),
        case("m4", "eager", 400.0),
        case("m1", "inductor", 50.0), case("m2", "inductor", 100.0), case("m3", "inductor", 300.0),
        case("m4", "inductor", 400.0),
        *(compiled(m, "inductor", "compile_time_cold_ms", (t,))
          for m, t in (("m1", 1000.0), ("m2", 2000.0), ("m3", 2500.0), ("m4", 4000.0))),
    ), results(
        case("m1", "eager", 10.0, GPU, peak_mib=1000), case("m2", "eager", 20.0, GPU, peak_mib=600),
        case("m1", "inductor", 5.0, GPU, peak_mib=1000), case("m2", "inductor", 10.0, GPU, peak_mib=600),
    )]
