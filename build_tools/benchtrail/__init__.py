"""benchtrail: continuous benchmarking for PyTorch projects.

The pipeline is a chain of stages (export, compile, run, compare, comment) that talk only
through files in a run directory; see ``docs/formats.md``.
"""

__version__ = "0.1.0"
