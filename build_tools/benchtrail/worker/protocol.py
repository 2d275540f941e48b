"""Worker requests and responses, and the only code that builds or reads their JSON; imports no torch.

The parent writes a request to REQUEST.json, runs ``python -m benchtrail.worker REQUEST.json RESPONSE.json``.
Request: ``{"version": 1, "kind": "compile" | "run", "config": {...}, ...}`` and its class's fields; response:
``{"version": 1, "status": str, "reason": str | null, ...}`` and the fields the job produced. An A/B run
sends the head's requests to the base commit's worker, of any age, so: no ``version`` means 1; readers ignore
unknown keys and take every response field as optional, so an optional field with an as-before default
may join a version; what an older reader would misread is a new version, served beside the old ones
(``SERVED_VERSIONS``; parents send the lowest that will do); an unserved version is refused by name."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from benchtrail.suite.serialization import serialize_and_pack

#: The version this code writes.
PROTOCOL_VERSION = 1
#: The versions this code reads and serves.
SERVED_VERSIONS = (1,)
#: What this worker does beyond its versions' fields (the server greets with them), for a parent to ask before
#: it sends an optional field an older worker would ignore. ``duet``: a run request's ``duet`` is honoured.
#: ``pythonpath``: the server forks other checkouts' jobs, each on its job's ``PYTHONPATH``, or refuses them.
FEATURES = ("duet", "pythonpath")
#: The measurement-method version, here so the parent reads it without the timing code. Results record it
#: (``environment.method_version``; absent: 1) and the baseline key includes it: bump it when new samples are
#: incomparable with old ones.
#:   1 — one spawned process per case and process index.
#:   2 — workers forked from a pre-imported server; a module's cases share each process, shuffled, from the
#:       compile stage's Inductor cache; cold compile samples exclude importing Dynamo and Inductor.
#:   3 — workers run with fixed glibc malloc thresholds: no allocation history can make a process page-fault.
#:   4 — eager function benchmarks' value tasks time the user's call on pre-bound arguments, without the
#:       module wrapper (floor ~5 µs → ~0.1 µs); torch's thread count is set before each sample; a model that
#:       declares ``mutates_inputs`` is timed one call per sample on fresh inputs.
METHOD_VERSION = 4
#: The reason of a CUDA case's ``failed`` record where torch sees no GPU (the worker's and the run stage's).
NO_CUDA_REASON = "CUDA run config on a machine without CUDA; refusing to run it on the CPU"


class ProtocolError(ValueError):
    """An unserved version, unknown kind or mistyped field; the message names it and what this side serves."""


def _version(data: Any, what: str) -> int:
    """1 when absent. Raises ProtocolError: not an object, or a version not in ``SERVED_VERSIONS``."""
    if not isinstance(data, dict):
        raise ProtocolError(f"worker {what} is a JSON {type(data).__name__}, not an object")
    version = data.get("version", 1)
    if type(version) is not int or version not in SERVED_VERSIONS:
        served = ", ".join(map(str, SERVED_VERSIONS))
        raise ProtocolError(
            f"worker {what} has protocol version {version!r}; this benchtrail serves version "
            f"{served} (a newer benchtrail wrote it: run both sides from one checkout, or "
            f"upgrade this one)"
        )
    return version


def _check(value: Any, types: type | tuple[type, ...], field: str, what: str = "request") -> Any:
    """``value`` if None or of ``types`` (a bool is no number), else ProtocolError naming the field."""
    types = types if isinstance(types, tuple) else (types,)
    if value is None or (isinstance(value, types) and (bool in types or not isinstance(value, bool))):
        return value
    raise ProtocolError(
        f"worker {what}: field {field!r} is {type(value).__name__} {value!r:.80}, not "
        + " or ".join(t.__name__ for t in types)
    )


#: Request fields added within version 1, written only when set: a worker from before them ignores them.
_OPTIONAL = ("tasks", "profile", "duet")


class _Request:
    #: Set by each request class: its dataclass fields, and the ``kind`` it is sent as.
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        """The request as a JSON object (version-1 field names and shapes)."""
        fields = dataclasses.asdict(self)
        return {"version": fields.pop("version"), "kind": self.kind} | {
            k: list(v) if isinstance(v, tuple) else v for k, v in fields.items() if v or k not in _OPTIONAL
        }


@dataclass(frozen=True)
class CompileRequest(_Request):
    """Compile one module; with ``module_dir`` write its artifact (export, AOTInductor) there.

    Attributes:
        config: ``serialize_and_pack([gen])`` of one ``ModuleGenerationConfig``.
        module_dir: None for a compile-time sample that keeps no artifact.
        explain: also count graphs and graph breaks (``torch._dynamo.explain``).
        tasks: after measuring, run one iteration of each task (``inference``, ``forward``, ``backward``,
            ``jacobian``) so its graphs land in the Inductor cache. Optional: older workers prime nothing.
    """

    config: dict[str, Any]
    module_dir: str | None = None
    explain: bool = True
    tasks: tuple[str, ...] = ()
    version: int = PROTOCOL_VERSION
    kind: ClassVar[str] = "compile"


@dataclass(frozen=True)
class RunRequest(_Request):
    """Run one case: samples in µs per iteration, with ``threads`` torch threads.

    Attributes:
        config: ``serialize_and_pack([rc])`` of one ``RunConfig``.
        module_dir: export and AOTInductor cases run from the artifact there.
        profile: a :func:`profile_spec`: after the samples, profile with ``torch.profiler`` and answer the
            operators' self times (``Response.profile``). Optional: older workers profile nothing.
        duet: a :func:`duet_spec`: pin to ``cpus`` and meet the other arm's worker at the barrier on the Unix
            socket before each sample, so sample j of both starts together. Optional: send it only to a
            worker whose server lists ``duet`` in :data:`FEATURES`.
    """

    config: dict[str, Any]
    threads: int
    module_dir: str | None = None
    version: int = PROTOCOL_VERSION
    profile: dict[str, Any] | None = None
    duet: dict[str, Any] | None = None
    kind: ClassVar[str] = "run"


Request = CompileRequest | RunRequest


def count_requests(requests: list[RunRequest], repeats: int, callgrind_dir: Any) -> dict[str, Any]:
    """The REQUESTS.json of ``python -m benchtrail.worker.counting REQUESTS.json JOURNAL.jsonl`` (run
    under callgrind), which appends ``{"start": i}`` to the journal before case i, then
    ``{"case": i, **response}``."""
    return {
        "version": PROTOCOL_VERSION,
        "repeats": repeats,
        "callgrind_dir": str(callgrind_dir),
        "requests": [r.to_json() for r in requests],
    }


def compile_request(
    gen: Any, module_dir: Any = None, explain: bool = True, tasks: tuple[str, ...] = ()
) -> CompileRequest:
    """``gen`` a ``ModuleGenerationConfig``; ``module_dir`` a path or None."""
    return CompileRequest(
        serialize_and_pack([gen]), str(module_dir) if module_dir else None, explain, tuple(tasks)
    )


def run_request(
    rc: Any, module_dir: Any = None, profile: dict[str, Any] | None = None, duet: dict[str, Any] | None = None
) -> RunRequest:
    """``rc`` a ``RunConfig``, run with its device's threads. Its ``count_instructions`` is dropped: no
    worker reads it and older workers refuse it."""
    device = dataclasses.replace(rc.target_device, count_instructions=False)
    return RunRequest(
        serialize_and_pack([dataclasses.replace(rc, target_device=device)]),
        device.threads,
        str(module_dir) if module_dir else None,
        profile=profile,
        duet=duet,
    )


def profile_spec(trace: Any, iterations: int = 20, budget_ms: float | None = None) -> dict[str, Any]:
    """Profile at most ``iterations`` (fewer when the samples say ``budget_ms`` ms would not fit them), the
    Chrome trace to ``trace`` (made absolute).

    Raises ProtocolError: ``iterations`` < 1 or ``budget_ms`` <= 0.
    """
    from pathlib import Path

    return _checked_profile(
        {"iterations": iterations, "trace": str(Path(trace).absolute()), "budget_ms": budget_ms}
    )


def duet_spec(socket: Any, cpus: Any) -> dict[str, Any]:
    """Raises ProtocolError: an empty ``socket``, or ``cpus`` not a non-empty list of distinct ids >= 0."""
    return _checked_duet({"socket": str(socket), "cpus": list(cpus)})


def _duet_of(value: Any) -> dict[str, Any] | None:
    spec = _check(value, dict, "duet")
    return None if spec is None else _checked_duet(spec)


def _checked_duet(spec: dict[str, Any]) -> dict[str, Any]:
    socket, cpus = spec.get("socket"), spec.get("cpus")
    if not (
        isinstance(socket, str)
        and socket
        and isinstance(cpus, list)
        and cpus
        and all(type(c) is int and c >= 0 for c in cpus)
        and len(set(cpus)) == len(cpus)
    ):
        raise ProtocolError(
            f"worker request: field 'duet' is {spec!r:.200}; allowed: {{socket: <path>, "
            f"cpus: <non-empty list of distinct CPU ids>}}"
        )
    return {"socket": socket, "cpus": cpus}


def _profile_of(value: Any) -> dict[str, Any] | None:
    spec = _check(value, dict, "profile")
    return None if spec is None else _checked_profile(spec)


def _checked_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields set; ProtocolError unless ``iterations`` >= 1, ``trace`` non-empty, ``budget_ms`` > 0."""
    checked = {
        k: _check(spec.get(k), types, f"profile.{k}")
        for k, types in (("iterations", int), ("trace", str), ("budget_ms", (int, float)))
    }
    iterations, trace, budget = checked.values()
    if iterations is None or iterations < 1 or not trace or (budget is not None and not budget > 0):
        raise ProtocolError(
            f"worker request: field 'profile' is {spec!r:.200}; allowed: {{iterations: "
            f"<integer >= 1>, trace: <path>, budget_ms: <number > 0> (optional)}}"
        )
    return {k: v for k, v in checked.items() if v is not None}


