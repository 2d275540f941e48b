"""benchtrail: continuous benchmarking for PyTorch projects.

Stages (export, compile, run, compare, comment) talk only through files in a run directory (docs/formats.md).
"""

__version__ = "0.1.0"

#: The authoring API, importable as ``from benchtrail import benchmark, Args`` (docs/adopting.md); loaded
#: on first use so ``import benchtrail`` stays as light as before.
_AUTHORING = ("Args", "benchmark", "module_benchmark")


def __getattr__(name: str):
    if name in _AUTHORING:
        from benchtrail.suite import functions

        return getattr(functions, name)
    raise AttributeError(f"module 'benchtrail' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_AUTHORING])
