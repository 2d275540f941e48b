"""The command line: ``benchtrail`` (:mod:`benchtrail.cli.app`), one module per command family."""

from benchtrail.cli.app import main

__all__ = ["main"]
