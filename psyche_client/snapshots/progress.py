"""A progress bar for long transfers (rich), shown only on a terminal: logs and pipes get none."""

import contextlib
import sys

# below this a transfer is over before a bar would help
MIN_BYTES = 16 << 20


@contextlib.contextmanager
def transfer_progress(enabled: bool, description: str, total: int):
    """Yields advance(n_bytes). Thread-safe (boto3 reports from its worker threads)."""
    if not enabled or total < MIN_BYTES or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
