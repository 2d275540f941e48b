"""The compiler summary: per compile config and device, the figures of PyTorch's TorchInductor performance
dashboard (https://hud.pytorch.org/benchmark/compilers), head against base.

Per (compile config, device), eager left out (the 1.00× reference): pass rate, geometric-mean speedup over
eager with a t interval, median cold and warm compile time (ms) and peak-memory compression ratio (CUDA
allocator; None on CPU), each with its change against base (pass rate in percentage points, the rest in
percent). docs/statistics.md ("Compiler summary") gives the definitions and their sources. Torch-free.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from benchtrail.compare.tables import counted, format_value
from benchtrail.errors import UserError
from benchtrail.markup import md_text
from benchtrail.results.schema import BenchmarkRecord, ResultsFile

#: The reference compile config: speedups and compression ratios are over it.
EAGER = "eager"
#: Level of the geometric-mean speedup's interval.
LEVEL = 0.95
#: Fewest cases with a speedup that get an interval; fewer give the count instead. Below 5 cases
#: t(0.975, n − 1) (12.71, 4.30, 3.18 at 2, 3, 4) and s on 1 to 3 degrees of freedom make the interval
#: meaningless: two cases of speedups near 1 gave [0.28…2.94].
MIN_INTERVAL_CASES = 5
#: ``details["memory"]`` key of an execution record: the CUDA allocator's peak while the timed samples ran
#: (peaks reset after warm-up, by the worker). CPU records have no such figure.
CUDA_PEAK = "max_memory_allocated_bytes"
#: Compilation metrics of a module's cold compile time, first found wins (``compile_time_ms``: older files).
COLD_METRICS = ("compile_time_cold_ms", "compile_time_ms")
WARM_METRIC = "compile_time_warm_ms"
#: The ``Summary`` figures a row gives a change for (``CompilerSummaryRow.change``).
FIGURES = ("pass_rate", "geomean_speedup", "cold_ms", "warm_ms", "compression_ratio")


def model_name(record: BenchmarkRecord) -> str:
    """The model of a record: its ``module_name`` (``<model>.<compile config>.<arch>``) less the
    compile config and architecture. Older names ``<model>-<compile config>.<arch>`` work too."""
    stem, cc = record.module_name.rsplit(".", 1)[0], record.compile_config
    return next((stem.removesuffix(end) for end in (f".{cc}", f"-{cc}") if cc and stem.endswith(end)), stem)


def execution_config(record: BenchmarkRecord, model: str) -> str | None:
    """``inference-bs1`` from ``<model>.<compile config>.<execution config>.<device>``, else None."""
    prefix, suffix = f"{model}.{record.compile_config}.", f".{record.device_name}"
    name = record.name
    if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix) + len(suffix):
        return name[len(prefix) : -len(suffix)]
    return None


@dataclass(frozen=True)
class Summary:
    """One side's figures for one compile config on one device: ``cases`` execution cases, ``ok`` those
    with status ok, ``paired`` those with a speedup (it and its eager case ok, medians above 0);
    ``geomean_speedup`` (eager / compiled median, above 1: faster) and its ``LEVEL`` interval (None below
    ``MIN_INTERVAL_CASES``); ``modules`` with an ok cold compile time, their median ``cold_ms``, ``warm_ms``;
    ``compression_ratio``: mean eager / compiled CUDA allocator peak over ``memory_pairs`` (None on CPU)."""

    cases: int
    ok: int
    paired: int
    geomean_speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    modules: int
    cold_ms: float | None
    warm_ms: float | None
    memory_pairs: int
    compression_ratio: float | None

    @property
    def pass_rate(self) -> float | None:
        """``ok / cases`` (0 to 1); None without cases."""
        return self.ok / self.cases if self.cases else None


@dataclass(frozen=True)
class CompilerSummaryRow:
    """One compile config on one device: the head's summary and the base's (None without one)."""

    compile_config: str
    device_name: str
    head: Summary
    base: Summary | None = None

    def change(self, figure: str) -> float | None:
        """The change of ``figure`` against base: ``pass_rate`` in percentage points, the others in percent;
        None when either side lacks it. Raises ValueError when ``figure`` is not in ``FIGURES``."""
        if figure not in FIGURES:
            raise ValueError(f"figure must be one of {', '.join(FIGURES)}; got {figure!r}")
        head, base = getattr(self.head, figure), getattr(self.base, figure) if self.base else None
        if head is None or base is None:
            return None
        if figure == "pass_rate":
            return (head - base) * 100
        return (head / base - 1) * 100 if base > 0 else None


def geomean_interval(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """``(geometric mean, low, high)`` of ``values``: the ``LEVEL`` Student t interval (``scipy.stats.t``)
    of the mean of ``log(values)``, exponentiated; low, high None below 2 values. Raises ValueError when
    ``values`` is empty or holds a value not finite and above 0."""
    if not values or any(not (math.isfinite(v) and v > 0) for v in values):
        raise ValueError(f"values must be finite and above 0, got {list(values)!r}")
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    from scipy.stats import t

    half = float(t.ppf((1 + LEVEL) / 2, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _case_key(record: BenchmarkRecord) -> tuple[str, str, str]:
    """What pairs a compiled case with its eager case: (model, execution config or task, device)."""
    model = model_name(record)
    return model, execution_config(record, model) or record.task or "-", record.device_name


def _memory_peak(record: BenchmarkRecord) -> float | None:
    peak = (record.details.get("memory") or {}).get(CUDA_PEAK)
    return float(peak) if isinstance(peak, (int, float)) and peak > 0 else None


#: What the summary has a row of: (compile config, device).
_Key = tuple[str, str]
#: Execution records by case key (:func:`_case_key`).
_Cases = dict[tuple[str, str, str], BenchmarkRecord]


def _executions(files: Iterable[ResultsFile]) -> defaultdict[_Key, _Cases]:
    """Execution records by (compile config, device), then case key. Raises UserError on a case twice."""
    out: defaultdict[_Key, _Cases] = defaultdict(dict)
    for b in (b for f in files for b in f.benchmarks if b.kind == "execution" and b.metric != "instructions"):
        cases = out[b.compile_config, b.device_name]
        key = _case_key(b)
        if key in cases:
            raise UserError(
                f"results: {b.name!r} ({b.compile_config}) is there twice (ids {cases[key].id} "
                f"and {b.id}); give each case's results once"
            )
        cases[key] = b
    return out


#: Each module's median cold and warm compile times (ms) of one compile config and device.
_Times = tuple[list[float], list[float]]


def _compile_times(files: Iterable[ResultsFile]) -> defaultdict[_Key, _Times]:
    """Each module's median cold and warm compile time, by (compile config, device)."""
    per_module: defaultdict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    for b in (b for f in files for b in f.benchmarks):
        if (
            b.kind == "compilation"
            and b.status == "ok"
            and b.median is not None
            and b.metric in (*COLD_METRICS, WARM_METRIC)
        ):
            per_module[b.compile_config, b.device_name, b.module_name][b.metric] = b.median
    out: defaultdict[_Key, _Times] = defaultdict(lambda: ([], []))
    for (config, device, _), metrics in per_module.items():
        for times, names in zip(out[config, device], (COLD_METRICS, (WARM_METRIC,))):
            times.extend([metrics[m] for m in names if m in metrics][:1])  # the first found
    return out


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _summary(cases: _Cases, eager: _Cases, times: _Times) -> Summary:
    speedups, ratios = [], []
    for key, b in cases.items():
        e = eager.get(key)
        if (
            e is None
            or b.status != "ok"
            or e.status != "ok"
            or b.median is None
            or e.median is None
            or not (b.median > 0 and e.median > 0)
        ):
            continue
        speedups.append(e.median / b.median)
        eager_peak, peak = _memory_peak(e), _memory_peak(b)
        if eager_peak is not None and peak is not None:
            ratios.append(eager_peak / peak)
    gm, low, high = geomean_interval(speedups) if speedups else (None, None, None)
    if len(speedups) < MIN_INTERVAL_CASES:
        low = high = None
    return Summary(
        cases=len(cases),
        ok=sum(b.status == "ok" for b in cases.values()),
        paired=len(speedups),
        geomean_speedup=gm,
        speedup_low=low,
        speedup_high=high,
        modules=len(times[0]),
        cold_ms=_median(times[0]),
        warm_ms=_median(times[1]),
        memory_pairs=len(ratios),
        compression_ratio=statistics.fmean(ratios) if ratios else None,
    )


