"""The PR description's line ends, as git reads them (issue 39): configure's note names lone CR line ends."""

import pytest

from tests.helpers.github_events import pr


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_a_description_with_lone_cr_line_ends_is_one_line_and_the_summary_says_why(gh, end):
    """Issue 39: as git reads it, a text with lone CR line ends is one long line (no trailer); the note names
    the cause. CRLF and LF line ends select the preset."""
    code, output, summary = gh("pull_request", pr(end.join(["Speed-up.", "", "benchmarks: cuda"])))
    assert code == 0
    if end == "\r":
        assert "has-benchmarks=false" in output
        assert ("no `benchmarks:` trailer in the last paragraph of the PR description (its lines end in a lone CR, "
                "`\\r`, which git does not read as a line end") in summary
    else:
        assert "benchmark-presets=cuda" in output and "lone CR" not in summary
