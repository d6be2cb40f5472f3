"""What every Snakemake ``script:`` entry point shares: its log file and its error report."""

from __future__ import annotations

import contextlib
import json
import logging
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

from robopipe.errors import DatasetError


@contextlib.contextmanager
def logged(snakemake) -> Iterator[logging.Logger]:
    """Log to the job's ``log:`` file; turn a :class:`DatasetError` into a one-line message.

    On bad input the job prints ``robopipe: <message>`` to stderr and its log and exits
    with status 1, so Snakemake reports the dataset, episode and file instead of a traceback.
    Any other exception (a robopipe bug, or bad input no check foresaw) is one line too,
    ``robopipe: dataset '<name>': job <rule> failed: <type>: <message>; ...``, naming the
    log file, which alone gets the traceback; the job exits with status 1.
    When the job ends, its peak RSS as it measures it itself goes to ``<log>.rss.json``
    (``peak_rss``), which the report reads: Snakemake's ``benchmark:`` sampler misses the
    peak of short jobs.
    """
    log_path = Path(snakemake.log[0]) if snakemake.log else None
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    file_handler = None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_path, mode="w")
        handlers.append(file_handler)
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
    except Exception as exc:
        dataset = getattr(getattr(snakemake, "wildcards", None), "dataset", None)
        where = f"dataset {dataset!r}: " if dataset else ""
        what = " ".join(f"{type(exc).__name__}: {exc}".split())  # one line
        logger.error(
            "robopipe: %sjob %s failed: %s; this is a robopipe bug or input no check "
            "foresaw: please report it with the traceback in %s",
            where,
            snakemake.rule,
            what,
            log_path or "(no log file)",
        )
        if file_handler is not None:
            record = logger.makeRecord(
                logger.name, logging.ERROR, __file__, 0, "traceback:", (), sys.exc_info()
            )
            file_handler.handle(record)
        sys.exit(1)
    finally:
        if log_path is not None:
            record = {"rule": snakemake.rule, **peak_rss()}
            log_path.with_name(log_path.name + RSS_SUFFIX).write_text(json.dumps(record))


RSS_SUFFIX = ".rss.json"


def peak_rss() -> dict:
    """This process's peak resident set size and its largest finished child's, in MiB
    (``getrusage`` ``ru_maxrss``: KiB on Linux): ``own_mb``, ``children_mb`` (the largest
    single child process waited for, not a sum), ``peak_mb`` (the larger of the two)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"own_mb": own, "children_mb": children, "peak_mb": max(own, children)}
