"""Results files: the schema of benchmark records, and reading and writing them."""
