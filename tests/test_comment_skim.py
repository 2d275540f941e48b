"""The comment a reader skims (issue 20, item 1): a headline of counts, a short table of confirmed changes,
the rest folded, each reason said once, no hex ids, a reproduce line by name, and one estimator per row
(a paired row's base → head agrees with its paired change). A fixed comparison built by the real compare,
marking and re-check code from fixed samples (no randomness)."""

import re
import shlex

import pytest

from benchtrail.compare.comment import render
from benchtrail.compare.comment_header import check_figure, runner_checks_line
from benchtrail.compare.document import Comparison, Row, comparison_to_dict
from benchtrail.compare.notes import mark_regressions
from benchtrail.compare.rules import Rules, load_thresholds
from benchtrail.compare.tables import estimate
from benchtrail.compare.verdicts import compare
from benchtrail.markup import md_text
from benchtrail.runner.ab import Arm
from tests.helpers.records import apply_recheck, record, results, spread

BASE, HEAD = "b" * 40, "c" * 40
DEVICE = "c2-standard-16"


def _paired(id_, base_values, head_values, rounds=4):
    """Base and head records of one series of a paired A/B run (``details.ab.rounds`` on both sides)."""
    return record(id_, base_values, ab={"rounds": rounds}), record(id_, head_values, ab={"rounds": rounds})


def _paired_samples(level, ratio, n=20, cross=True):
    """``n`` pairs (4 rounds of 5) taken in a fast or a slow spell of the machine (``level`` or 4 × ``level``),
    head ``ratio`` × base give or take 0.4%; in one pair a round (j = 0, 5, …) the spell ended between the
    base and the head sample (base slow, head fast). So the median pair ratio is ``ratio``, while the side
    medians are of different spells: 12 of 20 base samples are slow, 12 of 20 head samples fast. Without
    ``cross`` every pair is in one spell."""
    base, head = [], []
    for j in range(n):
        cross, slow = cross and j % 5 == 0, j % 2 == 1
        jitter = 1 + 0.001 * (j % 7)
        base.append(level * (4.0 if slow or cross else 1.0) * jitter)
        head.append(ratio * level * (4.0 if slow and not cross else 1.0) * jitter * (1
                                                                                     + 0.002 * ((j * 7) % 5 - 2)))
    return base, head


def _fixture():
    """The comparison: a confirmed regression (its re-check's paired figures), an improvement, a paired
    improvement of an A/B run, an unconfirmed regression, two inconclusive noisy rows, two failed rows, a new and a
    similar row, and failed runner checks with process ids."""
    noisy = [50.0, 150.0] * 10
    ab_base, ab_head = _paired_samples(200.0, 0.6)
    base = [record("slow", spread(100.0, 20)), record("fast", spread(100.0, 20)),
            record("suspect", spread(100.0, 20)),
            record("jumpy1", noisy), record("jumpy2", noisy), record("bad1", spread(10.0)),
            record("bad2", spread(10.0)),
            record("same", spread(50.0, 20)), _paired("paired", ab_base, ab_head)[0]]
    head = [record("slow", spread(130.0, 20)), record("fast", spread(70.0, 20)),
            record("suspect", spread(125.0, 20)),
            record("jumpy1", noisy[::-1]), record("jumpy2", [x * 1.1 for x in noisy]),
            record("bad1", status="failed"),
            record("bad2", status="failed"), record("same", spread(50.0, 20)),
            record("fresh", spread(20.0, 20)),
            _paired("paired", ab_base, ab_head)[1]]
    files = [results(*base, commit=BASE)], [results(*head, commit=HEAD)]
    rows = mark_regressions(compare(*files, load_thresholds()), Rules())
    comparison = comparison_to_dict(rows, *files, "thresholds.yaml", {"reason": "merge base"})
    comparison["head"]["runner_checks"] = [{"device": DEVICE, "failed": [
        {"name": "load average", "value": "3.20 over 1 min on 2 CPUs",
         "expected": "at most 1, half the CPUs"},
        {"name": "busy processes", "value": "python (pid 4242) 97%, stress (pid 77) 40%",
         "expected": "none above 20% of a CPU"}]}]
    # The re-check of "slow": a real paired comparison of its series, base and head interleaved on this
    # runner.
    pb, ph = _paired_samples(110.0, 1.12, cross=False)
    paired_rows = compare([results(_paired("slow", pb, ph)[0], commit=BASE)],
                          [results(_paired("slow", pb, ph)[1], commit=HEAD)], load_thresholds())
    not_reached = {r["id"]: 600.0 for r in comparison["rows"] if r["id"] == "suspect"}
    checked = apply_recheck(comparison, {r.id: r for r in paired_rows}, Arm("base", BASE, None),
                            Arm("head", HEAD, None),
                    not_reached=not_reached)
    return checked


