"""``explain`` and ``dump-cmds``: what a benchmark in a run directory is, and the command that reproduces it.

A benchmark is named by its id (run config, ``<run config id>-instructions``, module, or
``<module id>-<metric>``), a unique id prefix of 6 characters or more, or its name as the PR comment shows it.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from benchtrail.errors import UserError
from benchtrail.suite.definitions import Architecture, CompileMode, ModuleGenerationConfig, RunConfig
from benchtrail.suite.export import load_compilation, load_execution
from benchtrail.suite.names import module_dir, slug

MIN_PREFIX = 6


def locate_run(url: str) -> tuple[Path, Callable[[str], object]]:
    """A local run directory for ``url`` and a function that fetches one module's directory.

    ``url`` is a folder or a run's store URL (``gs://bucket/prefix/runs/<id>/<attempt>/``): its
    ``run-configs/`` and comparison.json are downloaded now, a module's files on ``fetch(module name)``.
    Raises UserError for a store URL that names no run, or a failed download.
    """
    from benchtrail.store import is_local, open_store, split_run_url

    if is_local(url):
        return (Path(url) if "://" not in url else open_store(url).root), lambda name: None
    parts = split_run_url(url)
    if not parts:
        raise UserError(
            f"--run {url!r}: a store URL must end in /runs/<run id>/<attempt>/, e.g. gs://bucket/runs/123/1/"
        )
    store_url, run_id, attempt = parts
    store = open_store(store_url)
    run_dir = store.fetch_run(run_id, attempt, patterns=("run-configs/*", "comparison.json"))

    def fetch(module_name: str) -> object:
        try:
            return store.fetch_run(run_id, attempt, run_dir, patterns=(f"{module_dir(module_name)}/**",))
        except UserError:
            return None  # a run without that module's directory (nothing compiled) still explains

    return run_dir, fetch


@dataclass(frozen=True)
class Target:
    """What an id names: a run config (execution) or a module (compilation), and the metric if any."""

    run_config: RunConfig | None
    module: ModuleGenerationConfig
    metric: str | None = None


def load_targets(run_dir: Path) -> dict[str, Target]:
    """Every id in a run directory's exports; raises UserError when it lacks ``run-configs/``."""
    execution = run_dir / "run-configs" / "execution.json"
    compilation = run_dir / "run-configs" / "compilation.json"
    if not execution.exists() and not compilation.exists():
        raise UserError(
            f"{run_dir} is not a run directory: it has no run-configs/execution.json or compilation.json"
        )
    targets = (
        {
            rc.id: Target(rc, rc.module_generation_config)
            for shards in load_execution(execution).values()
            for rcs in shards.values()
            for rc in rcs
        }
        if execution.exists()
        else {}
    )
    targets |= {
        f"{i}-instructions": replace(t, metric="instructions")  # the counting pass's
        for i, t in targets.items()
        if t.run_config.target_device.architecture is Architecture.CPU
    }
    if compilation.exists():
        from benchtrail.results.schema import METRICS

        gens, *_ = load_compilation(compilation)
        for gen in gens:
            targets.setdefault(gen.id, Target(None, gen))
            if gen.compile_config.mode is not CompileMode.EAGER:  # eager modules have no compilation series
                targets.update(
                    {
                        f"{gen.id}-{m}": Target(None, gen, m)  # the compile stage's metrics
                        for m, about in METRICS.items()
                        if about.modes
                    }
                )
    return targets


def _name(target: Target, name: str | None = None) -> str:
    """``name`` (default: the run config's, else the module's), then ``.<metric>`` if any."""
    name = name or (target.run_config or target.module).name
    return f"{name}.{target.metric}" if target.metric else name


def _shown_name(target: Target) -> str:
    """The name without ``.<device>``, as the comment's tables show it for one device."""
    rc = target.run_config
    return _name(target, rc.name.removesuffix(f".{rc.target_device.name}"))


