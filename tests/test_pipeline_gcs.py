"""The main job against a gs:// store (the real emulator and client), then explain from the gs:// URL."""

import contextlib
import io

import pytest

from benchtrail.cli import main


@pytest.mark.e2e
def test_pipeline_to_gcs_then_explain_from_the_comment_url(gcs_bucket, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCHTRAIL_STAGING", str(tmp_path / "staging"))
    monkeypatch.chdir(tmp_path)
    store = f"gs://{gcs_bucket}/ci"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["pipeline", "--benchmark-presets", "smoke", "--store", store]) == 0
    comment_md = stdout.getvalue().strip().splitlines()[-1]
    body = open(comment_md).read()
    fetch = next(line for line in body.splitlines() if line.startswith("Artifacts: "))
    reproduce = next(line for line in body.splitlines() if line.startswith("Reproduce: "))
    assert fetch.startswith(f"Artifacts: `gcloud storage cp -r {store}/runs/local-") and fetch.endswith("/1/ .`")
    explain_args = reproduce.removeprefix("Reproduce: `").removesuffix("`").split()
    assert explain_args[:2] == ["benchtrail", "explain"] and explain_args[4].startswith(f"{store}/runs/")
    capsys.readouterr()
    assert main(explain_args[1:]) == 0
    out = capsys.readouterr().out
    for field in ("benchmark    ", "model        ", "  tags       ", "  source     ", "  inputs     ",
                  "  compile    ", "run flags    ", "device       c2-standard-16", "compared     latency: ",
                  "reproduce:"):  # compared: the row of the run's comparison.json, fetched from the store
        assert field in out, field