@pytest.fixture(scope="module")
def rendered():
    comparison = _fixture()
    body, full, data = render(Comparison.of(comparison), "gs://bucket/pre/runs/123/1/")
    return comparison, body, full, data


def _table(body, heading):
    """The row lines (below header and delimiter) of the first table after the line ``heading``, as lists of cells."""
    lines = body.split(heading + "\n", 1)[1].splitlines()
    rows = []
    for line in lines[lines.index(next(x for x in lines if x.startswith("|"))):]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows[2:]


def test_the_fixture_has_every_kind_of_row(rendered):
    comparison, *_ = rendered
    verdicts = {r["id"]: (r["verdict"], r["mark"]) for r in comparison["rows"]}
    assert verdicts == {"slow": ("regressed", "confirmed"), "fast": ("improved", None),
                        "suspect": ("regressed", "unconfirmed"), "jumpy1": ("inconclusive", None),
                        "jumpy2": ("inconclusive", None), "bad1": ("failed", None), "bad2": ("failed", None),
                        "same": ("similar", None), "fresh": ("new", None), "paired": ("improved", None)}


def test_headline_short_table_and_folded_sections(rendered):
    comparison, body, full, data = rendered
    lines = body.splitlines()
    assert lines[0] == ("### benchtrail: 2 regressions (1 unconfirmed, 1 confirmed), 2 improvements, 2 inconclusive, "
                        "1 similar, 2 failed, 1 new")
    assert data["verdict"] == lines[0]
    table = _table(body, "#### Confirmed regressions and improvements")
    assert [r[0] for r in table] == ["`slow.inference-bs1`", "`paired.inference-bs1`", "`fast.inference-bs1`"]
    header = body.split("#### Confirmed regressions and improvements\n", 1)[1].splitlines()[0]
    assert header == "| benchmark | base → head | change (99% CI) | verdict |"
    assert [re.sub(r" \[\d+\]$", "", r[3]) for r in table] == ["regressed · confirmed", "improved",
                                                               "improved"]
    assert table[2][1] == "100.0 µs → 70.0 µs" and table[2][2].startswith("-30.0% (")
    summaries = re.findall(r"<details><summary>(.*)</summary>", body)
    assert summaries == ["Unconfirmed changes: 1 series", "Inconclusive: 2 series",
                         "Failed or not comparable: 2 series",
                         "New or removed: 1 series", "Similar: 1 series"]
    assert body.count("<details>") == body.count("</details>") == 5
    # every row once, and each device suffix dropped (one device: the context line names it)
    tables = body.split("#### Confirmed regressions and improvements", 1)[1].split("Reproduce:")[0]
    for row in comparison["rows"]:
        assert tables.count(f"`{row['name'].removesuffix('.' + DEVICE)}`") == 1, row["name"]
    assert f".{DEVICE}`" not in body.split("Reproduce:")[0] and f"devices {DEVICE}" in lines[1]
    assert full == body  # small enough: nothing cut


