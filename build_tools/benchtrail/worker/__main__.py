"""``python -m benchtrail.worker REQUEST.json RESPONSE.json`` (see :mod:`benchtrail.worker.main`)."""

import sys

from benchtrail.worker.main import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
