"""Old and foreign files (issue 16, part 4): real files of every earlier version are read, or refused naming
the version; a stored baseline that cannot be used gives rows with the reason, never a missing comparison.

The files under tests/data/old/ were written by the commits that introduced each version
(tests/data/README.md; tests/data/old/make.sh makes them again).
"""

import json
import re
from pathlib import Path

import pytest

from benchtrail.cli import main
from benchtrail.compare import document as compare_module
from benchtrail.compare.document import Comparison
from benchtrail.results import schema as results_schema
from benchtrail.results.io import load_results, write_results
from tests.helpers.git import commit, git
from tests.helpers.schemas import errors

OLD = Path(__file__).parent / "data" / "old"
DEVICE = "c2-standard-16"
SHARD = f"results/{DEVICE}-0.json"
NAMES = {i: f"{i}.inference-bs1.{DEVICE}" for i in ("rc-reg", "rc-same", "rc-new", "rc-fail", "rc-gone")}


def _run_dir(tmp_path: Path, name: str, source: Path, sha: str, copies: int = 1) -> Path:
    """A run directory holding the real results file ``source`` (``copies`` shards of it), its commit set to ``sha``."""
    obj_commit = json.loads(source.read_text(encoding="utf-8"))["commit"]
    text = source.read_text(encoding="utf-8").replace(obj_commit, sha)
    for i in range(copies):
        path = tmp_path / name / "results" / f"{DEVICE}-{i}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path / name


@pytest.fixture
def pr(repo, tmp_path, monkeypatch):
    """A PR branch of ``repo`` (the working directory) and a ``file://`` store holding tests/data/old/base.json
    (results schema 1) as run 111/1 of the merge base: ``(base sha, head sha, store folder)``."""
    base_sha = git(repo, "rev-parse", "main", isolated=True)
    git(repo, "checkout", "-q", "-b", "pr", isolated=True)
    head_sha = commit(repo, "pr change")
    store = tmp_path / "store"
    assert main(["upload", "--run-dir", str(_run_dir(tmp_path, "base", OLD / "base.json", base_sha)),
                 "--store", f"file://{store}", "--run-id", "111", "--attempt", "1", "--write-pointer"]) == 0
    monkeypatch.chdir(repo)
    return base_sha, head_sha, store


def _compare(tmp_path: Path, head: Path, store: Path, name: str = "comparison.json") -> dict:
    out = tmp_path / name
    assert main(["compare", "--head", str(head), "--store", f"file://{store}", "--output", str(out)]) == 0
    comparison = json.loads(out.read_text(encoding="utf-8"))
    assert errors("comparison.schema.json", comparison) == []
    return comparison


def _verdicts(comparison: dict) -> dict:
    return {r["id"]: (r["verdict"], r["reason"]) for r in comparison["rows"]}


@pytest.mark.parametrize("head_version", ["1", "current"])
def test_a_stored_baseline_of_results_schema_1_is_read_through_the_upgrade(pr, tmp_path, head_version):
    base_sha, head_sha, store = pr
    head = _run_dir(tmp_path, "head", OLD / "head.json", head_sha)
    if head_version == "current":  # the same records, rewritten by this benchtrail
        rewritten = load_results(head / SHARD)
        (head / SHARD).unlink()
        write_results(head / SHARD, rewritten)
    assert json.loads((head / SHARD).read_text())["schema_version"] == (
        1 if head_version == "1" else results_schema.SCHEMA_VERSION)
    comparison = _compare(tmp_path, head, store)
    assert {i: v for i, (v, _) in _verdicts(comparison).items()} == {
        "rc-reg": "regressed", "rc-same": "similar", "rc-new": "new", "rc-fail": "failed",
        "rc-gone": "removed"}
    rows = {r["id"]: r for r in comparison["rows"]}
    assert rows["rc-reg"]["base_median"] == pytest.approx(100.45) and rows["rc-reg"]["head_median"] == pytest.approx(150.45)
    assert rows["rc-gone"]["base_median"] == pytest.approx(50.45)
    assert comparison["baseline"]["devices"] == {DEVICE: {"commit": base_sha, "reason": "merge base",
                                                          "run_id": "111",
                                                          "attempt": 1}}
    assert (comparison["baseline"]["lacking"], comparison["baseline"]["ignored"]) == ({}, [])


def _future(text: str) -> str:
    return json.dumps({**json.loads(text), "schema_version": results_schema.SCHEMA_VERSION + 1})


def _bad_status(text: str) -> str:
    obj = json.loads(text)
    obj["benchmarks"][0]["status"] = "exploded"
    return json.dumps(obj)