def test_no_hex_ids_and_each_reason_said_once(rendered):
    comparison, body, *_ = rendered
    assert re.findall(r"[0-9a-f]{16,}", body) == []
    reasons = {r["reason"] for r in comparison["rows"] if r["reason"]}
    assert len(reasons) < sum(bool(r["reason"]) for r in comparison["rows"])  # some rows share a reason ...
    for reason in reasons:  # ... said once, in a legend
        assert sum(line.split("] ", 1)[-1] == md_text(reason) for line in body.splitlines()
                   if re.match(r"- \[\d+\] ", line)) == 1, reason
    noisy = {r["id"]: r for r in comparison["rows"] if r["noisy"]}
    refs = dict(re.findall(r"\| `(jumpy\d)\.inference-bs1` \|.*\| inconclusive · noisy · could detect ≥ \d+% \(threshold \d+%\) (\[\d+\]) \|",
                           body))
    assert f"- {refs['jumpy1']} {md_text(noisy['jumpy1']['reason'])}" in body.splitlines()
    # jumpy2's +10% is beyond its 5% threshold with p < 0.1: a suspect of the re-check, noisy or not (none ran
    # for it here).
    assert noisy["jumpy2"]["reason"] == ("no paired A/B re-check: the head suite has no such run config; "
                                         + noisy["jumpy1"]["reason"])  # and why it was inconclusive


def test_the_paired_change_agrees_with_the_medians_shown(rendered):
    comparison, body, *_ = rendered
    table = {r[0]: r for r in _table(body, "#### Confirmed regressions and improvements")}
    units = {"µs": 1.0, "ms": 1e3, "s": 1e6}
    for name in ("`slow.inference-bs1`", "`paired.inference-bs1`"):
        _, values, change, _ = table[name]
        assert change.endswith(", paired"), change
        base, head = (float(v.split()[0]) * units[v.split()[1]] for v in values.split(" → "))
        point, low, high = map(float, re.fullmatch(r"([-+][\d.]+)% \(([-+][\d.]+)…([-+][\d.]+)%\), paired",
                                                   change).groups())
        shown = (head / base - 1) * 100
        assert (shown > 0) == (point > 0) and low - 0.1 <= shown <= high + 0.1, (name, shown, change)
    slow = next(r for r in comparison["rows"] if r["id"] == "slow")
    # the stored baseline's figure is kept ...
    assert slow["stored"]["change"] == pytest.approx(30.0, abs=0.5)
    # ... the paired one shown
    assert slow["change"] == estimate(Row.of(slow)).change == pytest.approx(12.0, abs=1.0)
    assert "+30.0%" not in table["`slow.inference-bs1`"][2]
    # the paired run's own side medians disagree with its paired change (two spells of the machine) ...
    paired = next(r for r in comparison["rows"] if r["id"] == "paired")
    assert paired["head_median"] / paired["base_median"] - 1 < paired["ci_low"] / 100 - 0.05
    # ... so the head shown is base × the paired ratio, and the legend says so, once
    assert body.count("- paired: the change is the median of the per-pair ratios") == 1


def test_reproduce_line_names_the_benchmark_and_runner_warning_has_figures_not_pids(rendered):
    _, body, *_ = rendered
    assert ("Reproduce: `benchtrail explain slow.inference-bs1.c2-standard-16 --run "
            "gs://bucket/pre/runs/123/1/`") \
        in body.splitlines()
    (warning,) = [line for line in body.splitlines() if line.startswith("⚠ runner checks failed")]
    assert warning.startswith(f"⚠ runner checks failed on {DEVICE}: load average 3.20 \\> 1; busy processes: "
                              "python 97%, stress 40% (\\> 20%).")  # '>' escaped: shows as '>'
    assert "pid" not in body


