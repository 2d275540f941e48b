"""benchtrail's declarative benchmark suite: models, devices, compile and execution configs, presets.

``benchmark_suites.suite.generate()`` returns the whole suite; nothing here downloads anything.
"""
