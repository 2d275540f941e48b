"""Results for other tools: conversions and backend comparison."""
