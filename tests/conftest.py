"""Shared pytest fixtures."""

from __future__ import annotations

import pytest

from tests.github_server import GitHubServer


@pytest.fixture
def github_server():
    """A local server speaking GitHub's REST shapes (see tests/github_server.py), stopped afterwards."""
    server = GitHubServer().start()
    try:
        yield server
    finally:
        server.stop()
