"""Helpers the test modules share (fixtures stay in ``tests/conftest.py``, or a plugin module it registers:
``gcs_fixtures``)."""
