"""Progress on stderr (stdout stays machine-readable): a rich bar on a terminal, else a line per item."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchtrail.markup import rich_text

console = Console(stderr=True)


@contextlib.contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[str, str], None]]:
    """Yield ``report(name, status)``, called once per finished item; text shown as given, not as markup."""
    description = rich_text(description)
    if not console.is_terminal:
        done, start = 0, time.monotonic()

        def log(name: str, status: str) -> None:
            nonlocal done
            done += 1
            console.print(
                f"{description} \\[{done}/{total}] {rich_text(f'{status:7}')} {rich_text(name)} "
                f"({time.monotonic() - start:.0f} s)",
                highlight=False,
                soft_wrap=True,
            )

        yield log
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=console,
    ) as progress:
        task = progress.add_task(description, total=total, current="")

        def report(name: str, status: str) -> None:
            if status != "ok":
                progress.console.print(f"  [yellow]{rich_text(status)}[/]: {rich_text(name)}")
            progress.update(task, advance=1, current=rich_text(name))

        yield report
