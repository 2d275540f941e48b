"""Statistics over raw samples (numpy/scipy)."""
