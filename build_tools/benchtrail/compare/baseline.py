"""Find a head run's baseline runs, one per device (DESIGN.md's rule).

1. ``--base-commit``: its newest trusted run for each device.
2. Else the merge base of HEAD with the base branch (default: the default branch; else HEAD) and up to
   ``MAX_ANCESTORS`` first-parent ancestors: each device takes the nearest commit's newest trusted run
   with its own baseline key.
3. Else the newest earlier trusted run of the head commit itself.

Devices may get baselines of different commits; one without any is ``lacking`` (its rows are new).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from benchtrail.compare.document import Json
from benchtrail.compare.stored_runs import Pointer, StoredRuns, Trust, TrustAll
from benchtrail.errors import StoreError, UserError
from benchtrail.git import first_parents, merge_base, resolve_commit, symbolic_ref
from benchtrail.results.baseline_key import OTHER_KEY, BaselineKey, difference, keys_of_pointer
from benchtrail.results.schema import SCHEMA_VERSION, ResultsFile
from benchtrail.store import Store

MAX_ANCESTORS = 10
#: Appended to a device's ``lacking`` reason when only runs of the other origin (CI or local) match it.
ORIGIN_HINT = (
    "a run of the other origin (CI or local) matches otherwise; --baseline-any-origin would take "
    "it (the same device name may name another machine)"
)
#: Fetched of a baseline run whose pointer (version 1) lists no results files.
RESULTS_PATTERNS = ("results/*.json",)


@dataclass(frozen=True)
class Baseline:
    """A chosen baseline run: ``run_dir`` holds its fetched results, ``results`` its pointer's files."""

    commit: str
    reason: str
    run_id: str
    attempt: int
    run_dir: Path
    devices: tuple[str, ...]
    results: tuple[str, ...]

    def to_dict(self) -> Json:
        """comparison.json's ``baseline.devices`` entry of this run: commit, reason, run_id, attempt."""
        return {k: getattr(self, k) for k in ("commit", "reason", "run_id", "attempt")}


@dataclass(frozen=True)
class Ignored:
    """A stored run whose key matched but that the trust refused, and why."""

    commit: str
    run_id: str
    attempt: int
    reason: str


@dataclass(frozen=True)
class BaselineSet:
    """The baselines of one head run: ``runs`` the one serving most devices first, ``lacking``
    ``{device: why}``, ``ignored`` the runs the trust refused, ``trust`` its description."""

    runs: tuple[Baseline, ...]
    lacking: dict[str, str]
    ignored: tuple[Ignored, ...]
    trust: str

    @property
    def primary(self) -> Baseline | None:
        return self.runs[0] if self.runs else None

    def to_dict(self) -> Json | None:
        """comparison.json's ``baseline``: the primary run's fields, ``devices`` (each device's run),
        ``lacking``, ``ignored``, ``trust``. Without runs ``{reason, lacking, ignored, trust}`` when a run
        was ignored or stored under another key, else None."""
        extra = {
            "lacking": dict(sorted(self.lacking.items())),
            "ignored": [asdict(i) for i in self.ignored],
            "trust": self.trust,
        }
        if not self.runs:
            if not self.ignored:  # runs under another key (e.g. an older measurement method) say why: lacking
                other = any(OTHER_KEY in why for why in self.lacking.values())
                return {"reason": "no stored run under this run's baseline key", **extra} if other else None
            unusable = any(i.reason.startswith(UNUSABLE) for i in self.ignored)
            return {
                "reason": f"no {'usable' if unusable else 'trusted'} baseline run: {len(self.ignored)} "
                "stored run(s) ignored",
                **extra,
            }
        devices = {d: b.to_dict() for b in self.runs for d in b.devices}
        primary = self.runs[0]
        return {
            **primary.to_dict(),
            "run_dir": str(primary.run_dir),
            "devices": dict(sorted(devices.items())),
            **extra,
        }


def candidate_commits(repo: Path, head: str, base_branch: str | None = None) -> list[tuple[str, str]]:
    """``[(sha, reason)]``: the merge base of ``head`` with ``base_branch`` (``origin/<base_branch>`` first;
    default: ``origin/HEAD``'s target, else origin/main, main, origin/master, master), then up to
    ``MAX_ANCESTORS`` first-parent ancestors. Raises UserError when ``base_branch`` is not a branch."""
    refs = (
        (f"origin/{base_branch}", base_branch)
        if base_branch
        else ("origin/main", "main", "origin/master", "master")
    )
    branch = (None if base_branch else symbolic_ref(repo, "refs/remotes/origin/HEAD")) or next(
        (ref for ref in refs if resolve_commit(repo, ref)), None
    )
    if base_branch and branch is None:
        raise UserError(
            f"--base-branch {base_branch!r}: neither origin/{base_branch} nor {base_branch} is a "
            f"branch of {repo}; fetch it (actions/checkout with fetch-depth: 0 fetches every "
            "branch)"
        )
    base = merge_base(repo, head, branch) if branch else None
    reason = "merge base"
    if base is None:
        base, reason = head, "HEAD (no default branch)"
    shas = first_parents(repo, base, MAX_ANCESTORS + 1) or [base]
    return [(sha, f"{reason}~{i}" if i else reason) for i, sha in enumerate(shas)]


