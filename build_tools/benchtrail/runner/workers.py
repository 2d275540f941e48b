"""Start a worker process for one job, with a timeout, and collect its response."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from benchtrail.project import import_root
from benchtrail.worker.protocol import ProtocolError, Request, Response, read_response


def worker_pythonpath(start: Path = Path(".")) -> str:
    """``PYTHONPATH`` of a worker: the project root of ``start`` (``benchtrail.project.import_root``)
    first, then the inherited ``PYTHONPATH`` (without repeating the root); empty when both are."""
    root = import_root(start)
    paths = [str(root)] if root else []
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    return os.pathsep.join(paths)


def run_in_worker(request: Request, timeout_s: float, threads: int,
                  env: dict[str, str] | None = None, cwd: Path | None = None) -> Response:
    """Run ``request`` in ``python -m benchtrail.worker`` and return its response
    (:mod:`benchtrail.worker.protocol`; the worker may be an older commit's, see its compatibility rule).

    The worker runs in its own session so a timeout kills it and the compile subprocesses it
    started. ``OMP_NUM_THREADS`` is set to ``threads``; ``env`` adds environment variables; ``cwd`` is the worker's
    working directory (default: ours), which comes first on its ``sys.path``. ``PYTHONPATH`` starts
    with the project root of our working directory (``benchtrail.project.import_root``), then the
    inherited ``PYTHONPATH``, so the worker imports the project's suite and models wherever it runs
    and whether or not the project is installed; a ``PYTHONPATH`` in ``env`` replaces all of that
    (a paired run's arm names its own checkout: ``benchtrail.runner.ab.Arm.env``).
    A crash, a timeout or a response this side cannot read (e.g. a newer protocol version) becomes a
    response with status ``failed`` or ``timeout`` and a reason; this function does not raise for them.
    """
    with tempfile.TemporaryDirectory(prefix="benchtrail-worker-") as tmp:
        req, resp = Path(tmp, "request.json"), Path(tmp, "response.json")
        req.write_text(json.dumps(request.to_json()), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": worker_pythonpath(), **(env or {})}
        if not env["PYTHONPATH"]:
            del env["PYTHONPATH"]  # an empty entry would put the worker's working directory on sys.path twice
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchtrail.worker", str(req), str(resp)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return Response(status="timeout", reason=f"worker did not finish within {timeout_s:g} s")
        except BaseException:  # Ctrl-C or SIGTERM (see cli._terminate): never leave a worker behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        if proc.returncode != 0 or not resp.exists():
            tail = output.decode("utf-8", "replace").strip().splitlines()[-5:]
            return Response(status="failed", reason=f"worker exited with code {proc.returncode}: " + " / ".join(tail))
        try:
            return read_response(json.loads(resp.read_text(encoding="utf-8")))
        except (ProtocolError, ValueError) as exc:  # ValueError: not JSON
            return Response(status="failed", reason=f"the worker's response cannot be read: {exc}")
