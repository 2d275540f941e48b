"""A real comparison document of two sides' records, and the file ``benchtrail comment`` reads it from."""

from benchtrail.compare.document import comparison_to_dict
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from tests.helpers.records import results


def comparison_of(base, head):
    rows = compare([results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)], load_thresholds())
    return comparison_to_dict(rows, [results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)],
                              "thresholds.yaml", {"reason": "merge base"})


def write_comparison(tmp_path, comparison):
    from benchtrail import jsonio

    return jsonio.write_json(tmp_path / "comparison.json", comparison)


