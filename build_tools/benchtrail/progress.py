"""Progress display for long stages, on stderr so stdout stays machine-readable.

On a terminal it is a rich progress bar; in a CI log (not a terminal) one line per finished item.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)


@contextlib.contextmanager
def track(description: str, total: int) -> Iterator[Callable[[str, str], None]]:
    """Yield ``report(name, status)``; call it once per finished item."""
    if not console.is_terminal:
        done, start = 0, time.monotonic()

        def log(name: str, status: str) -> None:
            nonlocal done
            done += 1
            console.print(f"{description} [{done}/{total}] {status:7} {name} ({time.monotonic() - start:.0f} s)",
                          highlight=False, soft_wrap=True)

        yield log
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[current]}"))
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(description, total=total, current="")

        def report(name: str, status: str) -> None:
            if status != "ok":
                progress.console.print(f"  [yellow]{status}[/]: {name}")
            progress.update(task, advance=1, current=name)

        yield report
