"""Helpers the test modules share (fixtures stay in ``tests/conftest.py``)."""
