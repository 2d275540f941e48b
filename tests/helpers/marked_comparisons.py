"""A real comparison whose regressed rows carry the marks ``benchtrail gate`` reads."""

from benchtrail.compare.document import Comparison, comparison_to_dict, count_rows
from benchtrail.compare.rules import load_thresholds
from benchtrail.compare.verdicts import compare
from tests.helpers.records import record, results


def marked_comparison(marks: dict[str, str | None], **extra: dict) -> dict:
    """A real comparison of series whose head is 30% slower (ids ``marks``' keys, each regressed), plus one
    similar series; each regressed row gets its mark from ``marks`` and the keys of ``extra[id]``."""
    base = [record(i, [100.0 + j for j in range(20)]) for i in marks] + [record("same", [50.0] * 20)]
    head = [record(i, [130.0 + j for j in range(20)]) for i in marks] + [record("same", [50.0] * 20)]
    rows = compare([results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)], load_thresholds())
    obj = comparison_to_dict(rows, [results(*base, commit="b" * 40)], [results(*head, commit="c" * 40)],
                             "t.yaml")
    for row in obj["rows"]:
        if row["id"] in marks:
            assert row["verdict"] == "regressed", row
            row.update(mark=marks[row["id"]], **extra.get(row["id"], {}))
    obj["counts"] = count_rows(Comparison.of(obj).rows)
    return obj
