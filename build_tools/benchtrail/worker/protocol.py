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
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from benchtrail.suite.serialization import serialize_and_pack

#: The version this code writes.
PROTOCOL_VERSION = 1
#: The versions this code reads and serves.
SERVED_VERSIONS = (1,)
#: What this worker does beyond its versions' fields, for a parent to ask before it sends an optional field an
#: older worker would ignore (the server greets with them: ``benchtrail.worker.server``). ``duet``: a run
#: request's ``duet`` is honoured (issue 21). ``pythonpath``: the server forks jobs of other checkouts, each
#: child on its job's ``PYTHONPATH``, and refuses those it cannot (``benchtrail.worker.server``).
FEATURES = ("duet", "pythonpath")
#: The measurement-method version, owned here so the parent side reads it without the worker's timing code
#: (``benchtrail.worker.timing`` measures by it). Results record it (``environment.method_version``; files
#: without it are version 1) and it is part of the baseline key (``benchtrail.results.baseline_key``): bump it
#: when a change makes new samples incomparable with old ones, so no run is compared with a baseline measured
#: the old way.
#:   1 — one spawned process per case and process index.
#:   2 — workers forked from a pre-imported server (``benchtrail.worker.server``); the cases of one
#:       module share each process, in a shuffled order, from the compile stage's Inductor cache;
#:       cold compile samples no longer include importing Dynamo and Inductor (issue 18).
#:   3 — workers run with fixed glibc malloc thresholds (``benchtrail.runner.workers.MALLOC_TUNABLES``): no
#:       allocation history can put a process in a page-faulting mode (issue 38).
#:   4 — eager function benchmarks' value tasks time the user's call on pre-bound arguments, without the
#:       module wrapper (a floor of ~5 µs to ~0.1 µs); torch's thread count is set before each sample; a
#:       model that declares ``mutates_inputs`` is timed one call per sample on fresh inputs (issue 40).
METHOD_VERSION = 4
#: The reason of a CUDA case's ``failed`` record on a machine where torch sees no GPU: the worker's, and the
#: run stage's, which records such cases without starting a worker
#: (``benchtrail.runner.run_cases.run_cases``).
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
        served = ", ".join(map(str, SERVED_VERSIONS))
        raise ProtocolError(f"worker {what} has protocol version {version!r}; this benchtrail serves version "
                            f"{served} (a newer benchtrail wrote it: run both sides from one checkout, or "
                            f"upgrade this one)")
    return version


def _check(value: Any, types: type | tuple[type, ...], field: str, what: str = "request") -> Any:
    """``value`` when it is None or one of ``types`` (a bool is not taken for a number).

    Raises:
        ProtocolError: any other value, naming the field.
    """
    types = types if isinstance(types, tuple) else (types,)
    if value is None or (isinstance(value, types) and (bool in types or not isinstance(value, bool))):
        return value
    raise ProtocolError(f"worker {what}: field {field!r} is {type(value).__name__} {value!r:.80}, not "
                        + " or ".join(t.__name__ for t in types))


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
            k: list(v) if isinstance(v, tuple) else v for k, v in fields.items() if v or k not in _OPTIONAL}


@dataclass(frozen=True)
class CompileRequest(_Request):
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


