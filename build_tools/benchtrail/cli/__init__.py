"""The command line: ``benchtrail``, one module per command family."""

from benchtrail.cli.app import main

__all__ = ["main"]
