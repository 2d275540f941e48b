"""``python -m benchtrail.worker REQUEST.json RESPONSE.json``, or ``--serve``: the forking server."""

import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        from benchtrail.worker.server import main as serve

        raise SystemExit(serve())
    from benchtrail.worker.main import answer

    answer(*sys.argv[1:])  # REQUEST.json RESPONSE.json; exits 0 unless the files fail