def read_request(data: Any) -> Request:
    """Ignores unknown keys. Raises ProtocolError: an unserved version or kind, or a mistyped field."""
    version = _version(data, "request")
    kind = data.get("kind")
    config = data.get("config")
    if not isinstance(config, dict):
        raise ProtocolError(f"worker request: field 'config' is {type(config).__name__}, not an object")
    module_dir = _check(data.get("module_dir"), str, "module_dir") or None
    if kind == "compile":
        tasks = _check(data.get("tasks"), list, "tasks") or []
        if not all(isinstance(t, str) for t in tasks):
            raise ProtocolError(f"worker request: field 'tasks' is {tasks!r:.80}, not a list of task names")
        return CompileRequest(
            config,
            module_dir,
            bool(_check(data.get("explain", True), bool, "explain")),
            tuple(tasks),
            version,
        )
    if kind == "run":
        threads = _check(data.get("threads"), int, "threads")
        if threads is None:
            raise ProtocolError("worker request: a run request needs 'threads'")
        return RunRequest(
            config, threads, module_dir, version, _profile_of(data.get("profile")), _duet_of(data.get("duet"))
        )
    raise ProtocolError(f"worker request: kind {kind!r} is not one this worker serves ('compile', 'run')")


#: Response fields that are lists of numbers or objects (tuples here, lists in JSON).
_SEQUENCES = ("samples", "gpu_samples_us", "wall_samples_us", "break_reasons", "instructions")
#: Run fields written whenever the run's samples are, also when null (version 1 always wrote them).
WITH_SAMPLES = ("correctness", "jacobian_mode")
#: The JSON types a response field's annotation allows, by the annotation's first name.
_JSON_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "dict": dict,
    "tuple": (list, tuple),
}


