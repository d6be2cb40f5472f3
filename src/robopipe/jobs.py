"""What every Snakemake ``script:`` entry point shares: its log file and its error report."""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from robopipe.errors import DatasetError
from robopipe.retry import RemoteReadError


@contextlib.contextmanager
def logged(snakemake, *, pandas: bool = True) -> Iterator[logging.Logger]:
    """Log to the job's ``log:`` file; turn a :class:`DatasetError` into a one-line message.

    On bad input the job prints ``robopipe: <message>`` to stderr and its log and exits
    with status 1, so Snakemake reports the dataset, episode and file instead of a traceback.
    A remote read that failed on every attempt of its retry budget
    (:class:`robopipe.retry.RemoteReadError`) is one line too, ``robopipe: dataset '<name>':
    job <rule>: <URL>: gave up after ...``, with status 1.
    Any other exception (a robopipe bug, or bad input no check foresaw) is one line too,
    ``robopipe: dataset '<name>': job <rule> failed: <type>: <message>; ...``, naming the
    log file, which alone gets the traceback; the job exits with status 1.
    When the job ends, its peak RSS as it measures it itself goes to ``<log>.rss.json``
    (``peak_rss``), which the report reads: Snakemake's ``benchmark:`` sampler misses the
    peak of short jobs. The same file records ``startup_s``: seconds from the process's start
    to this call, i.e. the interpreter, Snakemake's script preamble and the job's imports
    (:func:`startup_seconds`), the fixed cost every job pays before its first work; and, in a
    SLURM job, ``job_start_s``: seconds from the SLURM job's start to this call
    (:func:`slurm_job_start_seconds`), which adds the Snakemake starts inside the job.

    With ``pandas=False`` (the conversion jobs) pandas is hidden from the job
    (:func:`hide_pandas`), so that pyarrow's numpy and Python conversions do not import it.
    """
    startup = startup_seconds()
    first_work = datetime.datetime.now()
    if not pandas:
        hide_pandas()
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
    except RemoteReadError as exc:  # a server that kept failing: neither a bug nor bad data
        what = " ".join(str(exc).split())  # one line (a DataLoader worker's adds a traceback)
        logger.error("robopipe: %sjob %s: %s", _where(snakemake), snakemake.rule, what)
        sys.exit(1)
    except Exception as exc:
        where = _where(snakemake)
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
            record = {"rule": snakemake.rule, **peak_rss(), "startup_s": startup}
            record["job_start_s"] = slurm_job_start_seconds(first_work)
            log_path.with_name(log_path.name + RSS_SUFFIX).write_text(json.dumps(record))


def _where(snakemake) -> str:
    """``dataset '<name>': `` for a job of one dataset, else ``""``."""
    dataset = getattr(getattr(snakemake, "wildcards", None), "dataset", None)
    return f"dataset {dataset!r}: " if dataset else ""


RSS_SUFFIX = ".rss.json"


def peak_rss() -> dict:
    """This process's peak resident set size and its largest finished child's, in MiB:
    ``own_mb`` (``VmHWM`` of ``/proc/self/status``, else ``getrusage`` ``ru_maxrss``),
    ``children_mb`` (the largest single child process waited for, not a sum), ``peak_mb``
    (the larger of the two).

    ``ru_maxrss`` of a process started by fork and exec counts the parent's RSS at the fork
    (Linux keeps the larger of the old and new address space's peak), so a job started by
    Snakemake would report at least Snakemake's size; ``VmHWM`` is the peak of the job's own
    address space."""
    own = _vm_hwm_mb()
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"own_mb": own, "children_mb": children, "peak_mb": max(own, children)}


def _vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def startup_seconds() -> float | None:
    """Seconds since this process started (``/proc/self/stat`` field 22, in clock ticks since
    boot, against ``/proc/uptime``; 0.01 s resolution), or None where ``/proc`` is absent."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after "pid (comm)"
        with open("/proc/uptime", encoding="ascii") as uptime:
            now = float(uptime.read().split()[0])
    except OSError:
        return None
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the whole line
    return round(max(now - started, 0.0), 3)


def slurm_job_start_seconds(at: datetime.datetime) -> float | None:
    """Seconds from the start of the SLURM job this process runs in (``SLURM_JOB_ID``, its
    ``squeue`` start time, 1 s resolution, the node's local time) to ``at`` (local time);
    None outside SLURM or where ``squeue`` cannot tell."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%S"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        started = datetime.datetime.fromisoformat(out[0])
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return None
    return round((at - started).total_seconds(), 1)


class _NoPandas:
    """A ``sys.meta_path`` finder that makes ``import pandas`` fail."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(
                f"{name} is not imported by this job (robopipe.jobs.hide_pandas)", name=name
            )
        return None


def hide_pandas() -> None:
    """Make ``import pandas`` fail in this process from now on (none of the conversion jobs
    uses pandas), so that pyarrow does not import it: 0.45 s and about 60 MB per process.

    pyarrow 26 imports pandas on its first numpy or Python conversion (``pa.array``,
    ``Array.to_numpy``, ``pa.scalar``, compute functions), only to ask whether an object is
    a pandas one (``pandas-shim.pxi``) or to prepare pandas' types (``ConvertArrayToPandas``
    in C++, which retries on every call). Both take a failed import as "no pandas" and
    convert as before; only pyarrow's own pandas functions (``to_pandas``, ``from_pandas``)
    then raise ``ModuleNotFoundError``. Nothing is done where pandas is imported already.
    """
    if "pandas" in sys.modules or any(isinstance(f, _NoPandas) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _NoPandas())
