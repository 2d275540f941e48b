# comparison.json -> the rows that fail the gating check: regressions a paired A/B run confirmed
# (mark `confirmed`) of series that are not quarantined. Accepted (`benchmarks-accept:`) and
# quarantined regressions carry those marks instead; `unconfirmed` ones, including rows the bounded
# re-check did not reach, never gate. Used by the workflow's gate job through the jq CLI
# (`jq -c -f gate.jq comparison.json`); `benchtrail gate` (benchtrail.compare.gate.check) applies the same
# rule in Python, and tests/test_gate.py checks that both fail the same rows.
[.rows[] | select(.verdict == "regressed" and .mark == "confirmed" and (.quarantined | not))
 | {id, name, device_name, change, ci_low, ci_high}]