WHERE = f"run 111/1: results file {SHARD}"
# what the stored file becomes -> (its content, the rows' reason, the start of `compare --base`'s error)
UNUSABLE = {
    "future": (_future, f"baseline incompatible: schema {results_schema.SCHEMA_VERSION + 1} ({WHERE}; this "
                        f"benchtrail reads results schemas 1..{results_schema.SCHEMA_VERSION}: upgrade "
               "benchtrail to "
                        "compare with it)",
               f"has schema_version {results_schema.SCHEMA_VERSION + 1}, but this "
                                            "benchtrail reads versions"),
    "truncated": (lambda t: t[: len(t) // 2],
                  f"baseline unreadable: {WHERE} is not valid JSON (truncated or corrupt?): ",
                  "is not valid JSON (truncated or corrupt?)"),
    "html": (lambda t: "<html>503 Service Unavailable</html>",
             f"baseline unreadable: {WHERE} is not valid JSON "
             "(truncated or corrupt?): Expecting value at line 1 column 1", "is not valid JSON"),
    "list": (lambda t: "[1, 2]", "baseline unreadable: run 111/1: ",
             "is not a benchtrail results file (no schema_version)"),
    "bad status": (_bad_status, "baseline unreadable: run 111/1: ",
                   "benchmark 'rc-reg.inference-bs1.c2-standard-16' "
                                                                    "has status 'exploded'; allowed: ok, "
                   "failed"),
    "latin-1": (lambda t: t.replace('"rc-reg.', '"rc-r\xe9g.'),
                f"baseline unreadable: {WHERE} is not UTF-8 text (byte ", "is not UTF-8 text (byte "),
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_an_unusable_stored_baseline_gives_rows_with_the_reason_and_a_comparison(pr, tmp_path, kind, capsys):
    base_sha, head_sha, store = pr
    content, reason, direct_error = UNUSABLE[kind]
    stored = store / "runs" / "111" / "1" / SHARD
    stored.write_bytes(content(stored.read_text(encoding="utf-8")).encode("latin-1" if kind == "latin-1"
                                                                          else "utf-8"))
    head = _run_dir(tmp_path, "head", OLD / "head.json", head_sha)
    comparison = _compare(tmp_path, head, store)
    got = _verdicts(comparison)
    why = got["rc-reg"][1]
    assert why.startswith(reason) and (why == reason or kind not in ("future", "html"))
    if kind in ("list", "bad status"):
        assert direct_error in why and str(stored.name) in why
    # Every head series of the device says why; none is new, none removed (the baseline's series are unknown).
    assert got == {"rc-reg": ("not-comparable", why), "rc-same": ("not-comparable", why),
                   "rc-new": ("not-comparable", why), "rc-fail": ("failed", "head failed: boom")}
    baseline = comparison["baseline"]
    assert baseline["reason"] == "no usable baseline run: 1 stored run(s) ignored"
    assert baseline["ignored"] == [{"commit": base_sha, "run_id": "111", "attempt": 1,
                                    "reason": f"its results cannot be used: {why}"}]
    assert baseline["lacking"] == {DEVICE: why} and comparison["base"] is None
    assert f"{DEVICE} is not compared" in capsys.readouterr().err
    # The comment shows the reason; gate passes (nothing was judged).
    assert main(["comment", "--comparison", str(tmp_path / "comparison.json"), "--output-dir",
                 str(tmp_path / "c")]) == 0
    body = (tmp_path / "c" / "comment.md").read_text(encoding="utf-8")
    assert " · no usable baseline: its stored results cannot be read (below), so nothing is compared" in body
    # the reason is said once, in the legend the rows refer to by number
    assert re.search(r"not-comparable \[(\d+)\]", body) and "its results cannot be used: " in body
    number = re.search(r"not-comparable \[(\d+)\]", body).group(1)
    assert f"- [{number}] {why.split(':')[0]}: " in body
    assert main(["gate", "--comparison", str(tmp_path / "comparison.json")]) == 0
    # The same file passed directly is the user's error: exit 1, naming the file, and no comparison.
    capsys.readouterr()
    assert main(["compare", "--base", str(stored), "--head", str(head), "--output",
                 str(tmp_path / "direct.json")]) == 1
    err = capsys.readouterr().err
    assert str(stored) in err and direct_error in err
    assert not (tmp_path / "direct.json").exists()


def test_a_stored_run_holding_a_series_twice_gives_rows_with_the_reason(repo, tmp_path, monkeypatch):
    base_sha = git(repo, "rev-parse", "main", isolated=True)
    head_sha = commit(repo, "next")
    store = tmp_path / "store"
    assert main(["upload", "--run-dir",
                 str(_run_dir(tmp_path, "base", OLD / "base.json", base_sha, copies=2)),
                 "--store", f"file://{store}", "--run-id", "7", "--attempt", "2", "--write-pointer"]) == 0
    monkeypatch.chdir(repo)
    comparison = _compare(tmp_path, _run_dir(tmp_path, "head", OLD / "head.json", head_sha), store)
    why = (f"baseline unreadable: run 7/2: series '{NAMES['rc-reg']}' (rc-reg) is in results files "
           f"results/{DEVICE}-0.json and results/{DEVICE}-1.json")
    assert _verdicts(comparison) == {"rc-reg": ("not-comparable", why), "rc-same": ("not-comparable", why),
                                     "rc-new": ("not-comparable", why),
                                     "rc-fail": ("failed", "head failed: boom")}
    assert comparison["baseline"]["lacking"] == {DEVICE: why}


def test_only_the_devices_of_an_unusable_run_go_without_a_baseline(pr, tmp_path, capsys):
    """Two devices, each with its own stored run of the merge base: the run of one is of a newer results
    schema, so that device's rows say so and the other device is compared as usual."""
    base_sha, head_sha, store = pr
    other = "n1-standard-4"

    def moved(source: Path, name: str) -> Path:  # the same real file, for another device and series ids
        path = tmp_path / name
        path.write_text(source.read_text(encoding="utf-8").replace(DEVICE, other).replace('"rc-', '"xc-'))
        return path

    base2 = _run_dir(tmp_path, "base2", moved(OLD / "base.json", "base2.json"), base_sha)
    (base2 / SHARD).rename(base2 / f"results/{other}-0.json")
    assert main(["upload", "--run-dir", str(base2), "--store", f"file://{store}", "--run-id", "222",
                 "--attempt",
                 "1", "--write-pointer"]) == 0
    stored = store / "runs" / "222" / "1" / "results" / f"{other}-0.json"
    stored.write_text(_future(stored.read_text(encoding="utf-8")), encoding="utf-8")
    head = _run_dir(tmp_path, "head", OLD / "head.json", head_sha)
    _run_dir(tmp_path, "head2", moved(OLD / "head.json", "head2.json"), head_sha)
    (tmp_path / "head2" / SHARD).rename(head / f"results/{other}-0.json")
    comparison = _compare(tmp_path, head, store)
    future = results_schema.SCHEMA_VERSION + 1
    why = (f"baseline incompatible: schema {future} (run 222/1: results file results/{other}-0.json; this "
           f"benchtrail reads results schemas 1..{results_schema.SCHEMA_VERSION}: upgrade benchtrail to compare "
           "with it)")
    assert {i: v if i.startswith("rc-") else (v, r) for i, (v, r) in _verdicts(comparison).items()} == {
        "rc-reg": "regressed", "rc-same": "similar", "rc-new": "new", "rc-fail": "failed",
        "rc-gone": "removed",
        "xc-reg": ("not-comparable", why), "xc-same": ("not-comparable", why),
        "xc-new": ("not-comparable", why),
        "xc-fail": ("failed", "head failed: boom")}
    baseline = comparison["baseline"]
    assert (baseline["run_id"], baseline["reason"], list(baseline["devices"])) == ("111", "merge base",
                                                                                   [DEVICE])
    assert baseline["lacking"] == {other: why}
    assert baseline["ignored"] == [{"commit": base_sha, "run_id": "222", "attempt": 1,
                                    "reason": f"its results cannot be used: {why}"}]


ROWS = {"rc-reg": "regressed", "rc-same": "similar", "rc-new": "new", "rc-fail": "failed",
        "rc-gone": "removed"}
# version -> (rc-reg's verdict and mark, `gate`'s exit code and summary, what the comment says)
COMPARISONS = {
    1: (("regressed", None), 0,
        "passed: no confirmed regression that is not accepted; 1 unconfirmed regression not "
                                "gated; 0 accepted, 0 quarantined", "baseline `bbbbbbb`"),
    2: (("regressed", "accepted"), 0, "passed: no confirmed regression that is not accepted; 0 unconfirmed "
                                      "regressions not gated; 1 accepted, 0 quarantined", "accepted"),
    3: (("regressed", "confirmed"), 3, "failed: 1 confirmed regression not accepted", "confirmed"),
    4: (("regressed", "quarantined"), 0,
        "passed: no confirmed regression that is not accepted; 0 unconfirmed "
                                         "regressions not gated; 0 accepted, 1 quarantined",
        "flaky, see issue 7"),
    5: (("new", None), 0,
        "passed: no confirmed regression that is not accepted; 0 unconfirmed regressions not "
                          "gated; 0 accepted, 0 quarantined",
        "the store could not be read: cannot list gs://bt-gone/ci/"),
    6: (("regressed", "unconfirmed"), 0,
        "passed: no confirmed regression that is not accepted; 1 unconfirmed "
                                         "regression not gated; 0 accepted, 0 quarantined", "(merge base)"),
}


@pytest.mark.parametrize("version", sorted(COMPARISONS))
def test_comment_and_gate_read_a_real_comparison_of_every_earlier_version(version, tmp_path, capsys):
    path = OLD / f"comparison-v{version}.json"
    obj = json.loads(path.read_text(encoding="utf-8"))
    assert obj["schema_version"] == version and version < compare_module.SCHEMA_VERSION
    (verdict, mark), gate_exit, summary, shown = COMPARISONS[version]
    rows = {r.id: r for r in compare_module.load_comparison(path).rows}
    assert (rows["rc-reg"].verdict, rows["rc-reg"].mark) == (verdict, mark)
    expected = dict(ROWS) if version != 5 else {"rc-reg": "new", "rc-same": "new", "rc-new": "new",
                                                "rc-fail": "failed"}
    assert {i: r.verdict for i, r in rows.items()} == expected
    assert main(["comment", "--comparison", str(path), "--output-dir", str(tmp_path / "c")]) == 0
    full = (tmp_path / "c" / "full.md").read_text(encoding="utf-8")
    comment = json.loads((tmp_path / "c" / "comment.json").read_text(encoding="utf-8"))
    # one device: the comment names each series without its device suffix (the context line names it)
    assert all(f"`{name.removesuffix('.' + DEVICE)}`" in full for i, name in NAMES.items() if i in expected)
    assert shown in full.replace("\\", "")
    assert {k: comment["counts"][k] for k in ("regressed", "similar", "new", "failed", "removed")} == {
        "regressed": int(verdict == "regressed"), "similar": int(version != 5),
        "new": 3 if version == 5 else 1,
        "failed": 1, "removed": int(version != 5)}
    capsys.readouterr()
    assert main(["gate", "--comparison", str(path)]) == gate_exit
    out = capsys.readouterr().out
    assert f"benchtrail gate: {summary}" in out
    assert ("confirmed regression: rc-reg.inference-bs1.c2-standard-16 (c2-standard-16): +49.8%" in out) == (gate_exit == 3)


def _edited(tmp_path: Path, version: int, edit) -> Path:
    obj = json.loads((OLD / f"comparison-v{version}.json").read_text(encoding="utf-8"))
    edit(obj)
    path = tmp_path / f"edited-v{version}.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


REFUSED = {  # what is wrong -> (the file from an earlier version, how it is edited, what the error says)
    "a newer version": (6, lambda o: o.update(schema_version=compare_module.SCHEMA_VERSION + 1),
                        f"has schema_version {compare_module.SCHEMA_VERSION + 1}, but this benchtrail reads versions "
                        f"1..{compare_module.SCHEMA_VERSION}; upgrade benchtrail"),
    "version 0": (1, lambda o: o.update(schema_version=0),
                  "schema_version 0 is not valid; versions start at 1"),
    "a version as text": (2, lambda o: o.update(schema_version="2"),
                          "missing or non-integer 'schema_version' (got '2')"),
    "a v1 row without its verdict": (1, lambda o: o["rows"][0].pop("verdict"), "rows[0]"),
    "a v5 row with an unknown verdict": (5, lambda o: o["rows"][1].update(verdict="slower"),
                                         "rows[1] ('rc-same.inference-bs1.c2-standard-16') has verdict 'slower'; "
                                         "allowed: regressed"),
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_comment_and_gate_refuse_a_bad_or_newer_comparison_naming_the_file_and_field(kind, tmp_path, capsys):
    version, edit, message = REFUSED[kind]
    path = _edited(tmp_path, version, edit)
    for command in (["comment", "--comparison", str(path), "--output-dir", str(tmp_path / "c")],
                    ["gate", "--comparison", str(path)]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert str(path) in err and message in err, err
    assert not (tmp_path / "c").exists()


def test_the_old_files_are_the_versions_they_claim():
    """Each file under tests/data/old/ is what the README says: the inputs are results schema 1."""
    for name in ("base.json", "head.json"):
        obj = json.loads((OLD / name).read_text(encoding="utf-8"))
        assert obj["schema_version"] == 1 and all("direction" not in b for b in obj["benchmarks"])
        # the upgrade fills it in
        assert load_results(OLD / name).benchmarks[0].direction == "lower-is-better"


def test_a_version_7_comparison_with_a_noisy_row_is_read_shown_as_inconclusive_and_rechecked(tmp_path,
                                                                                             capsys):
    """4f888d2 wrote verdict ``noisy`` (comparison version 7): comment, terminal and gate read it, its noisy row
    beside the inconclusive ones; the re-check takes it as a suspect and writes version 8 without ``noisy``."""
    from benchtrail.compare.terminal import render_table
    from benchtrail.runner.ab import Arm
    from benchtrail.runner.recheck import suspects
    from tests.helpers.records import apply_recheck

    path = OLD / "comparison-v7.json"
    old = compare_module.load_comparison(path)
    assert old.schema_version == 7 and [r.verdict for r in old.rows] == ["noisy", "regressed"]
    assert main(["comment", "--comparison", str(path), "--output-dir", str(tmp_path / "c")]) == 0
    body = (tmp_path / "c" / "comment.md").read_text(encoding="utf-8")
    assert body.splitlines()[0] == "### benchtrail: 1 regression (1 unconfirmed), 0 improvements, 1 noisy"
    assert "<details><summary>Inconclusive: 1 series</summary>" in body and "| noisy [" in body
    assert render_table(old,
                        width=200).splitlines()[-1].startswith("inconclusive (1): rc-noisy.inference-bs1 +15.0%")
    assert main(["gate", "--comparison", str(path)]) == 0
    assert [r.id for r in suspects(old)] == ["rc-noisy", "rc-reg"]  # the noisy +15% (p = 0.04) is screened in
    paired = {"rc-reg": {**old.document["rows"][1], "head_details": {"ab": {"rounds": 3, "stop": "decided"}}}}
    checked = apply_recheck(old.document, paired, Arm("base", "b" * 40, None), Arm("head", "c" * 40, None))
    assert checked["schema_version"] == compare_module.SCHEMA_VERSION
    assert [(r["verdict"], r.get("noisy")) for r in checked["rows"]] == [("inconclusive", True),
                                                                         ("regressed", None)]
    assert checked["counts"]["inconclusive"] == 1 and "noisy" not in checked["counts"]
    (tmp_path / "checked.json").write_text(json.dumps(checked), encoding="utf-8")
    assert [r.verdict for r in compare_module.load_comparison(tmp_path / "checked.json").rows] == [
        "inconclusive", "regressed"]


@pytest.mark.parametrize("version", [3, 4, 6, 7])
def test_a_recheck_of_an_earlier_comparison_writes_a_document_its_schema_and_reader_accept(version, tmp_path):
    """Re-checking a real comparison of each version from 3 on (version 5's has no compared row): a paired row
    that decides brings the document to this version (every field of every row, counts, missing_shards); one
    that decides nothing (a failed arm) keeps its version and counts as that version did (noisy before 8). Both
    validate and read back. The regression of versions 3 and 4 (confirmed, quarantined) is made a suspect."""
    from benchtrail.runner.ab import Arm
    from benchtrail.runner.recheck import suspects
    from tests.helpers.records import apply_recheck

    obj = json.loads((OLD / f"comparison-v{version}.json").read_text(encoding="utf-8"))
    reg = next(r for r in obj["rows"] if r["id"] == "rc-reg")
    reg.update(mark="unconfirmed", **({"quarantined": None} if version == 4 else {}))
    row = next(r for r in obj["rows"] if r["id"] == suspects(Comparison.of(obj))[0].id)
    arms = Arm("base", "b" * 40, None), Arm("head", "c" * 40, None)
    decided = {row["id"]: {**row, "verdict": "similar", "change": 0.1, "ci_low": -0.5, "ci_high": 0.7,
                           "q_value": 0.5, "p_value": 0.5, "mde": 1.0, "outcome": "SAME", "noisy": False,
                           "head_details": {"ab": {"rounds": 3, "stop": "decided"}}}}
    failed = {row["id"]: {**row, "verdict": "failed", "reason": "head failed: boom", "head_details": {}}}
    for paired, expected in ((decided, compare_module.SCHEMA_VERSION), (failed, version)):
        checked = apply_recheck(obj, paired, *arms)
        assert checked["schema_version"] == expected
        assert errors("comparison.schema.json", checked) == []
        path = tmp_path / f"checked-{expected}.json"
        path.write_text(json.dumps(checked), encoding="utf-8")
        rows = {r.id: r for r in compare_module.load_comparison(path).rows}
        assert rows[row["id"]].verdict == ("similar" if paired is decided else row["verdict"])
