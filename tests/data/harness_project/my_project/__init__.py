"""The adopting project's own code: what its benchmarks measure (docs/adopting.md)."""