def find_baselines(
    store: Store,
    repo: Path,
    head: str,
    head_keys: dict[str, set[BaselineKey]],
    trust: Trust | None = None,
    *,
    base_branch: str | None = None,
    explicit: str | None = None,
    exclude: tuple[str, int] | None = None,
    any_origin: bool = False,
) -> BaselineSet:
    """The baseline runs of a head run whose devices have ``head_keys`` (the module docstring's rule), each
    ``run_dir`` the store's local run folder, not fetched yet. ``trust`` None trusts all; ``exclude`` is the
    head run; ``any_origin`` (``--baseline-any-origin``) lets a local run serve a CI head and the reverse.

    Raises: UserError when ``explicit`` has no usable run for any head device, ``base_branch`` is not a
    branch of ``repo``, or the store cannot be read.
    """
    trust = trust or TrustAll()
    branches = (base_branch,) if base_branch else ()
    if explicit:
        candidates = [(resolve_commit(repo, explicit) or explicit, "given by --base-commit")]
    else:
        candidates = [*candidate_commits(repo, head, base_branch), (head, "earlier run of this commit")]
    wanted = dict(head_keys)
    runs = []
    ignored: dict[tuple[str, int], Ignored] = {}
    seen = set()
    other_origin = set()  # devices a run of the other origin would have served
    other_key: dict[str, str] = {}  # device -> what its lacking reason adds about a run under another key
    serves: dict[tuple[str, int], list[str]] = {}  # run -> the wanted devices it serves (candidate)
    for sha, reason in candidates:
        if not wanted or sha in seen:
            continue
        seen.add(sha)

        def candidate(p: Pointer, sha: str = sha) -> bool:
            """Whether the pointer's run serves a wanted device: its keys and the head's match both ways (a
            run with some of a device's shards on another GPU model serves no head of that device)."""
            run = p["run_id"], p["attempt"]
            if run == exclude:
                return False
            keys = keys_of_pointer(p)
            differs = {
                d: difference(keys[d], wanted[d], any_origin=any_origin) for d in wanted.keys() & keys.keys()
            }
            serves[run] = sorted(d for d, what in differs.items() if what is None)
            for d in differs.keys() - set(serves[run]):
                if difference(keys[d], wanted[d], any_origin=True) is None:
                    other_origin.add(d)
                else:  # measured under another key
                    other_key.setdefault(d, f"; stored runs of {sha[:12]} {OTHER_KEY}: {differs[d]}")
            return bool(serves[run]) and run not in ignored

        stored = StoredRuns(store, sha, trust, candidate, branches)  # the store's reader checked the fields
        for message in stored.unreadable:
            ignored["", len(ignored)] = Ignored(sha, "", 0, message)
        for p, why in stored:  # newest first
            run = p["run_id"], p["attempt"]
            if why:
                ignored[run] = Ignored(sha, *run, why)
                continue
            runs.append(
                Baseline(
                    sha, reason, *run, store.run_dir(*run), tuple(serves[run]), tuple(p.get("results", ()))
                )
            )
            for d in serves[run]:
                del wanted[d]
    if explicit and not runs:
        raise UserError(
            f"--base-commit {explicit}: the store {store.url} has no "
            f"{'trusted ' if ignored else ''}run of {candidates[0][0]} for devices "
            f"{sorted(head_keys)} with their baseline keys (device, GPU model, torch version, "
            "method version, origin)"
            + (f"; ignored: {'; '.join(i.reason for i in ignored.values())}" if ignored else "")
        )
    depth = (
        "the given commit"
        if explicit
        else f"the merge base, its {MAX_ANCESTORS} first-parent ancestors or HEAD"
    )
    lacking = {
        d: f"no {'trusted ' if ignored else ''}stored run with this device's baseline key "
        f"({', '.join(k.describe() for k in sorted(keys, key=str))}) at {depth}"
        + (f"; {ORIGIN_HINT}" if d in other_origin else other_key.get(d, ""))
        for d, keys in wanted.items()
    }
    runs.sort(key=lambda b: -len(b.devices))
    return BaselineSet(tuple(runs), lacking, tuple(ignored.values()), trust.description)


