"""A dashboard page as a browser shows it: rendered by headless Chromium (skipped where none is installed)."""

import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str | None:
    return next((shutil.which(n) for n in ("chromium", "chromium-browser",
                                           "google-chrome") if shutil.which(n)), None)


def rendered(page: Path) -> str:
    binary = chromium()
    if binary is None:
        pytest.skip("no chromium binary on PATH (CI installs Debian's chromium; see .ci/run)")
    done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu",
                           "--virtual-time-budget=10000",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