def _summaries(files: Sequence[ResultsFile]) -> dict[_Key, Summary]:
    cases, times = _executions(files), _compile_times(files)
    return {
        (config, device): _summary(cases[config, device], cases[EAGER, device], times[config, device])
        for config, device in set(cases) | set(times)
        if config != EAGER
    }


def compiler_summary(
    head: Sequence[ResultsFile], base: Sequence[ResultsFile] | None = None
) -> list[CompilerSummaryRow]:
    """One row per (compile config, device) of ``head`` other than eager, by device then compile config,
    each with ``base``'s summary of the same (None where base has none). Raises UserError when a side holds
    a case twice."""
    heads, bases = _summaries(head), _summaries(base or ())
    return [
        CompilerSummaryRow(*key, heads[key], bases.get(key))
        for key in sorted(heads, key=lambda key: key[::-1])
    ]  # by device, then compile config


def rows_to_json(rows: Sequence[CompilerSummaryRow]) -> list[dict[str, Any]]:
    """The rows as JSON values (``dataclasses.asdict``), read back by :func:`rows_from_json`."""
    return [asdict(r) for r in rows]


#: The ``Summary`` fields that are counts (the others are numbers or None).
_COUNTS = ("cases", "ok", "paired", "modules", "memory_pairs")


def _summary_from_json(value: Any, where: str) -> Summary:
    names = [f.name for f in fields(Summary)]
    if not isinstance(value, dict) or set(value) != set(names):
        raise UserError(
            f"{where} is {value!r}; expected an object with exactly the fields {', '.join(names)}"
        )
    for name, v in value.items():
        count = name in _COUNTS
        number = type(v) in (int, float) and math.isfinite(v)  # JSON: not a bool
        if not (number and type(v) is int and v >= 0 if count else v is None or number):
            raise UserError(
                f"{where}.{name} is {v!r}; expected "
                f"{'an integer >= 0' if count else 'a finite number or null'}"
            )
    if value["paired"] < MIN_INTERVAL_CASES:  # files written before MIN_INTERVAL_CASES: interval dropped
        value = {**value, "speedup_low": None, "speedup_high": None}
    return Summary(**value)


