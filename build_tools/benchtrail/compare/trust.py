"""What a baseline lookup asks about each stored run: may it be a baseline? (docs/store.md, "Trusted baselines").

The lookup (:mod:`benchtrail.compare.baseline`) only needs this protocol; the GitHub-backed
implementation and ``--trust`` live in :mod:`benchtrail.github.trust`.
"""

from __future__ import annotations

from typing import Any, Protocol


class Trust(Protocol):
    """Decides whether the run a commit pointer names may be a baseline."""

    #: One line for messages: what this trust accepts.
    description: str

    def check(self, pointer: dict[str, Any], branches: tuple[str, ...] = ()) -> str | None:
        """None when the pointer's run is trusted, else why not (one sentence naming the run).

        ``pointer`` is a dict of ``Store.pointers`` (with the store's ``stored_at``); ``branches`` the
        branches besides the default branch whose pushes count (a PR's base branch)."""
        ...


class TrustAll:
    """Every stored run counts: a local store's own runs, or ``--trust all``."""

    description = "every stored run"

    def check(self, pointer: dict[str, Any], branches: tuple[str, ...] = ()) -> str | None:
        return None