def fetch_baselines(store: Store, found: BaselineSet) -> tuple[list[ResultsFile], BaselineSet]:
    """Fetch each run's results files (its pointer's list, else ``results/*.json``), keeping the records of
    the devices it serves; returns them and ``found`` with each ``run_dir`` the fetched folder. A run whose
    results cannot be used (:func:`results_problem`, a series in two files) moves to ``ignored``, its
    devices to ``lacking`` with ``baseline incompatible: ...`` or ``baseline unreadable: ...``.

    Raises: StoreError when the store cannot be read.
    """
    files = []
    fetched, lacking, ignored = [], dict(found.lacking), list(found.ignored)
    seen: dict[str, str] = {}  # series id -> the run holding it, over every run
    for b in found.runs:
        run = f"{b.run_id}/{b.attempt}"
        try:  # the store's reader checked the names of b.results
            folder = store.fetch_run(b.run_id, b.attempt, patterns=b.results or RESULTS_PATTERNS)
            loaded = _load_run(folder, b, run, seen)
        except StoreError:
            raise
        except UserError as exc:  # a run the store holds no files of, or results that cannot be used
            problem = str(exc) if isinstance(exc, _Unusable) else f"{UNREADABLE}: run {run}: {exc}"
            ignored.append(Ignored(b.commit, b.run_id, b.attempt, f"{UNUSABLE}: {problem}"))
            lacking.update(dict.fromkeys(b.devices, problem))
            continue
        files.extend(loaded)
        seen.update({r.id: run for f in loaded for r in f.benchmarks})
        fetched.append(replace(b, run_dir=folder))
    return files, replace(found, runs=tuple(fetched), lacking=lacking, ignored=tuple(ignored))


#: How a device's ``lacking`` reason starts when its baseline run exists but cannot be used.
INCOMPATIBLE = "baseline incompatible"
UNREADABLE = "baseline unreadable"
#: How the reason of an ``Ignored`` run whose results cannot be used starts.
UNUSABLE = "its results cannot be used"


def unusable(baseline: Json | None) -> dict[str, str]:
    """``{device: reason}`` of comparison.json's ``baseline.lacking`` whose baseline run cannot be used."""
    lacking = (baseline or {}).get("lacking")
    if not isinstance(lacking, dict):
        return {}
    return {
        d: why
        for d, why in lacking.items()
        if isinstance(why, str) and why.startswith((f"{INCOMPATIBLE}:", f"{UNREADABLE}:"))
    }


def results_problem(path: Path, where: str) -> str | None:
    """Why the results file ``path`` (``where`` in messages) cannot be loaded, or None to let the loader
    try: ``baseline incompatible: schema N (...)`` for a newer ``schema_version``, ``baseline unreadable:
    ...`` for a file unreadable, not UTF-8 or not JSON. Other problems are the loader's to name."""
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        return f"{UNREADABLE}: {where} cannot be read: {exc.strerror or exc}"
    except UnicodeDecodeError as exc:
        return f"{UNREADABLE}: {where} is not UTF-8 text (byte {exc.start})"
    except json.JSONDecodeError as exc:
        return (
            f"{UNREADABLE}: {where} is not valid JSON (truncated or corrupt?): "
            f"{exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"
        )
    except (ValueError, RecursionError) as exc:
        return f"{UNREADABLE}: {where} is not JSON benchtrail can read ({type(exc).__name__})"
    version = obj.get("schema_version") if isinstance(obj, dict) else None
    if type(version) is int and version > SCHEMA_VERSION:  # not a bool
        return (
            f"{INCOMPATIBLE}: schema {version} ({where}; this benchtrail reads results schemas "
            f"1..{SCHEMA_VERSION}: upgrade benchtrail to compare with it)"
        )
    return None


class _Unusable(UserError):
    """Results of a baseline run that cannot be used, the message saying so whole."""


def _load_run(folder: Path, b: Baseline, run: str, seen: dict[str, str]) -> list[ResultsFile]:
    """The records of the devices ``b`` (``run``) serves from its fetched ``folder``; ``seen``: series id ->
    run. Raises UserError when its results cannot be used, e.g. a series in two files or runs."""
    from benchtrail.results.io import load_results

    if b.results:
        paths = [folder / name for name in b.results]
    else:
        inner = folder / "results" if (folder / "results").is_dir() else folder
        paths = sorted(inner.glob("*.json"))
        if not paths:
            raise _Unusable(f"{UNREADABLE}: run {run} has no results files (results/*.json)")
    kept = []
    holder: dict[str, str] = {}  # series id -> the results file holding it
    for path in paths:
        name = path.relative_to(folder).as_posix()
        problem = results_problem(path, f"run {run}: results file {name}")
        if problem:
            raise _Unusable(problem)
        f = load_results(path, keep_bad=True)  # bad samples: not-comparable rows
        records = tuple(r for r in f.benchmarks if r.device_name in b.devices)
        gpu = f.environment.get("gpu_name")
        if records and gpu is not None and not isinstance(gpu, str):
            raise UserError(
                f"results file {name}: field environment.gpu_name is {repr(gpu)[:100]}; allowed: "
                "a string or null"
            )
        for r in records:
            other = holder.get(r.id) or seen.get(r.id)
            if other:
                where = (
                    f"results files {other} and {name}" if r.id in holder else f"run {other} and run {run}"
                )
                raise UserError(f"series {r.name!r} ({r.id}) is in {where}")
            holder[r.id] = name
        if records:
            kept.append(replace(f, benchmarks=records))
    return kept
