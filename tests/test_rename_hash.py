"""Issue 39, item 2: a declared rename (``renamed_from``) compares as the same benchmark. The content hash of a
function benchmark leaves out its own name (scheme 2), so a pure rename keeps the hash and a rename with a body
change does not; a baseline hashed by the scheme before is compared with a note instead of ``not-comparable``."""

import dataclasses
import importlib
import sys

import pytest

from benchtrail.compare.notes import HASH_SCHEME_NOTE
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from benchtrail.results.schema import ResultsFile
from benchtrail.suite.content_hash import content_hash
from benchtrail.suite.functions import discover, suite_of
from tests.helpers.records import record, spread

HEADER = "import torch\nfrom benchtrail import Args, benchmark\n\n\n"
INPUTS = "@benchmark(inputs=lambda: Args(torch.ones(4)){extra})\n"


def _hashes(tmp_path, monkeypatch, source: str) -> dict[str, tuple[str, str]]:
    """``{run config id: (name, content hash)}`` of the benchmarks module ``renames`` holding ``source``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "renames.py").write_text(HEADER + source)
    sys.modules.pop("renames", None)
    importlib.invalidate_caches()
    suite = suite_of(discover(["renames"]))
    return {rc.id: (rc.name, content_hash(rc, "2.13.0")) for rc in suite.run_configs}


def test_a_pure_rename_keeps_the_id_and_the_hash_and_a_body_change_does_not(tmp_path, monkeypatch):
    before = _hashes(tmp_path, monkeypatch, INPUTS.format(extra="") + "def add_one(x):\n    return x + 1\n")
    renamed = INPUTS.format(extra=", renamed_from='renames.add_one'")
    after = _hashes(tmp_path, monkeypatch, renamed + "def plus_one(x):\n    return x + 1\n")
    changed = _hashes(tmp_path, monkeypatch, renamed + "def plus_one(x):\n    return x + 2\n")
    assert before.keys() == after.keys() == changed.keys() and len(before) == 1
    (rc_id,) = before
    assert before[rc_id][0].startswith("renames.add_one.") and after[rc_id][0].startswith("renames.plus_one.")
    assert after[rc_id][1] == before[rc_id][1] != changed[rc_id][1]


def _side(commit: str, content_hash: str, scheme: int | None, factor: float = 1.0) -> ResultsFile:
    rec = dataclasses.replace(record("rc1", spread(100.0 * factor, 30)), content_hash=content_hash)
    env = {"torch_version": "2.13.0", **({"hash_scheme": scheme} if scheme else {})}
    return ResultsFile(commit, False, {"run_id": "r", "attempt": 1, "presets": ["x86_64"]}, env, (rec,))


@pytest.mark.parametrize("base_scheme, verdict, reason", [
    (None, "regressed", HASH_SCHEME_NOTE),  # a baseline of the scheme before: compared, unchecked
    (2, "not-comparable", "definition changed (content hash differs: flags, torch version or model source)"),
])
def test_a_baseline_of_the_scheme_before_is_compared_with_a_note(base_scheme, verdict, reason):
    (row,) = compare([_side("b" * 40, "0" * 64, base_scheme)], [_side("c" * 40, "1" * 64, 2, 1.3)],
                     load_thresholds())
    assert (row.verdict, row.reason) == (verdict, reason)