def rows_from_json(data: Any, where: str = "compiler_summary") -> list[CompilerSummaryRow]:
    """Rows from :func:`rows_to_json`'s output; ``where`` (file and field) starts each message. A summary of
    fewer than ``MIN_INTERVAL_CASES`` cases reads without an interval. Raises UserError, naming the row,
    field and value, when ``data`` is not a list of such rows."""
    if not isinstance(data, list):
        raise UserError(f"{where} is {data!r}; expected a list of rows")
    rows = []
    for i, row in enumerate(data):
        at = f"{where}[{i}]"
        if not isinstance(row, dict) or set(row) != {"compile_config", "device_name", "head", "base"}:
            raise UserError(
                f"{at} is {row!r}; expected an object with compile_config, device_name, head, base"
            )
        for name in ("compile_config", "device_name"):
            if not isinstance(row[name], str) or not row[name]:
                raise UserError(f"{at}.{name} is {row[name]!r}; expected a non-empty string")
        base = None if row["base"] is None else _summary_from_json(row["base"], f"{at}.base")
        rows.append(
            CompilerSummaryRow(
                row["compile_config"], row["device_name"], _summary_from_json(row["head"], f"{at}.head"), base
            )
        )
    return rows


def _change(row: CompilerSummaryRow, figure: str) -> str:
    """`` (+25 pp)`` (the pass rate) or `` (-11.1%)``: the row's change of ``figure``; ``""`` for none.
    Rounded first, so a tiny negative shows as ``+0``."""
    value = row.change(figure)
    if value is None:
        return ""
    # -0.0 + 0.0 is 0.0
    return (
        f" ({round(value) + 0.0:+.0f} pp)" if figure == "pass_rate" else f" ({round(value, 1) + 0.0:+.1f}%)"
    )


def _few_cases(s: Summary) -> bool:
    """A speedup from fewer than ``MIN_INTERVAL_CASES`` cases: shown with its count, without an interval."""
    return s.geomean_speedup is not None and s.paired < MIN_INTERVAL_CASES


def _speedup_cell(s: Summary) -> str:
    if s.geomean_speedup is None:
        return "—"
    if _few_cases(s):
        return f"{s.geomean_speedup:.2f}× [{counted(s.paired, 'case')}]"
    interval = "" if s.speedup_low is None else f" [{s.speedup_low:.2f}…{s.speedup_high:.2f}]"
    return f"{s.geomean_speedup:.2f}×{interval}"


def render_markdown(rows: Sequence[CompilerSummaryRow]) -> str:
    """The rows as a Markdown table with a legend (a device column only for more than one device), each
    figure followed by its change against base; ``""`` for no rows."""
    if not rows:
        return ""
    devices = len({r.device_name for r in rows}) > 1
    header = [
        "compile config",
        *(["device"] if devices else []),
        "pass rate",
        f"speedup [{LEVEL:.0%} CI]",
        "cold compile",
        "warm compile",
        "memory ratio",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * (1 + devices) + "---:|" * 5]
    for r in rows:
        h = r.head
        rate = "—" if h.pass_rate is None else f"{h.pass_rate:.0%} ({h.ok}/{h.cases})"
        memory = "—" if h.compression_ratio is None else f"{h.compression_ratio:.2f}×"
        shown = (rate, _speedup_cell(h), format_value(h.cold_ms, "ms"), format_value(h.warm_ms, "ms"), memory)
        cells = [
            md_text(r.compile_config),
            *([md_text(r.device_name)] if devices else []),
            *(text + _change(r, f) for f, text in zip(FIGURES, shown)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Speedup: eager median / compiled median per case, geometric mean over cases. Compile: "
        "median over modules. Memory ratio: eager / compiled CUDA allocator peak over the timed "
        "samples (— on CPU). In parentheses: change against base (pass rate in percentage points).",
    ]
    if any(_few_cases(r.head) for r in rows):
        lines[-1] += (
            f" [n cases]: fewer than {MIN_INTERVAL_CASES} cases with a speedup, too few for a "
            f"{LEVEL:.0%} interval."
        )
    return "\n".join(lines) + "\n"
