"""What every Snakemake ``script:`` entry point shares: its log file and its error report."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

from robopipe.errors import DatasetError


@contextlib.contextmanager
def logged(snakemake) -> Iterator[logging.Logger]:
    """Log to the job's ``log:`` file; turn a :class:`DatasetError` into a one-line message.

    On bad input the job prints ``robopipe: <message>`` to stderr and its log and exits
    with status 1, so Snakemake reports the dataset, episode and file instead of a traceback.
    """
    log_path = Path(snakemake.log[0]) if snakemake.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        handlers=handlers,
        force=True,
    )
    logger = logging.getLogger(f"robopipe.{snakemake.rule}")
    try:
        yield logger
    except DatasetError as exc:
        logger.error("robopipe: %s", exc)
        sys.exit(1)
