"""``python -m benchtrail.worker REQUEST.json RESPONSE.json`` (see :mod:`benchtrail.worker.main`), or
``python -m benchtrail.worker --serve``: the pre-imported server that forks workers
(:mod:`benchtrail.worker.server`)."""

import sys

if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        from benchtrail.worker.server import main as serve

        raise SystemExit(serve())
    from benchtrail.worker.main import main

    raise SystemExit(main(sys.argv[1:]))