@dataclass(frozen=True)
class RunRequest(_Request):
    """Run one case: samples in µs per iteration, with ``threads`` torch threads.

    Attributes:
        config: ``serialize_and_pack([rc])`` of one ``RunConfig`` (JSON object).
        threads: ``torch.set_num_threads`` of the worker.
        module_dir: the compiled module's directory (export and AOTInductor cases run from its artifact).
        profile: after the timed samples, profile more iterations with ``torch.profiler``
            (:func:`profile_spec`: ``iterations`` at most, within ``budget_ms`` when given; the Chrome trace
            written to ``trace``, an absolute path) and answer the operators' self times
            (``Response.profile``). Added within version 1, optional (written only when set): a worker from
            before it ignores the key, profiles nothing and its response has no ``profile``.
        duet: duet measurement (:func:`duet_spec`): the worker pins itself to ``cpus`` (CPU ids) for the whole
            job and, before each timed sample, meets the other arm's worker at the barrier served on the Unix
            socket ``socket`` (``benchtrail.runner.duet``), so sample j of both starts together. Added within
            version 1, optional: a worker from before it would ignore it, so a parent sends it only to a
            worker whose server lists ``duet`` in its features (:data:`FEATURES`); the response's ``duet``
            says it was done.
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
    """The request file of a counting process (``python -m benchtrail.worker.counting REQUESTS.json
    JOURNAL.jsonl`` under callgrind, ``benchtrail.runner.count_cases``): its run requests, the ``repeats``
    counted of each and the folder its callgrind files go to. The process appends ``{"start": i}`` to the
    journal before case i, then ``{"case": i, **response}``."""
    return {"version": PROTOCOL_VERSION, "repeats": repeats, "callgrind_dir": str(callgrind_dir),
            "requests": [r.to_json() for r in requests]}


def compile_request(gen: Any, module_dir: Any = None, explain: bool = True,
                    tasks: tuple[str, ...] = ()) -> CompileRequest:
    """The request that compiles ``gen`` (a ``ModuleGenerationConfig``); ``module_dir`` a path or None;
    ``tasks`` the task names whose graphs to compile into the Inductor cache afterwards."""
    return CompileRequest(serialize_and_pack([gen]), str(module_dir) if module_dir else None, explain,
                          tuple(tasks))


def run_request(rc: Any, module_dir: Any = None, profile: dict[str, Any] | None = None,
                duet: dict[str, Any] | None = None) -> RunRequest:
    """The request that runs ``rc`` (a ``RunConfig``) with its device's threads; ``module_dir`` a path or
    None; ``profile`` a :func:`profile_spec` or None (no profiling); ``duet`` a :func:`duet_spec` or None.
    The device's ``count_instructions`` is left out (no worker reads it, and a worker from before it refuses
    the field)."""
    device = dataclasses.replace(rc.target_device, count_instructions=False)
    return RunRequest(serialize_and_pack([dataclasses.replace(rc, target_device=device)]), device.threads,
                      str(module_dir) if module_dir else None, profile=profile, duet=duet)


def profile_spec(trace: Any, iterations: int = 20, budget_ms: float | None = None) -> dict[str, Any]:
    """The ``profile`` of a run request: profile at most ``iterations`` iterations (fewer when the timed
    samples say ``budget_ms`` ms would not fit them) and write the Chrome trace to ``trace`` (made absolute).

    Raises:
        ProtocolError: ``iterations`` < 1 or ``budget_ms`` <= 0.
    """
    from pathlib import Path

    return _checked_profile({"iterations": iterations, "trace": str(Path(trace).absolute()),
                             "budget_ms": budget_ms})


def duet_spec(socket: Any, cpus: Any) -> dict[str, Any]:
    """The ``duet`` of a run request: the barrier's Unix socket path and the CPU ids to pin to.

    Raises:
        ProtocolError: an empty path, or ``cpus`` not a non-empty list of distinct integers >= 0.
    """
    return _checked_duet({"socket": str(socket), "cpus": list(cpus)})


def _duet_of(value: Any) -> dict[str, Any] | None:
    """The checked ``duet`` of a run request (None when absent); raises ProtocolError as :func:`duet_spec`."""
    spec = _check(value, dict, "duet")
    return None if spec is None else _checked_duet(spec)


def _checked_duet(spec: dict[str, Any]) -> dict[str, Any]:
    """A ``duet`` object checked; raises ProtocolError as :func:`duet_spec`."""
    socket, cpus = spec.get("socket"), spec.get("cpus")
    if not (isinstance(socket, str) and socket and isinstance(cpus, list) and cpus
            and all(type(c) is int and c >= 0 for c in cpus) and len(set(cpus)) == len(cpus)):
        raise ProtocolError(f"worker request: field 'duet' is {spec!r:.200}; allowed: {{socket: <path>, "
                            f"cpus: <non-empty list of distinct CPU ids>}}")
    return {"socket": socket, "cpus": cpus}


def _profile_of(value: Any) -> dict[str, Any] | None:
    """The checked ``profile`` of a run request (None when absent).

    Raises:
        ProtocolError: not an object, ``iterations`` not an integer >= 1, ``trace`` not a non-empty string,
            ``budget_ms`` not a number > 0.
    """
    spec = _check(value, dict, "profile")
    return None if spec is None else _checked_profile(spec)


def _checked_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """A ``profile`` object's fields checked, those set; raises ProtocolError as :func:`_profile_of`."""
    checked = {k: _check(spec.get(k), types, f"profile.{k}")
               for k, types in (("iterations", int), ("trace", str), ("budget_ms", (int, float)))}
    iterations, trace, budget = checked.values()
    if iterations is None or iterations < 1 or not trace or (budget is not None and not budget > 0):
        raise ProtocolError(f"worker request: field 'profile' is {spec!r:.200}; allowed: {{iterations: "
                            f"<integer >= 1>, trace: <path>, budget_ms: <number > 0> (optional)}}")
    return {k: v for k, v in checked.items() if v is not None}


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
    module_dir = _check(data.get("module_dir"), str, "module_dir") or None
    if kind == "compile":
        tasks = _check(data.get("tasks"), list, "tasks") or []
        if not all(isinstance(t, str) for t in tasks):
            raise ProtocolError(f"worker request: field 'tasks' is {tasks!r:.80}, not a list of task names")
        return CompileRequest(config, module_dir, bool(_check(data.get("explain", True), bool, "explain")),
                              tuple(tasks), version)
    if kind == "run":
        threads = _check(data.get("threads"), int, "threads")
        if threads is None:
            raise ProtocolError("worker request: a run request needs 'threads'")
        return RunRequest(config, threads, module_dir, version, _profile_of(data.get("profile")),
                          _duet_of(data.get("duet")))
    raise ProtocolError(f"worker request: kind {kind!r} is not one this worker serves ('compile', 'run')")


