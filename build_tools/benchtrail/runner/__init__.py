"""The parent side: launching workers, the compile and run stages, paired A/B, re-check, environment."""