def _first(items: list[str]) -> str:
    return ", ".join(items[:10]) + (" …" if len(items) > 10 else "")


def resolve(targets: dict[str, Target], query: str) -> tuple[str, Target]:
    """Find ``query`` as an id, an exact name, a name without ``.<device>``, or a unique id prefix (>=
    ``MIN_PREFIX`` characters).

    Raises:
        UserError: nothing matches, a name several benchmarks share, or an ambiguous prefix (each listing
            the candidates).
    """
    if query in targets:
        return query, targets[query]
    named = sorted(i for i, t in targets.items() if _name(t) == query)
    if not named:  # the name as the comment's tables show it: without the device
        named = sorted(i for i, t in targets.items() if t.run_config and query == _shown_name(t))
        if len(named) > 1:
            raise UserError(
                f"benchmark {query!r} ran on {len(named)} devices of this "
                f"run: pass the name with its device "
                f"({_first(sorted(_name(targets[i]) for i in named))})"
            )
    if len(named) == 1:
        return named[0], targets[named[0]]
    if named:
        raise UserError(
            f"benchmark name {query!r} is ambiguous: {len(named)} benchmarks of this run have it "
            f"(ids {_first(named)}); pass one id"
        )
    if len(query) >= MIN_PREFIX and (hits := sorted(i for i in targets if i.startswith(query))):
        base = min(hits, key=len)
        if all(h == base or h.startswith(base + "-") for h in hits):
            return base, targets[base]  # one id, or a module id and the series ids it prefixes
        raise UserError(f"benchmark id prefix {query!r} is ambiguous: {', '.join(hits[:5])}")
    near = difflib.get_close_matches(
        query, sorted({_name(t) for t in targets.values()}) + list(targets), n=5, cutoff=0.5
    )
    hint = f" Near matches: {', '.join(near)}." if near else ""
    raise UserError(
        f"no benchmark {query!r} in this run ({len(targets)} ids).{hint} "
        "List them all with `benchtrail dump-cmds`."
    )


def reproduce_command(target: Target, run_dir: Path) -> str:
    """The local command that reproduces the benchmark from the run's exports, writing under ``repro/``."""
    configs = run_dir / "run-configs"
    if target.run_config:
        rc = target.run_config
        args = [
            "benchtrail",
            "run",
            "--run-configs",
            str(configs / "execution.json"),
            "--device-name",
            rc.target_device.name,
            "--benchmark-id",
            rc.id,
            "--modules-dir",
            str(run_dir),
            "--output",
            f"repro/{slug(rc.name)}.json",
        ]  # its bench documents go to repro/docs/
        args += ["--metrics", "instructions"] if target.metric else []  # counted beside: *.instructions.json
    else:
        gen = target.module
        args = [
            "benchtrail",
            "compile",
            "--run-configs",
            str(configs / "compilation.json"),
            "--output-dir",
            f"repro/{slug(gen.name)}",
            "--device-name",
            "local",
            "--architecture",
            gen.target_architecture.value,
            "--module-id",
            gen.id,
        ]
    return shlex.join(args)


