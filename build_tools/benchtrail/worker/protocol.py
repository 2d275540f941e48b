"""The worker protocol: the typed requests the parent sends and the responses a worker answers.

The parent (``benchtrail.runner``) writes one request as JSON to ``REQUEST.json`` and starts
``python -m benchtrail.worker REQUEST.json RESPONSE.json``; the worker writes one response as JSON
to ``RESPONSE.json`` and exits. This module is the only place either side builds or reads that
JSON (``to_json`` / ``read_request`` / ``read_response``). It imports neither torch nor any worker
module that does, so the parent side stays torch-free.

Requests (``kind`` names the job)::

    {"version": 1, "kind": "compile", "config": <packed ModuleGenerationConfig>,
     "module_dir": str | null, "explain": bool, "tasks": [str] (optional)}
    {"version": 1, "kind": "run", "config": <packed RunConfig>, "threads": int, "module_dir": str | null,
     "profile": {"iterations": int, "trace": str, "budget_ms": float (optional)} (optional),
     "duet": {"socket": str, "cpus": [int]} (optional)}

Responses: ``{"version": 1, "status": str, "reason": str | null, ...}`` plus the fields of
:class:`Response` that the job produced (a field the job did not produce is left out, not null).

Compatibility rule
------------------
A paired A/B run (``benchtrail.runner.ab``) sends the *head's* requests to the *base* commit's own
worker, and the base may be any older commit. So every protocol change keeps the previous
version working, in both directions:

1. A request or response without a ``version`` key is version 1 (workers and parents from before
   the field existed) and is still served and read.
2. What a new parent sends must be accepted by an older worker: field names and shapes of an
   existing version never change. Readers ignore keys they do not know (the version-1 worker of
   commit 686ed93 reads requests by key and ignores the rest), so a new *optional* field with a
   default that means "as before" may be added within a version.
3. What an older worker answers must be read by a new parent: every response field stays
   optional on reading, so an old worker's response (fewer fields, no ``version``) reads fully.
4. A change an older reader would misread (a renamed, retyped or newly required field, a changed
   meaning) gets a new version number; the parent keeps sending the lowest version that expresses
   the job, and a worker keeps serving every version in :data:`SERVED_VERSIONS`.
5. A version a reader does not serve is refused by name, never guessed at: a worker answers
   status ``failed`` with a reason naming the version and the versions it serves
   (:class:`ProtocolError`), and a parent treats such a response as a failed case.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

#: The version this code writes.
PROTOCOL_VERSION = 1
#: The versions this code reads and serves.
SERVED_VERSIONS = (1,)
#: What this worker does beyond its versions' fields, for a parent to ask before it sends an optional field an
#: older worker would ignore (the server greets with them: ``benchtrail.worker.server``). ``duet``: a run
#: request's ``duet`` is honoured (issue 21). ``pythonpath``: the server forks jobs of other checkouts, each
#: child on its job's ``PYTHONPATH``, and refuses those it cannot (``benchtrail.worker.server``).
FEATURES = ("duet", "pythonpath")
#: The reason of a CUDA case's ``failed`` record on a machine where torch sees no GPU: the worker's, and the run
#: stage's, which records such cases without starting a worker (``benchtrail.runner.run_cases.run_cases``).
NO_CUDA_REASON = "CUDA run config on a machine without CUDA; refusing to run it on the CPU"


class ProtocolError(ValueError):
    """A request or response cannot be read: unserved version, unknown kind, or a field of the wrong
    type; the message names the field or version and what this side serves."""


def _version(data: Any, what: str) -> int:
    """The ``version`` of a request or response dict (1 when absent).

    Raises:
        ProtocolError: ``data`` is not an object, or its version is not one of ``SERVED_VERSIONS``.
    """
    if not isinstance(data, dict):
        raise ProtocolError(f"worker {what} is a JSON {type(data).__name__}, not an object")
    version = data.get("version", 1)
    if type(version) is not int or version not in SERVED_VERSIONS:
        served = ", ".join(str(v) for v in SERVED_VERSIONS)
        raise ProtocolError(f"worker {what} has protocol version {version!r}; this benchtrail serves version "
                            f"{served} (a newer benchtrail wrote it: run both sides from one checkout, or "
                            f"upgrade this one)")
    return version


def _check(value: Any, types: type | tuple[type, ...], field: str, what: str) -> Any:
    """``value`` when it is None or one of ``types`` (a bool is not taken for a number).

    Raises:
        ProtocolError: any other value, naming the field.
    """
    types = types if isinstance(types, tuple) else (types,)
    if value is None or (isinstance(value, types) and (bool in types or not isinstance(value, bool))):
        return value
    raise ProtocolError(f"worker {what}: field {field!r} is {type(value).__name__} {value!r:.80}, not "
                        + " or ".join(t.__name__ for t in types))


@dataclass(frozen=True)
class CompileRequest:
    """Compile one module; with ``module_dir`` write its artifact (export, AOTInductor) there.

    Attributes:
        config: ``serialize_and_pack([gen])`` of one ``ModuleGenerationConfig`` (JSON object).
        module_dir: the module's directory, or None for a compile-time sample that keeps no artifact.
        explain: also count graphs and graph breaks (``torch._dynamo.explain``).
        tasks: after measuring, run the first iteration of each of these tasks (``inference``,
            ``forward``, ``backward``, ``jacobian``) as the run stage will, so their graphs land in the
            Inductor cache. Added within version 1, optional (written only when not empty): a worker
            from before it ignores the key and primes nothing.
    """

    config: dict[str, Any]
    module_dir: str | None = None
    explain: bool = True
    tasks: tuple[str, ...] = ()
    version: int = PROTOCOL_VERSION
    kind: ClassVar[str] = "compile"

    def to_json(self) -> dict[str, Any]:
        """The request as a JSON object (version-1 field names and shapes)."""
        out = {"version": self.version, "kind": self.kind, "config": self.config, "module_dir": self.module_dir,
               "explain": self.explain}
        return {**out, "tasks": list(self.tasks)} if self.tasks else out


@dataclass(frozen=True)
class RunRequest:
    """Run one case: samples in µs per iteration, with ``threads`` torch threads.

    Attributes:
        config: ``serialize_and_pack([rc])`` of one ``RunConfig`` (JSON object).
        threads: ``torch.set_num_threads`` of the worker.
        module_dir: the compiled module's directory (export and AOTInductor cases run from its artifact).
        profile: after the timed samples, profile more iterations with ``torch.profiler`` (:func:`profile_spec`:
            ``iterations`` at most, within ``budget_ms`` when given; the Chrome trace written to ``trace``, an
            absolute path) and answer the operators' self times (``Response.profile``). Added within
            version 1, optional (written only when set): a worker from before it ignores the key, profiles
            nothing and its response has no ``profile``.
        duet: duet measurement (:func:`duet_spec`): the worker pins itself to ``cpus`` (CPU ids) for the whole job
            and, before each timed sample, meets the other arm's worker at the barrier served on the Unix socket
            ``socket`` (``benchtrail.runner.duet``), so sample j of both starts together. Added within version 1,
            optional: a worker from before it would ignore it, so a parent sends it only to a worker whose
            server lists ``duet`` in its features (:data:`FEATURES`); the response's ``duet`` says it was done.
    """

    config: dict[str, Any]
    threads: int
    module_dir: str | None = None
    version: int = PROTOCOL_VERSION
    profile: dict[str, Any] | None = None
    duet: dict[str, Any] | None = None
    kind: ClassVar[str] = "run"

    def to_json(self) -> dict[str, Any]:
        """The request as a JSON object (version-1 field names and shapes)."""
        out = {"version": self.version, "kind": self.kind, "config": self.config, "threads": self.threads,
               "module_dir": self.module_dir}
        return {**out, **({"profile": self.profile} if self.profile else {}),
                **({"duet": self.duet} if self.duet else {})}


Request = CompileRequest | RunRequest


def compile_request(gen: Any, module_dir: Any = None, explain: bool = True,
                    tasks: tuple[str, ...] = ()) -> CompileRequest:
    """The request that compiles ``gen`` (a ``ModuleGenerationConfig``); ``module_dir`` a path or None;
    ``tasks`` the task names whose graphs to compile into the Inductor cache afterwards."""
    from benchtrail.suite.serialization import serialize_and_pack

    return CompileRequest(serialize_and_pack([gen]), str(module_dir) if module_dir else None, explain, tuple(tasks))


def run_request(rc: Any, module_dir: Any = None, profile: dict[str, Any] | None = None,
                duet: dict[str, Any] | None = None) -> RunRequest:
    """The request that runs ``rc`` (a ``RunConfig``) with its device's threads; ``module_dir`` a path or None;
    ``profile`` a :func:`profile_spec` or None (no profiling); ``duet`` a :func:`duet_spec` or None."""
    from benchtrail.suite.serialization import serialize_and_pack

    return RunRequest(serialize_and_pack([rc]), rc.target_device.threads, str(module_dir) if module_dir else None,
                      profile=profile, duet=duet)


def profile_spec(trace: Any, iterations: int = 20, budget_ms: float | None = None) -> dict[str, Any]:
    """The ``profile`` of a run request: profile at most ``iterations`` iterations (fewer when the timed
    samples say ``budget_ms`` ms would not fit them) and write the Chrome trace to ``trace`` (made absolute).

    Raises:
        ProtocolError: ``iterations`` < 1 or ``budget_ms`` <= 0.
    """
    from pathlib import Path

    return _profile_of({"iterations": iterations, "trace": str(Path(trace).absolute()),
                        **({"budget_ms": budget_ms} if budget_ms is not None else {})})


def duet_spec(socket: Any, cpus: Any) -> dict[str, Any]:
    """The ``duet`` of a run request: the barrier's Unix socket path and the CPU ids to pin to.

    Raises:
        ProtocolError: an empty path, or ``cpus`` not a non-empty list of distinct integers >= 0.
    """
    return _duet_of({"socket": str(socket), "cpus": list(cpus)})  # type: ignore[return-value]


def _duet_of(value: Any) -> dict[str, Any] | None:
    """The checked ``duet`` of a run request (None when absent); raises ProtocolError as :func:`duet_spec`."""
    spec = _check(value, dict, "duet", "request")
    if spec is None:
        return None
    socket, cpus = spec.get("socket"), spec.get("cpus")
    if not (isinstance(socket, str) and socket and isinstance(cpus, list) and cpus
            and all(type(c) is int and c >= 0 for c in cpus) and len(set(cpus)) == len(cpus)):
        raise ProtocolError(f"worker request: field 'duet' is {spec!r:.200}; allowed: {{socket: <path>, cpus: "
                            f"<non-empty list of distinct CPU ids>}}")
    return {"socket": socket, "cpus": cpus}


def _profile_of(value: Any) -> dict[str, Any] | None:
    """The checked ``profile`` of a run request (None when absent).

    Raises:
        ProtocolError: not an object, ``iterations`` not an integer >= 1, ``trace`` not a non-empty string,
            ``budget_ms`` not a number > 0.
    """
    spec = _check(value, dict, "profile", "request")
    if spec is None:
        return None
    iterations = _check(spec.get("iterations"), int, "profile.iterations", "request")
    trace = _check(spec.get("trace"), str, "profile.trace", "request")
    budget = _check(spec.get("budget_ms"), (int, float), "profile.budget_ms", "request")
    if iterations is None or iterations < 1 or not trace or (budget is not None and not budget > 0):
        raise ProtocolError(f"worker request: field 'profile' is {spec!r:.200}; allowed: {{iterations: <integer >= 1>, "
                            f"trace: <path>, budget_ms: <number > 0> (optional)}}")
    return {"iterations": iterations, "trace": trace, **({"budget_ms": budget} if budget is not None else {})}


def read_request(data: Any) -> Request:
    """The request of a JSON object; without ``version`` it is version 1; unknown keys are ignored.

    Raises:
        ProtocolError: an unserved version, a kind other than ``compile`` or ``run``, or a field of
            the wrong type.
    """
    version = _version(data, "request")
    kind = data.get("kind")
    config = data.get("config")
    if not isinstance(config, dict):
        raise ProtocolError(f"worker request: field 'config' is {type(config).__name__}, not an object")
    module_dir = _check(data.get("module_dir"), str, "module_dir", "request")
    if kind == "compile":
        explain = data.get("explain", True)
        tasks = _check(data.get("tasks"), list, "tasks", "request") or []
        if not all(isinstance(t, str) for t in tasks):
            raise ProtocolError(f"worker request: field 'tasks' is {tasks!r:.80}, not a list of task names")
        return CompileRequest(config, module_dir or None, bool(_check(explain, bool, "explain", "request")),
                              tuple(tasks), version)
    if kind == "run":
        threads = _check(data.get("threads"), int, "threads", "request")
        if threads is None:
            raise ProtocolError("worker request: a run request needs 'threads'")
        return RunRequest(config, threads, module_dir or None, version, _profile_of(data.get("profile")),
                          _duet_of(data.get("duet")))
    raise ProtocolError(f"worker request: kind {kind!r} is not one this worker serves ('compile', 'run')")


#: Response fields that are lists of numbers or objects (tuples here, lists in JSON).
_SEQUENCES = ("samples", "gpu_samples_us", "wall_samples_us", "break_reasons")
#: Run fields written whenever the run's samples are, also when null (version 1 always wrote them).
_WITH_SAMPLES = ("correctness", "jacobian_mode")
_TYPES: dict[str, Any] = {
    "status": str, "reason": str, "traceback": str, "oom": dict, "phase_times_ms": dict,
    "samples": (list, tuple), "iterations_per_sample": int, "warmup_iterations": int, "timing": dict,
    "memory": dict, "gpu_samples_us": (list, tuple), "wall_samples_us": (list, tuple), "threads": int,
    "correctness": dict, "jacobian_mode": str, "compile_time_ms": (int, float), "peak_rss_bytes": int,
    "kernel_count": int, "kernel_count_reason": str, "recompiles": int, "fxgraph_cache_hit": int,
    "fxgraph_cache_miss": int,
    "artifacts": dict, "graph_count": int, "graph_breaks": int, "break_reasons": (list, tuple),
    "timed_ms": (int, float), "warmup_ms": (int, float), "prime_ms": (int, float), "profile": dict, "duet": dict,
    "floor_us": (int, float), "threads_set": int,
}


@dataclass(frozen=True)
class Response:
    """A worker's answer to one request (or the parent's stand-in for a worker that did not answer).

    Attributes:
        status: ``ok``; ``mismatch`` (ran, but the output differs from the reference); ``failed``;
            ``oom``; ``timeout`` (the parent killed the worker).
        reason: why, for any status but ``ok`` (null for ``ok``).
        traceback: the last frames of an unexpected exception.
        oom: ``{"requested_bytes": int | None, "cache_emptied": bool}`` of an out-of-memory error.
        phase_times_ms: a run's phases in ms (``prep``, ``compile``, ``check``, ``run``, ``done``),
            those it finished also when it failed part-way.
        samples: a run's samples, µs per iteration; ``gpu_samples_us`` and ``wall_samples_us`` the
            CUDA-event and synchronised host times on a GPU.
        iterations_per_sample, warmup_iterations, threads: how a run was measured.
        timing: the timing plan (``benchtrail.worker.cuda_timing.TimingPlan`` as a dict).
        memory: peak memory in bytes (``peak_rss_bytes``; on a GPU also device memory).
        correctness: the check of the task's quantity against the reference, or None (no check).
        jacobian_mode: ``jacrev`` or ``jacfwd`` for the Jacobian task, else None.
        compile_time_ms, peak_rss_bytes, kernel_count, recompiles, fxgraph_cache_hit,
        fxgraph_cache_miss, artifacts (bytes per file), graph_count, graph_breaks, break_reasons:
            a compile job's statistics (graph counts only when explained).
        kernel_count_reason: why ``kernel_count`` is 0 (``benchtrail.worker.build.no_kernels_reason``);
            absent otherwise. Added within version 1, optional: a worker from before it leaves it out.
        timed_ms: a run's time inside its timed sample blocks, ms; ``warmup_ms`` the rest of its
            ``run`` phase (warm-up and block calibration). Added within version 1 (optional: a
            worker from before them leaves them out).
        prime_ms: a compile job's time compiling its ``tasks``' graphs into the cache (optional, as above).
        profile: a run's profile when the request asked for one (``RunRequest.profile``): ``{"iterations": int,
            "trace": path, "wall_ms": float, "operators": [{"name": str, "self_cpu_us": float, "count": int,
            "self_device_us": float (on a GPU)}]}``, self times in µs summed over the profiled iterations,
            largest self CPU time first (at most 50 operators); or ``{"error": str}`` when profiling failed
            (the samples stand). Added within version 1, optional: a worker from before it leaves it out.
        duet: a run of a duet request (``RunRequest.duet``): ``{"cpus": [int], "synced": int}``, the CPUs it was
            pinned to and the samples it started at the barrier. Added within version 1, optional.
        floor_us: a CPU run's harness floor, µs per call: a no-op called as the case's call is, in its block
            size (``benchtrail.worker.timing.floor_us``). ``threads_set``: the thread count set before each
            sample; ``threads`` then is the count the case's code left (it differs when the code changes it).
            Both added within version 1, optional (issue 40).
        version: the protocol version of the writer (1 when the JSON has none).
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
    version: int = PROTOCOL_VERSION

    def __post_init__(self) -> None:
        for name in _SEQUENCES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def as_dict(self) -> dict[str, Any]:
        """The response as the runner's stages use it: ``status`` and ``reason``, then every field the
        job produced (lists for sequences), without ``version``; the shape ``compile-stats.json`` and
        the run records are built from."""
        out: dict[str, Any] = {"status": self.status, "reason": self.reason}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("status", "reason", "version"):
                continue
            if value is None and not (f.name in _WITH_SAMPLES and self.samples is not None):
                continue
            out[f.name] = list(value) if f.name in _SEQUENCES else value
        return out

    def to_json(self) -> dict[str, Any]:
        """The response as a JSON object: :meth:`as_dict` with ``version``."""
        return {"version": self.version, **self.as_dict()}


def read_response(data: Any) -> Response:
    """The response of a JSON object; without ``version`` it is version 1; unknown keys are ignored.

    Raises:
        ProtocolError: an unserved version, no ``status``, or a field of the wrong type.
    """
    version = _version(data, "response")
    if not isinstance(data.get("status"), str) or not data["status"]:
        raise ProtocolError(f"worker response: field 'status' is {data.get('status')!r}, not a status name")
    fields = {name: _check(data.get(name), types, name, "response") for name, types in _TYPES.items()}
    return Response(**fields, version=version)


def refusal(exc: ProtocolError) -> Response:
    """The ``failed`` response a worker answers to a request it cannot read."""
    return Response(status="failed", reason=f"cannot serve the request: {exc}")