@pytest.mark.parametrize("name", ["we`ird ``name", "`edge`", "it's $(rm -rf) x"])
def test_the_reproduce_line_survives_backticks_and_quotes_in_names(rendered, name):
    comparison = rendered[0]
    row = dict(comparison["rows"][0], name=name)
    body, _, _ = render(Comparison.of({**comparison, "rows": [row]}), "/store/runs/r/1")
    (line,) = [x for x in body.splitlines() if x.startswith("Reproduce: ")]
    span = line.removeprefix("Reproduce: ")
    fence = re.match(r"`+", span)[0]
    inner = span[len(fence):-len(fence)]
    # CommonMark: no run of that length
    assert span.endswith(fence) and not re.search(f"(?<!`){fence}(?!`)", inner)
    if inner.startswith(" ") and inner.endswith(" ") and inner.strip(" "):
        inner = inner[1:-1]
    assert shlex.split(inner) == ["benchtrail", "explain", name, "--run", "/store/runs/r/1"]


def test_check_figures():
    assert check_figure({"name": "load average", "value": "3.20 over 1 min on 2 CPUs",
                         "expected": "at most 1.5, half the CPUs"}) == "load average 3.20 \\> 1.5"
    assert check_figure({"name": "memory pressure", "value": "PSI some avg10 12.00%",
                         "expected": "at most 10%"}) == "memory pressure 12.00% \\> 10%"
    assert check_figure({"name": "available memory", "value": "0.5 GiB of 8.0 GiB (6%)",
                         "expected": "at least 10% of memory"}) == "available memory 6% \\< 10%"
    assert check_figure({"name": "cpu governor", "value": "powersave",
                         "expected": "performance"}) == "cpu governor is powersave (expected performance)"
    assert check_figure({"name": "gpu processes", "value": "python (pid 12, 900 MiB)",
                         "expected": "none"}) == "gpu processes is python (900 MiB) (expected none)"
    assert runner_checks_line(Comparison({"head": {"runner_checks": []}}, ())) is None


def test_explain_takes_the_exact_name_the_reproduce_line_gives_and_refuses_a_shared_one():
    from benchmark_suites.suite import generate
    from benchtrail.errors import UserError
    from benchtrail.runner.explain import Target, resolve

    rcs = generate().select_run_configs(("smoke",))
    targets = {rc.id: Target(rc, rc.module_generation_config) for rc in rcs}
    rc = rcs[0]
    assert resolve(targets, rc.name) == (rc.id, targets[rc.id])
    assert resolve(targets, rc.id) == (rc.id, targets[rc.id])
    shared = {**targets, "copy-of-" + rc.id: targets[rc.id]}  # two benchmarks of one name
    with pytest.raises(UserError,
                       match=rf"benchmark name '{re.escape(rc.name)}' is ambiguous: 2 benchmarks of this "
                                        r"run have it \(ids "
                       rf"{', '.join(sorted([rc.id, 'copy-of-' + rc.id]))}\); pass one id"):
        resolve(shared, rc.name)
    # The name as the comment's tables show it for a run of one device: without ".<device>".
    assert resolve(targets, rc.name.rsplit(".", 1)[0]) == (rc.id, targets[rc.id])
    with pytest.raises(UserError, match="no benchmark"):
        resolve(targets, rc.name.rsplit(".", 2)[0])  # any other prefix of a name is not a name
    everywhere = {r.id: Target(r, r.module_generation_config) for r in generate().run_configs}
    cpu, cuda = (next(r for r in everywhere.values()
                      if r.run_config.name == f"matmul-1024.eager.inference-bs1.{d}")
                 for d in ("c2-standard-16", "a2-highgpu-1g"))
    with pytest.raises(UserError, match=re.escape(
            "benchmark 'matmul-1024.eager.inference-bs1' ran on 2 devices of this run: pass the name with its device "
            "(matmul-1024.eager.inference-bs1.a2-highgpu-1g, matmul-1024.eager.inference-bs1.c2-standard-16)")):
        resolve(everywhere, "matmul-1024.eager.inference-bs1")
    assert resolve(everywhere, cpu.run_config.name)[1] is cpu and resolve(everywhere,
                                                                          cuda.run_config.name)[1] is cuda