def explain(benchmark_id: str, target: Target, run_dir: Path) -> str:
    """Model, compile config, run flags, device, figures in the run's comparison, command."""
    gen, rc = target.module, target.run_config
    model, cc = gen.model, gen.compile_config
    options = ", ".join(f"{k}={v}" for k, v in cc.options) or "none"
    kind = (
        "execution (instructions per call, counted under callgrind)"
        if rc and target.metric
        else "execution (latency, µs per iteration)"
        if rc
        else f"compilation ({target.metric or 'module'})"
    )
    # function benchmarks carry the "function" tag
    function = not model.input_specs and "function" in model.tags
    lines = [
        f"benchmark    {_name(target)}",
        f"id           {benchmark_id}",
        f"kind         {kind}",
        "",
        f"model        {model.name} (id {model.id})",
        f"  tags       {', '.join(model.tags)}",
        f"  source     {model.entry_point}",
        f"  inputs     {', '.join(model.input_specs) or 'none'}"
        if not function
        else f"  inputs     the input factory of {model.entry_point}, parameters "
        f"{', '.join(f'{k}={v!r}' for k, v in model.params) or 'none'}",
        f"  reference  {model.reference_entry_point or 'none'}",
        f"module       {gen.name} (id {gen.id}), target {gen.target_architecture.value}",
        f"  compile    {cc.name}: mode {cc.mode.value}, dtype {cc.dtype}, flags: {options}",
        f"  directory  {run_dir / module_dir(gen.name)}",
    ]
    if rc:
        ec, dev = rc.execution_config, rc.target_device
        lines += [
            f"run flags    task {ec.task.value}, "
            + (f"batch size {ec.batch_size}, " if not function else "")  # a function benchmark has none
            + f"{ec.processes} process{'es' if ec.processes != 1 else ''} × "
            f"{ec.min_samples} samples, blocks ≥ {ec.min_sample_time_ms:g} ms, warm-up ≥ "
            f"{ec.warmup_time_ms:g} ms, timeout {ec.timeout_s:g} s",
            f"device       {dev.name} ({dev.host_environment}, {dev.architecture.value}, "
            f"{dev.microarchitecture}, {dev.threads} thread{'s' if dev.threads != 1 else ''})",
            f"presets      {', '.join(rc.presets)}",
        ]
    plot = run_dir / "distributions" / f"{slug(_name(target))}.png"
    if plot.is_file():  # the report plots a changed or inconclusive series
        lines += ["", f"samples      base vs head strip plot: {plot}"]
    lines += _compared(benchmark_id, target, run_dir)
    lines += ["", "reproduce:", f"  {reproduce_command(target, run_dir)}"]
    return "\n".join(lines) + "\n"


def _compared(benchmark_id: str, target: Target, run_dir: Path) -> list[str]:
    """The benchmark's comparison.json rows as the comment shows them, then the profile diff of a profiled
    re-check and the per-function diff of a confirmed instruction regression; one line without rows."""
    from benchtrail.compare.callgrind import function_lines
    from benchtrail.compare.document import load_comparison
    from benchtrail.compare.gate import figures
    from benchtrail.compare.profile_diff import profile_lines

    path = run_dir / "comparison.json"
    if not path.is_file():
        return ["", "compared     no: this run has no comparison.json"]
    try:
        rows = load_comparison(path).rows
    except UserError as exc:
        return ["", f"compared     unreadable: {exc}"]
    rc = target.run_config
    module = rc is None and target.metric is None
    ids = {rc.id, f"{rc.id}-instructions"} if rc else {benchmark_id}
    mine = [r for r in rows if r.id in ids or (module and r.id.startswith(f"{benchmark_id}-"))]
    if not mine:
        return ["", "compared     no row of this benchmark in comparison.json"]
    lines = [""] + [
        f"compared     {r.metric}: {r.verdict}{f' · {r.mark}' if r.mark else ''}, {figures(r)}"
        + (f"; {r.reason}" if r.reason else "")
        for r in mine
    ]
    said = [line for r in mine for line in profile_lines(r.profile, run_dir)]
    lines += ["", "why (torch.profiler):", *(f"  {line}" for line in said)] if said else []
    said = [
        line
        for r in mine
        if r.verdict == "regressed" and r.mark == "confirmed"
        for line in function_lines(r.functions)
    ]
    return lines + (
        ["", "why (callgrind, instructions per call):", *(f"  {line}" for line in said)] if said else []
    )


def dump_commands(targets: dict[str, Target], run_dir: Path) -> str:
    """One ``# name`` line and its reproduce command per run config and module, in name order."""
    return (
        "\n".join(
            f"# {_name(target)}\n{reproduce_command(target, run_dir)}"
            for target in sorted(targets.values(), key=_name)
            if not target.metric
        )
        + "\n"
    )
