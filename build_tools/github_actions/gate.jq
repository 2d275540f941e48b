# comparison.json -> the rows that fail the gating check: regressions a paired A/B run confirmed
# (mark `confirmed`). Accepted (`benchmarks-accept:`) and quarantined regressions carry those marks
# instead; `unconfirmed` ones, including rows the bounded re-check did not reach, never gate.
# Used by the workflow's gate job through the jq CLI (`jq -c -f gate.jq comparison.json`) and by
# `benchtrail gate` through the jq Python package; both print the same list.
[.rows[] | select(.verdict == "regressed" and .mark == "confirmed")
 | {id, name, device_name, change, ci_low, ci_high}]
