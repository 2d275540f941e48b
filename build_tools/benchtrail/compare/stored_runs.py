"""What a baseline lookup asks of each stored run: may it be a baseline? (docs/store.md, "Trusted
baselines"). Every lookup of stored runs by commit goes through :class:`StoredRuns`; the GitHub-backed
trust and ``--trust`` live in the github package."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

#: A commit pointer, as ``Store.pointers`` lists it.
Pointer = dict[str, Any]


class Trust(Protocol):
    """Decides whether the run a commit pointer names may be a baseline."""

    #: One line for messages: what this trust accepts.
    description: str

    def check(self, pointer: Pointer, branches: tuple[str, ...] = ()) -> str | None:
        """None when the pointer's run is trusted, else why not (one sentence naming the run); ``branches``:
        those besides the default branch whose pushes count (a PR's base branch)."""
        ...


class TrustAll:
    """Every stored run counts: a local store's own runs, or ``--trust all``."""

    description = "every stored run"

    def check(self, pointer: Pointer, branches: tuple[str, ...] = ()) -> str | None:
        return None


class StoredRuns:
    """The one lookup of stored runs by commit: iterating gives ``(pointer, why not or None)``, newest
    first, for the pointers of ``commit`` that ``wanted`` keeps (asked before ``trust``, which may cost a
    GitHub request); ``unreadable`` holds the messages of pointers the store could not read."""

    def __init__(
        self,
        store: Any,
        commit: str,
        trust: Trust | None,
        wanted: Callable[[Pointer], bool],
        branches: tuple[str, ...] = (),
    ) -> None:
        self._pointers = store.pointers(commit)
        self.unreadable: tuple[str, ...] = tuple(getattr(self._pointers, "unreadable", ()))
        self._trust, self._branches, self._wanted = trust or TrustAll(), branches, wanted

    def __iter__(self) -> Iterator[tuple[Pointer, str | None]]:
        for p in reversed(self._pointers):
            if self._wanted(p):
                yield p, self._trust.check(p, self._branches)