#: Response fields that are lists of numbers or objects (tuples here, lists in JSON).
_SEQUENCES = ("samples", "gpu_samples_us", "wall_samples_us", "break_reasons", "instructions")
#: Run fields written whenever the run's samples are, also when null (version 1 always wrote them).
WITH_SAMPLES = ("correctness", "jacobian_mode")
#: The JSON types a response field's annotation allows, by the annotation's first name.
_JSON_TYPES: dict[str, Any] = {"str": str, "int": int, "float": (int, float), "dict": dict,
                               "tuple": (list, tuple)}


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
        profile: a run's profile when the request asked for one (``RunRequest.profile``): ``{"iterations":
            int, "trace": path, "wall_ms": float, "operators": [{"name": str, "self_cpu_us": float, "count":
            int, "self_device_us": float (on a GPU)}]}``, self times in µs summed over the profiled
            iterations, largest self CPU time first (at most 50 operators); or ``{"error": str}`` when
            profiling failed (the samples stand). Added within version 1, optional: a worker from before it
            leaves it out.
        duet: a run of a duet request (``RunRequest.duet``): ``{"cpus": [int], "synced": int}``, the CPUs it
            was pinned to and the samples it started at the barrier. Added within version 1, optional.
        floor_us: a CPU run's harness floor, µs per call: a no-op called as the case's call is, in its block
            size (``benchtrail.worker.timing.floor_us``). ``threads_set``: the thread count set before each
            sample; ``threads`` then is the count the case's code left (it differs when the code changes it).
            Both added within version 1, optional (issue 40).
        instructions: a counting run's instructions per call, one per repeat (``benchtrail.worker.counting``);
            ``overhead`` the instructions of an empty counted block (subtracted); ``cpu_capability`` the ISA
            torch dispatched on under valgrind; ``callgrind`` the last repeat's callgrind file. Optional.
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
        """The response as a JSON object: ``version``, ``status`` and ``reason``, then every field the job
        produced (lists for sequences)."""
        out: dict[str, Any] = {"version": self.version, "status": self.status, "reason": self.reason}
        for f in dataclasses.fields(self)[2:-1]:  # after status and reason, before version
            value = getattr(self, f.name)
            if value is not None or (f.name in WITH_SAMPLES and self.samples is not None):
                out[f.name] = list(value) if f.name in _SEQUENCES else value
        return out


#: Each response field (but ``version``) and the JSON types it takes.
#: (The annotations are strings, ``from __future__ import annotations``: the first word names the type.)
_TYPES = {f.name: _JSON_TYPES[re.findall(r"\w+", str(f.type))[0]] for f in dataclasses.fields(Response)[:-1]}


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