@dataclass(frozen=True)
class Response:
    """A worker's answer to one request (or the parent's stand-in for one that did not answer).

    Attributes:
        status: ``ok``, ``mismatch`` (output differs from the reference), ``failed``, ``oom``, ``timeout``.
        oom: ``{"requested_bytes": int | None, "cache_emptied": bool}``.
        phase_times_ms: ms per finished phase (``prep``, ``compile``, ``check``, ``run``, ``done``).
        samples: µs per iteration; ``gpu_samples_us``, ``wall_samples_us``: CUDA-event and synced host times.
        timing: the worker's CUDA timing plan as a dict. ``memory``: peak bytes (``peak_rss_bytes``, device).
        artifacts: bytes per file; graph counts only when explained. Compile times in ms.
        timed_ms: a run's time inside its timed sample blocks; ``warmup_ms`` the rest of its ``run`` phase.
        profile: ``{"iterations": int, "trace": path, "wall_ms": float, "operators": [{"name": str,
            "self_cpu_us": float, "count": int, "self_device_us": float (GPU)}]}``, µs summed over the
            iterations, largest self CPU first, at most 50; or ``{"error": str}`` (the samples stand).
        duet: ``{"cpus": [int], "synced": int}``: CPUs pinned to, samples started at the barrier.
        floor_us: a CPU run's harness floor, µs per call. ``threads_set``: set before each sample;
            ``threads`` is then what the case's code left.
        instructions: per call, one per repeat, less ``overhead`` (an empty counted block's);
            ``cpu_capability``: the ISA torch dispatched on under valgrind.
        version: 1 when the JSON has none. Fields added within version 1 are absent from older workers.
    """

    status: str
    reason: str | None = None
    traceback: str | None = None
    oom: dict[str, Any] | None = None
    phase_times_ms: dict[str, float] | None = None
    samples: tuple[float, ...] | None = None
    iterations_per_sample: int | None = None
    warmup_iterations: int | None = None
    timing: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    gpu_samples_us: tuple[float, ...] | None = None
    wall_samples_us: tuple[float, ...] | None = None
    threads: int | None = None
    correctness: dict[str, Any] | None = None
    jacobian_mode: str | None = None
    compile_time_ms: float | None = None
    peak_rss_bytes: int | None = None
    kernel_count: int | None = None
    kernel_count_reason: str | None = None
    recompiles: int | None = None
    fxgraph_cache_hit: int | None = None
    fxgraph_cache_miss: int | None = None
    artifacts: dict[str, int] | None = None
    graph_count: int | None = None
    graph_breaks: int | None = None
    break_reasons: tuple[dict[str, Any], ...] | None = None
    timed_ms: float | None = None
    warmup_ms: float | None = None
    prime_ms: float | None = None
    profile: dict[str, Any] | None = None
    duet: dict[str, Any] | None = None
    floor_us: float | None = None
    threads_set: int | None = None
    instructions: tuple[float, ...] | None = None
    overhead: int | None = None
    cpu_capability: str | None = None
    callgrind: str | None = None
    version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        for name in _SEQUENCES:
            if (value := getattr(self, name)) is not None:
                object.__setattr__(self, name, tuple(value))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_json(self) -> dict[str, Any]:
        """``version``, ``status``, ``reason``, then every field the job produced."""
        out: dict[str, Any] = {"version": self.version, "status": self.status, "reason": self.reason}
        for f in dataclasses.fields(self)[2:-1]:  # after status and reason, before version
            value = getattr(self, f.name)
            if value is not None or (f.name in WITH_SAMPLES and self.samples is not None):
                out[f.name] = list(value) if f.name in _SEQUENCES else value
        return out


#: Each response field (but ``version``) and the JSON types it takes; the annotations are strings.
_TYPES = {f.name: _JSON_TYPES[re.findall(r"\w+", str(f.type))[0]] for f in dataclasses.fields(Response)[:-1]}


def read_response(data: Any) -> Response:
    """Ignores unknown keys. Raises ProtocolError: an unserved version, no ``status``, or a mistyped field."""
    version = _version(data, "response")
    if not isinstance(data.get("status"), str) or not data["status"]:
        raise ProtocolError(f"worker response: field 'status' is {data.get('status')!r}, not a status name")
    fields = {name: _check(data.get(name), types, name, "response") for name, types in _TYPES.items()}
    return Response(**fields, version=version)


def refusal(exc: ProtocolError) -> Response:
    """The ``failed`` response to a request a worker cannot read."""
    return Response(status="failed", reason=f"cannot serve the request: {exc}")
